#!/usr/bin/env bash
# Time and peak memory of `hardshift create` for the example (6 nodes) and for 100 and 1000
# workers, for each key algorithm; fresh bundles and re-runs. Median of RUNS runs.
#   hack/bench-create.sh            (RUNS=5 by default)
#   MCO=1 hack/bench-create.sh      merge every master and worker into the ~350 KB MCO fixture base
#   AGENT_URL=1 hack/bench-create.sh    nodes fetch the agent (--agent-url) instead of embedding it
#   ALGS="ecdsa-p256" WORKERS="1000" to narrow the matrix
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
cargo build --release --quiet
bin=$PWD/target/release/hardshift
extra=(--self-contained-nodes)
if [ "${AGENT_URL:-0}" = 1 ]; then
  extra+=(--agent-url http://192.168.126.1:8080/hardshift-agent)
fi
if [ "${MCO:-0}" = 1 ]; then
  base=$PWD/tests/fixtures/mco/master-large.ign
  extra+=(--mco-base "master=$base,worker=$base")
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# user (s): CPU time in hardshift itself; the rest of "fresh" is mostly the kernel creating files.
printf '%-10s %-11s %10s %9s %10s %14s %12s\n' nodes algorithm "fresh (s)" "user (s)" "rerun (s)" "peak RSS (MB)" "bundle (MB)"
for workers in ${WORKERS:-2 100 1000}; do
  src=$work/src-$workers
  if [ "$workers" = 2 ]; then mkdir -p "$src"; cp examples/ocp4/*.yaml "$src"/; else hack/gen-lab.py "$src" "$workers"; fi
  cp -r examples/ocp4/release examples/ocp4/crds "$src"/
  for alg in ${ALGS:-rsa-2048 rsa-4096 ecdsa-p256}; do
    runs=$RUNS; [ "$alg" = rsa-4096 ] && runs=$(( RUNS < 3 ? RUNS : 3 ))
    fresh=(); rerun=(); rss=(); user=()
    for i in $(seq "$runs"); do
      # A new directory per run: deleting thousands of files right before a run makes the next
      # run's file creation pay for the deletion (ext4 with discard), which is not create's cost.
      d=$work/run-$workers-$alg-$i; mkdir -p "$d"; cp -r "$src"/. "$d"/
      t=$( { /usr/bin/time -f '%e %U %M' "$bin" create --dir "$d" --key-algorithm "$alg" "${extra[@]}" >/dev/null; } 2>&1 | tail -1)
      read -r e u m <<<"$t"; fresh+=("$e"); user+=("$u"); rss+=("$m")
      t=$( { /usr/bin/time -f '%e %M' "$bin" create --dir "$d" --key-algorithm "$alg" "${extra[@]}" >/dev/null; } 2>&1 | tail -1)
      rerun+=("${t% *}")
    done
    printf '%-10s %-11s %10s %9s %10s %14s %12s\n' $((workers + 4)) "$alg" \
      "$(printf '%s\n' "${fresh[@]}" | median)" "$(printf '%s\n' "${user[@]}" | median)" "$(printf '%s\n' "${rerun[@]}" | median)" \
      "$(printf '%s\n' "${rss[@]}" | median | awk '{printf "%.1f", $1/1024}')" \
      "$(du -smL "$d/ignition" | cut -f1)"
  done
done
