#!/usr/bin/env bash
# Boot nodes of an existing bundle through its own lab, on a private bridge in a network namespace
# (the bundle's machine network, helper address and VIPs, whatever they are): `hardshift lab serve`
# (the generated dnsmasq: DHCP reservations by MAC, DNS; HAProxy; the boot files; every boot step
# an event) and `hardshift collector`. VMs (QEMU; KVM when it runs the firmware, else TCG) PXE-boot the test image
# (hack/boot-image.sh: Debian's kernel and the real Ignition, not RHCOS) with the inventory's MACs.
# Waits until each node has reported, prints per node when each step was first seen and
# `hardshift status`, stops every VM and process it started. Needs root.
#   hack/boot-lab.sh --dir DIR --nodes NAME[,NAME...] [--timeout S] [--work DIR] [--fault NAME[:NODE]]... [--hold S|forever]
#   hack/boot-lab.sh --print-binaries   the binaries it runs (where cargo puts them), and nothing else
# Exit 0 when every node reported; 1 naming who did not and the last thing seen of it (no DHCP,
# no Ignition fetch, Ignition failed, no report); 2 on bad arguments.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<'EOF'
usage: hack/boot-lab.sh --dir DIR --nodes NAME[,NAME...] [--timeout S] [--work DIR] [--fault NAME[:NODE]]... [--hold S|forever]
       hack/boot-lab.sh --print-binaries

Boot nodes of the bundle in DIR (`hardshift create` has run) under QEMU through its own lab, and
wait until each reports. Needs root.
  --dir DIR          the bundle
  --nodes N[,N...]   nodes to boot, by hostname (bootstrap,master-0)
  --timeout S        seconds to wait for every report (default 900)
  --work DIR         logs, consoles and what the helper serves (default DIR/boot-lab); a new or
                     empty directory, or one an earlier run made (it is emptied)
  --fault NAME[:NODE]  start the lab with a fault (repeatable): dns-wildcard (the lab's DNS
                     answers every name under the cluster's domain), no-ptr:NODE (the node's
                     address does not resolve back to its name), mtu:NODE (the node's NIC
                     at a 9000-byte MTU, the lab's bridge at 1500), slow-disk:NODE (the
                     node's disk takes 25 writes a second: etcd's fdatasync too slow),
                     no-default-route:NODE (the node's gateway left out of its ip= argument
                     and its NetworkManager keyfile: it reaches its own subnet only),
                     live-again:NODE (after its live system writes the disk, the firmware
                     boots the network again), disk-first:NODE (the firmware boots the disk
                     and never the network). A bundle with live configs (the default) boots
                     each node's live system with a blank disk; its agent writes the disk and
                     the VM then boots it
  --hold S|forever   keep the lab and its VMs up S seconds after the first reports (forever:
                     until Ctrl-C): what the machines' probes find a round later (DNS, PTR,
                     routes, peers) reaches the collector only while the lab runs
  --print-binaries   print the hardshift-boot-lab and hardshift binaries it runs, then exit
  -h, --help         this text
Exit 0 when every node reported, 1 when one did not, 2 on bad arguments.
EOF
}

bad() {
  echo "boot-lab.sh: $*" >&2
  echo "run hack/boot-lab.sh --help for the arguments" >&2
  exit 2
}

# Every argument is read before anything is installed, built or run.
pass=() dir='' nodes='' print=''
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --print-binaries) print=1 ;;
    --dir | --nodes | --timeout | --work | --fault | --hold)
      [ $# -ge 2 ] || bad "$1 needs a value"
      case $1 in --dir) dir=$2 ;; --nodes) nodes=$2 ;; esac
      pass+=("$1" "$2")
      shift ;;
    --dir=* | --nodes=* | --timeout=* | --work=* | --fault=* | --hold=*)
      case $1 in --dir=*) dir=${1#*=} ;; --nodes=*) nodes=${1#*=} ;; esac
      pass+=("$1") ;;
    *) bad "unknown argument ${1@Q}" ;;
  esac
  shift
done

# Where cargo puts the binaries: its target directory (CARGO_TARGET_DIR, a config's
# build.target-dir, else the checkout's target/), as cargo itself resolves it.
target_dir() {
  (cd "$root" && cargo metadata --format-version 1 --no-deps --offline) |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}

if [ -n "$print" ]; then
  t=$(target_dir)
  printf '%s\n' "$t/debug/hardshift-boot-lab" "$t/debug/hardshift"
  exit 0
fi
[ -n "$dir" ] || bad "--dir DIR is required (the bundle)"
[ -n "$nodes" ] || bad "--nodes NAME[,NAME...] is required (the nodes to boot)"
[ -d "$dir" ] || bad "--dir $dir: no such directory"

image=$("$root/hack/boot-image.sh" | tail -1)
(cd "$root" && cargo build -q --locked -p hardshift -p hardshift-agent -p hardshift-boot-lab)
t=$(target_dir)
exec "$t/debug/hardshift-boot-lab" --image "$image" --hardshift "$t/debug/hardshift" "${pass[@]}"
