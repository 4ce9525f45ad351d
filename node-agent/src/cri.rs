//! The container runtime through the CRI RuntimeService on its unix socket (CRI-O on RHCOS; any CRI
//! runtime answers the same calls): Version, Status (RuntimeReady, NetworkReady), every pod sandbox
//! and container, and for exited containers their exit code and reason. Read-only calls only.

use hardshift_proto::cri::{
    Container, ContainerState, ContainerStatusRequest, ListContainersRequest, ListPodSandboxRequest, PodSandbox, PodSandboxState,
    StatusRequest, VersionRequest,
};
use hardshift_proto::v1::{ComponentState, ContainerInfo, Health, PodInfo};
use hardshift_proto::vocab::{state, Component};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(3);
/// ContainerStatus calls per probe: enough for every failing container on a node, bounded anyway.
const MAX_STATUS_CALLS: usize = 64;

fn state_name(s: i32) -> &'static str {
    match ContainerState::try_from(s) {
        Ok(ContainerState::ContainerCreated) => "created",
        Ok(ContainerState::ContainerRunning) => state::RUNNING,
        Ok(ContainerState::ContainerExited) => state::EXITED,
        _ => "unknown",
    }
}

/// What the probe read, before it is judged.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub runtime: String,
    pub api: String,
    /// (type, status, reason, message) of each runtime condition.
    pub conditions: Vec<(String, bool, String, String)>,
    pub pods: Vec<PodInfo>,
    pub containers: Vec<ContainerInfo>,
}

pub type Client = hardshift_proto::cri::runtime_service_client::RuntimeServiceClient<tonic::transport::Channel>;

/// Every pod sandbox and container, and each sandbox id's `namespace/name`.
pub async fn inventory(c: &mut Client) -> anyhow::Result<(Vec<PodSandbox>, Vec<Container>, HashMap<String, String>)> {
    let st = |s: tonic::Status| anyhow::anyhow!("CRI: {}: {}", s.code(), s.message());
    let sandboxes = c
        .list_pod_sandbox(ListPodSandboxRequest { filter: None })
        .await
        .map_err(st)?
        .into_inner()
        .items;
    let containers = c
        .list_containers(ListContainersRequest { filter: None })
        .await
        .map_err(st)?
        .into_inner()
        .containers;
    let names = sandboxes
        .iter()
        .map(|p| {
            let m = p.metadata.clone().unwrap_or_default();
            (p.id.clone(), format!("{}/{}", m.namespace, m.name))
        })
        .collect();
    Ok((sandboxes, containers, names))
}

