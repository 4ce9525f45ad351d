//! bootkube.sh and its unit: wait for etcd and the API, apply CRDs, then manifests, patch the
//! Infrastructure and FeatureGate status, then let the cluster-version-operator start. Every step is recorded in
//! a JSON progress file other tools (the node agent, a person with ssh) can read.

use super::paths::*;

/// `record RESULT [ERROR]`: the step's progress record (`{"stage","result","lastError","time"}`,
/// replaced atomically) at `$PROGRESS`, read by the node agent; `$stage` names the step.
pub const RECORD: &str = crate::scripts::RECORD;

pub fn script() -> String {
    crate::scripts::fill(
        crate::scripts::BOOTKUBE,
        &[
            ("ASSET_DIR", &ASSET_DIR),
            ("BOOTKUBE_PROGRESS", &BOOTKUBE_PROGRESS),
            ("KUBECONFIGS_DIR", &KUBECONFIGS_DIR),
            ("BOOTSTRAP_SECRETS", &BOOTSTRAP_SECRETS),
            ("RECORD", &RECORD),
            ("CVO_STAGED", &CVO_STAGED),
            ("STATIC_PODS", &STATIC_PODS),
            ("AFTER_CVO", &AFTER_CVO),
        ],
    )
}

pub const UNIT: &str = "[Unit]
Description=hardshift bootkube: bring up the bootstrap control plane
Wants=kubelet.service
After=kubelet.service crio.service network-online.target
ConditionPathExists=!/opt/openshift/.bootkube.done

[Service]
Type=oneshot
RemainAfterExit=true
ExecStart=/usr/local/bin/bootkube.sh
Restart=on-failure
RestartSec=10
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
";

#[cfg(test)]
mod tests {
    /// What coreos-installer prints (TABs, CRs between its progress lines, an ESC) goes into the
    /// record as valid JSON, every character but the control ones kept.
    #[test]
    fn the_record_is_json_whatever_the_error_holds() {
        let t = tempfile::tempdir().unwrap();
        let progress = t.path().join("p.json");
        let script = format!(
            "{}\nPROGRESS={}\nstage=write-disk\nrecord failed $'Read disk 1.2 GiB/4 GiB (30%)\\r\\tError: \\e[1m\\\"/dev/sdz\\\" \\\\ no such\\ndevice'",
            super::RECORD,
            progress.display()
        );
        let out = std::process::Command::new("bash").args(["-c", &script]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&progress).unwrap()).unwrap();
        assert_eq!(v["stage"], "write-disk");
        assert_eq!(v["result"], "failed");
        assert_eq!(
            v["lastError"],
            "Read disk 1.2 GiB/4 GiB (30%)  Error:  [1m\"/dev/sdz\" \\ no such device"
        );
    }
}
