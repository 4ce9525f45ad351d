#!/usr/bin/env bash
# A real boot, timed: the example's bootstrap and master-0 PXE-boot at once through the bundle's
# own lab (hardshift-boot-lab); per VM, when each step was first seen after power-on: DHCP lease,
# Ignition config fetched, Ignition complete, first report stored by the collector (polled every
# 0.5 s). Also the machine image's build, cold (an empty cache: about 220 MB of Debian packages)
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
mkdir -p "$work/b"; cp -r examples/ocp4/*.yaml examples/ocp4/release examples/ocp4/crds "$work/b"/
"$bin/hardshift" create --dir "$work/b" --self-contained-nodes >/dev/null
"$bin/hardshift-boot-lab" --dir "$work/b" --nodes bootstrap,master-0 --image "$image" \
  --hardshift "$bin/hardshift" --work "$work/run" | sed -n '1,/^$/p'
echo "bench-boot: goal: power-on to first report under 120 s per VM under TCG"
