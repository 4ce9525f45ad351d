//! Test hosts in network namespaces on one bridge: the lab's real addresses on one machine.
//! Every client runs inside a namespace; all are removed on drop.

use super::run;
use std::process::{Child, Command, Stdio};

pub struct Netns {
    pub prefix: String,
    hosts: Vec<String>,
    children: Vec<Child>,
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
            hosts: vec![],
            children: vec![],
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
        for h in self.hosts.iter().rev() {
            let _ = run("ip", &["netns", "del", h]);
        }
    }
}
