#!/usr/bin/env bash
# Speed of `hardshift create`, side by side in one run (rsa-2048, RUNS rounds, each round running
# every case once in turn, medians reported):
#   openssl      hack/openssl-pipeline.sh: the tutorial's way, one openssl call at a time
#   no-agent     create --no-agent on a fresh directory
#   default      create (the agent embedded) on a fresh directory, the agent's encoding cached
#   default-cold the same with an empty cache (the first run after building a new agent)
#   rerun        create again on a bundle, nothing changed
#   1004 nodes   1,000 workers, every master and worker merged into the ~350 KB MCO fixture, the
#                agent fetched by URL (--agent-url); peak RSS too
#   1004 dense   the same with the fixture's padding made random: nothing in the base compresses,
#                so every config carries the base's ~350 KB (held once in memory, written per node)
#   single-node  the example as a single node (bootstrap-in-place): its one config holds the
#                bootstrap's parts and the master's config; its size is printed too
#   floor        the key-generation floor: AWS-LC (the library create uses) making the same keys
#                as a fresh example bundle, on all cores, and nothing else (keygen-floor example)
# then the ratios the goals are stated in.
#   hack/bench-create.sh            (RUNS=5 by default)
#   MATRIX=1 hack/bench-create.sh   also the matrix: 6, 104 and 1004 nodes x each key algorithm,
#                                   fresh and re-run (MCO=1, AGENT_URL=1, ALGS, WORKERS as before)
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo puts what it builds (CARGO_TARGET_DIR honoured).
T=$(hack/target-dir.sh)
RUNS=${RUNS:-5}
cargo build --release --quiet --workspace
cargo build --release --quiet -p hardshift-generator --example keygen-floor
bin=$T/release/hardshift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache
# The keys a fresh example bundle holds, by algorithm (counted once, on the first bundle made).
key_kinds() {
  [ -s "$work/kinds" ] && return
  for k in "$1"/pki/*.key "$1"/agent-pki/*.key; do openssl pkey -in "$k" -noout -text | head -1; done >"$work/kinds"
}
# The floor's own measure of its parallel round (its process also times keys one by one after it),
# and its peak RSS.
floor_of() {
  /usr/bin/time -o "$work/time" -f '%M' "$T/release/examples/keygen-floor" "$(rsa_keys)" "$(ec_keys)" 1 >"$work/floor"
  echo "$(sed -n 's/.* threads: \([0-9.]*\) s .*/\1/p' "$work/floor") $(tail -1 "$work/time")"
}
rsa_keys() { grep -c "Private-Key: (2048 bit" "$work/kinds"; }
ec_keys() { grep -c "Private-Key: (256 bit" "$work/kinds"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
fresh_dir() { local d; d=$(mktemp -d "$work/run.XXXXXX"); cp -r "$1"/. "$d"/; echo "$d"; }
# time_of CMD...: wall seconds and peak RSS (KB) of one command, "E M".
time_of() { /usr/bin/time -o "$work/time" -f '%e %M' "$@" >/dev/null 2>&1; tail -1 "$work/time"; }

example=$work/example
mkdir -p "$example"; cp -r examples/ocp4/*.yaml examples/ocp4/release examples/ocp4/crds "$example"/
sno=$work/sno
hack/gen-lab.py "$sno" single-node >/dev/null; cp -r examples/ocp4/release examples/ocp4/crds "$sno"/
big=$work/big
hack/gen-lab.py "$big" 1000 >/dev/null; cp -r examples/ocp4/release examples/ocp4/crds "$big"/
base=$PWD/tests/fixtures/mco/master-large.ign
dense=$work/master-dense.ign
python3 - "$base" "$dense" <<'PY'
import base64, json, os, sys
cfg = json.load(open(sys.argv[1]))
for f in cfg["storage"]["files"]:
    src = f["contents"]["source"]
    if len(src) > 100000:
        f["contents"]["source"] = "data:;base64," + base64.b64encode(os.urandom(len(src) * 3 // 4 - 20)).decode()
json.dump(cfg, open(sys.argv[2], "w"))
PY
alg=(--key-algorithm rsa-2048 --self-contained-nodes)
declare -A W R
for i in $(seq "$RUNS"); do
  # One round: every case once, in turn, so that machine noise falls on all of them alike.
  d=$(fresh_dir "$example"); W[openssl]+="$(time_of hack/openssl-pipeline.sh "$d/openssl") "
  d=$(fresh_dir "$example"); W[no-agent]+="$(time_of "$bin" create --dir "$d" "${alg[@]}" --no-agent) "
  rm -rf "$XDG_CACHE_HOME"
  d=$(fresh_dir "$example"); W[default-cold]+="$(time_of "$bin" create --dir "$d" "${alg[@]}") "
  d=$(fresh_dir "$example"); W[default]+="$(time_of "$bin" create --dir "$d" "${alg[@]}") "
  key_kinds "$d"
  W[rerun]+="$(time_of "$bin" create --dir "$d" "${alg[@]}") "
  d=$(fresh_dir "$sno"); W[single-node]+="$(time_of "$bin" create --dir "$d" "${alg[@]}") "
  sno_size=$(stat -c %s "$d"/ignition/*.ign)
  d=$(fresh_dir "$big")
  W[1004-nodes]+="$(time_of "$bin" create --dir "$d" "${alg[@]}" --mco-base "master=$base,worker=$base" \
    --agent-url http://192.168.126.1:8080/hardshift-agent) "
  W[1004-rerun]+="$(time_of "$bin" create --dir "$d" "${alg[@]}" --mco-base "master=$base,worker=$base" \
    --agent-url http://192.168.126.1:8080/hardshift-agent) "
  d=$(fresh_dir "$big")
  W[floor]+="$(floor_of) "
  W[1004-dense]+="$(time_of "$bin" create --dir "$d" "${alg[@]}" --mco-base "master=$dense,worker=$dense" \
    --agent-url http://192.168.126.1:8080/hardshift-agent) "
  # Nothing is deleted until the end: ext4 makes a file created right after a mass deletion pay
  # for it (recently_deleted inodes), which is not create's cost.
done
printf '%-13s %10s %14s   (median of %s, rsa-2048)\n' case "time (s)" "peak RSS (MB)" "$RUNS"
for c in floor openssl no-agent default default-cold rerun single-node 1004-nodes 1004-rerun 1004-dense; do
  read -r -a v <<<"${W[$c]}"
  e=(); m=()
  for ((j = 0; j < ${#v[@]}; j += 2)); do e+=("${v[j]}"); m+=("${v[j+1]}"); done
  R[$c]=$(printf '%s\n' "${e[@]}" | median)
  printf '%-13s %10s %14s\n' "$c" "${R[$c]}" "$(printf '%s\n' "${m[@]}" | median | awk '{printf "%.1f", $1/1024}')"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "keys per bundle:         $(rsa_keys) RSA-2048, $(ec_keys) P-256; $("$bin" --version | tail -n +2)"
echo "default / floor:         $(ratio "${R[default]}" "${R[floor]}")x   (goal: at most 1.2x)"
echo "openssl / default:       $(ratio "${R[openssl]}" "${R[default]}")x   (goal: at least 5x)"
echo "default / no-agent:      $(ratio "${R[default]}" "${R[no-agent]}")x   (goal: at most 1.3x)"
echo "default-cold / no-agent: $(ratio "${R[default-cold]}" "${R[no-agent]}")x"
echo "rerun:                   ${R[rerun]} s   (goal: under 0.3 s)"
echo "single node:             ${R[single-node]} s; its one config $(awk -v b="$sno_size" 'BEGIN {printf "%.2f", b / 1048576}') MiB"
echo "1004 nodes:              ${R[1004-nodes]} s   (goal: under 2 s, peak RSS under 250 MB); rerun ${R[1004-rerun]} s; dense ${R[1004-dense]} s"
"$T/release/examples/keygen-floor" "$(rsa_keys)" "$(ec_keys)" 1 | sed 's/^/single thread: /' 
[ "${MATRIX:-0}" = 1 ] || exit 0

extra=(--self-contained-nodes)
if [ "${AGENT_URL:-0}" = 1 ]; then
  extra+=(--agent-url http://192.168.126.1:8080/hardshift-agent)
fi
if [ "${MCO:-0}" = 1 ]; then
  extra+=(--mco-base "master=$base,worker=$base")
fi
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
