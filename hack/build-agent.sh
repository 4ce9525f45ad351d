#!/usr/bin/env bash
# A static hardshift-agent (musl): runs on every RHCOS, including 4.12 and earlier with glibc 2.28
# (the default glibc build needs 2.34). Prints its path and size; `create --agent-binary PATH`
# bakes it into every node's Ignition.
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo puts what it builds (CARGO_TARGET_DIR honoured).
T=$(hack/target-dir.sh)
target=x86_64-unknown-linux-musl
if ! rustup target list --installed | grep -qx "$target"; then
  rustup target add "$target" || { echo "build-agent: cannot add the $target target (no network to the Rust dist server?)" >&2; exit 1; }
fi
command -v musl-gcc >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends musl-tools >/dev/null; }
# AWS-LC and sqlite are C: compile them with musl's gcc wrapper.
CC_x86_64_unknown_linux_musl=musl-gcc cargo build --release --locked -p hardshift-agent --target "$target" --quiet
bin=$T/$target/release/hardshift-agent
file "$bin" | grep -q "static" || { echo "build-agent: $bin is not static" >&2; exit 1; }
echo "$bin: $(stat -c %s "$bin") bytes, $(file -b "$bin" | cut -d, -f1-5)"
