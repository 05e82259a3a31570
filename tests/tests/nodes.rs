//! Simulated nodes with the real PE program: `rshmrun --nodes K` (and `--netns` as root) runs the `nodes`
//! scenario of `rshmem-test-pe` (real processes, TCP bootstrap, shared-memory heaps, CPU backend). The
//! scenario checks the split, the node team, allocations and host barriers across nodes, and host
//! put/get reaching this node's PEs and refusing the others' by name.

use std::collections::BTreeMap;
mod common;

use common::tool;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `rshmrun --nodes K [--netns] -np N rshmem-test-pe nodes`, with a deadline.
fn run_nodes(np: usize, nodes: usize, netns: bool) -> (Output, String) {
    let deadline = Duration::from_secs(60);
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["--nodes", &nodes.to_string(), "-np", &np.to_string(), "--timeout", &deadline.as_secs().to_string()]);
    if netns {
        cmd.arg("--netns").env("RSHMEM_TEST_NETNS", "1");
    } else {
        cmd.env_remove("RSHMEM_TEST_NETNS");
    }
    cmd.arg(tool("rshmem-test-pe")).arg("nodes");
    // A broken node setup shows as PEs that cannot reach PE 0: fail in 10 s, not 30.
    cmd.env("RSHMEM_SYMMETRIC_SIZE", "64m").env("RSHMEM_BACKEND", "cpu").env("RSHMEM_BOOTSTRAP_TIMEOUT", "10");
    cmd.env("RSHMEM_TEST_NODES", nodes.to_string());
    let start = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    assert!(start.elapsed() < deadline + Duration::from_secs(10), "rshmrun overran its own --timeout");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "--nodes {nodes} -np {np}{} failed:\n{text}", if netns { " --netns" } else { "" });
    for pe in 0..np {
        assert!(text.contains(&format!("[pe {pe}] PE {pe}: nodes ok")), "PE {pe} did not report nodes ok:\n{text}");
    }
    (out, text)
}

#[test]
fn two_nodes_of_four_pes() {
    run_nodes(4, 2, false);
}

/// 4 PEs on 3 nodes: PEs 0-1, 2 and 3 (the first node gets the extra PE).
#[test]
fn three_nodes_of_four_pes_uneven() {
    run_nodes(4, 3, false);
}

/// One node: everything is node-local, as without --nodes.
#[test]
fn one_node() {
    run_nodes(3, 1, false);
}

/// As many nodes as PEs: nothing is shared at all.
#[test]
fn one_pe_per_node() {
    run_nodes(3, 3, false);
}

/// --netns (root; CI is root, so it must not be skipped there): the same scenario with each node in its
/// own network namespace. The scenario proves the bootstrap is on node 0's 10.99.0.1, that node 0's
/// loopback is not reachable from node 1 while node 0's address is, and prints each PE's namespace and
/// pid; here: one namespace per node, not this process's, and none of them (nor any PE) left afterwards.
#[test]
fn two_nodes_of_four_pes_in_network_namespaces() {
    if !is_root() {
        return rshmem_test_support::skip("two_nodes_of_four_pes_in_network_namespaces", "--netns needs root (scripts/test.sh runs as root)");
    }
    let (_, text) = run_nodes(4, 2, true);
    let own = std::fs::read_link("/proc/self/ns/net").unwrap().to_string_lossy().into_owned();
    // "[pe P] PE P: node K netns net:[I] pid Q"
    let mut ns_of_node: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut pids = Vec::new();
    for line in text.lines().filter(|l| l.contains(" netns ")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let node: usize = f[5].parse().unwrap();
        ns_of_node.entry(node).or_default().push(f[7].to_string());
        pids.push(f[9].to_string());
    }
    assert_eq!(pids.len(), 4, "not every PE printed its namespace:\n{text}");
    assert_eq!(ns_of_node.len(), 2, "{text}");
    let per_node: Vec<&String> = ns_of_node.values().map(|v| {
        assert!(v.iter().all(|n| n == &v[0]), "a node's PEs are in different namespaces:\n{text}");
        &v[0]
    }).collect();
    assert_ne!(per_node[0], per_node[1], "the two nodes share a namespace:\n{text}");
    assert!(!per_node.contains(&&own), "a node runs in the test's own namespace:\n{text}");
    // rshmrun has exited and reaped its PEs: no PE process and no holder of the namespaces is left.
    for pid in &pids {
        assert!(!std::path::Path::new("/proc").join(pid).exists(), "PE process {pid} is still there after the job");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = holders(&[per_node[0].clone(), per_node[1].clone()]);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "still in the nodes' namespaces after the job: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Effective user id 0, from /proc/self/status ("Uid: real effective saved fs").
fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid = status.lines().find_map(|l| l.strip_prefix("Uid:")).expect("Uid line in /proc/self/status");
    uid.split_whitespace().nth(1) == Some("0")
}

/// Processes (any thread, any descriptor) that refer to one of `namespaces` ("net:[inode]").
fn holders(namespaces: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = p.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let mut refs = Vec::new();
        for dir in ["task", "fd"] {
            for e in std::fs::read_dir(p.path().join(dir)).into_iter().flatten().flatten() {
                let link = if dir == "task" { e.path().join("ns/net") } else { e.path() };
                if let Ok(l) = std::fs::read_link(link) {
                    refs.push(l.to_string_lossy().into_owned());
                }
            }
        }
        if refs.iter().any(|r| namespaces.contains(r)) {
            found.push(format!("pid {name}"));
        }
    }
    found
}
