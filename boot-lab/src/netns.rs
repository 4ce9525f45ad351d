//! Hosts in network namespaces on one bridge: a lab's real addresses on one machine. Every
//! program runs inside a namespace; all are stopped and the namespaces removed on drop.

use std::process::{Child, Command, Stdio};

/// `program args`: whether it succeeded, and its stdout and stderr.
pub fn run(program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    (out.status.success(), format!("{}{}", text(&out.stdout), text(&out.stderr)))
}

pub struct Netns {
    pub prefix: String,
    /// Programs started here get SIGKILL when the thread that started them ends, so a killed
    /// boot lab leaves no VM or server running (set it only where that thread lives as long).
    pub die_with_parent: bool,
    hosts: Vec<String>,
    children: Vec<Child>,
    etc: Vec<std::path::PathBuf>,
}

fn ip(args: &[&str]) {
    let (ok, out) = run("ip", args);
    assert!(ok, "ip {}: {out}", args.join(" "));
}

impl Netns {
    /// `hosts`: (name, addresses with prefix, e.g. "192.168.126.1/24").
    pub fn new(tag: &str, hosts: &[(&str, &[&str])]) -> Netns {
        let prefix = format!("hs{}{tag}", std::process::id() % 100000);
        let mut me = Netns {
            prefix: prefix.clone(),
            die_with_parent: false,
            hosts: vec![],
            children: vec![],
            etc: vec![],
        };
        let br = format!("{prefix}-br");
        ip(&["netns", "add", &br]);
        me.hosts.push(br.clone());
        ip(&["-n", &br, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &br, "link", "set", "br0", "up"]);
        for (i, (name, addrs)) in hosts.iter().enumerate() {
            let ns = me.ns(name);
            let (v, e) = (format!("v{prefix}x{i}"), format!("e{prefix}x{i}"));
            let (v, e) = (&v[..v.len().min(15)], &e[..e.len().min(15)]);
            ip(&["netns", "add", &ns]);
            me.hosts.push(ns.clone());
            ip(&["link", "add", v, "type", "veth", "peer", "name", e]);
            ip(&["link", "set", v, "netns", &br]);
            ip(&["-n", &br, "link", "set", v, "master", "br0"]);
            ip(&["-n", &br, "link", "set", v, "up"]);
            ip(&["link", "set", e, "netns", &ns]);
            ip(&["-n", &ns, "link", "set", e, "name", "eth0"]);
            for a in addrs.iter() {
                ip(&["-n", &ns, "addr", "add", a, "dev", "eth0"]);
            }
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        me
    }

    /// A default route through `gateway` in host `name` (the lab's helper), as nodes have.
    pub fn route(&self, name: &str, gateway: &str) {
        ip(&["-n", &self.ns(name), "route", "add", "default", "via", gateway]);
    }

    pub fn ns(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// Start a long-running program in host `name`'s namespace; killed on drop.
    pub fn spawn(&mut self, name: &str, program: &str, args: &[&str]) {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(name), program])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn in namespace");
        self.children.push(child);
    }

    /// `program` in host `name`'s network namespace, keeping the machine's /sys (and so its
    /// cgroup mounts, which `ip netns exec` hides by remounting /sys: the kubelet and runc need
    /// them), with the namespace's own /etc/hosts bind-mounted in a private mount namespace.
    /// Every step execs the next, so the child's PID is the program's.
    pub fn command(&self, name: &str, program: &str) -> Command {
        let ns = self.ns(name);
        let etc = format!("/etc/netns/{ns}");
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{ns}"));
        c.args(["--", "unshare", "--mount", "--propagation", "slave", "--", "sh", "-c"]);
        c.arg(format!(
            "for f in hosts resolv.conf; do [ ! -f {etc}/$f ] || mount --bind {etc}/$f /etc/$f || exit 125; done; exec \"$0\" \"$@\""
        ));
        c.arg(program);
        c
    }

    /// Like `spawn`, with environment variables and output to `log`; returns the PID.
    pub fn spawn_logged(&mut self, name: &str, program: &str, args: &[String], env: &[(String, String)], log: &std::path::Path) -> u32 {
        self.spawn_logged_in(name, program, args, env, log, None)
    }

