#!/usr/bin/env bash
# Set up a fresh Debian 12 machine (root). Idempotent; installs Debian packages only.
#   hack/setup.sh           what building hardshift and running `create` need (a C compiler)
#   hack/setup.sh --tests   and everything the tests run for real (hack/test.sh calls this)
# Nothing fetched is built here. Tests that need programs no registry ships (the release's
# Kubernetes binaries, OpenShift's own programs) form tiers (hack/tiers) that hack/test.sh runs
# only when the directory named by their env var is given (e.g. HARDSHIFT_KUBE_BIN).
set -euo pipefail
pkgs=(gcc libc6-dev)
if [ "${1:-}" = "--tests" ]; then
  pkgs+=(g++ openssl curl iproute2 python3 python3-yaml systemd dbus-daemon etcd-server etcd-client ignition time haproxy dnsmasq
    bind9-utils bind9-dnsutils isc-dhcp-server containerd runc containernetworking-plugins
    systemd-journal-remote nftables podman busybox-static faketime docker-registry skopeo umoci apache2-utils
    chromium chromium-driver prometheus prometheus-alertmanager zsh fish man-db groff-base lintian dpkg-dev
    qemu-system-x86 ipxe-qemu ipxe mmdebstrap gdisk openssh-client shellcheck)
  # qemu-system-x86 (tests/boot.rs): on a machine image carrying a backported qemu-utils, apt removes
  # it for bookworm's QEMU (nothing here uses qemu-utils).
  # kubectl: the machine image ships one; Debian's kubernetes-client is the fallback.
  command -v kubectl >/dev/null 2>&1 || pkgs+=(kubernetes-client)
elif [ -n "${1:-}" ]; then
  echo "usage: hack/setup.sh [--tests]" >&2
  exit 2
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
command -v cargo >/dev/null || { echo "setup: cargo is required (rustup)" >&2; exit 1; }
# The etcd, dnsmasq and isc-dhcp-server packages may start system services; the tests run their
# own, on other ports or in namespaces, and never need these.
