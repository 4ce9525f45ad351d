#!/usr/bin/env python3
"""Write a lab's inputs with N workers (for benchmarks): hack/gen-lab.py DIR WORKERS.
hack/gen-lab.py DIR single-node: the example as a single node (bootstrap-in-place, no VIPs).

Same cluster as examples/ocp4, on a /16 machine network so that thousands of nodes fit (up to
31,500 workers), and beyond 508 workers a /8 cluster network (a /23 of pods for each of up to 32,768
nodes; the example's /14 holds 512).
"""
import pathlib, sys

out = pathlib.Path(sys.argv[1])
single = sys.argv[2] == "single-node"
workers = 0 if single else int(sys.argv[2])
if not 0 <= workers <= 31500:
    sys.exit(f"gen-lab.py: {workers} workers: the /16 machine network holds 0 to 31,500")
example = pathlib.Path(__file__).resolve().parent.parent / "examples" / "ocp4"
out.mkdir(parents=True, exist_ok=True)
ic = (example / "install-config.yaml").read_text()
ic = ic.replace("192.168.126.0/24", "192.168.0.0/16").replace("  replicas: 2", f"  replicas: {workers}")
if workers + 4 > 512:
    ic = ic.replace("cidr: 10.128.0.0/14", "cidr: 10.0.0.0/8")
hs = (example / "hardshift.yaml").read_text()
if single:
    ic = ic.replace("  replicas: 3", "  replicas: 1").replace(
        "platform:", "bootstrapInPlace:\n  installationDisk: /dev/disk/by-id/wwn-0x64cd98f04fde100024684cf3034da5c2\nplatform:"
    )
    hs = "".join(l for l in hs.splitlines(True) if not l.startswith("loadBalancer:") and "VIP:" not in l)
(out / "install-config.yaml").write_text(ic)
(out / "hardshift.yaml").write_text(hs)


def host(name, role, ip, mac):
    return f"""- hostname: {name}
  role: {role}
  interfaces:
  - name: enp1s0
    macAddress: {mac}
  networkConfig:
    interfaces:
    - name: enp1s0
      type: ethernet
      state: up
      ipv4:
        enabled: true
        dhcp: false
        address:
        - ip: {ip}
          prefix-length: 16
    dns-resolver:
      config:
        server: [192.168.126.1]
    routes:
      config:
      - destination: 0.0.0.0/0
        next-hop-address: 192.168.126.1
        next-hop-interface: enp1s0
"""


hosts = [] if single else [host("bootstrap", "bootstrap", "192.168.126.100", "52:54:00:00:00:64")]
hosts += [host(f"master-{i}", "master", f"192.168.126.{101 + i}", f"52:54:00:00:00:{0x65 + i:02x}") for i in range(1 if single else 3)]
for i in range(workers):
    hosts.append(host(f"worker-{i}", "worker", f"192.168.{130 + i // 250}.{1 + i % 250}", f"52:54:00:01:{i // 256:02x}:{i % 256:02x}"))
(out / "agent-config.yaml").write_text("apiVersion: v1beta1\nkind: AgentConfig\nmetadata:\n  name: ocp4\nhosts:\n" + "".join(hosts))
