#!/usr/bin/env bash
# Diagnosis over many nodes' stored reports, as `hardshift diagnose` runs it: the store's newest
# report per node, then every rule on every node (goal: 5,000 nodes under 1 s), and the cost of one
# CSR decision of `approve-csrs`. The fault → diagnosis times with real components are printed by
# tests/agent_systemd.rs (kubelet.service stop) and tests/control_plane.rs (timing: approve-csrs).
#   NODES="1000 5000" REPORTS=3 hack/bench-diagnose.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p hardshift-collector --example bench_diagnose
for n in ${NODES:-1000 5000}; do
  target/release/examples/bench_diagnose "$n" "${REPORTS:-3}"
done
