#!/usr/bin/env bash
# Print cargo's target directory for this checkout, as cargo itself resolves it (CARGO_TARGET_DIR,
# a config's build.target-dir, else the checkout's target/): where the hack/ scripts find the
# binaries they built, so that none times or runs a stale or missing one.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --no-deps --offline |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
