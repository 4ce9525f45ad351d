#!/usr/bin/env bash
# The release from a real registry (goal: pull and extract under 2 s and 50 MB; mirror-check of
# 200 images under 1 s on loopback). Builds the synthetic release of tests/release.rs (900
# manifests over 3 layers, a whiteout, 200 image references over 10 pushed images) in Debian's
# docker-registry with TLS and htpasswd auth, then times, RUNS times each with a cold cache:
# `hardshift release pull` (peak RSS from /usr/bin/time) and `hardshift mirror-check`.
# Needs the test set-up (hack/setup.sh): docker-registry, skopeo, umoci, htpasswd, openssl.
#   RUNS=5 hack/bench-release.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo puts what it builds (CARGO_TARGET_DIR honoured).
T=$(hack/target-dir.sh)
cargo build --release --quiet --bin hardshift
work=$(mktemp -d)
trap 'kill $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
# The registry and the release, as the test builds them (the test keeps its work dir with KEEP).
HARDSHIFT_BENCH_KEEP="$work/lab" cargo test --release --quiet --test release bench_fixture -- --ignored --nocapture >"$work/fixture.log" 2>&1 || { cat "$work/fixture.log"; exit 1; }
dir="$work/lab/bundle"
image=$(cat "$work/lab/image")
echo "release $image, $(find "$work/lab/storage" -type f | wc -l) files in the registry"
for _ in $(seq "${RUNS:-5}"); do
  rm -rf "$dir/release/cache" "$dir/release/crds" "$dir/release/image-references"
  /usr/bin/time -f "%e %M" -o "$work/t" "$T/release/hardshift" release pull --dir "$dir" --release-image "$image" >/dev/null
  read -r secs kb < "$work/t"
  t0=$(date +%s.%N)
  "$T/release/hardshift" mirror-check --dir "$dir" --release-image "$image" >"$work/mc" || true
  t1=$(date +%s.%N)
  printf 'pull+extract %5.2f s  peak %5d MB    mirror-check %5.2f s (%s)\n' "$secs" $((kb / 1024)) "$(echo "$t1 - $t0" | bc)" "$(tail -1 "$work/mc" | sed 's/mirror-check: //')"
done
