//! Admission to the agents' listener: the caps in total and per source address, the slots that
//! hold a place until a connection ends, and the refusals, counted and logged rate-limited.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The limits a listener enforces.
#[derive(Debug, Clone)]
pub struct Limits {
    pub handshake_timeout: Duration,
    /// From the end of the TLS handshake to the agent's Hello.
    pub hello_timeout: Duration,
    pub max_connections: usize,
    pub max_per_address: usize,
    /// Slots of `max_connections` only authenticated connections hold (the dashboard's admin,
    /// past the TLS handshake): connections that never authenticate fill the rest, never these.
    pub reserved_for_authenticated: usize,
    /// Full, close the oldest idle connection (no request in flight), then the oldest live
    /// stream, for a newcomer, rather than refuse it: a flood then cannot keep anyone out.
    pub shed_oldest: bool,
    /// Live streams (SSE) one address holds at most; a new one closes that address's oldest.
    pub max_streams_per_address: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake_timeout: Duration::from_secs(10),
            hello_timeout: Duration::from_secs(10),
            max_connections: 10_000,
            max_per_address: 64,
            reserved_for_authenticated: 0,
            shed_oldest: false,
            max_streams_per_address: usize::MAX,
        }
    }
}

/// Why a connection was refused (the label refusals are counted under).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    ConnectionCap,
    AddressCap,
    HandshakeTimeout,
    HandshakeFailed,
    NoHello,
    /// Not a refusal: an open connection closed to make room (`Limits::shed_oldest`).
    Shed,
}

impl Refusal {
    pub const ALL: [Refusal; 6] = [
        Refusal::ConnectionCap,
        Refusal::AddressCap,
        Refusal::HandshakeTimeout,
        Refusal::HandshakeFailed,
        Refusal::NoHello,
        Refusal::Shed,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Refusal::ConnectionCap => "connection_cap",
            Refusal::AddressCap => "address_cap",
            Refusal::HandshakeTimeout => "handshake_timeout",
            Refusal::HandshakeFailed => "handshake_failed",
            Refusal::NoHello => "no_hello",
            Refusal::Shed => "shed",
        }
    }
}

/// Open connections (admitted, handshaking or serving) and refusals so far.
#[derive(Default)]
pub struct Gate {
    /// Which door (empty for the agents'): the prefix of its log lines.
    name: &'static str,
    open: Mutex<Open>,
    refused: Mutex<BTreeMap<Refusal, u64>>,
    log: Mutex<BTreeMap<Refusal, RateLimit>>,
}

/// The connections open now: counts under each cap, and each connection by age (ids ascend)
/// with what it is doing, for choosing which to shed.
#[derive(Default)]
struct Open {
    total: usize,
    unauthenticated: usize,
    per_address: HashMap<IpAddr, usize>,
    next_id: u64,
    conns: BTreeMap<u64, Entry>,
}

struct Entry {
    peer: SocketAddr,
    authenticated: bool,
    activity: Activity,
    close: Arc<tokio::sync::Notify>,
}

/// What a connection is doing, as far as shedding goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Nothing in flight: a handshake not done, no request yet, or between two requests.
    Idle,
    /// A request is being answered: never shed.
    Busy,
    /// A live stream (SSE) is open: shed after every idle one.
    Stream,
}

impl Open {
    /// The cap a newcomer from `ip` would go over, if any.
    fn over(&self, ip: IpAddr, limits: &Limits) -> Option<Refusal> {
        if self.total >= limits.max_connections || self.unauthenticated >= unauthenticated_cap(limits) {
            return Some(Refusal::ConnectionCap);
        }
        (self.per_address.get(&ip).copied().unwrap_or(0) >= limits.max_per_address).then_some(Refusal::AddressCap)
    }

    /// Which connection to close for a newcomer from `ip` that would go over `cap`: an idle one
    /// before a stream, one that never authenticated before one that did, one of the address
    /// holding the most before others (a flood from a few addresses sheds itself, not the one
    /// viewer beside it), the oldest first; never one answering a request. For the address's
    /// cap, one of that address; while those that never authenticated fill their share, one of
    /// them (closing another would free nothing for the newcomer); else any, an authenticated
    /// one only when idle.
    fn victim(&self, cap: Refusal, ip: IpAddr, limits: &Limits) -> Option<u64> {
        let share_full = self.unauthenticated >= unauthenticated_cap(limits);
        let eligible = |e: &Entry| match cap {
            Refusal::AddressCap => e.peer.ip() == ip,
            _ if share_full => !e.authenticated,
            _ => !e.authenticated || e.activity == Activity::Idle,
        };
        let crowd = |e: &Entry| std::cmp::Reverse(self.per_address.get(&e.peer.ip()).copied().unwrap_or(0));
        let rank = |e: &Entry| (e.activity != Activity::Idle, e.authenticated, crowd(e));
        self.conns
            .iter()
            .filter(|(_, e)| e.activity != Activity::Busy && eligible(e))
            .min_by_key(|(id, e)| (rank(e), **id))
            .map(|(id, _)| *id)
    }

