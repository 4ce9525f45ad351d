#!/usr/bin/env bash
# Agent footprint beside Debian's prometheus-node-exporter, in one run: RSS (max, KB) and CPU (% of
# one core) over DURATION seconds (default 600), the agent reporting every 5 s to a real collector,
# node_exporter scraped every 5 s. Also the agent binary's size.
#   DURATION=120 hack/bench-agent.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo puts what it builds (CARGO_TARGET_DIR honoured).
T=$(hack/target-dir.sh)
DURATION=${DURATION:-600}
command -v prometheus-node-exporter >/dev/null || { apt-get install -y -q prometheus-node-exporter >/dev/null; }
cargo build --release --quiet -p hardshift
cargo build --profile agent --quiet -p hardshift-agent  # the agent as create embeds it
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/b"; cp -r examples/ocp4/*.yaml examples/ocp4/release examples/ocp4/crds "$work/b"/
"$T/release/hardshift" create --dir "$work/b" --key-algorithm ecdsa-p256 --no-agent --self-contained-nodes >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$T/release/hardshift" collector --dir "$work/b" --listen "127.0.0.1:$port" --web 127.0.0.1:0 2>/dev/null & pids+=($!)
cat > "$work/agent.toml" <<EOT
collector = "127.0.0.1:$port"
node = "master-0"
role = "master"
ca = "$work/b/agent-pki/agent-ca.crt"
cert = "$work/b/agent-pki/agent-master-0.crt"
key = "$work/b/agent-pki/agent-master-0.key"
interval_ms = 5000
EOT
"$T/agent/hardshift-agent" --config "$work/agent.toml" 2>/dev/null & agent=$!; pids+=("$agent")
prometheus-node-exporter --web.listen-address=127.0.0.1:19100 >/dev/null 2>&1 & ne=$!; pids+=("$ne")
sleep 2
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
a0=$(ticks $agent); n0=$(ticks $ne); amax=0; nmax=0
for _ in $(seq $((DURATION / 5))); do
  curl -s "http://127.0.0.1:19100/metrics" >/dev/null || true
  sleep 5
  a=$(rss $agent); n=$(rss $ne)
  (( a > amax )) && amax=$a; (( n > nmax )) && nmax=$n
done
hz=$(getconf CLK_TCK)
cpu() { awk -v t="$1" -v hz="$hz" -v d="$DURATION" 'BEGIN {printf "%.3f", 100 * t / hz / d}'; }
printf '%-24s %14s %12s\n' process "max RSS (KB)" "CPU (%core)"
printf '%-24s %14s %12s\n' hardshift-agent "$amax" "$(cpu $(( $(ticks $agent) - a0 )))"
printf '%-24s %14s %12s\n' prometheus-node-exporter "$nmax" "$(cpu $(( $(ticks $ne) - n0 )))"
echo "agent binary: $(stat -c %s "$T/agent/hardshift-agent") bytes (goal: under 8,000,000; glibc build; needs GLIBC_$(objdump -T "$T/agent/hardshift-agent" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1))"
echo "reports stored: $("$T/release/hardshift" status --dir "$work/b" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["reports"])')"