async fn read(socket: &Path) -> anyhow::Result<Snapshot> {
    let mut c = hardshift_proto::cri_client(socket, TIMEOUT).await?;
    let st = |s: tonic::Status| anyhow::anyhow!("{}: {}", s.code(), s.message());
    let v = c.version(VersionRequest { version: "v1".into() }).await.map_err(st)?.into_inner();
    let status = c.status(StatusRequest { verbose: false }).await.map_err(st)?.into_inner();
    let (sandboxes, list, pod_names) = inventory(&mut c).await?;
    let pods = sandboxes
        .iter()
        .map(|p| {
            let m = p.metadata.clone().unwrap_or_default();
            PodInfo {
                id: p.id.clone(),
                namespace: m.namespace,
                name: m.name,
                ready: p.state == PodSandboxState::SandboxReady as i32,
                created_ms: p.created_at / 1_000_000,
            }
        })
        .collect();
    let mut containers = Vec::with_capacity(list.len());
    let mut calls = 0;
    for k in list {
        let m = k.metadata.clone().unwrap_or_default();
        let mut info = ContainerInfo {
            id: k.id.clone(),
            pod: pod_names.get(&k.pod_sandbox_id).cloned().unwrap_or_default(),
            name: m.name,
            state: state_name(k.state).into(),
            attempt: m.attempt,
            image: k.image.map(|i| i.image).unwrap_or_default(),
            ..Default::default()
        };
        // Only an exited container has an exit code and reason worth a call.
        if k.state == ContainerState::ContainerExited as i32 && calls < MAX_STATUS_CALLS {
            calls += 1;
            if let Ok(r) = c
                .container_status(ContainerStatusRequest {
                    container_id: k.id.clone(),
                    verbose: false,
                })
                .await
            {
                if let Some(s) = r.into_inner().status {
                    info.exit_code = s.exit_code;
                    info.reason = s.reason;
                    info.message = s.message;
                    info.finished_ms = s.finished_at / 1_000_000;
                }
            }
        }
        containers.push(info);
    }
    containers.sort_by(|a, b| (&a.pod, &a.name, a.attempt).cmp(&(&b.pod, &b.name, b.attempt)));
    Ok(Snapshot {
        runtime: format!("{} {}", v.runtime_name, v.runtime_version),
        api: v.runtime_api_version,
        conditions: status
            .status
            .map(|s| {
                s.conditions
                    .into_iter()
                    .map(|c| (c.r#type, c.status, c.reason, c.message))
                    .collect()
            })
            .unwrap_or_default(),
        pods,
        containers,
    })
}

/// Containers that failed: exited non-zero, and only the newest attempt of each (an older attempt
/// that failed is history once a newer one runs).
pub fn failing(containers: &[ContainerInfo]) -> Vec<&ContainerInfo> {
    hardshift_proto::vocab::failing_containers(containers)
}

/// Judge a snapshot: the runtime component, as the status table shows it.
pub fn judge(s: &Snapshot) -> ComponentState {
    let cond = |t: &str| s.conditions.iter().find(|c| c.0 == t);
    let running = s.containers.iter().filter(|c| c.state == state::RUNNING).count();
    let ready_pods = s.pods.iter().filter(|p| p.ready).count();
    let failed = failing(&s.containers);
    let mut details = HashMap::from([
        ("runtime".to_string(), s.runtime.clone()),
        ("apiVersion".to_string(), s.api.clone()),
        ("pods".to_string(), s.pods.len().to_string()),
        ("podsReady".to_string(), ready_pods.to_string()),
        ("containers".to_string(), s.containers.len().to_string()),
        ("running".to_string(), running.to_string()),
        ("failing".to_string(), failed.len().to_string()),
    ]);
    for (t, ok, reason, msg) in &s.conditions {
        details.insert(t.clone(), if *ok { "true".into() } else { format!("false: {reason}: {msg}") });
    }
    let state = format!("{running}/{} running, {ready_pods}/{} pods ready", s.containers.len(), s.pods.len());
    let (health, reason) = match (cond("RuntimeReady"), cond("NetworkReady")) {
        (Some((_, false, r, m)), _) => (Health::Failing, format!("RuntimeReady=false: {r}: {m}")),
        (None, _) => (Health::Failing, "the runtime reports no RuntimeReady condition".to_string()),
        _ if !failed.is_empty() => {
            let f: Vec<String> = failed
                .iter()
                .take(5)
                .map(|c| {
                    let why = if c.reason.is_empty() {
                        "exited".to_string()
                    } else {
                        c.reason.clone()
                    };
                    let restarts = if c.attempt > 0 {
                        format!(", {} restarts: crash-looping", c.attempt)
                    } else {
                        String::new()
                    };
                    format!("{}/{} {why} (exit {}{restarts})", c.pod, c.name, c.exit_code)
                })
                .collect();
            (Health::Warning, format!("{} failing: {}", failed.len(), f.join("; ")))
        }
        // Before the network operator writes a CNI config every node is here: a warning, with why.
        (_, Some((_, false, r, m))) => (Health::Warning, format!("NetworkReady=false: {r}: {m} (no CNI config yet)")),
        _ => (Health::Ok, String::new()),
    };
    ComponentState {
        name: Component::Cri.name().into(),
        health: health as i32,
        state,
        reason,
        details,
    }
}

/// Probe the runtime; the snapshot's pods and containers go into the report.
pub async fn probe(socket: &Path) -> (ComponentState, Vec<PodInfo>, Vec<ContainerInfo>) {
    match tokio::time::timeout(TIMEOUT * 2, read(socket)).await {
        Ok(Ok(s)) => {
            let c = judge(&s);
            (c, s.pods, s.containers)
        }
        Ok(Err(e)) => {
            let (state, why) = if !socket.exists() {
                ("no socket", "the runtime is not running (is crio.service started?)")
            } else {
                ("unreachable", "the runtime does not answer on its socket")
            };
            let c = ComponentState {
                name: Component::Cri.name().into(),
                health: Health::Failing as i32,
                state: state.into(),
                reason: format!("{why}: {e}"),
                details: Default::default(),
            };
            (c, vec![], vec![])
        }
        Err(_) => {
            let c = ComponentState {
                name: Component::Cri.name().into(),
                health: Health::Failing as i32,
                state: "timeout".into(),
                reason: format!("{} did not answer within {}s", socket.display(), (TIMEOUT * 2).as_secs()),
                details: Default::default(),
            };
            (c, vec![], vec![])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, attempt: u32, state: &str, exit: i32) -> ContainerInfo {
        ContainerInfo {
            pod: "ns/p".into(),
            name: name.into(),
            attempt,
            state: state.into(),
            exit_code: exit,
            reason: if exit != 0 { "Error".into() } else { String::new() },
            ..Default::default()
        }
    }

    #[test]
    fn only_the_newest_attempt_counts() {
        let cs = vec![
            c("a", 0, "exited", 1),
            c("a", 1, "running", 0),
            c("b", 2, "exited", 2),
            c("d", 0, "exited", 0),
        ];
        let f = failing(&cs);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].name, "b");
    }

    #[test]
    fn judgement_names_the_failing_container_before_the_network() {
        let cond = |t: &str, ok: bool| {
            (
                t.to_string(),
                ok,
                if ok { "" } else { "NetworkPluginNotReady" }.to_string(),
                String::new(),
            )
        };
        let mut s = Snapshot {
            conditions: vec![cond("RuntimeReady", true), cond("NetworkReady", false)],
            ..Default::default()
        };
        let j = judge(&s);
        assert_eq!(j.health, Health::Warning as i32);
        assert!(j.reason.starts_with("NetworkReady=false"), "{}", j.reason);
        s.containers = vec![c("etcd", 3, "exited", 1)];
        let j = judge(&s);
        assert!(
            j.reason.contains("ns/p/etcd Error (exit 1, 3 restarts: crash-looping)"),
            "{}",
            j.reason
        );
        s.conditions[0].1 = false;
        assert_eq!(judge(&s).health, Health::Failing as i32);
    }
}
