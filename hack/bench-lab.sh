#!/usr/bin/env bash
# What the lab adds to `create`: time of `hardshift lab` (which renders only DIR/lab/ and rewrites
# the bundle) for the example and for 1000 workers. Median of RUNS runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo puts what it builds (CARGO_TARGET_DIR honoured).
T=$(hack/target-dir.sh)
RUNS=${RUNS:-5}
cargo build --release --quiet
bin=$T/release/hardshift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-8s %12s %10s %12s\n' nodes "lab (s)" "user (s)" "lab files"
for workers in 2 1000; do
  d=$work/$workers
  if [ "$workers" = 2 ]; then mkdir -p "$d"; cp examples/ocp4/*.yaml "$d"/; else hack/gen-lab.py "$d" "$workers"; fi
  cp -r examples/ocp4/release examples/ocp4/crds "$d"/
  "$bin" create --dir "$d" --key-algorithm ecdsa-p256 --self-contained-nodes ${AGENT_URL:+--agent-url http://192.168.126.1:8080/hardshift-agent} >/dev/null
  e=(); u=()
  for i in $(seq "$RUNS"); do
    # Alternate the disk size so every run really rewrites the lab.
    sed -i "s/diskGiB: .*/diskGiB: $((100 + i))/" "$d/hardshift.yaml"
    t=$( { /usr/bin/time -f '%e %U' "$bin" lab --dir "$d" >/dev/null; } 2>&1 | tail -1)
    e+=("${t% *}"); u+=("${t#* }")
  done
  printf '%-8s %12s %10s %12s\n' $((workers + 4)) "$(printf '%s\n' "${e[@]}" | median)" "$(printf '%s\n' "${u[@]}" | median)" "$(find -L "$d/lab" -type f | wc -l)"
done
