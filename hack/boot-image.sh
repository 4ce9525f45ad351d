#!/usr/bin/env bash
# The machine image tests/boot.rs PXE-boots a bundle's Ignition configs with: Debian 12's kernel, a
# dracut initramfs with Debian's Ignition (2.14) and NetworkManager, and a root disk with systemd,
# NetworkManager and sshd. Everything comes from Debian packages, but coreos-installer, which is
# built from crates.io (cached by version); nothing is mounted (no loop device).
#
#   hack/boot-image.sh [CACHE]   prints the image directory:
#     CACHE/<key>/{vmlinuz,initramfs.img,disk.raw,metal.raw.zst,versions.txt}
#
# disk.raw is the live system's root (the VMs boot it through a throw-away overlay). metal.raw.zst is
# what the live system's coreos-installer writes, laid out as RHCOS's metal image is: a GPT disk with
# an ext4 `boot` partition (coreos-installer writes the node's config to its ignition/config.ign) and
# the `root` partition. On the first boot from it (kernel argument `hardshift.boot_config`), the
# initramfs copies that config to /usr/lib/ignition/user.ign, where Ignition reads it (RHCOS's
# coreos-ignition-setup-user does the same).
#
# CACHE defaults to ${XDG_CACHE_HOME:-~/.cache}/hardshift/boot-image. <key> hashes this script and the
# versions apt would install of the packages that make the image, so an image is rebuilt only when one
# of them changes. Runs at once wait for each other (flock); a build happens in a temporary directory
# renamed into place when complete, so a killed build leaves nothing that looks like an image.
# Needs root (mmdebstrap --mode=root, chroot). Installs the host packages it needs when missing.
set -euo pipefail
SELF=$(readlink -f "$0")
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${SECURITY:-http://deb.debian.org/debian-security}
# Packages of the image. linux-image-amd64's version names the kernel; curl is dracut's url-lib (Ignition fetches).
PKGS=(systemd systemd-sysv udev dbus network-manager openssh-server sudo iproute2 procps kmod passwd
  util-linux e2fsprogs linux-image-amd64 dracut dracut-network ignition curl zstd)
# Packages the tests and this script run on the host. qemu-utils is not needed (the VMs write to a
# throw-away overlay: -drive snapshot=on).
HOST_PKGS=(mmdebstrap qemu-system-x86 ipxe-qemu gdisk e2fsprogs dnsmasq-base openssh-client python3 zstd
  pkg-config libssl-dev libzstd-dev liblzma-dev)
# The coreos-installer the live system runs (crates.io; RHCOS's live image carries its own).
COREOS_INSTALLER_VERSION=0.26.0

log() { echo "boot-image: $*" >&2; }

host_deps() {
  local missing=() p
  for p in "${HOST_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  # bookworm's qemu-system-x86 conflicts with a backported qemu-utils: refuse instead of letting apt
  # remove packages the machine has.
  if apt-get install -s --no-install-recommends "${missing[@]}" | grep -q '^Remv '; then
    log "installing ${missing[*]} would remove packages:"
    apt-get install -s --no-install-recommends "${missing[@]}" | grep '^Remv ' >&2
    exit 1
  fi
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}

# The cache key: this script and the candidate versions of the image's packages in the host's apt lists
# (the host is the same Debian release). Lists older than a day are refreshed first.
cache_key() {
  local lists=/var/lib/apt/lists
  if [ -z "$(find "$lists" -maxdepth 1 -name '*_InRelease' -mtime -1 2>/dev/null | head -1)" ]; then
    apt-get update -q >&2 || log "apt-get update failed; keying on the lists there are"
  fi
  { sha256sum < "$SELF"
    echo "coreos-installer $COREOS_INSTALLER_VERSION"
    apt-cache policy "${PKGS[@]}" 2>/dev/null | awk '/^[^ ]/ {p=$1} /Candidate:/ {print p, $2}'
  } | sha256sum | cut -c1-16
}

# coreos-installer, built once per version into CACHE/tools/coreos-installer-VERSION (cargo, from
# crates.io, with its own lock file); prints the binary's path.
coreos_installer() {
  local dir=$CACHE/tools/coreos-installer-$COREOS_INSTALLER_VERSION tmp
  if [ ! -x "$dir/bin/coreos-installer" ]; then
    tmp=$(mktemp -d "$CACHE/.tmp-ci-XXXXXX")
    log "building coreos-installer $COREOS_INSTALLER_VERSION (minutes, once)"
    CARGO_TARGET_DIR=$tmp/target cargo install --quiet --locked coreos-installer \
      --version "$COREOS_INSTALLER_VERSION" --root "$tmp/root" >&2
    rm -rf "$dir"
    mkdir -p "$CACHE/tools"
    mv -T "$tmp/root" "$dir"
    rm -rf "$tmp"
  fi
  echo "$dir/bin/coreos-installer"
}

# Runs inside mmdebstrap (customize hook): $1 is the new root, with /proc, /sys and /dev mounted.
customize() {
  local R=$1 OUT=$2 kver
  kver=$(ls "$R/lib/modules" | sort -V | tail -1)
  cat > "$R/etc/dracut.conf.d/50-ignition.conf" <<'EOF'
# Any machine (not this host's hardware), with Ignition and NetworkManager; only the virtual
# machine's drivers, which keeps the initramfs small and dracut quick.
hostonly="no"
add_dracutmodules+=" ignition network-manager "
omit_dracutmodules+=" plymouth lvm mdraid dmraid crypt multipath iscsi nfs nbd fcoe fcoe-uefi cifs btrfs biosdevname resume i18n "
drivers=" virtio_net virtio_blk virtio_pci virtio_rng e1000 e1000e ext4 af_packet qemu_fw_cfg "
compress="zstd"
EOF
  # Debian's Ignition always relabels for SELinux at the end of its files stage: it reads
  # /sysroot/etc/selinux/config and runs `setfiles` from the initramfs, and fails the boot without
  # them. No SELinux here: a config naming a policy, and a no-op setfiles for dracut to copy in
  # (dracut looks in /usr/sbin, not /usr/local). The no-op is removed from the root afterwards.
  mkdir -p "$R/etc/selinux"
  printf 'SELINUX=disabled\nSELINUXTYPE=default\n' > "$R/etc/selinux/config"
  printf '#!/bin/sh\n# stand-in for Ignition'"'"'s SELinux relabel: no SELinux on this image\nexit 0\n' > "$R/usr/sbin/setfiles"
  chmod 755 "$R/usr/sbin/setfiles"
  # The installed system's first boot: the config coreos-installer wrote to the boot partition,
  # for Ignition (its "system" config, /usr/lib/ignition/user.ign).
  local mod=$R/usr/lib/dracut/modules.d/50hardshift-boot-config
  mkdir -p "$mod"
  cat > "$mod/hardshift-boot-config.service" <<'EOF'
[Unit]
Description=hardshift: the Ignition config coreos-installer wrote to the boot partition
DefaultDependencies=no
# Conditions only (no Requires= on the device: that job would be queued, and waited for, on every
# boot of the image, the live system's too); the script waits for the partition itself.
ConditionKernelCommandLine=hardshift.boot_config
ConditionKernelCommandLine=ignition.firstboot
Before=ignition-fetch-offline.service
OnFailure=emergency.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'i=0; until [ -e /dev/disk/by-label/boot ]; do i=$((i+1)); [ $i -le 90 ] || exit 1; sleep 1; done; mkdir -p /run/hardshift-boot /usr/lib/ignition && mount -o ro /dev/disk/by-label/boot /run/hardshift-boot && { ! [ -f /run/hardshift-boot/ignition/config.ign ] || cp /run/hardshift-boot/ignition/config.ign /usr/lib/ignition/user.ign; }; umount /run/hardshift-boot'
EOF
  cat > "$mod/module-setup.sh" <<'EOF'
#!/bin/bash
check() { return 0; }
depends() { echo ignition systemd; }
install() {
  inst_simple "$moddir/hardshift-boot-config.service" "$systemdsystemunitdir/hardshift-boot-config.service"
  mkdir -p "$initdir/$systemdsystemunitdir/ignition-complete.target.wants"
  ln -sf ../hardshift-boot-config.service "$initdir/$systemdsystemunitdir/ignition-complete.target.wants/"
  inst_multiple mount umount cp mkdir sleep
}
EOF
  chmod 755 "$mod/module-setup.sh"
  sed -i 's/add_dracutmodules+=" ignition network-manager "/add_dracutmodules+=" ignition network-manager hardshift-boot-config "/' \
    "$R/etc/dracut.conf.d/50-ignition.conf"
  chroot "$R" dracut --quiet --force --kver "$kver" /boot/initramfs-ignition.img
  cp "$R/boot/vmlinuz-$kver" "$OUT/vmlinuz"
  cp "$R/boot/initramfs-ignition.img" "$OUT/initramfs.img"
  chmod 644 "$OUT/vmlinuz" "$OUT/initramfs.img"
  rm -f "$R/boot/initramfs-ignition.img" "$R/usr/sbin/setfiles"
  chroot "$R" dpkg-query -W -f '${Package} ${Version}\n' "linux-image-$kver" dracut ignition systemd \
    network-manager openssh-server > "$OUT/versions.txt"

  install -m 755 "$CI_BIN" "$R/usr/local/bin/coreos-installer"
  echo 'LABEL=root / ext4 defaults,errors=remount-ro 0 1' > "$R/etc/fstab"
  echo localhost > "$R/etc/hostname"
  # NetworkManager configures the network, as on RHCOS: the first boot's preset-all must not enable
  # systemd-networkd too.
  mkdir -p "$R/etc/systemd/system-preset"
  printf 'disable systemd-networkd.service\ndisable systemd-networkd.socket\ndisable systemd-networkd-wait-online.service\n' \
    > "$R/etc/systemd/system-preset/10-boot-image.preset"
  # Ignition 2.14 writes SSH keys to ~/.ssh/authorized_keys.d/ignition (the layout RHCOS reads).
  echo 'AuthorizedKeysFile .ssh/authorized_keys .ssh/authorized_keys.d/ignition' \
    > "$R/etc/ssh/sshd_config.d/50-ignition.conf"
  # Host keys are per machine: none in the image, made when sshd first starts. Ed25519 only: the
  # RSA-3072 key `ssh-keygen -A` also makes costs an emulated CPU many seconds at every first boot.
  rm -f "$R"/etc/ssh/ssh_host_*
  echo 'HostKey /etc/ssh/ssh_host_ed25519_key' > "$R/etc/ssh/sshd_config.d/40-host-key.conf"
  mkdir -p "$R/etc/systemd/system/ssh.service.d"
  printf '[Service]\nExecStartPre=\nExecStartPre=/bin/sh -c %s\nExecStartPre=/usr/sbin/sshd -t\n' \
    "'test -f /etc/ssh/ssh_host_ed25519_key || ssh-keygen -q -t ed25519 -N \"\" -f /etc/ssh/ssh_host_ed25519_key'" \
    > "$R/etc/systemd/system/ssh.service.d/10-host-keys.conf"
  # Housekeeping a throw-away test machine never needs, which an emulated CPU pays for at boot:
  # e2scrub_reap (a shell script over lsblk and LVM) held boot up for minutes under TCG; the
  # timers would start apt and friends in the middle of a test.
  chroot "$R" systemctl mask --quiet e2scrub_reap.service e2scrub_all.timer apt-daily.timer \
    apt-daily-upgrade.timer dpkg-db-backup.timer fstrim.timer 2>/dev/null || true
  # RHCOS lets core use sudo without a password; the bundle only gives core its SSH key.
  echo 'core ALL=(ALL) NOPASSWD: ALL' > "$R/etc/sudoers.d/core"
  chmod 440 "$R/etc/sudoers.d/core"
  # The initramfs's NetworkManager (ip= on the kernel command line) leaves its profile and device
  # state in /run/NetworkManager; the root's NetworkManager would keep that connection and never
  # activate the keyfile Ignition wrote. RHCOS's coreos-teardown-initramfs does the same.
  cat > "$R/etc/systemd/system/nm-initrd-teardown.service" <<'EOF'
[Unit]
Description=Forget the initramfs network so NetworkManager applies the keyfiles in /etc
DefaultDependencies=no
After=local-fs.target
Before=NetworkManager.service
ConditionPathExists=/run/NetworkManager/initrd/neednet

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'rm -rf /run/NetworkManager/system-connections /run/NetworkManager/devices /run/NetworkManager/initrd; for d in /sys/class/net/*; do n=$${d##*/}; [ "$$n" = lo ] || ip addr flush dev "$$n" scope global; done'

[Install]
WantedBy=NetworkManager.service
EOF
  chroot "$R" systemctl enable --quiet nm-initrd-teardown.service
  # A throw-away test machine: root logs in on the serial console without a password, to debug a
  # failed boot (sshd refuses empty passwords).
  chroot "$R" passwd -d root >/dev/null
  rm -f "$R/var/lib/dbus/machine-id"
  rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/*.bin
}

build() {  # $1: the directory to fill (empty)
  local OUT=$1 root=$1/root debs=$2
  mkdir -p "$debs"
  # INITRD=No: the kernel's postinst does not run dracut; the customize hook runs it once.
  INITRD=No mmdebstrap --quiet --mode=root --variant=minbase --include="$(IFS=,; echo "${PKGS[*]}")" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --skip=download/empty --skip=essential/unlink \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
    --setup-hook="sync-in $debs /var/cache/apt/archives/" \
    --customize-hook="sync-out /var/cache/apt/archives $debs" \
    --customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb' \
    --customize-hook="\"$SELF\" --customize \"\$1\" \"$OUT\"" \
    bookworm "$root" "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
    "deb $SECURITY bookworm-security main" >&2
  # mmdebstrap empties /etc/machine-id last. systemd 252 runs its first-boot presets, which is where
  # Ignition's `enabled: true` lands (/etc/systemd/system-preset/20-ignition.preset), only when the
  # file is missing or says "uninitialized".
  echo uninitialized > "$root/etc/machine-id"
  # A GPT disk, partition 1 an ext4 labelled root made from the tree (mkfs -d: no mount).
  mkfs.ext4 -q -F -L root -E root_owner=0:0 -d "$root" "$OUT/root.ext4" 2046M
  truncate -s 2048M "$OUT/disk.raw"
  sgdisk -o -n 1:2048:0 -t 1:8300 -c 1:root "$OUT/disk.raw" >/dev/null
  dd if="$OUT/root.ext4" of="$OUT/disk.raw" bs=1M seek=1 conv=notrunc,sparse status=none
  # The metal image: the same tree, as small as it fits (every byte of it is written at each
  # install), behind an empty ext4 `boot` partition. Compressed: coreos-installer reads zstd.
  local metal=$OUT/metal.raw p1 p2 end2
  truncate -s 1120M "$metal"
  sgdisk -o -n 1:2048:+64M -t 1:8300 -c 1:boot -n 2:0:0 -t 2:8300 -c 2:root "$metal" >/dev/null
  p1=$(sgdisk -i 1 "$metal" | awk '/First sector/ {print $3}')
  p2=$(sgdisk -i 2 "$metal" | awk '/First sector/ {print $3}')
  end2=$(sgdisk -i 2 "$metal" | awk '/Last sector/ {print $3}')
  mkfs.ext4 -q -F -L boot -E offset=$((p1 * 512)) "$metal" 64M
  mkfs.ext4 -q -F -L root -E root_owner=0:0,offset=$((p2 * 512)) -d "$root" "$metal" "$(((end2 - p2 + 1) / 2))K"
  zstd -q -1 -T0 --rm "$metal"
  rm -rf "$OUT/root.ext4" "$root"
}

if [ "${1:-}" = --customize ]; then customize "$2" "$3"; exit 0; fi
[ "$(id -u)" = 0 ] || { log "needs root (mmdebstrap --mode=root)"; exit 1; }
host_deps
CACHE=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/hardshift/boot-image}
mkdir -p "$CACHE"
CACHE=$(readlink -f "$CACHE")
key=$(cache_key)
final=$CACHE/$key
exec 9>"$CACHE/.lock"
flock 9
if [ ! -f "$final/metal.raw.zst" ]; then
  # Holding the lock, any temporary directory is a killed build's: unmount what mmdebstrap left
  # mounted in it (its /proc, /sys, /dev), and never delete across a file system boundary.
  findmnt -rn -o TARGET | grep -F "$CACHE/.tmp-" | sort -r | xargs -r -n1 umount -l || true
  rm -rf --one-file-system "$CACHE"/.tmp-*
  tmp=$(mktemp -d "$CACHE/.tmp-$key-XXXXXX")
  start=$SECONDS
  CI_BIN=$(coreos_installer)
  export CI_BIN
  log "building $final (a few minutes)"
  build "$tmp" "$CACHE/debs"
  echo "$key" > "$tmp/key"
  chmod 755 "$tmp"
  mv -T "$tmp" "$final"
  log "built in $((SECONDS - start))s"
  # Images of older keys: the newest one stays (a test may still be booting it), older ones go.
  ls -dt "$CACHE"/[0-9a-f]*/ | tail -n +3 | xargs -r rm -rf --one-file-system
fi
echo "$final"
