//! The transport choice through real processes: `rshmrun --nodes 2 -np 4` (two simulated nodes, TCP
//! bootstrap, shared-memory heaps on each node, CPU backend) with `RSHMEM_REMOTE_TRANSPORT` set.
//! `none` runs the `nodes` scenario with the other node's PEs refused by name; `auto` (the default) and
//! `proxy` run it with them reached through the proxy (no NIC here); `ibgda` runs it through the
//! emulated NIC, saying so once.

mod common;

use common::{text, tool};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const VAR: &str = "RSHMEM_REMOTE_TRANSPORT";

/// `rshmrun --nodes 2 -np 4 rshmem-test-pe nodes` with `VAR` set to `value` (None: unset). Returns
/// whether it succeeded and its output.
fn run(value: Option<&str>) -> (bool, String) {
    let deadline = Duration::from_secs(30);
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["--nodes", "2", "-np", "4", "--timeout", &deadline.as_secs().to_string()]);
    cmd.arg(tool("rshmem-test-pe")).arg("nodes");
    cmd.env("RSHMEM_SYMMETRIC_SIZE", "64m").env("RSHMEM_BACKEND", "cpu").env("RSHMEM_BOOTSTRAP_TIMEOUT", "10");
    cmd.env("RSHMEM_TEST_NODES", "2").env_remove("RSHMEM_TEST_NETNS");
    match value {
        Some(v) => cmd.env(VAR, v),
        None => cmd.env_remove(VAR),
    };
    let start = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    assert!(start.elapsed() < deadline + Duration::from_secs(10), "rshmrun overran its own --timeout");
    (out.status.success(), text(&out))
}

/// Runs the nodes scenario and checks every PE reported success; returns the output.
fn assert_nodes_ok(value: Option<&str>) -> String {
    let (ok, text) = run(value);
    assert!(ok, "{VAR}={value:?}: the nodes scenario failed:\n{text}");
    for pe in 0..4 {
        assert!(text.contains(&format!("[pe {pe}] PE {pe}: nodes ok")), "{VAR}={value:?}: PE {pe} did not report nodes ok:\n{text}");
    }
    text
}

#[test]
fn none_runs_the_nodes_scenario() {
    assert_nodes_ok(Some("none"));
}

/// Without a NIC, `auto` across nodes is the proxy, not the emulated NIC.
#[test]
fn unset_is_auto_which_is_the_proxy_across_nodes() {
    for value in [None, Some("auto")] {
        let text = assert_nodes_ok(value);
        assert!(!text.contains("emulated NIC"), "{VAR}={value:?} chose the emulated NIC:\n{text}");
    }
}

#[test]
fn proxy_runs_the_nodes_scenario() {
    assert_nodes_ok(Some("proxy"));
}

#[test]
fn ibgda_without_a_nic_runs_the_nodes_scenario_on_the_emulated_nic() {
    let text = assert_nodes_ok(Some("ibgda"));
    assert_eq!(text.matches("no usable RDMA NIC").count(), 1, "{VAR}=ibgda: the emulated NIC is not announced exactly once:\n{text}");
}

#[test]
fn a_garbage_value_fails_at_init_naming_the_variable_and_the_choices() {
    let (ok, text) = run(Some("tcp"));
    assert!(!ok, "{VAR}=tcp succeeded:\n{text}");
    assert!(
        text.contains(&format!("rshmem_init: {VAR}=\"tcp\"")) && text.contains("expected auto, none, proxy or ibgda"),
        "{VAR}=tcp: no PE named the variable and its values:\n{text}"
    );
}

#[test]
fn rshmrun_info_lists_the_variable_with_its_values() {
    let out = Command::new(tool("rshmrun")).arg("--info").env_remove(VAR).output().expect("run rshmrun --info");
    let text = text(&out);
    assert!(out.status.success(), "rshmrun --info failed:\n{text}");
    let at = text.find(&format!("{VAR}\n")).unwrap_or_else(|| panic!("rshmrun --info does not list {VAR}:\n{text}"));
    let entry: String = text[at..].lines().take(3).collect::<Vec<_>>().join("\n");
    assert!(entry.contains("default: auto"), "{entry}");
    for v in ["none", "proxy", "ibgda", "p2p"] {
        assert!(entry.contains(v), "rshmrun --info's {VAR} entry does not mention {v}:\n{entry}");
    }
}

/// A single-node job with `proxy` named starts no proxy: no PE could use it, and its channels would
/// add reads of host memory to every quiet (rshmem's single-node figures on 2 x H200 were measured
/// with the variable set, 2026-11-27, and paid 1.4 us per quiet).
#[test]
fn proxy_named_in_a_single_node_job_starts_nothing() {
    let out = Command::new(tool("rshmrun"))
        .args(["-np", "2", "--timeout", "30"])
        .arg(tool("rshmem-test-pe"))
        .arg("ring")
        .env("RSHMEM_SYMMETRIC_SIZE", "64m")
        .env("RSHMEM_BACKEND", "cpu")
        .env("RSHMEM_DEBUG", "info")
        .env(VAR, "proxy")
        .stdin(Stdio::null())
        .output()
        .expect("run rshmrun");
    let text = text(&out);
    assert!(out.status.success(), "the ring failed:\n{text}");
    assert!(!text.contains("proxy: PE"), "a proxy was started for a single-node job:\n{text}");
    assert!(text.contains("PE 1: ring ok"), "{text}");
}
