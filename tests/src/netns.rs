//! Network namespaces on a bridge, and link faults as nftables drop rules inside them.
//!
//! Layout of one cluster network: a bridge `fpb<pid>x<n>` in the root namespace holding
//! `10.<a>.<b>.1/24`; node `i` lives in namespace `fp<pid>x<n>-<i>` behind a veth pair, as
//! `10.<a>.<b>.<i + 2>`. Names carry the test process id so that [`remove_stale`] can delete what
//! an earlier, crashed run left behind (its process is gone) without touching a concurrent run.
//!
//! Faults are silent drops (no RST, no ICMP): TCP connections hang, as with a real partition.
//! A node's faults live in one nftables table, `inet fencepost_fault`, with an input and an
//! output chain; healing deletes the table.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

const FAULT_TABLE: &str = "fencepost_fault";

/// Runs a command, failing with its stderr.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program} {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `nft` inside namespace `ns` with `script` on stdin.
fn nft(ns: &str, script: &str) -> Result<()> {
    use std::io::Write as _;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("spawning nft")?;
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "nft in {ns} failed: {}\n{script}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Checks that this process can create a namespace and run nftables inside it.
pub(crate) fn probe() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not running as root".into());
    }
    let ns = format!("fp{}xprobe", std::process::id());
    run("ip", &["netns", "add", &ns]).map_err(|e| format!("`ip netns add` failed: {e:#}"))?;
    let checked = run("ip", &["netns", "exec", &ns, "nft", "list", "tables"])
        .map(|_| ())
        .map_err(|e| format!("nftables unusable in a namespace: {e:#}"));
    let removed = run("ip", &["netns", "del", &ns]).map(|_| ());
    checked?;
    removed.map_err(|e| format!("`ip netns del` failed: {e:#}"))
}

