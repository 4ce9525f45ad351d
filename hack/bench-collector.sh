#!/usr/bin/env bash
# Collector under load: N simulated agents (each its own mTLS connection and certificate) on
# loopback, one report per INTERVAL_MS each, for DURATION seconds. Reports the collector's CPU and
# max RSS, ingest latency (report sent → its Ack, which the collector sends only after the commit)
# p50/p99/max, and checks that every report sent is stored exactly once.
#   AGENTS="1000 5000" INTERVAL_MS=5000 DURATION=60 hack/bench-collector.sh
set -euo pipefail
cd "$(dirname "$0")/.."
AGENTS=${AGENTS:-"1000 5000"}
INTERVAL_MS=${INTERVAL_MS:-5000}
DURATION=${DURATION:-60}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
cargo build --release --quiet -p hardshift --bin hardshift
cargo build --release --quiet -p hardshift-collector --example simulate_agents
work=$(mktemp -d)
col=
cleanup() { [ -n "$col" ] && kill "$col" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/b"; cp -r examples/ocp4/*.yaml examples/ocp4/release examples/ocp4/crds "$work/b"/
target/release/hardshift create --dir "$work/b" --key-algorithm ecdsa-p256 --no-agent --self-contained-nodes >/dev/null
hz=$(getconf CLK_TCK)
printf '%-7s %8s %8s %8s %7s %8s %8s %8s %9s %9s %9s %10s %11s\n' agents sent acked stored failed p50_ms p99_ms max_ms \
  steady_p50 steady_p99 steady_max "cpu_%core" "max_rss_KB"
for n in $AGENTS; do
  rm -rf "$work/b/collector"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  target/release/hardshift collector --dir "$work/b" --listen "127.0.0.1:$port" --max-per-address 100000 --max-connections 100000 2>"$work/collector-$n.log" & col=$!
  sleep 1
  t0=$(awk '{print $14 + $15}' /proc/$col/stat); s0=$(date +%s.%N)
  out=$(/usr/bin/time -f "sim_cpu_s=%U+%S sim_rss_kb=%M" -a -o "$work/simtime-$n" target/release/examples/simulate_agents "$work/b" "127.0.0.1:$port" "$n" "$INTERVAL_MS" "$DURATION" 2>"$work/sim-$n.log")
  t1=$(awk '{print $14 + $15}' /proc/$col/stat); s1=$(date +%s.%N)
  rss=$(awk '/VmHWM/ {print $2}' /proc/$col/status)
  kill -INT "$col"; wait "$col" 2>/dev/null || true; col=
  stored=$(python3 - "$work/b/collector/reports.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute("select count(*) from reports where node like 'sim-%'").fetchone()[0])
PY
)
  echo "simulator: $(cat "$work/simtime-$n")" >&2
  val() { echo "$out" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k {print $2}'; }
  cpu=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v a="$s0" -v b="$s1" 'BEGIN {printf "%.1f", 100 * t / hz / (b - a)}')
  printf '%-7s %8s %8s %8s %7s %8s %8s %8s %9s %9s %9s %10s %11s\n' "$n" "$(val sent)" "$(val acked)" "$stored" "$(val failed_agents)" \
    "$(val p50_ms)" "$(val p99_ms)" "$(val max_ms)" "$(val steady_p50_ms)" "$(val steady_p99_ms)" "$(val steady_max_ms)" "$cpu" "$rss"
  if [ "$(val sent)" != "$stored" ] || [ "$(val failed_agents)" != 0 ]; then
    echo "LOST OR FAILED: see $work/sim-$n.log" >&2; tail -5 "$work/sim-$n.log" >&2
  fi
done