    /// As `spawn_logged`, in working directory `cwd` (a container's `/`: what it writes to a
    /// relative path lands there, not in the caller's directory).
    pub fn spawn_logged_in(
        &mut self,
        name: &str,
        program: &str,
        args: &[String],
        env: &[(String, String)],
        log: &std::path::Path,
        cwd: Option<&std::path::Path>,
    ) -> u32 {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(log).expect("log file");
        let mut cmd = self.command(name, program);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        if self.die_with_parent {
            die_with_parent(&mut cmd);
        }
        let child = cmd
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn in namespace");
        let pid = child.id();
        self.children.push(child);
        pid
    }

    /// Whether a program started here has exited (and how), without waiting.
    pub fn exited(&mut self, pid: u32) -> Option<std::process::ExitStatus> {
        self.children
            .iter_mut()
            .find(|c| c.id() == pid)
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Stop one program started here (SIGKILL, then reap).
    pub fn kill(&mut self, pid: u32) {
        if let Some(i) = self.children.iter().position(|c| c.id() == pid) {
            let mut c = self.children.remove(i);
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `/etc/hosts` as seen by programs in host `name`'s namespace (bind-mounted from
    /// /etc/netns/NS/hosts, as `ip netns exec` does): the lab's DNS names without a DNS server.
    /// Other names go to `nameserver` (the lab's helper), never to the machine's resolver.
    pub fn hosts(&mut self, name: &str, nameserver: &str, entries: &[(&str, &str)]) {
        let dir = std::path::Path::new("/etc/netns").join(self.ns(name));
        hardshift_bundle::fsio::make_dir_all(&dir, 0o755).unwrap();
        let mut text = String::from("127.0.0.1 localhost\n::1 localhost\n");
        for (ip, names) in entries {
            text.push_str(&format!("{ip} {names}\n"));
        }
        std::fs::write(dir.join("hosts"), text).unwrap();
        std::fs::write(
            dir.join("resolv.conf"),
            format!("nameserver {nameserver}\noptions timeout:1 attempts:1\n"),
        )
        .unwrap();
        self.etc.push(dir);
    }

    pub fn kill_all(&mut self) {
        for mut c in self.children.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn exec(&self, name: &str, program: &str, args: &[&str]) -> (bool, String) {
        let ns = self.ns(name);
        let mut all = vec!["netns", "exec", ns.as_str(), program];
        all.extend_from_slice(args);
        run("ip", &all)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.kill_all();
        for d in &self.etc {
            let _ = std::fs::remove_dir_all(d);
        }
        for h in self.hosts.iter().rev() {
            let _ = run("ip", &["netns", "del", h]);
        }
    }
}

/// SIGKILL for `cmd`'s process when the thread that spawns it ends (prctl PR_SET_PDEATHSIG; it
/// survives the execs of `ip netns exec`, nsenter and unshare, which exec without forking).
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only makes one async-signal-safe
    // system call.
    unsafe {
        cmd.pre_exec(|| nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(std::io::Error::from));
    }
}

/// Remove what a killed run with this `tag` left (SIGKILL runs no destructor): namespaces
/// `hs<PID><tag>-*` whose PID is gone, and every process still in them. A namespace of a run
/// still alive is left alone.
pub fn reap_stale(tag: &str) -> Vec<String> {
    let (_, list) = run("ip", &["netns", "list"]);
    let mut reaped = Vec::new();
    for ns in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(rest) = ns.strip_prefix("hs") else { continue };
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let after = &rest[digits.len()..];
        if digits.is_empty() || !after.starts_with(&format!("{tag}-")) {
            continue;
        }
        if std::path::Path::new(&format!("/proc/{digits}")).exists() {
            continue;
        }
        let (_, pids) = run("ip", &["netns", "pids", ns]);
        for pid in pids.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = run("ip", &["netns", "del", ns]);
        reaped.push(ns.to_string());
    }
    reaped
}
