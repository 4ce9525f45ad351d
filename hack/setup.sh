#!/usr/bin/env bash
# Install what hardshift's tests use on a fresh Debian 12 machine (root). Idempotent.
set -euo pipefail
pkgs=(openssl curl iproute2 python3 systemd dbus-daemon etcd-server etcd-client ignition time haproxy dnsmasq bind9-utils bind9-dnsutils isc-dhcp-server containerd runc containernetworking-plugins gcc libc6-dev systemd-journal-remote)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# kubectl: the machine image ships one; Debian's kubernetes-client is the fallback.
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The etcd package may start a system etcd on 2379; the tests run their own, in namespaces.
command -v cargo >/dev/null || { echo "setup: cargo is required (rustup)" >&2; exit 1; }
# The dnsmasq and isc-dhcp-server packages may start system services; the tests run their own on
# other ports or in namespaces, and never need these.