    /// Forget a connection (shed, or ended): its place under every cap is free again.
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.conns.remove(&id)?;
        self.total -= 1;
        if !e.authenticated {
            self.unauthenticated -= 1;
        }
        let ip = e.peer.ip();
        if let Some(n) = self.per_address.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&ip);
            }
        }
        Some(e)
    }
}

/// The places connections that never authenticated may hold: all but the reserve.
fn unauthenticated_cap(limits: &Limits) -> usize {
    limits.max_connections.saturating_sub(limits.reserved_for_authenticated).max(1)
}

/// At most `BURST` log lines per reason and window; the rest are counted and summed up when the
/// window ends. Per reason, so a flood of one kind does not hide another.
struct RateLimit {
    window_start: Instant,
    lines: u32,
    suppressed: u64,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            window_start: Instant::now(),
            lines: 0,
            suppressed: 0,
        }
    }
}

const BURST: u32 = 20;
const WINDOW: Duration = Duration::from_secs(60);

/// A connection's name at its gate: what its requests use to say what it is doing.
#[derive(Clone)]
pub struct Tag {
    gate: Arc<Gate>,
    id: u64,
}

impl Tag {
    /// Say what the connection does now. A new live stream over its address's share closes
    /// that address's oldest stream.
    pub fn set(&self, activity: Activity, limits: &Limits) {
        let shed = {
            let Ok(mut open) = self.gate.open.lock() else { return };
            let Some(e) = open.conns.get_mut(&self.id) else { return };
            let (was, ip) = (e.activity, e.peer.ip());
            e.activity = activity;
            if activity != Activity::Stream || was == Activity::Stream {
                return;
            }
            let streams: Vec<u64> = open
                .conns
                .iter()
                .filter(|(id, e)| **id != self.id && e.activity == Activity::Stream && e.peer.ip() == ip)
                .map(|(id, _)| *id)
                .collect();
            if streams.len() < limits.max_streams_per_address {
                return;
            }
            open.remove(streams[0])
        };
        if let Some(e) = shed {
            e.close.notify_one();
            let d = format!(
                "its oldest live stream, for a newer one ({} streams from this address at most)",
                limits.max_streams_per_address
            );
            self.gate.note(e.peer, Refusal::Shed, "closed", &d);
        }
    }
}

/// A connection's place under the caps, given back when the connection ends.
pub struct Slot {
    tag: Tag,
    close: Arc<tokio::sync::Notify>,
    /// Its descriptor's place (`front_door`): given back after the connection's socket is
    /// closed, since a slot is dropped after the stream it goes with.
    descriptor: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.tag.gate.open.lock() {
            open.remove(self.tag.id);
        }
    }
}

impl Slot {
    /// Hold the connection's descriptor permit until the slot is dropped.
    pub fn hold(&mut self, permit: tokio::sync::OwnedSemaphorePermit) {
        self.descriptor = Some(permit);
    }

    /// The connection proved who it is (the admin's certificate): it now holds a place of
    /// the reserve, out of reach of connections that never authenticate.
    pub fn authenticate(&self) {
        if let Ok(mut open) = self.tag.gate.open.lock() {
            let mut newly = false;
            if let Some(e) = open.conns.get_mut(&self.tag.id) {
                newly = !e.authenticated;
                e.authenticated = true;
            }
            if newly {
                open.unauthenticated -= 1;
            }
        }
    }

    pub fn tag(&self) -> Tag {
        self.tag.clone()
    }

    /// Resolves when the gate closed this connection to make room (`Limits::shed_oldest`).
    pub async fn shed(&self) {
        self.close.notified().await
    }
}

impl Gate {
    /// A gate whose log lines start with `name:`.
    pub fn named(name: &'static str) -> Gate {
        Gate {
            name,
            ..Default::default()
        }
    }

