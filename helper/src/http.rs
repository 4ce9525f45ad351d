//! The helper's HTTP server: what the nodes fetch while they boot, from the bundle itself. The
//! paths are those the bundle's iPXE script, PXELINUX configs and kernel arguments name under
//! `lab.httpBaseUrl`: `pxe/` (the iPXE script), `rhcos/` (the live kernel, initramfs and rootfs,
//! from the directory the admin names), `ignition/NODE.ign`, `live/NODE.ign` (the live system's
//! config, with `lab.liveAgent`), and the agent (`hardshift-agent`).
//!
//! A node's config (and its live config) holds its keys (the bootstrap's, the cluster's), so it is served only to the
//! address that node's DHCP reservation gives it; any other client gets 403, and the request is
//! an event naming the address that asked. Every request is an event of the node it belongs to:
//! its path, status, bytes sent and how long it took, recorded when the answer ends (a download
//! cut short says how far it got).

use crate::record::Recorder;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, Method, Request, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures_util::Stream;
use hardshift_collector::boot::{BootEvent, Step};
use std::net::{IpAddr, SocketAddr};
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

/// What the server serves, and to whom.
#[derive(Clone)]
pub struct Site {
    /// The bundle's directory.
    pub dir: PathBuf,
    /// RHCOS's live kernel, initramfs and rootfs, if given.
    pub rhcos: Option<PathBuf>,
    /// The path of `lab.httpBaseUrl` ("" or "/prefix"): what the nodes put before each file.
    pub prefix: String,
    /// (node, its address, its MAC), from the inventory.
    pub nodes: Vec<(String, IpAddr, String)>,
    /// Serve a node's config to any address (labs without DHCP reservations).
    pub serve_to_any: bool,
    pub recorder: Recorder,
}

/// Where a request path leads, or why nowhere.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// A file to send, and the node whose config it is (only that node's address may have it).
    File {
        path: PathBuf,
        only_for: Option<String>,
    },
    NotFound,
}

/// One plain file name (no `/`, `.` or `..`): a request never leaves the directory it names.
fn plain(name: &str) -> Option<&str> {
    let mut c = Path::new(name).components();
    match (c.next(), c.next()) {
        (Some(Component::Normal(_)), None) if !name.contains('/') && !name.starts_with('.') => Some(name),
        _ => None,
    }
}

impl Site {
    /// The file a request path names. Pure (the file's existence is the answer's business).
    pub fn route(&self, path: &str) -> Route {
        let Some(rest) = path.strip_prefix(self.prefix.as_str()).and_then(|r| r.strip_prefix('/')) else {
            return Route::NotFound;
        };
        let (dir, name) = match rest.split_once('/') {
            Some((d, n)) => (d, n),
            None => ("", rest),
        };
        let Some(name) = plain(name) else { return Route::NotFound };
        match dir {
            // A node's config and its live system's: both hold its keys, each only for the node.
            "ignition" | "live" => match name.strip_suffix(".ign") {
                Some(node) if self.nodes.iter().any(|(n, _, _)| n == node) => Route::File {
                    path: self.dir.join(dir).join(name),
                    only_for: Some(node.to_string()),
                },
                _ => Route::NotFound,
            },
            "pxe" => Route::File {
                path: self.dir.join("lab/pxe").join(name),
                only_for: None,
            },
            "rhcos" => match &self.rhcos {
                Some(d) => Route::File {
                    path: d.join(name),
                    only_for: None,
                },
                None => Route::NotFound,
            },
            "" => Route::File {
                path: self.dir.join("http").join(name),
                only_for: None,
            },
            _ => Route::NotFound,
        }
    }

    /// The node at `ip`, if the inventory gives it that address.
    pub fn node_at(&self, ip: IpAddr) -> Option<&(String, IpAddr, String)> {
        self.nodes.iter().find(|(_, a, _)| *a == ip)
    }
}

/// An address as the inventory writes it: an IPv4 peer on a dual-stack socket is `::ffff:a.b.c.d`.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The router: every GET and HEAD through `answer`.
pub fn app(site: Arc<Site>) -> axum::Router {
    axum::Router::new().fallback(answer).with_state(site)
}

