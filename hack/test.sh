#!/usr/bin/env bash
# Set up a fresh machine and run every test (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
hack/setup.sh
cargo test --workspace --locked --no-fail-fast