    pub(super) fn prefix(&self) -> String {
        if self.name.is_empty() {
            String::new()
        } else {
            format!("{}: ", self.name)
        }
    }

    /// Admit a new connection from `peer`, or say which cap it hits. With `shed_oldest`, the
    /// connections closed to make room are closed and logged here.
    pub fn admit(self: &Arc<Self>, peer: SocketAddr, limits: &Limits) -> Result<Slot, Refusal> {
        let mut shed = Vec::new();
        let admitted = self.admit_locked(peer, limits, &mut shed);
        for (e, cap) in shed {
            e.close.notify_one();
            let why = match cap {
                Refusal::AddressCap => format!("{} connections from this address", limits.max_per_address),
                _ => format!("{} connections open", limits.max_connections),
            };
            let d = format!(
                "its oldest idle connection (or live stream), for a newer one ({}: {why})",
                cap.label()
            );
            self.note(e.peer, Refusal::Shed, "closed", &d);
        }
        admitted
    }

    fn admit_locked(self: &Arc<Self>, peer: SocketAddr, limits: &Limits, shed: &mut Vec<(Entry, Refusal)>) -> Result<Slot, Refusal> {
        let ip = peer.ip();
        let mut open = self.open.lock().map_err(|_| Refusal::ConnectionCap)?;
        // Each round frees a place under one cap; two caps at most, and one more for luck.
        for _ in 0..3 {
            let Some(cap) = open.over(ip, limits) else { break };
            let victim = limits.shed_oldest.then(|| open.victim(cap, ip, limits)).flatten();
            match victim.and_then(|id| open.remove(id)) {
                Some(e) => shed.push((e, cap)),
                None => return Err(cap),
            }
        }
        if let Some(cap) = open.over(ip, limits) {
            return Err(cap);
        }
        let id = open.next_id;
        open.next_id += 1;
        open.total += 1;
        open.unauthenticated += 1;
        *open.per_address.entry(ip).or_insert(0) += 1;
        let close = Arc::new(tokio::sync::Notify::new());
        open.conns.insert(
            id,
            Entry {
                peer,
                authenticated: false,
                activity: Activity::Idle,
                close: close.clone(),
            },
        );
        Ok(Slot {
            tag: Tag { gate: self.clone(), id },
            close,
            descriptor: None,
        })
    }

    /// `admit`, or count and log the refusal (naming the cap it hit) and give nothing.
    pub fn admit_or_refuse(self: &Arc<Self>, peer: SocketAddr, limits: &Limits) -> Option<Slot> {
        match self.admit(peer, limits) {
            Ok(s) => Some(s),
            Err(why) => {
                let detail = match why {
                    Refusal::AddressCap => format!("{} connections from this address already", limits.max_per_address),
                    _ => format!("{} connections open already", limits.max_connections),
                };
                self.refuse(peer, why, &detail);
                None
            }
        }
    }

    /// Count a refusal and log it, unless this window has had its share of lines.
    pub fn refuse(&self, peer: SocketAddr, why: Refusal, detail: &str) {
        self.note(peer, why, "refused", detail)
    }

    /// Count what was done to a connection (`verb`: refused, closed) and log it, rate-limited.
    fn note(&self, peer: SocketAddr, why: Refusal, verb: &str, detail: &str) {
        if let Ok(mut r) = self.refused.lock() {
            *r.entry(why).or_insert(0) += 1;
        }
        let Ok(mut logs) = self.log.lock() else { return };
        let log = logs.entry(why).or_default();
        let now = Instant::now();
        if now.duration_since(log.window_start) >= WINDOW {
            if log.suppressed > 0 {
                tracing::warn!(
                    "{}{} more of these ({}) were not logged in the last minute",
                    self.prefix(),
                    log.suppressed,
                    why.label()
                );
            }
            *log = RateLimit {
                window_start: now,
                ..Default::default()
            };
        }
        if log.lines < BURST {
            log.lines += 1;
            tracing::warn!(%peer, "{}{verb} {peer}: {}: {detail}", self.prefix(), why.label());
        } else {
            log.suppressed += 1;
        }
    }

