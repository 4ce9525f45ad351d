#!/usr/bin/env bash
# A minimal Debian 12 root with systemd, to boot as a container (podman --rootfs ROOT:O
# --systemd=always): tests/deb.rs installs the hardshift package into it and runs the collector's
# unit under that systemd. Everything comes from Debian packages.
#
#   hack/systemd-root.sh [CACHE]   prints the root directory: CACHE/<key>/root
#
# CACHE defaults to ${XDG_CACHE_HOME:-~/.cache}/hardshift/systemd-root. <key> hashes this script and
# the versions apt would install of the root's packages, so a root is rebuilt only when one of them
# changes. The root is never changed after it is made: boot it through an overlay (`:O`). Runs at
# once wait for each other (flock); a build happens in a temporary directory renamed into place when
# complete. The .debs are kept in CACHE/debs for the next build. Needs root (mmdebstrap --mode=root).
set -euo pipefail
SELF=$(readlink -f "$0")
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${SECURITY:-http://deb.debian.org/debian-security}
# systemd as PID 1 and its bus; what the package depends on (adduser; libc6 and libgcc-s1 come with
# the base); curl and iproute2 (ss) for the test's checks from inside.
PKGS=(systemd systemd-sysv dbus adduser curl iproute2)

log() { echo "systemd-root: $*" >&2; }

# The cache key: this script and the candidate versions of the root's packages in the host's apt
# lists (the host is the same Debian release). Lists older than a day are refreshed first.
cache_key() {
  local lists=/var/lib/apt/lists
  if [ -z "$(find "$lists" -maxdepth 1 -name '*_InRelease' -mtime -1 2>/dev/null | head -1)" ]; then
    apt-get update -q >&2 || log "apt-get update failed; keying on the lists there are"
  fi
  { sha256sum < "$SELF"
    apt-cache policy "${PKGS[@]}" 2>/dev/null | awk '/^[^ ]/ {p=$1} /Candidate:/ {print p, $2}'
  } | sha256sum | cut -c1-16
}

build() {  # $1: the directory to fill (empty), $2: the .deb cache
  local root=$1/root debs=$2
  mkdir -p "$debs"
  # The excludes stay in the root's dpkg config: none may hide what the package installs (its
  # man pages and docs).
  mmdebstrap --quiet --mode=root --variant=minbase --include="$(IFS=,; echo "${PKGS[*]}")" \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --skip=download/empty --skip=essential/unlink \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
    --setup-hook="sync-in $debs /var/cache/apt/archives/" \
    --customize-hook="sync-out /var/cache/apt/archives $debs" \
    --customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    bookworm "$root" "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
    "deb $SECURITY bookworm-security main" >&2
  chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' "${PKGS[@]}" > "$1/versions.txt"
}

[ "$(id -u)" = 0 ] || { log "needs root (mmdebstrap --mode=root)"; exit 1; }
command -v mmdebstrap >/dev/null || {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >&2
}
CACHE=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/hardshift/systemd-root}
mkdir -p "$CACHE"
CACHE=$(readlink -f "$CACHE")
key=$(cache_key)
final=$CACHE/$key
exec 9>"$CACHE/.lock"
flock 9
if [ ! -d "$final/root" ]; then
  # Holding the lock, any temporary directory is a killed build's: unmount what mmdebstrap left
  # mounted in it, and never delete across a file system boundary.
  findmnt -rn -o TARGET | grep -F "$CACHE/.tmp-" | sort -r | xargs -r -n1 umount -l || true
  rm -rf --one-file-system "$CACHE"/.tmp-*
  tmp=$(mktemp -d "$CACHE/.tmp-$key-XXXXXX")
  start=$SECONDS
  log "building $final (a minute or two)"
  build "$tmp" "$CACHE/debs"
  chmod 755 "$tmp"
  mv -T "$tmp" "$final"
  log "built in $((SECONDS - start))s"
  # Roots of older keys: the newest one stays (a test may still be running on it), older ones go.
  ls -dt "$CACHE"/[0-9a-f]*/ | tail -n +3 | xargs -r rm -rf --one-file-system
fi
echo "$final/root"