/// The process id encoded in a harness name `<prefix><pid>x...`, if it is one.
fn owner_pid(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() || !rest[digits.len()..].starts_with('x') {
        return None;
    }
    digits.parse().ok()
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Deletes namespaces and bridges left by harness runs whose process is gone (a crashed or
/// killed test run cannot clean up after itself). Processes still running inside a deleted
/// namespace were started with a parent-death signal and died with their test process.
pub fn remove_stale() {
    let me = std::process::id();
    if let Ok(list) = run("ip", &["netns", "list"]) {
        for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
            if let Some(pid) = owner_pid(name, "fp") {
                if pid != me && !alive(pid) {
                    eprintln!("harness: removing stale namespace {name}");
                    if let Err(e) = run("ip", &["netns", "del", name]) {
                        eprintln!("harness: {e:#}");
                    }
                }
            }
        }
    }
    if let Ok(list) = run("ip", &["-o", "link", "show", "type", "bridge"]) {
        for line in list.lines() {
            // "<index>: <name>: <flags> ..."
            let Some(name) = line.split(": ").nth(1) else {
                continue;
            };
            if let Some(pid) = owner_pid(name, "fpb") {
                if pid != me && !alive(pid) {
                    eprintln!("harness: removing stale bridge {name}");
                    if let Err(e) = run("ip", &["link", "del", name]) {
                        eprintln!("harness: {e:#}");
                    }
                }
            }
        }
    }
}

/// One cluster's network: a bridge and one namespace per node. Torn down on drop.
#[derive(Debug)]
pub struct Network {
    bridge: String,
    namespaces: Vec<String>,
    subnet: [u8; 2],
    /// Namespaces holding a fault table.
    faulted: Mutex<BTreeSet<usize>>,
}

impl Network {
    /// Creates the bridge and `nodes` namespaces, each with `lo` up and a default route via the
    /// bridge.
    pub fn create(nodes: usize) -> Result<Network> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        assert!((1..=200).contains(&nodes), "{nodes} nodes");
        remove_stale();
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let subnet = [100 + (pid % 100) as u8, (n % 250) as u8];
        let bridge = format!("fpb{pid}x{n}");
        assert!(bridge.len() <= 15, "interface name {bridge} too long");
        let mut net = Network {
            bridge: bridge.clone(),
            namespaces: Vec::new(),
            subnet,
            faulted: Mutex::new(BTreeSet::new()),
        };
        run("ip", &["link", "add", &bridge, "type", "bridge"])?;
        let gateway = net.bridge_ip().to_string();
        run(
            "ip",
            &["addr", "add", &format!("{gateway}/24"), "dev", &bridge],
        )?;
        run("ip", &["link", "set", &bridge, "up"])?;
        for i in 0..nodes {
            let ns = format!("fp{pid}x{n}-{i}");
            run("ip", &["netns", "add", &ns])?;
            net.namespaces.push(ns.clone());
            let veth = format!("fv{pid}x{n}-{i}");
            assert!(veth.len() <= 15, "interface name {veth} too long");
            run(
                "ip",
                &[
                    "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
                ],
            )?;
            run("ip", &["link", "set", &veth, "master", &bridge, "up"])?;
            let ip = net.ip(i).to_string();
            run(
                "ip",
                &["-n", &ns, "addr", "add", &format!("{ip}/24"), "dev", "eth0"],
            )?;
            run("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
            run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
            run(
                "ip",
                &["-n", &ns, "route", "add", "default", "via", &gateway],
            )?;
        }
        Ok(net)
    }

    /// The bridge's address (the test process's side).
    pub fn bridge_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.subnet[0], self.subnet[1], 1)
    }

    /// Node `i`'s address.
    pub fn ip(&self, i: usize) -> Ipv4Addr {
        assert!(
            i < self.namespaces.len(),
            "node {i} of {}",
            self.namespaces.len()
        );
        Ipv4Addr::new(10, self.subnet[0], self.subnet[1], (i + 2) as u8)
    }

    /// Node `i`'s namespace.
    pub fn namespace(&self, i: usize) -> &str {
        &self.namespaces[i]
    }

    fn add_rules(&self, node: usize, rules: &[String]) -> Result<()> {
        let ns = &self.namespaces[node];
        let mut faulted = self.faulted.lock().expect("fault set");
        let mut script = String::new();
        if faulted.insert(node) {
            script.push_str(&format!(
                "table inet {FAULT_TABLE} {{\n\
                 chain input {{ type filter hook input priority -100; policy accept; }}\n\
                 chain output {{ type filter hook output priority -100; policy accept; }}\n}}\n"
            ));
        }
        for rule in rules {
            script.push_str(&format!("add rule inet {FAULT_TABLE} {rule}\n"));
        }
        nft(ns, &script)
    }

    /// Packets from node `from` to node `to` are silently dropped (at `from`'s output); the
    /// other direction still flows.
    pub fn drop_one_way(&self, from: usize, to: usize) -> Result<()> {
        let to_ip = self.ip(to);
        let from_ip = self.ip(from);
        self.add_rules(from, &[format!("output ip daddr {to_ip} drop")])?;
        // Also at the receiver, so that a rule is visible from both ends when debugging.
        self.add_rules(to, &[format!("input ip saddr {from_ip} drop")])
    }

    /// No packet passes between nodes `a` and `b`, either way.
    pub fn drop_both_ways(&self, a: usize, b: usize) -> Result<()> {
        self.drop_one_way(a, b)?;
        self.drop_one_way(b, a)
    }

    /// Removes every fault.
    pub fn heal(&self) -> Result<()> {
        let mut faulted = self.faulted.lock().expect("fault set");
        let mut first_error = None;
        for node in std::mem::take(&mut *faulted) {
            let ns = &self.namespaces[node];
            if let Err(e) = run(
                "ip",
                &[
                    "netns",
                    "exec",
                    ns,
                    "nft",
                    "delete",
                    "table",
                    "inet",
                    FAULT_TABLE,
                ],
            ) {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// The nftables rules currently installed, per namespace (for failure reports).
    pub fn describe_faults(&self) -> String {
        let faulted = self.faulted.lock().expect("fault set");
        faulted
            .iter()
            .map(|&n| {
                let ns = &self.namespaces[n];
                let rules = run(
                    "ip",
                    &[
                        "netns",
                        "exec",
                        ns,
                        "nft",
                        "list",
                        "table",
                        "inet",
                        FAULT_TABLE,
                    ],
                )
                .unwrap_or_else(|e| format!("{e:#}"));
                format!("{ns}:\n{rules}")
            })
            .collect()
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            if let Err(e) = run("ip", &["netns", "del", ns]) {
                eprintln!("harness: {e:#}");
            }
        }
        if let Err(e) = run("ip", &["link", "del", &self.bridge]) {
            eprintln!("harness: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pids_are_parsed_from_harness_names_only() {
        assert_eq!(owner_pid("fp1234x0-3", "fp"), Some(1234));
        assert_eq!(owner_pid("fpb77x12", "fpb"), Some(77));
        assert_eq!(owner_pid("fpb77x12", "fp"), None);
        assert_eq!(owner_pid("fp1234probe", "fp"), None);
        assert_eq!(owner_pid("fp1234xprobe", "fp"), Some(1234));
        assert_eq!(owner_pid("docker0", "fp"), None);
    }
}
