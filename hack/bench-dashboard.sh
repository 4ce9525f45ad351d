#!/usr/bin/env bash
# The dashboard under load: N simulated agents (each its own mTLS connection, one report per
# INTERVAL_MS) for DURATION seconds, with 0 and then DASHBOARDS open dashboards (each a live
# event stream of the node grid, as a browser tab holds). Reports the collector's CPU and max
# RSS, the bytes each dashboard received, the page weight of the grid at N nodes, and a
# /metrics scrape's size and time. Then RUNS runs of the browser test print the time from a
# failing report to the red cell in headless Chromium.
#   AGENTS=1000 DASHBOARDS=5 INTERVAL_MS=5000 DURATION=60 RUNS=3 hack/bench-dashboard.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo puts what it builds (CARGO_TARGET_DIR honoured).
T=$(hack/target-dir.sh)
AGENTS=${AGENTS:-1000}
DASHBOARDS=${DASHBOARDS:-5}
INTERVAL_MS=${INTERVAL_MS:-5000}
DURATION=${DURATION:-60}
RUNS=${RUNS:-3}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
cargo build --release --quiet -p hardshift --bin hardshift -p hardshift-collector --example simulate_agents
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
# The agents are nodes of the bundle (the collector admits only its inventory's).
hack/gen-lab.py "$work/b" "$AGENTS"; cp -r examples/ocp4/release examples/ocp4/crds "$work/b"/
"$T/release/hardshift" create --dir "$work/b" --key-algorithm ecdsa-p256 --no-agent --self-contained-nodes >/dev/null
hz=$(getconf CLK_TCK)
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
printf '%-7s %-10s %8s %10s %11s %12s %8s %11s %11s %8s\n' agents dashboards stored "cpu_%core" "max_rss_KB" "KB_per_dash" grid_KB grid_gz_KB metrics_KB grid_ms
for dash in 0 "$DASHBOARDS"; do
  rm -rf "$work/b/collector"
  port=$(free); web=$(free)
  "$T/release/hardshift" collector --dir "$work/b" --listen "127.0.0.1:$port" --web "127.0.0.1:$web" --no-api-watch \
    --max-per-address 100000 --max-connections 100000 2>"$work/collector.log" & col=$!; pids+=("$col")
  # Ready when the agents' port accepts (bound once the inventory is read).
  for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.5; done
  streams=()
  for i in $(seq 1 "$dash"); do
    curl -sN "http://127.0.0.1:$web/events/grid" >"$work/dash-$i" & streams+=($!); pids+=($!)
  done
  t0=$(awk '{print $14 + $15}' /proc/$col/stat); s0=$(date +%s.%N)
  "$T/release/examples/simulate_agents" "$work/b" "127.0.0.1:$port" "$AGENTS" "$INTERVAL_MS" "$DURATION" >/dev/null 2>"$work/sim.log"
  t1=$(awk '{print $14 + $15}' /proc/$col/stat); s1=$(date +%s.%N)
  rss=$(awk '/VmHWM/ {print $2}' /proc/$col/status)
  grid=$(curl -s "http://127.0.0.1:$web/" | wc -c)
  gz=$(curl -s -H 'Accept-Encoding: gzip' -o /dev/null -w '%{size_download}' "http://127.0.0.1:$web/")
  grid_ms=$(curl -s -H 'Accept-Encoding: gzip' -o /dev/null -w '%{time_total}' "http://127.0.0.1:$web/" | awk '{printf "%.0f", $1 * 1000}')
  metrics=$(curl -s "http://127.0.0.1:$web/metrics" | wc -c)
  per=0
  if [ "$dash" -gt 0 ]; then per=$(cat "$work"/dash-* | wc -c); per=$((per / dash / 1024)); fi
  for s in "${streams[@]}"; do kill "$s" 2>/dev/null || true; done
  kill -TERM "$col"; wait "$col" 2>/dev/null || true
  stored=$(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("select count(*) from reports").fetchone()[0])' "$work/b/collector/reports.db")
  cpu=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v a="$s0" -v b="$s1" 'BEGIN {printf "%.1f", 100 * t / hz / (b - a)}')
  printf '%-7s %-10s %8s %10s %11s %12s %8s %11s %11s %8s\n' "$AGENTS" "$dash" "$stored" "$cpu" "$rss" "$per" "$((grid / 1024))" "$((gz / 1024))" "$((metrics / 1024))" "$grid_ms"
  rm -f "$work"/dash-*
done
echo
echo "report → browser (headless Chromium, the dashboard test; $RUNS runs):"
for i in $(seq 1 "$RUNS"); do
  cargo test -q --test dashboard the_dashboard_shows -- --nocapture 2>&1 | grep -E "report → browser|page weight" | tr '\n' ' '
  echo
done
