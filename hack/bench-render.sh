#!/usr/bin/env bash
# `hardshift render` on the example bundle: wall time and peak memory (the largest process, the
# renders included) of RUNS runs with the images at hand, median and max; the size of DIR/render;
# and the nodes' configs before and after `create` merges the masters and workers into the
# renders' MachineConfigs.
#   hack/bench-render.sh                        real podman, a stand-in image for every render
#                                               (busybox and tests/fixtures/render-standin)
#   HARDSHIFT_OCP_BIN=DIR hack/bench-render.sh  the release's own programs (hack/tiers), run by
#                                               tests/fixtures/podman-ocp-bin in place of the images
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo puts what it builds (CARGO_TARGET_DIR honoured).
T=$(hack/target-dir.sh)
RUNS=${RUNS:-5}
cargo build --release --quiet -p hardshift
bin=$T/release/hardshift
work=$(mktemp -d)
trap 'rm -rf "$work"; [ -n "${image:-}" ] && podman rmi -f "$image" >/dev/null 2>&1 || true' EXIT
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
d=$work/bundle
mkdir -p "$d"; cp -r examples/ocp4/*.yaml examples/ocp4/release examples/ocp4/crds "$d"/
# The example's release as a real one names it (the tests do the same: tests/render.rs).
python3 - "$d/release/image-references" <<'PY'
import json, sys, copy
p = sys.argv[1]; v = json.load(open(p)); tags = v["spec"]["tags"]
for t in tags:
    if t["name"] == "hyperkube":
        t.setdefault("annotations", {})["io.openshift.build.versions"] = "kubernetes=1.31.5"
c = copy.deepcopy(tags[0]); c["name"] = "cluster-policy-controller"; tags.append(c)
json.dump(v, open(p, "w"))
PY
"$bin" create --dir "$d" --key-algorithm rsa-2048 --self-contained-nodes --no-agent >/dev/null
before=$(du -sb "$d/.hardshift/current/ignition" | cut -f1)
args=()
if [ -n "${HARDSHIFT_OCP_BIN:-}" ]; then
  export PODMAN=$PWD/tests/fixtures/podman-ocp-bin HARDSHIFT_OCP_MANIFESTS=$PWD/../shared/openshift-4.18/crds
  how="the release's programs ($HARDSHIFT_OCP_BIN)"
else
  # podman as the tests run it on this kind of machine (tests/common/podman.rs).
  printf '[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n' >"$work/containers.conf"
  printf '[storage]\ndriver = "vfs"\nrunroot = "%s/run"\ngraphroot = "%s/graph"\n' "$work" "$work" >"$work/storage.conf"
  export CONTAINERS_CONF=$work/containers.conf CONTAINERS_STORAGE_CONF=$work/storage.conf
  root=$work/image/rootfs; mkdir -p "$root/bin" "$root/usr/bin"
  cp /bin/busybox "$root/bin/"
  for a in sh hostname ip awk grep base64 printf cp mkdir head cat basename echo sed; do ln -s busybox "$root/bin/$a"; done
  cp tests/fixtures/render-standin/* "$root/usr/bin/"; cp tests/fixtures/mco/worker-machineconfig.json "$root/fixture.json"
  tar -C "$root" -cf "$work/image/layer.tar" .
  printf 'FROM scratch\nADD layer.tar /\nENV PATH=/bin:/usr/bin\n' >"$work/image/Containerfile"
  image=localhost/hardshift-render-bench:latest
  podman build -q -t "$image" "$work/image" >/dev/null
  for t in cluster-config-api cluster-etcd-operator cluster-kube-apiserver-operator cluster-kube-controller-manager-operator cluster-kube-scheduler-operator machine-config-operator; do
    args+=("--image=$t=$image")
  done
  how="podman with a stand-in image (the image cached)"
fi
e=(); m=()
for _ in $(seq "$RUNS"); do
  t=$( { /usr/bin/time -f '%e %M' "$bin" render --dir "$d" "${args[@]}" >/dev/null; } 2>&1 | tail -1)
  e+=("${t% *}"); m+=("${t#* }")
done
"$bin" create --dir "$d" --key-algorithm rsa-2048 --self-contained-nodes --no-agent >/dev/null
after=$(du -sb "$d/.hardshift/current/ignition" | cut -f1)
echo "hardshift render, $how, $RUNS runs:"
printf '  wall: median %s s, max %s s\n' "$(printf '%s\n' "${e[@]}" | median)" "$(printf '%s\n' "${e[@]}" | sort -n | tail -1)"
printf '  peak memory (largest process): median %s MiB\n' "$(( $(printf '%s\n' "${m[@]}" | median) / 1024 ))"
printf '  DIR/render: %s KiB (assets, outputs, logs, renders.json)\n' "$(( $(du -sb "$d/render" | cut -f1) / 1024 ))"
printf '  the nodes'"'"' configs: %s KiB self-contained, %s KiB merged into the renders'"'"' MachineConfigs\n' "$((before / 1024))" "$((after / 1024))"
