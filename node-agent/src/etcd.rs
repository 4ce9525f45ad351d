//! etcd over its gRPC API with the node's etcd client certificate, one connection per probe: a
//! linearizable read (what etcd's own `/health` does: it needs a leader and a quorum), the
//! member's status (leader, raft index, db size, errors), the member list and the alarms.
//! `read` gathers a `Snapshot`; `judge` (pure) turns it into the component, naming every failure
//! in etcd's own words ("etcdserver: no leader").

use anyhow::Context;
use hardshift_proto::etcd::alarm_request::AlarmAction;
use hardshift_proto::etcd::cluster_client::ClusterClient;
use hardshift_proto::etcd::kv_client::KvClient;
use hardshift_proto::etcd::maintenance_client::MaintenanceClient;
use hardshift_proto::etcd::{AlarmMember, AlarmRequest, AlarmType, Member, MemberListRequest, RangeRequest, StatusRequest, StatusResponse};
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::Component;
use std::collections::HashMap;
use std::time::Duration;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

const TIMEOUT: Duration = Duration::from_secs(3);

pub use hardshift_agent_config::EtcdConfig;

/// What one probe read from the member; each part may have failed on its own.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// A linearizable read of one key.
    pub read: Result<(), tonic::Status>,
    pub status: Result<StatusResponse, tonic::Status>,
    pub members: Result<Vec<Member>, tonic::Status>,
    pub alarms: Result<Vec<AlarmMember>, tonic::Status>,
}

fn said(s: &tonic::Status) -> String {
    if s.message().is_empty() {
        format!("{:?}", s.code())
    } else {
        s.message().to_string()
    }
}

/// One TLS connection to the member, shared by the probe's calls (HTTP/2 streams).
async fn channel(cfg: &EtcdConfig) -> anyhow::Result<Channel> {
    let read = |p: &std::path::Path| std::fs::read(p).with_context(|| p.display().to_string());
    let host = cfg
        .endpoint
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(&cfg.endpoint)
        .trim_matches(['[', ']'])
        .to_string();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(&cfg.ca)?))
        .identity(Identity::from_pem(read(&cfg.cert)?, read(&cfg.key)?))
        .domain_name(host);
    Endpoint::from_shared(format!("https://{}", cfg.endpoint))
        .with_context(|| cfg.endpoint.clone())?
        .tls_config(tls)?
        .connect_timeout(TIMEOUT)
        .timeout(TIMEOUT)
        .connect()
        .await
        .with_context(|| cfg.endpoint.clone())
}

/// Ask the member everything at once over one connection.
pub async fn read(cfg: &EtcdConfig) -> anyhow::Result<Snapshot> {
    let ch = channel(cfg).await?;
    let (mut kv, mut cluster) = (KvClient::new(ch.clone()), ClusterClient::new(ch.clone()));
    let (mut status_c, mut alarm_c) = (MaintenanceClient::new(ch.clone()), MaintenanceClient::new(ch));
    let (read, status, members, alarms) = tokio::join!(
        kv.range(RangeRequest {
            key: b"health".to_vec(),
            limit: 1,
            keys_only: true,
            ..Default::default()
        }),
        status_c.status(StatusRequest {}),
        cluster.member_list(MemberListRequest { linearizable: false }),
        alarm_c.alarm(AlarmRequest {
            action: AlarmAction::Get as i32,
            member_id: 0,
            alarm: AlarmType::None as i32,
        }),
    );
    Ok(Snapshot {
        read: read.map(|_| ()),
        status: status.map(|r| r.into_inner()),
        members: members.map(|r| r.into_inner().members),
        alarms: alarms.map(|r| r.into_inner().alarms),
    })
}

fn alarm_name(a: i32) -> &'static str {
    match AlarmType::try_from(a) {
        Ok(AlarmType::Nospace) => "NOSPACE",
        Ok(AlarmType::Corrupt) => "CORRUPT",
        Ok(AlarmType::None) => "NONE",
        Err(_) => "UNKNOWN",
    }
}

