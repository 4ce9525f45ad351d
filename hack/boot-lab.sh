#!/usr/bin/env bash
# Boot nodes of an existing bundle through its own lab, on a private bridge in a network namespace
# (the bundle's machine network, helper address and VIPs, whatever they are): the generated dnsmasq
# (DHCP reservations by MAC, DNS), HAProxy and an HTTP server for DIR/ignition and DIR/http, and
# `hardshift collector`. VMs (QEMU; KVM when it runs the firmware, else TCG) PXE-boot the test image
# (hack/boot-image.sh: Debian's kernel and the real Ignition, not RHCOS) with the inventory's MACs.
# Waits until each node has reported, prints per node when each step was first seen and
# `hardshift status`, stops every VM and process it started. Needs root.
#   hack/boot-lab.sh --dir DIR --nodes NAME[,NAME...] [--timeout S] [--work DIR]
# Exit 0 when every node reported; 1 naming who did not and the last thing seen of it (no DHCP,
# no Ignition fetch, Ignition failed, no report); 2 on bad arguments.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
image=$("$root/hack/boot-image.sh" | tail -1)
(cd "$root" && cargo build -q --locked -p hardshift -p hardshift-agent -p hardshift-boot-lab)
exec "$root/target/debug/hardshift-boot-lab" --image "$image" --hardshift "$root/target/debug/hardshift" "$@"
