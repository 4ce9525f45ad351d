#!/usr/bin/env bash
# Set up a fresh machine and run every test (what CI runs): format and lint first, then the
# tests, fuzz targets included (HARDSHIFT_FUZZ_SECS each, default 10; the corpus is fuzz/corpus/).
set -euo pipefail
cd "$(dirname "$0")/.."
hack/setup.sh
# rustfmt and clippy come with the machine's rustup toolchain; say so loudly if one is missing.
for c in fmt clippy; do
  cargo "$c" --version >/dev/null 2>&1 || rustup component add "${c/fmt/rustfmt}" >/dev/null 2>&1 || true
done
if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all --check; else echo "test.sh: LINT NOT RUN: no rustfmt" >&2; fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets --locked -- -D warnings
else
  echo "test.sh: LINT NOT RUN: no clippy" >&2
fi
export HARDSHIFT_FUZZ_SECS=${HARDSHIFT_FUZZ_SECS:-20}
cargo test --workspace --locked --no-fail-fast