/// The component from what the member said. Pure.
pub fn judge(s: &Snapshot) -> ComponentState {
    let members: &[Member] = s.members.as_deref().unwrap_or(&[]);
    let st = s.status.as_ref().ok();
    let leader = st.map(|s| s.leader).unwrap_or(0);
    let me = st.and_then(|s| s.header.as_ref()).map(|h| h.member_id).unwrap_or(0);
    let is_leader = leader != 0 && leader == me;
    let alarms: &[AlarmMember] = s.alarms.as_deref().unwrap_or(&[]);
    let mut d: HashMap<String, String> = HashMap::new();
    d.insert(
        "members".into(),
        members.iter().map(|m| m.name.clone()).collect::<Vec<_>>().join(","),
    );
    d.insert("leader".into(), if leader == 0 { String::new() } else { format!("{leader:x}") });
    d.insert("isLeader".into(), is_leader.to_string());
    if let Some(st) = st {
        d.insert("raftIndex".into(), st.raft_index.to_string());
        d.insert("raftTerm".into(), st.raft_term.to_string());
        d.insert("dbSize".into(), st.db_size.to_string());
        d.insert("version".into(), st.version.clone());
        if st.is_learner {
            d.insert("learner".into(), "true".into());
        }
    }
    d.insert("alarms".into(), alarms.len().to_string());
    let state = format!("{} members{}", members.len(), if is_leader { ", leader" } else { "" });
    let (health, reason) = if let Err(e) = &s.read {
        // What `etcdctl endpoint health` and `/health` report: no quorum read, no health.
        (Health::Failing, format!("a linearizable read failed: {}", said(e)))
    } else if !alarms.is_empty() {
        let list: Vec<String> = alarms
            .iter()
            .map(|a| format!("{} on member {:x}", alarm_name(a.alarm), a.member_id))
            .collect();
        (Health::Failing, format!("alarms: {}", list.join(", ")))
    } else if let Err(e) = &s.status {
        (Health::Warning, format!("status: {}", said(e)))
    } else if leader == 0 {
        (Health::Failing, "no leader".into())
    } else if let Some(st) = st.filter(|s| !s.errors.is_empty()) {
        (Health::Warning, st.errors.join("; "))
    } else if let Err(e) = &s.members {
        (Health::Warning, format!("member list: {}", said(e)))
    } else {
        (Health::Ok, String::new())
    };
    ComponentState {
        name: Component::Etcd.name().into(),
        health: health as i32,
        state,
        reason,
        details: d,
    }
}

/// The member list, one line per member as etcdctl prints it (a debug request's answer).
pub async fn members(cfg: &EtcdConfig) -> anyhow::Result<Vec<String>> {
    let run = async {
        let mut c = ClusterClient::new(channel(cfg).await?);
        let ms = c
            .member_list(MemberListRequest { linearizable: false })
            .await
            .map_err(|s| anyhow::anyhow!("member list: {}", said(&s)))?
            .into_inner()
            .members;
        Ok::<_, anyhow::Error>(
            ms.iter()
                .map(|m| {
                    format!(
                        "{:x} name={} peers={} clients={}{}",
                        m.id,
                        if m.name.is_empty() { "(unstarted)" } else { &m.name },
                        m.peer_ur_ls.join(","),
                        m.client_ur_ls.join(","),
                        if m.is_learner { " learner" } else { "" }
                    )
                })
                .collect(),
        )
    };
    tokio::time::timeout(TIMEOUT, run)
        .await
        .map_err(|_| anyhow::anyhow!("etcd at {} did not answer within 3s", cfg.endpoint))?
}

