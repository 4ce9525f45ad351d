#!/usr/bin/env python3
"""Write tests/fixtures/mco/: a synthetic MCO-rendered base in the shape `machine-config-controller
bootstrap` produces (30+ files, 20+ units), for the merge tests and the benchmarks.

  master.ign                  an Ignition 3.2.0 config
  worker-machineconfig.json   a rendered MachineConfig holding one in spec.config
  master-large.ign            the master base padded to about 300 KB (benchmark)

The contents are plausible, written for hardshift, not copied from the MCO.
"""
import base64, json, pathlib, urllib.parse

out = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "mco"
out.mkdir(parents=True, exist_ok=True)


def data(text):
    return "data:," + urllib.parse.quote(text)


def files(role):
    f = {
        "/etc/kubernetes/kubelet.conf": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\nclusterDNS: [172.30.0.10]\nclusterDomain: cluster.local\nmaxPods: 250\nrotateCertificates: true\nserverTLSBootstrap: true\n",
        "/etc/kubernetes/kubelet-ca.crt": "-----BEGIN CERTIFICATE-----\nMIIBfixture\n-----END CERTIFICATE-----\n",
        "/etc/kubernetes/cloud.conf": "",
        "/etc/kubernetes/apiserver-url.env": "KUBERNETES_SERVICE_HOST=api-int.base.example\nKUBERNETES_SERVICE_PORT=6443\n",
        "/etc/crio/crio.conf.d/00-default": "[crio]\ninternal_wipe = true\n[crio.runtime]\nselinux = true\nconmon = \"\"\n[crio.image]\nglobal_auth_file = \"/var/lib/kubelet/config.json\"\npause_image = \"quay.io/base/pause@sha256:00\"\n[crio.network]\nplugin_dirs = [\"/var/lib/cni/bin\", \"/usr/libexec/cni\"]\n",
        "/etc/containers/policy.json": json.dumps({"default": [{"type": "insecureAcceptAnything"}], "transports": {"docker-daemon": {"": [{"type": "insecureAcceptAnything"}]}}}),
        "/etc/containers/registries.conf": "unqualified-search-registries = [\"registry.access.redhat.com\"]\n",
        "/etc/containers/storage.conf": "[storage]\ndriver = \"overlay\"\nrunroot = \"/var/run/containers/storage\"\ngraphroot = \"/var/lib/containers/storage\"\n",
        "/etc/sysctl.d/forward.conf": "net.ipv4.ip_forward = 1\n",
        "/etc/sysctl.d/inotify.conf": "fs.inotify.max_user_watches = 65536\nfs.inotify.max_user_instances = 8192\n",
        "/etc/sysctl.d/enable-userfaultfd.conf": "vm.unprivileged_userfaultfd = 1\n",
        "/etc/modules-load.d/iptables.conf": "ip_tables\niptable_nat\n",
        "/etc/NetworkManager/conf.d/99-keyfiles.conf": "[keyfile]\npath=/etc/NetworkManager/system-connections-merged\n",
        "/etc/NetworkManager/conf.d/sdn.conf": "[main]\nrc-manager=unmanaged\n",
        "/etc/NetworkManager/dispatcher.d/30-resolv-prepender": "#!/bin/bash\nset -eo pipefail\n# prepend the node's resolver\n",
        "/etc/NetworkManager/dispatcher.d/99-vsphere-disable-tx-udp-tnl": "#!/bin/bash\nexit 0\n",
        "/usr/local/bin/configure-ovs.sh": "#!/bin/bash\nset -eux\n# configure br-ex on the default interface\n" + "# step\n" * 40,
        "/usr/local/bin/mco-hostname": "#!/bin/bash\n# set the hostname from DHCP or the node name\n",
        "/usr/local/sbin/set-valid-nodeip.sh": "#!/bin/bash\n# pick the node IP for kubelet\n",
        "/usr/local/bin/nm-clean-initrd-state.sh": "#!/bin/bash\nrm -rf /run/NetworkManager/initrd\n",
        "/usr/local/bin/kubenswrapper": "#!/bin/bash\nexec \"$@\"\n",
        "/etc/systemd/system.conf.d/10-default-env.conf": "[Manager]\n",
        "/etc/systemd/system.conf.d/kubelet-cgroups.conf": "[Manager]\nDefaultCPUAccounting=yes\nDefaultMemoryAccounting=yes\n",
        "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem": "",
        "/var/lib/kubelet/config.json": "{\"auths\":{\"base.example\":{\"auth\":\"YmFzZTpiYXNl\"}}}",
        "/etc/mco/proxy.env": "",
        "/etc/mco/internal-registry-pull-secret.json": "{\"auths\":{}}",
        "/etc/ssh/sshd_config.d/10-insecure-rsa-keysig.conf": "PubkeyAcceptedKeyTypes +ssh-rsa\n",
        "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt": "",
        "/etc/kubernetes/kubelet-plugins/volume/exec/.dummy": "",
        "/etc/audit/rules.d/mco-audit-quiet-containers.rules": "-a exclude,always -F msgtype=NETFILTER_CFG\n",
        "/etc/tmpfiles.d/cleanup-cni.conf": "r /etc/kubernetes/cni/net.d/80-openshift-network.conf\n",
        "/etc/kubernetes/crio-metrics-proxy.cfg": "{}\n",
        "/etc/node-sizing-enabled.env": "NODE_SIZING_ENABLED=false\nSYSTEM_RESERVED_MEMORY=1Gi\nSYSTEM_RESERVED_CPU=500m\n",
    }
    if role == "master":
        f["/etc/kubernetes/manifests/recycler-pod.yaml"] = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: recyler-pod\n  namespace: openshift-infra\n"
        f["/etc/kubernetes/manifests/apiserver-watcher.yaml"] = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: apiserver-watcher\n  namespace: openshift-kube-apiserver\n"
    return [{"path": p, "mode": 0o755 if ("/bin/" in p or "dispatcher.d" in p) else 0o644, "overwrite": True, "contents": {"source": data(c)}}
            for p, c in sorted(f.items())]


