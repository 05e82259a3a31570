//! How a job across nodes settles on its remote transport, through real processes (`rshmrun --nodes 2`,
//! CPU backend), with the test hook `RSHMEM_TEST_NIC_USABLE` making PEs believe they have a usable NIC
//! (no NIC here): under `auto`, PEs that disagree all take the proxy, and a NIC that cannot be set up on
//! every PE makes every PE fall back to the proxy, saying why; with `RSHMEM_REMOTE_TRANSPORT=ibgda` both
//! stop the job with the reason instead of stranding it.

mod common;

use common::{text, tool};
use std::process::{Command, Stdio};

fn job(np: &str, env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["--nodes", "2", "-np", np, "--timeout", "60"]).arg(tool("rshmem-test-pe")).args(["ring", "rma", "amo"]);
    cmd.env("RSHMEM_BACKEND", "cpu").env("RSHMEM_SYMMETRIC_SIZE", "64m").env_remove("RSHMEM_REMOTE_TRANSPORT").env_remove("RSHMEM_DEBUG");
    cmd.env_remove("RSHMEM_PROXY_PROVIDER").env_remove("RSHMEM_TEST_VERBS_USABLE").env_remove("RSHMEM_TEST_NIC_USABLE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    (out.status.success(), text(&out))
}

/// A job of `np` PEs with `env` that must succeed (every PE passing), saying each of `says`.
fn passes_saying(np: &str, env: &[(&str, &str)], says: &[&str]) {
    let (ok, t) = job(np, env);
    assert!(ok, "the job failed with {env:?}:\n{t}");
    for s in says {
        assert!(t.contains(s), "with {env:?} the job did not say {s:?}:\n{t}");
    }
    let last = np.parse::<usize>().unwrap() - 1;
    assert!(t.contains(&format!("PE {last}: amo ok")), "{t}");
}

#[test]
fn a_nic_that_cannot_be_set_up_falls_back_to_the_proxy() {
    passes_saying("2", &[("RSHMEM_TEST_NIC_USABLE", "all")], &["ibgda: the NIC could not be set up", "every PE uses the proxy instead"]);
}

#[test]
fn pes_that_disagree_take_the_proxy_together() {
    passes_saying("4", &[("RSHMEM_TEST_NIC_USABLE", "0")], &["a usable NIC on PE 0, none on PEs 1-3: every PE uses the proxy"]);
}

#[test]
fn ibgda_asked_for_stops_with_the_reason() {
    // A NIC on some PEs only: the emulated NIC cannot talk to a real one.
    let (ok, t) = job("2", &[("RSHMEM_TEST_NIC_USABLE", "1"), ("RSHMEM_REMOTE_TRANSPORT", "ibgda")]);
    assert!(!ok && t.contains("a usable NIC on PE 1, none on PE 0") && t.contains("RSHMEM_REMOTE_TRANSPORT=proxy"), "{t}");
    // A NIC on every PE that cannot be set up: no fallback when asked for.
    let (ok, t) = job("2", &[("RSHMEM_TEST_NIC_USABLE", "all"), ("RSHMEM_REMOTE_TRANSPORT", "ibgda")]);
    assert!(!ok && t.contains("ibgda: the NIC could not be set up") && !t.contains("uses the proxy instead"), "{t}");
}

#[test]
fn a_verbs_proxy_that_cannot_be_set_up_falls_back_to_tcp() {
    passes_saying("2", &[("RSHMEM_TEST_VERBS_USABLE", "all")], &["proxy over verbs: the NIC could not be set up", "every PE's proxy uses TCP instead"]);
}

#[test]
fn pes_that_disagree_on_the_proxy_provider_take_tcp_together() {
    let says = "proxy over verbs: no usable NIC on PEs 1-3 (PE 1: RSHMEM_TEST_VERBS_USABLE says no): every PE's proxy uses TCP";
    passes_saying("4", &[("RSHMEM_TEST_VERBS_USABLE", "0")], &[says]);
}

#[test]
fn verbs_asked_for_stops_with_the_reason() {
    // No usable NIC anywhere: the job stops naming the PEs and why.
    let (ok, t) = job("2", &[("RSHMEM_PROXY_PROVIDER", "verbs")]);
    assert!(!ok && t.contains("RSHMEM_PROXY_PROVIDER=verbs: no NIC usable for the proxy over verbs on PEs 0, 1") && t.contains("=auto"), "{t}");
    // Usable on every PE, but the setup fails: no fallback when asked for.
    let (ok, t) = job("2", &[("RSHMEM_TEST_VERBS_USABLE", "all"), ("RSHMEM_PROXY_PROVIDER", "verbs")]);
    assert!(!ok && t.contains("proxy over verbs: the NIC could not be set up") && !t.contains("uses TCP instead"), "{t}");
    // A value that is none of them.
    let (ok, t) = job("2", &[("RSHMEM_PROXY_PROVIDER", "udp")]);
    assert!(!ok && t.contains("RSHMEM_PROXY_PROVIDER") && t.contains("expected auto, tcp or verbs"), "{t}");
}
