#!/usr/bin/env bash
# One report's wall time while etcd and the kubelet hang: both endpoints accept TCP and never
# answer. The probes run at once, each with its own timeout (etcd 3 s, kubelet /healthz 2 s), so
# a report should take about the slowest timeout, not their sum. Also a report with nothing
# hanging, for comparison. RUNS runs each.
#   RUNS=3 hack/bench-hung-probes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo puts what it builds (CARGO_TARGET_DIR honoured).
T=$(hack/target-dir.sh)
RUNS=${RUNS:-3}
cargo build --release --quiet -p hardshift-agent
work=$(mktemp -d)
hole=
cleanup() { [ -n "$hole" ] && kill "$hole" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
# A black hole: accepts every connection, reads nothing, answers nothing.
python3 - "$work/ports" <<'PY' & hole=$!
import socket, sys, threading, time
socks = []
ports = []
for _ in range(2):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(128); socks.append(s); ports.append(s.getsockname()[1])
open(sys.argv[1], "w").write(" ".join(map(str, ports)) + "\n")
held = []
def serve(s):
    while True:
        c, _ = s.accept(); held.append(c)
for s in socks:
    threading.Thread(target=serve, args=(s,), daemon=True).start()
while True:
    time.sleep(60)
PY
for _ in $(seq 50); do [ -s "$work/ports" ] && break; sleep 0.1; done
read -r etcd kubelet < "$work/ports"
# etcd's TLS material must exist for the probe to try: any certificate will do, the handshake never starts.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/k.pem" -out "$work/c.pem" -subj /CN=x -days 1 2>/dev/null
conf() {
  cat > "$work/agent-$1.toml" <<TOML
collector = "127.0.0.1:1"
node = "master-0"
ca = "$work/c.pem"
cert = "$work/c.pem"
key = "$work/k.pem"
units = []
cri_socket = ""
kubelet_cert = ""
state_dir = "$work/state"
kubelet_healthz = "$2"
$3
TOML
}
conf hung "127.0.0.1:$kubelet" "[etcd]
endpoint = \"127.0.0.1:$etcd\"
ca = \"$work/c.pem\"
cert = \"$work/c.pem\"
key = \"$work/k.pem\""
conf idle "127.0.0.1:1" ""
printf '%-28s %s\n' case "wall seconds per report (status: one report)"
for c in hung idle; do
  times=()
  for _ in $(seq "$RUNS"); do
    s=$(date +%s.%N)
    "$T/release/hardshift-agent" --config "$work/agent-$c.toml" status >/dev/null 2>&1 || true
    e=$(date +%s.%N)
    times+=("$(awk -v a="$s" -v b="$e" 'BEGIN {printf "%.2f", b - a}')")
  done
  label=$([ "$c" = hung ] && echo "etcd + kubelet hung" || echo "nothing hung (refused)")
  printf '%-28s %s\n' "$label" "${times[*]}"
done
