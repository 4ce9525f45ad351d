#!/usr/bin/env bash
# The real control plane on the example bundle (tests/control_plane.rs): etcd → API ready,
# bootkube.sh's duration, kubelet start → Node Ready (through both CSRs and a CNI config), and
# each test's wall time. RUNS runs of each test, one at a time; prints min / median / max.
# Needs the test set-up and HARDSHIFT_KUBE_BIN (the tier of hack/tiers).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
hack/setup.sh --tests >/dev/null
: "${HARDSHIFT_KUBE_BIN:?set HARDSHIFT_KUBE_BIN to a directory with the release kube-apiserver, kube-controller-manager, kube-scheduler and kubelet (see hack/tiers)}"
cargo test --quiet --no-run --test control_plane 2>/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for test in the_bootstrap_control_plane_runs_from_the_bundle_and_bootkube_completes \
            master_0s_real_kubelet_joins_through_its_csrs_and_the_agent_reports_it; do
  for i in $(seq "$RUNS"); do
    start=$(date +%s.%N)
    cargo test --quiet --test control_plane -- --exact "$test" --nocapture --test-threads 1 >"$work/out" 2>&1 ||
      { echo "run $i of $test failed:" >&2; tail -40 "$work/out" >&2; exit 1; }
    end=$(date +%s.%N)
    grep '^timing: ' "$work/out" | sed 's/^timing: //' >>"$work/timings"
    echo "whole test ($test): $(echo "$end - $start" | bc) s" >>"$work/timings"
  done
done
printf '%-80s %8s %8s %8s\n' "measure" "min (s)" "median" "max"
cut -d: -f1 "$work/timings" | sort -u | while read -r what; do
  grep -F "$what:" "$work/timings" | sed 's/.*: \([0-9.]*\) s$/\1/' | sort -n |
    awk -v w="$what" '{a[NR]=$1} END {printf "%-80s %8.2f %8.2f %8.2f\n", w, a[1], a[int((NR+1)/2)], a[NR]}'
done
