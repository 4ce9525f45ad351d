#!/usr/bin/env bash
# What `hardshift lab serve` costs (root: network namespaces). The example bundle's helper in one
# namespace, master-0 in another on a veth pair; then, RUNS times each:
#   - the live rootfs (1 GiB) fetched by master-0: wall time, MB/s, and the helper's CPU time;
#     the same file from Python's http.server (the boot lab's helper before `lab serve`) beside it;
#   - master-0's Ignition config fetched 200 times in a row: the median time of one;
#   - the boot events of those requests: how many are in the store, and how long after the last
#     request the last one was stored.
set -euo pipefail
cd "$(dirname "$0")/.."
T=$(hack/target-dir.sh)
RUNS=${RUNS:-3}
cargo build --release --quiet -p hardshift
bin=$T/release/hardshift
work=$(mktemp -d)
tag=hsb$$
cleanup() {
  [ -n "${serve:-}" ] && kill "$serve" 2>/dev/null && wait "$serve" 2>/dev/null
  [ -n "${py:-}" ] && kill "$py" 2>/dev/null
  ip netns del "$tag-h" 2>/dev/null || true
  ip netns del "$tag-n" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
d=$work/b
mkdir -p "$d" "$d/rhcos"
cp examples/ocp4/*.yaml "$d"/
cp -r examples/ocp4/release examples/ocp4/crds "$d"/
"$bin" create --dir "$d" --key-algorithm ecdsa-p256 --self-contained-nodes --no-agent >/dev/null
truncate -s 1G "$d/rhcos/rhcos-live-rootfs.x86_64.img"
head -c 4096 /dev/zero >"$d/rhcos/rhcos-live-kernel-x86_64"
head -c 4096 /dev/zero >"$d/rhcos/rhcos-live-initramfs.x86_64.img"

ip netns add "$tag-h"
ip netns add "$tag-n"
ip link add "${tag}a" type veth peer name "${tag}b"
ip link set "${tag}a" netns "$tag-h"
ip link set "${tag}b" netns "$tag-n"
ip -n "$tag-h" addr add 192.168.126.1/24 dev "${tag}a"
ip -n "$tag-n" link set "${tag}b" address 52:54:00:00:00:65
ip -n "$tag-n" addr add 192.168.126.101/24 dev "${tag}b"
for ns in "$tag-h" "$tag-n"; do ip -n "$ns" link set lo up; done
ip -n "$tag-h" link set "${tag}a" up
ip -n "$tag-n" link set "${tag}b" up

ip netns exec "$tag-h" "$bin" lab serve --dir "$d" --rhcos "$d/rhcos" --interface "${tag}a" --no-collector >"$work/serve.log" 2>&1 &
serve=$!
for _ in $(seq 600); do
  grep -q "lab serve: DHCP" "$work/serve.log" && break
  kill -0 "$serve" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.1
done
# `ip netns exec` execs the program: its PID is the helper's.
helper_pid=$serve
ip netns exec "$tag-h" python3 -m http.server 8081 --bind 192.168.126.1 --directory "$d/rhcos" >/dev/null 2>&1 &
py=$!
sleep 1

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
fetch() { ip netns exec "$tag-n" curl -s -o /dev/null -w '%{time_total}' "$1"; }

ws=(); cs=(); ps=()
for _ in $(seq "$RUNS"); do
  c0=$(cpu "$helper_pid")
  ws+=("$(fetch http://192.168.126.1:8080/rhcos/rhcos-live-rootfs.x86_64.img)")
  c1=$(cpu "$helper_pid")
  cs+=("$(awk -v a="$c0" -v b="$c1" -v hz="$hz" 'BEGIN {printf "%.2f", (b - a) / hz}')")
  ps+=("$(fetch http://192.168.126.1:8081/rhcos-live-rootfs.x86_64.img)")
done
w=$(printf '%s\n' "${ws[@]}" | median)
p=$(printf '%s\n' "${ps[@]}" | median)
mbs() { awk -v t="$1" 'BEGIN {printf "%.0f", 1073.741824 / t}'; }
printf '%-44s %8s s %6s MB/s  helper CPU %s s\n' "rootfs 1 GiB, lab serve" "$w" "$(mbs "$w")" "$(printf '%s\n' "${cs[@]}" | median)"
printf '%-44s %8s s %6s MB/s\n' "rootfs 1 GiB, python3 -m http.server" "$p" "$(mbs "$p")"

ts=()
for _ in $(seq 200); do ts+=("$(fetch http://192.168.126.1:8080/ignition/master-0.ign)"); done
last=$(date +%s%3N)
printf '%-44s %8s s (median of 200)\n' "master-0.ign, one fetch" "$(printf '%s\n' "${ts[@]}" | median)"

want=$((200 + RUNS))
for _ in $(seq 300); do
  n=$("$bin" events master-0 --dir "$d" -o json | python3 -c 'import json,sys; print(sum(1 for e in json.load(sys.stdin) if e["component"] == "boot" and "GET /" in e["to"]))')
  [ "$n" -ge "$want" ] && break
  sleep 0.1
done
stored=$(( $(date +%s%3N) - last ))
printf '%-44s %8s of %s, all within %s ms of the last request\n' "boot events stored (HTTP, master-0)" "$n" "$want" "$stored"