    /// Refusals by reason so far.
    pub fn refusals(&self) -> BTreeMap<Refusal, u64> {
        self.refused.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().map(|o| o.total).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::Context;

    fn at(ip: &str) -> SocketAddr {
        SocketAddr::new(ip.parse().unwrap(), 5)
    }

    #[test]
    fn caps_count_and_release() {
        let gate = Arc::new(Gate::default());
        let limits = Limits {
            max_connections: 3,
            max_per_address: 2,
            ..Default::default()
        };
        let (a, b) = (at("10.0.0.1"), at("10.0.0.2"));
        let s1 = gate.admit(a, &limits).unwrap();
        let _s2 = gate.admit(a, &limits).unwrap();
        assert_eq!(gate.admit(a, &limits).err(), Some(Refusal::AddressCap));
        let _s3 = gate.admit(b, &limits).unwrap();
        assert_eq!(gate.admit(b, &limits).err(), Some(Refusal::ConnectionCap));
        drop(s1);
        assert_eq!(gate.open(), 2);
        gate.admit(a, &limits).unwrap();
        let peer: SocketAddr = "10.0.0.1:5".parse().unwrap();
        for _ in 0..(BURST + 5) {
            gate.refuse(peer, Refusal::NoHello, "x");
        }
        assert_eq!(gate.refusals()[&Refusal::NoHello], u64::from(BURST) + 5);
        assert_eq!(gate.log.lock().unwrap()[&Refusal::NoHello].suppressed, 5);
        // Another reason still gets its own lines.
        gate.refuse(peer, Refusal::AddressCap, "y");
        assert_eq!(gate.log.lock().unwrap()[&Refusal::AddressCap].lines, 1);
    }

    /// Full, the oldest idle connection goes first, then the oldest stream, never one answering
    /// a request; the reserve is for authenticated connections; an address's streams are capped.
    #[test]
    fn a_full_gate_sheds_the_oldest_idle_and_keeps_the_reserve() {
        let gate = Arc::new(Gate::named("dashboard"));
        let limits = Limits {
            max_connections: 4,
            max_per_address: 3,
            reserved_for_authenticated: 1,
            shed_oldest: true,
            max_streams_per_address: 1,
            ..Default::default()
        };
        let shed_now = |s: &Slot| {
            let mut f = std::pin::pin!(s.shed());
            f.as_mut().poll(&mut Context::from_waker(std::task::Waker::noop())).is_ready()
        };
        let admin = gate.admit(at("10.0.0.9"), &limits).unwrap();
        admin.authenticate();
        let busy = gate.admit(at("10.0.0.1"), &limits).unwrap();
        busy.tag().set(Activity::Busy, &limits);
        let stream = gate.admit(at("10.0.0.2"), &limits).unwrap();
        stream.tag().set(Activity::Stream, &limits);
        let idle = gate.admit(at("10.0.0.3"), &limits).unwrap();
        // Three that never authenticated hold all but the reserve: the idle one goes first.
        let next = gate.admit(at("10.0.0.4"), &limits).unwrap();
        assert!(shed_now(&idle) && !shed_now(&busy) && !shed_now(&stream) && !shed_now(&admin));
        // Then the oldest stream (the busy one is answering).
        next.tag().set(Activity::Busy, &limits);
        let last = gate.admit(at("10.0.0.5"), &limits).unwrap();
        assert!(shed_now(&stream) && !shed_now(&busy) && !shed_now(&admin));
        assert_eq!(gate.open(), 4);
        // All that never authenticated answering requests: a newcomer is refused, and the
        // admin's place is not taken for it.
        last.tag().set(Activity::Busy, &limits);
        assert_eq!(gate.admit(at("10.0.0.6"), &limits).err(), Some(Refusal::ConnectionCap));
        assert!(!shed_now(&admin));
        // A second stream from one address closes its first.
        drop((busy, next));
        let s1 = gate.admit(at("10.0.0.7"), &limits).unwrap();
        s1.tag().set(Activity::Stream, &limits);
        let s2 = gate.admit(at("10.0.0.7"), &limits).unwrap();
        s2.tag().set(Activity::Stream, &limits);
        assert!(shed_now(&s1) && !shed_now(&s2) && !shed_now(&admin));
        assert!(gate.refusals()[&Refusal::Shed] >= 3);
        // A flood from one address sheds itself before the lone connection beside it, older or not.
        let gate = Arc::new(Gate::default());
        let lone = gate.admit(at("10.0.1.1"), &limits).unwrap();
        let flood: Vec<Slot> = (0..2).map(|_| gate.admit(at("10.0.1.2"), &limits).unwrap()).collect();
        let _newcomer = gate.admit(at("10.0.1.3"), &limits).unwrap();
        assert!(!shed_now(&lone) && shed_now(&flood[0]) && !shed_now(&flood[1]));
    }
}