pub async fn probe(cfg: &EtcdConfig) -> ComponentState {
    let mut c = ComponentState {
        name: Component::Etcd.name().into(),
        ..Default::default()
    };
    // Before etcd runs here (a master before the cluster-etcd-operator rolls it out) its
    // certificates do not exist yet: that is a phase, not a fault.
    if let Some(p) = [&cfg.ca, &cfg.cert, &cfg.key].into_iter().find(|p| !p.exists()) {
        c.health = Health::Warning as i32;
        c.state = "no certificates yet".into();
        c.reason = format!("{} absent: etcd is not rolled out on this node yet", p.display());
        return c;
    }
    match tokio::time::timeout(TIMEOUT, read(cfg)).await {
        Err(_) => {
            c.health = Health::Failing as i32;
            c.state = "timeout".into();
            c.reason = format!("etcd at {} did not answer within 3s", cfg.endpoint);
            c
        }
        Ok(Err(e)) => {
            c.health = Health::Failing as i32;
            c.state = "unreachable".into();
            c.reason = format!("{e:#}");
            c
        }
        Ok(Ok(snap)) => judge(&snap),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hardshift_proto::etcd::ResponseHeader;

    fn member(id: u64, name: &str) -> Member {
        Member {
            id,
            name: name.into(),
            peer_ur_ls: vec![format!("https://{name}:2380")],
            client_ur_ls: vec![format!("https://{name}:2379")],
            is_learner: false,
        }
    }

    /// A healthy 3-member cluster as master-0's member answers when it leads.
    fn healthy() -> Snapshot {
        Snapshot {
            read: Ok(()),
            status: Ok(StatusResponse {
                header: Some(ResponseHeader {
                    cluster_id: 0xcdf818194e3a8c32,
                    member_id: 0x8e9e05c52164694d,
                    revision: 12,
                    raft_term: 3,
                }),
                version: "3.5.16".into(),
                db_size: 20480,
                leader: 0x8e9e05c52164694d,
                raft_index: 57,
                raft_term: 3,
                ..Default::default()
            }),
            members: Ok(vec![
                member(0x8e9e05c52164694d, "master-0"),
                member(0x91bc3c398fb3c146, "master-1"),
                member(0xfd422379fda50e48, "master-2"),
            ]),
            alarms: Ok(vec![]),
        }
    }

    #[test]
    fn a_healthy_leader() {
        let c = judge(&healthy());
        assert_eq!(c.health, Health::Ok as i32, "{c:?}");
        assert_eq!(c.state, "3 members, leader");
        assert_eq!(c.details["members"], "master-0,master-1,master-2");
        assert_eq!(c.details["leader"], "8e9e05c52164694d");
        assert_eq!(c.details["alarms"], "0");
    }

    #[test]
    fn no_quorum_is_named_in_etcds_words() {
        // A member cut off from the others: its status still answers, with no leader, and the
        // linearizable read fails as etcd says it.
        let mut s = healthy();
        s.read = Err(tonic::Status::unavailable("etcdserver: no leader"));
        if let Ok(st) = &mut s.status {
            st.leader = 0;
        }
        let c = judge(&s);
        assert_eq!(c.health, Health::Failing as i32);
        assert_eq!(c.reason, "a linearizable read failed: etcdserver: no leader");
        assert_eq!(c.state, "3 members");
        assert_eq!(c.details["leader"], "");
    }

    #[test]
    fn an_internal_error_is_not_mistaken_for_no_leader() {
        // Before, an HTTP 500 from the gateway read as "no leader". Now the read's own error is
        // the reason, and the leader etcd reports is kept.
        let mut s = healthy();
        s.read = Err(tonic::Status::unavailable("etcdserver: request timed out"));
        let c = judge(&s);
        assert_eq!(c.health, Health::Failing as i32);
        assert!(c.reason.ends_with("etcdserver: request timed out"), "{c:?}");
        assert_eq!(c.details["leader"], "8e9e05c52164694d");
    }

    #[test]
    fn alarms_and_errors() {
        let mut s = healthy();
        s.alarms = Ok(vec![AlarmMember {
            member_id: 0x91bc3c398fb3c146,
            alarm: AlarmType::Nospace as i32,
        }]);
        let c = judge(&s);
        assert_eq!(c.health, Health::Failing as i32);
        assert_eq!(c.reason, "alarms: NOSPACE on member 91bc3c398fb3c146");
        let mut s = healthy();
        if let Ok(st) = &mut s.status {
            st.errors = vec!["slow fdatasync".into()];
        }
        let c = judge(&s);
        assert_eq!((c.health, c.reason.as_str()), (Health::Warning as i32, "slow fdatasync"));
        let mut s = healthy();
        s.status = Err(tonic::Status::unavailable("etcdserver: leader changed"));
        let c = judge(&s);
        assert_eq!(c.health, Health::Warning as i32, "{c:?}");
        assert_eq!(c.details["leader"], "");
    }
}