def units(role):
    u = [
        {"name": "kubelet.service", "enabled": True, "contents": f"[Unit]\nDescription=Kubernetes Kubelet\nRequires=crio.service kubelet-dependencies.target\nAfter=kubelet-dependencies.target\n\n[Service]\nType=notify\nEnvironmentFile=/etc/os-release\nEnvironmentFile=-/etc/kubernetes/kubelet-workaround\nEnvironmentFile=-/etc/kubernetes/kubelet-env\nExecStart=/usr/local/bin/kubenswrapper /usr/bin/kubelet --config=/etc/kubernetes/kubelet.conf --bootstrap-kubeconfig=/etc/kubernetes/kubeconfig --kubeconfig=/var/lib/kubelet/kubeconfig --container-runtime-endpoint=/var/run/crio/crio.sock --node-labels=node-role.kubernetes.io/{role},node.openshift.io/os_id=${{ID}} --node-ip=${{KUBELET_NODE_IP}} --v=2\nRestart=always\nRestartSec=10\n\n[Install]\nWantedBy=multi-user.target\n",
         "dropins": [{"name": "01-kubens.conf", "contents": "[Service]\nEnvironmentFile=-/run/kubens/env\n"},
                     {"name": "10-mco-default-env.conf", "contents": ""},
                     {"name": "10-mco-default-madv.conf", "contents": "[Service]\nEnvironment=\"GODEBUG=x509ignoreCN=0,madvdontneed=1\"\n"}]},
        {"name": "crio.service", "dropins": [{"name": "10-mco-default-env.conf", "contents": ""},
                                              {"name": "10-mco-profile-unix-socket.conf", "contents": "[Service]\nEnvironment=\"ENABLED_PROFILE_UNIX_SOCKET=true\"\n"}]},
        {"name": "kubelet-dependencies.target", "contents": "[Unit]\nDescription=Dependencies necessary to run kubelet\nRequires=basic.target network-online.target\nWants=crio-wipe.service\n"},
        {"name": "machine-config-daemon-firstboot.service", "enabled": True, "contents": "[Unit]\nDescription=Machine Config Daemon Firstboot\nConditionPathExists=/etc/ignition-machine-config-encapsulated.json\n\n[Service]\nType=oneshot\nExecStart=/run/bin/machine-config-daemon firstboot-complete-machineconfig\n\n[Install]\nWantedBy=multi-user.target\n"},
        {"name": "machine-config-daemon-pull.service", "enabled": True, "contents": "[Unit]\nDescription=Machine Config Daemon Pull\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n"},
        {"name": "nodeip-configuration.service", "enabled": True, "contents": "[Unit]\nDescription=Writes IP address configuration so that kubelet and crio services select a valid node IP\nBefore=kubelet-dependencies.target\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n"},
        {"name": "ovs-configuration.service", "enabled": True, "contents": "[Unit]\nDescription=Configures OVS with proper host networking configuration\n\n[Service]\nType=oneshot\nExecStart=/usr/local/bin/configure-ovs.sh OVNKubernetes\n\n[Install]\nWantedBy=multi-user.target\n"},
        {"name": "ovs-vswitchd.service", "dropins": [{"name": "10-ovs-vswitchd-restart.conf", "contents": "[Service]\nRestart=always\n"}]},
        {"name": "ovsdb-server.service", "dropins": [{"name": "10-ovsdb-restart.conf", "contents": "[Service]\nRestart=always\n"}]},
        {"name": "openvswitch.service", "enabled": True},
        {"name": "rpc-statd.service", "dropins": [{"name": "mco-disabled.conf", "contents": "[Unit]\nConditionPathExists=/enoent\n"}]},
        {"name": "kubelet-auto-node-size.service", "enabled": True, "contents": "[Unit]\nDescription=Dynamically sets the system reserved for the kubelet\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n\n[Install]\nRequiredBy=kubelet-dependencies.target\n"},
        {"name": "wait-for-br-ex-up.service", "enabled": True, "contents": "[Unit]\nDescription=Wait for br-ex up event from NetworkManager\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n\n[Install]\nRequiredBy=kubelet-dependencies.target\n"},
        {"name": "node-valid-hostname.service", "enabled": True, "contents": "[Unit]\nDescription=Wait for a non-localhost hostname\n\n[Service]\nType=oneshot\nExecStart=/usr/local/bin/mco-hostname\n\n[Install]\nRequiredBy=kubelet-dependencies.target\n"},
        {"name": "pivot.service", "mask": True},
        {"name": "zincati.service", "mask": True},
        {"name": "NetworkManager-clean-initrd-state.service", "enabled": True, "contents": "[Unit]\nDescription=Cleans NetworkManager state generated by dracut\n\n[Service]\nType=oneshot\nExecStart=/usr/local/bin/nm-clean-initrd-state.sh\n\n[Install]\nWantedBy=network-online.target\n"},
        {"name": "dummy-network.service", "enabled": True, "contents": "[Unit]\nDescription=Create dummy network\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n"},
        {"name": "crio-wipe.service", "dropins": [{"name": "10-mco-default-env.conf", "contents": ""}]},
        {"name": "systemd-journald.service", "dropins": [{"name": "10-mco-journald.conf", "contents": "[Service]\nLogRateLimitIntervalSec=0\n"}]},
        {"name": "aws-kubelet-nodename.service", "enabled": False, "contents": "[Unit]\nDescription=Fetch kubelet node name from AWS Metadata\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n"},
        {"name": "kubelet-cleanup.service", "enabled": True, "contents": "[Unit]\nDescription=Kubelet cleanup\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n"},
        {"name": "update-ca-trust.service", "enabled": True, "contents": "[Unit]\nDescription=Update CA trust\n\n[Service]\nType=oneshot\nExecStart=/usr/bin/update-ca-trust\n\n[Install]\nWantedBy=multi-user.target\n"},
    ]
    return sorted(u, key=lambda x: x["name"])


def config(role, pad=0):
    fs = files(role)
    if pad:
        blob = "".join(f"# padding line {i:06d} so the base weighs what a real rendered config does\n" for i in range(pad))
        fs.append({"path": "/etc/hardshift-fixture/padding.txt", "mode": 0o644, "contents": {"source": "data:;base64," + base64.b64encode(blob.encode()).decode()}})
    return {"ignition": {"version": "3.2.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBaseFixtureKeyOnlyForTests base@fixture"]}]},
            "storage": {"files": fs}, "systemd": {"units": units(role)}}


(out / "master.ign").write_text(json.dumps(config("master"), indent=1) + "\n")
mc = {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
      "metadata": {"name": "rendered-worker-fixture", "annotations": {"machineconfiguration.openshift.io/generated-by-controller-version": "fixture"}},
      "spec": {"config": config("worker"), "osImageURL": "quay.io/base/rhcos@sha256:00"}}
(out / "worker-machineconfig.json").write_text(json.dumps(mc, indent=1) + "\n")
(out / "master-large.ign").write_text(json.dumps(config("master", pad=3500)) + "\n")
for f in sorted(out.iterdir()):
    print(f.name, f.stat().st_size)
