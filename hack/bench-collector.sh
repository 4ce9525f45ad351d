#!/usr/bin/env bash
# Collector under load: N simulated agents (each its own mTLS connection) on loopback, one report
# per INTERVAL_MS each, for DURATION seconds. The agents are nodes of a real bundle: one lab of
# max(AGENTS) workers (hack/gen-lab.py) made by `hardshift create`, whose inventory the collector
# admits and whose agent certificates the simulated agents present (create's time, peak memory
# and disk for it are printed first). Reports the collector's CPU (whole run, and steady state:
# once every agent is connected), max RSS and open descriptors, ingest latency (report sent → its
# Ack, which the collector sends only after the commit) p50/p99/max, and checks that every report
# sent is stored exactly once. The machine's load average is printed beside each run.
#   AGENTS="1000 5000 10000 20000" INTERVAL_MS=5000 DURATION=60 hack/bench-collector.sh
# PROFILE=dev measures the debug build instead (quicker to build; slower, not the shipped one);
# WEB=0 runs the collector without its dashboard (which, unwatched, redraws every 2 s).
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo puts what it builds (CARGO_TARGET_DIR honoured).
T=$(hack/target-dir.sh)
AGENTS=${AGENTS:-"1000 5000 10000 20000"}
INTERVAL_MS=${INTERVAL_MS:-5000}
DURATION=${DURATION:-60}
PROFILE=${PROFILE:-release}
WEB=${WEB:-1}
bin=$T/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# Each agent is a descriptor on both sides: the collector keeps 384 of its limit for the store and
# the dashboard, so N agents need a limit of N + 384 (it says so and lowers --max-connections).
echo "open-file limit: $(ulimit -n)"
# One build for both: built apart, their dependencies' features differ and the CLI is linked again.
cargo build --profile "$PROFILE" --quiet -p hardshift --bin hardshift -p hardshift-collector --example simulate_agents
work=$(mktemp -d)
col=
cleanup() { [ -n "$col" ] && kill "$col" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
max=$(printf '%s\n' $AGENTS | sort -n | tail -1)
hack/gen-lab.py "$work/b" "$max"
cp -r examples/ocp4/release examples/ocp4/crds "$work/b"/
/usr/bin/time -f '%e %M' -o "$work/create-time" \
  "$bin/hardshift" create --dir "$work/b" --key-algorithm ecdsa-p256 --no-agent --self-contained-nodes >/dev/null
read -r create_s create_kb <"$work/create-time"
echo "bundle: $max workers + 3 masters + bootstrap; create ${create_s} s, peak RSS $((create_kb / 1024)) MB," \
  "$(du -sm "$work/b" | cut -f1) MB on disk, $(find "$work/b/.hardshift" -type f | wc -l) files"
hz=$(getconf CLK_TCK)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
printf '%-7s %8s %8s %8s %7s %8s %8s %8s %9s %9s %9s %10s %10s %11s %6s  %s\n' agents sent acked stored failed p50_ms p99_ms max_ms \
  steady_p50 steady_p99 steady_max "cpu_%core" "steady_cpu" "max_rss_KB" max_fd load
for n in $AGENTS; do
  rm -rf "$work/b/collector"
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  port=$(free_port); web_args=(--web "127.0.0.1:$(free_port)")
  [ "$WEB" = 1 ] || web_args=(--no-web)
  started=$(date +%s)
  "$bin/hardshift" collector --dir "$work/b" --listen "127.0.0.1:$port" "${web_args[@]}" --no-api-watch \
    --max-per-address 100000 --max-connections 100000 2>"$work/collector-$n.log" & col=$!
  # Ready when the agents' port accepts: it is bound once the inventory is read (seconds at 20,000
  # hosts), and the simulated agents, unlike real ones, do not retry.
  for _ in $(seq 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$col" 2>/dev/null || { cat "$work/collector-$n.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "collector for $n agents ready after $(($(date +%s) - started)) s" >&2
  t0=$(ticks "$col"); s0=$(date +%s.%N)
  /usr/bin/time -f "sim_cpu_s=%U+%S sim_rss_kb=%M" -o "$work/simtime-$n" \
    "$bin/examples/simulate_agents" "$work/b" "127.0.0.1:$port" "$n" "$INTERVAL_MS" "$DURATION" >"$work/out-$n" 2>"$work/sim-$n.log" & sim=$!
  # Once a second: the collector's CPU ticks and open descriptors (the steady state's CPU is
  # taken from the first second after every agent connected to the end of sending).
  : >"$work/samples-$n"
  while kill -0 "$sim" 2>/dev/null; do
    echo "$(date +%s.%N) $(ticks "$col") $(find "/proc/$col/fd" -mindepth 1 -maxdepth 1 | wc -l)" >>"$work/samples-$n"
    sleep 1
  done
  wait "$sim" || true
  t1=$(ticks "$col"); s1=$(date +%s.%N)
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$col/status")
  kill -TERM "$col"; wait "$col" 2>/dev/null || true; col=
  out=$(cat "$work/out-$n")
  # Rows are keyed by (node, boot, seq): a report stored twice would be one row, so stored ==
  # sent with every agent's last report acknowledged means each stored exactly once.
  stored=$(python3 - "$work/b/collector/reports.db" <<'PY'
import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("select count(*) from reports").fetchone()[0])
PY
)
  echo "simulator: $(cat "$work/simtime-$n")" >&2
  val() { echo "$out" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k {print $2}'; }
  cpu=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v a="$s0" -v b="$s1" 'BEGIN {printf "%.1f", 100 * t / hz / (b - a)}')
  connected=$(sed -n 's/.*all [0-9]* agents connected after \([0-9.]*\)s.*/\1/p' "$work/sim-$n.log")
  steady=$(awk -v s0="$s0" -v c="${connected:-1e9}" -v d="$DURATION" -v hz="$hz" '
    BEGIN { from = s0 + c + 1; to = s0 + d }
    $1 >= from && $1 <= to { if (!a) { a = $1; ta = $2 } b = $1; tb = $2 }
    END { if (b > a) printf "%.1f", 100 * (tb - ta) / hz / (b - a); else print "-" }' "$work/samples-$n")
  fds=$(awk 'm < $3 { m = $3 } END { print m }' "$work/samples-$n")
  printf '%-7s %8s %8s %8s %7s %8s %8s %8s %9s %9s %9s %10s %10s %11s %6s  %s\n' "$n" "$(val sent)" "$(val acked)" "$stored" \
    "$(val failed_agents)" "$(val p50_ms)" "$(val p99_ms)" "$(val max_ms)" "$(val steady_p50_ms)" "$(val steady_p99_ms)" \
    "$(val steady_max_ms)" "$cpu" "$steady" "$rss" "$fds" "$load"
  if [ "$(val sent)" != "$stored" ] || [ "$(val failed_agents)" != 0 ]; then
    echo "LOST OR FAILED:" >&2
    sed 's/^simulate: [^:]*: /simulate: /' "$work/sim-$n.log" | sort | uniq -c | sort -rn | head -5 >&2
    grep -h "refused connections\|lowered to" "$work/collector-$n.log" >&2 || true
  fi
done
