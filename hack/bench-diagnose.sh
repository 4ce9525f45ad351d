#!/usr/bin/env bash
# Diagnosis over many nodes' stored reports, as `hardshift diagnose` runs it: the store's newest
# report per node, then every rule on every node (goal: 5,000 nodes under 1 s), and the cost of one
# CSR decision of `approve-csrs`. Then, with FAULTS=1 (needs root, dnsmasq and systemd: the test
# set-up), the time from each real fault to the right finding at the collector (goal: under 2 s):
# kubelet.service stopped (tests/agent_systemd.rs), a DNS zone with a typo, fixed, and a node
# booted as "localhost" (tests/why_stuck.rs). Each is measured inside its test, RUNS times.
#   NODES="1000 5000" REPORTS=3 FAULTS=1 RUNS=3 hack/bench-diagnose.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo puts what it builds (CARGO_TARGET_DIR honoured).
T=$(hack/target-dir.sh)
cargo build --release --quiet -p hardshift-collector --example bench_diagnose
for n in ${NODES:-1000 5000}; do
  "$T/release/examples/bench_diagnose" "$n" "${REPORTS:-3}"
done
if [ "${FAULTS:-0}" = 1 ]; then
  out=$(mktemp)
  trap 'rm -f "$out"' EXIT
  for _ in $(seq "${RUNS:-3}"); do
    cargo test --quiet --test why_stuck --test agent_systemd -- --nocapture >"$out" 2>&1 || { cat "$out"; exit 1; }
    grep -E '^timing: |known to the collector after' "$out" || true
  done
fi
