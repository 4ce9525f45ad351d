//! The VMs under QEMU: how one is started, and which accelerator runs the iPXE ROM.

use crate::lab::files::read_lossy;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a VM boots, and from which disks.
pub(super) enum Disks<'a> {
    /// From its NIC, the image's root as its disk (through a throw-away overlay): the node's
    /// config applied to the image directly (`lab.liveAgent: false`).
    Image,
    /// From its NIC into the live system (the image's root, through an overlay, as the second
    /// disk), with `target` as its first disk (`/dev/vda`, the bundle's default installation
    /// disk): the live agent writes it. The reboot ends QEMU (`-no-reboot`): the lab then boots
    /// the VM as its firmware would.
    Live { target: &'a Path },
    /// From `target` once written, as firmware booting the disk does: the image's kernel and
    /// initramfs with `append` (QEMU loads them; the root, the boot partition and the config on it
    /// are the disk's).
    Installed { target: &'a Path, append: &'a str },
}

/// A VM on a tap of the lab bridge. q35 with the NIC behind a PCIe root port, as libvirt lays it
/// out: the guest names it enp1s0, the name the bundle's keyfile and `ip=` use. `faults`: the
/// NIC's MTU and the root disk's write operations a second, when a fault sets them.
#[allow(clippy::too_many_arguments)]
pub(super) fn vm_command(
    br: &str,
    image: &Path,
    accel: &str,
    tap: &str,
    name: &str,
    mac: &str,
    faults: (Option<u32>, Option<u32>),
    console: &Path,
    disks: Disks,
) -> Command {
    let (mtu, iops) = faults;
    let cpu = if accel == "kvm" { "host" } else { "max" };
    let accel = if accel == "kvm" { "kvm" } else { "tcg,tb-size=256" };
    let overlay = format!("if=none,id=d0,format=raw,snapshot=on,file={}", image.join("disk.raw").display());
    let writable = |t: &Path| format!("if=none,id=t0,format=raw,cache=unsafe,file={}", t.display());
    // QEMU's block throttling: a steady rate, no burst (a burst would let a short probe through).
    let throttled = |mut d: String| {
        if let Some(n) = iops {
            d.push_str(&format!(",throttling.iops-write={n}"));
        }
        d
    };
    // host_mtu: the virtio NIC tells the guest its MTU (VIRTIO_NET_F_MTU), which the driver sets.
    let mtu = mtu.map(|m| format!(",host_mtu={m}")).unwrap_or_default();
    let mut c = Command::new("ip");
    // The console appends: a VM's live boot and its installed boot in one file, in order.
    c.args(["netns", "exec", br, "qemu-system-x86_64", "-nodefaults", "-name", name])
        .args(["-machine", "q35", "-accel", accel, "-cpu", cpu, "-m", "512", "-smp", "1"])
        .args([
            "-display",
            "none",
            "-chardev",
            &format!("file,id=con,path={},append=on", console.display()),
        ])
        .args(["-serial", "chardev:con"])
        .args(["-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1"])
        .args(["-netdev", &format!("tap,id=n0,ifname={tap},script=no,downscript=no")])
        .args(["-device", "virtio-rng-pci"]);
    let nic = |boot: &str| format!("virtio-net-pci,bus=rp1,netdev=n0,mac={mac}{boot}{mtu}");
    match disks {
        Disks::Image => {
            c.args(["-device", &nic(",bootindex=1")])
                .args(["-drive", &throttled(overlay), "-device", "virtio-blk-pci,drive=d0"]);
        }
        Disks::Live { target } => {
            c.args(["-device", &nic(",bootindex=1"), "-no-reboot"])
                .args(["-drive", &writable(target), "-device", "virtio-blk-pci,drive=t0"])
                .args(["-drive", &overlay, "-device", "virtio-blk-pci,drive=d0"]);
        }
        Disks::Installed { target, append } => {
            c.args(["-device", &nic(""), "-no-reboot"])
                .args(["-kernel", &image.join("vmlinuz").display().to_string()])
                .args(["-initrd", &image.join("initramfs.img").display().to_string()])
                .args(["-append", append])
                .args(["-drive", &throttled(writable(target)), "-device", "virtio-blk-pci,drive=t0"]);
        }
    }
    c.stdout(Stdio::null()).stderr(Stdio::null());
    c
}

/// KVM when it runs the VMs' firmware, else TCG (slower, same result). /dev/kvm is not enough: under
/// nested virtualisation KVM may fail in the iPXE ROM's real-mode code ("KVM internal error ...
/// emulation failure") and the VM stops there. So the probe runs that ROM until it sends its
/// first DHCP packet (captured to a file), it fails, or 30 s pass.
pub fn accelerator(scratch: &Path) -> &'static str {
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_err() {
        return "tcg";
    }
    let (pcap, log) = (scratch.join("kvm-probe.pcap"), scratch.join("kvm-probe.log"));
    let Ok(err_file) = std::fs::File::create(&log) else { return "tcg" };
    let Ok(mut probe) = Command::new("qemu-system-x86_64")
        .args([
            "-nodefaults",
            "-machine",
            "q35",
            "-accel",
            "kvm",
            "-cpu",
            "host",
            "-m",
            "128",
            "-display",
            "none",
        ])
        .args(["-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0", "-boot", "n"])
        .args(["-object", &format!("filter-dump,id=f0,netdev=n0,file={}", pcap.display())])
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
    else {
        return "tcg";
    };
    let start = Instant::now();
    let ok = loop {
        // A pcap file is a 24-byte header, then packets.
        if std::fs::metadata(&pcap).map(|m| m.len() > 24).unwrap_or(false) {
            break true;
        }
        let err = read_lossy(&log);
        if !err.is_empty() || probe.try_wait().ok().flatten().is_some() || start.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "boot-lab: KVM does not run the firmware here ({}): TCG",
                err.lines().next().unwrap_or("no packet")
            );
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = probe.kill();
    let _ = probe.wait();
    if ok {
        "kvm"
    } else {
        "tcg"
    }
}