async fn answer(State(site): State<Arc<Site>>, ConnectInfo(peer): ConnectInfo<SocketAddr>, req: Request<Body>) -> Response {
    let start = Instant::now();
    let ip = canonical(peer.ip());
    let path = req.uri().path().to_string();
    let head = req.method() == Method::HEAD;
    let (node, mac) = site.node_at(ip).map(|(n, _, m)| (n.clone(), m.clone())).unwrap_or_default();
    let event = |step: Step, detail: String| BootEvent {
        at_ms: hardshift_proto::now_ms(),
        node: node.clone(),
        mac: mac.clone(),
        ip: ip.to_string(),
        step,
        detail,
    };
    let plain_answer = |status: StatusCode, text: &str| {
        Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Body::from(format!("{text}\n")))
            .expect("a response")
    };
    if req.method() != Method::GET && !head {
        site.recorder.record(event(Step::Http, format!("{} {path} 405", req.method())));
        return plain_answer(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD only");
    }
    let (file, only_for) = match site.route(&path) {
        Route::File { path: f, only_for } => (f, only_for),
        Route::NotFound => {
            site.recorder.record(event(Step::Http, format!("GET {path} 404")));
            return plain_answer(StatusCode::NOT_FOUND, "not a file the bundle serves");
        }
    };
    if let Some(owner) = &only_for {
        if !site.serve_to_any && node != *owner {
            let who = if node.is_empty() { String::new() } else { format!(" ({node})") };
            site.recorder.record(event(
                Step::HttpRefused,
                format!("GET {path} 403: {owner}'s config asked for by {ip}{who}, not by {owner}'s address"),
            ));
            return plain_answer(StatusCode::FORBIDDEN, "this config is served only to its node's address");
        }
    }
    let opened = match tokio::fs::File::open(&file).await {
        Ok(f) => match f.metadata().await {
            Ok(m) if m.is_file() => Some((f, m.len())),
            _ => None,
        },
        Err(_) => None,
    };
    let Some((f, len)) = opened else {
        site.recorder
            .record(event(Step::Http, format!("GET {path} 404 (no {})", file.display())));
        return plain_answer(
            StatusCode::NOT_FOUND,
            "the bundle has no such file (see `hardshift lab serve --dry-run`)",
        );
    };
    let builder = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_LENGTH, len)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        // The configs hold keys: no cache on the way keeps them.
        .header(header::CACHE_CONTROL, "no-store");
    if head {
        site.recorder.record(event(Step::Http, format!("HEAD {path} 200 {len} B")));
        return builder.body(Body::empty()).expect("a response");
    }
    let counted = Counted {
        inner: tokio_util::io::ReaderStream::with_capacity(f, 256 << 10),
        sent: 0,
        len,
        start,
        done: Some((site.recorder.clone(), event(Step::Http, String::new()), format!("GET {path} 200"))),
    };
    builder.body(Body::from_stream(counted)).expect("a response")
}

/// A file's bytes on their way out, counted; when the answer ends (sent whole, or the client
/// gone), the request's event is recorded with what was sent and how long it took.
struct Counted<S> {
    inner: S,
    sent: u64,
    len: u64,
    start: Instant,
    done: Option<(Recorder, BootEvent, String)>,
}

impl<S: Stream<Item = std::io::Result<Bytes>> + Unpin> Stream for Counted<S> {
    type Item = std::io::Result<Bytes>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let p = Pin::new(&mut self.inner).poll_next(cx);
        if let Poll::Ready(Some(Ok(b))) = &p {
            self.sent += b.len() as u64;
        }
        p
    }
}

impl<S> Drop for Counted<S> {
    fn drop(&mut self) {
        if let Some((rec, mut e, what)) = self.done.take() {
            let ms = self.start.elapsed().as_millis();
            e.detail = if self.sent == self.len {
                format!("{what} {} B {ms} ms", self.sent)
            } else {
                format!("{what} cut short: {} of {} B in {ms} ms", self.sent, self.len)
            };
            e.at_ms = hardshift_proto::now_ms();
            rec.record(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> Site {
        Site {
            dir: "/b".into(),
            rhcos: Some("/r".into()),
            prefix: String::new(),
            nodes: vec![("master-0".into(), "192.168.126.101".parse().unwrap(), "52:54:00:aa:bb:01".into())],
            serve_to_any: false,
            recorder: Recorder::discard(),
        }
    }

    #[test]
    fn paths_lead_into_the_bundle_and_nowhere_else() {
        let s = site();
        let file = |p: &str, o: Option<&str>| Route::File {
            path: p.into(),
            only_for: o.map(String::from),
        };
        assert_eq!(
            s.route("/ignition/master-0.ign"),
            file("/b/ignition/master-0.ign", Some("master-0"))
        );
        assert_eq!(s.route("/live/master-0.ign"), file("/b/live/master-0.ign", Some("master-0")));
        assert_eq!(s.route("/pxe/boot.ipxe"), file("/b/lab/pxe/boot.ipxe", None));
        assert_eq!(
            s.route("/rhcos/rhcos-live-rootfs.x86_64.img"),
            file("/r/rhcos-live-rootfs.x86_64.img", None)
        );
        assert_eq!(s.route("/hardshift-agent"), file("/b/http/hardshift-agent", None));
        for bad in [
            "/ignition/worker-9.ign",
            "/ignition/../auth/kubeconfig",
            "/pxe/../../etc/passwd",
            "/pxe/",
            "/.hardshift",
            "/auth/kubeconfig",
            "/rhcos/a/b",
            "ignition/master-0.ign",
        ] {
            assert_eq!(s.route(bad), Route::NotFound, "{bad}");
        }
        let mut p = site();
        p.prefix = "/ocp4".into();
        assert_eq!(p.route("/ocp4/pxe/boot.ipxe"), file("/b/lab/pxe/boot.ipxe", None));
        assert_eq!(p.route("/pxe/boot.ipxe"), Route::NotFound);
        p.rhcos = None;
        assert_eq!(p.route("/ocp4/rhcos/x"), Route::NotFound);
    }

    #[test]
    fn a_v4_peer_on_a_v6_socket_is_its_v4_address() {
        assert_eq!(
            canonical("::ffff:192.168.126.101".parse().unwrap()),
            "192.168.126.101".parse::<IpAddr>().unwrap()
        );
        assert_eq!(canonical("fd00::1".parse().unwrap()), "fd00::1".parse::<IpAddr>().unwrap());
    }
}
