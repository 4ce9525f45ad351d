#!/usr/bin/env bash
# A real boot, timed: the example's bootstrap and master-0 PXE-boot at once through the bundle's
# own lab (hardshift-boot-lab); per VM, when each step was first seen after power-on: DHCP lease,
# Ignition config fetched, Ignition complete, first report stored by the collector (polled every
# 0.5 s). Then the live install of one VM (worker-0): its live system's report, the reboot after
# coreos-installer wrote the disk, the installed system's report. Also the machine image's build, cold (an empty cache: about 220 MB of Debian packages)
# and cached. Needs root.  COLD=0 hack/bench-boot.sh skips the cold build.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
cargo build -q --locked -p hardshift -p hardshift-agent -p hardshift-boot-lab
# The binaries where cargo put them (CARGO_TARGET_DIR honoured), as hack/boot-lab.sh finds them.
bin=$(dirname "$(hack/boot-lab.sh --print-binaries | head -1)")
if [ "${COLD:-1}" = 1 ]; then
  t=$(now); hack/boot-image.sh "$work/image-cache" >/dev/null
  echo "bench-boot: image build, cold: $(since "$t") s"
  rm -rf "$work/image-cache"
fi
t=$(now); image=$(hack/boot-image.sh | tail -1)
echo "bench-boot: image, cached: $(since "$t") s"
# The plain install (lab.liveAgent: false): the node's config applied to the image directly.
mkdir -p "$work/b"; cp -r examples/ocp4/*.yaml examples/ocp4/release examples/ocp4/crds "$work/b"/
sed -i 's/^lab:$/lab:\n  liveAgent: false/' "$work/b/hardshift.yaml"
"$bin/hardshift" create --dir "$work/b" --self-contained-nodes >/dev/null
"$bin/hardshift-boot-lab" --dir "$work/b" --nodes bootstrap,master-0 --image "$image" \
  --hardshift "$bin/hardshift" --work "$work/run" | sed -n '1,/^$/p'
# The live install, one VM alone: its live system reports, its agent writes the metal image with
# coreos-installer, it reboots into the disk, and the installed system reports.
mkdir -p "$work/l"; cp -r examples/ocp4/*.yaml examples/ocp4/release examples/ocp4/crds "$work/l"/
sed -i 's|^lab:$|lab:\n  installImageURL: http://192.168.126.1:8080/rhcos/metal.raw.zst\n  installImageUnsigned: true|' "$work/l/hardshift.yaml"
"$bin/hardshift" create --dir "$work/l" --self-contained-nodes >/dev/null
"$bin/hardshift-boot-lab" --dir "$work/l" --nodes worker-0 --image "$image" \
  --hardshift "$bin/hardshift" --work "$work/live" | sed -n '1,/^$/p;/^BOOT /p'
echo "bench-boot: goal (P7): power-on to the installed system's first report under 120 s under TCG, disk write included"
