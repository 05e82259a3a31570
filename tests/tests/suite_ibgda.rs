//! The multi-process suite across simulated nodes through the IBGDA transport: device threads post
//! mlx5 work requests to rshmem's emulated NIC (there is no NIC here), which carries them over TCP to
//! the target node's responder. Every case of `common/suite.rs` that runs across nodes runs here with
//! `rshmrun --nodes 2` and `RSHMEM_REMOTE_TRANSPORT=ibgda`, and again with `--netns` as root.
//!
//! The cases that post work requests (WQEs) to another node run again under each of the emulated
//! NIC's fault modes (`RSHMEM_IBGDA_FAULTS`: a delay between doorbell and WQE fetch, dropped
//! doorbells, WQE counts wrapping past 65536, a full send queue, slow completions), which expose
//! ordering bugs in the posting code that a fast NIC hides. Each such run checks, from the counts every
//! PE's NIC prints at finalize, that the fault under test was injected at least once. The plain
//! emulated run checks which cases post WQEs (`RSHMEM_IBGDA_FAULTS=none` prints the counts without
//! injecting anything), so that the list below stays true. Then the bad-input cases: a WQE with a bad
//! rkey or a remote address outside the target's heap ends in a clear error.

mod common;

use common::suite::{self, suite_cases, Layout};
use common::suite::{IBGDA_DROPPED_DOORBELLS, IBGDA_FETCH_DELAY, IBGDA_FULL_SEND_QUEUE, IBGDA_INDEX_WRAP, IBGDA_SLOW_COMPLETIONS, TWO_NODES_IBGDA, TWO_NODES_IBGDA_COUNTED, TWO_NODES_IBGDA_NETNS};
use common::text;
use std::time::Duration;

/// The cases whose device code posts WQEs to PEs on the other node, by how many: `one` post one WQE
/// per PE (the ring shift: one doorbell on one QP, so no second doorbell to drop), `few` post fewer
/// than the 16 WQEBBs per QP that wrap the WQE count from the wrap fault's start (65520), `many` post
/// enough for every fault mode to fire. Every other case of the suite posts none (host RMA goes
/// through the proxy; the rest fail or finish before any remote device call).
macro_rules! wqe_cases {
    ($then:ident) => {
        $then! {
            one: [ring_shift_scenario, ring_shift_example_under_rshmrun, cudarc_interop_example_under_rshmrun],
            few: [wait_until_six_comparisons, teams_and_ptr],
            many: [
                p_and_g_all_sizes, put_get_every_scope_size_alignment, atomics_every_operation,
                fetch_add_contention_distinct_values, amo_mixed_local_and_remote, compare_swap_lock_excludes,
                fence_orders_data_before_flag, put_signal_payload_before_signal, device_barriers, reinit_after_finalize, device_call_after_finalize_names_the_call,
            ],
        }
    };
}

/// Names of the cases of [`wqe_cases!`].
macro_rules! wqe_case_names {
    (one: [$($one:ident),* $(,)?], few: [$($few:ident),* $(,)?], many: [$($many:ident),* $(,)?] $(,)?) => {
        const POSTS_WQES: &[&str] = &[$(stringify!($one),)* $(stringify!($few),)* $(stringify!($many)),*];
    };
}
wqe_cases!(wqe_case_names);

/// Runs `case` on the emulated NIC, printing the NICs' counts: it posts WQEs to another node exactly
/// when [`POSTS_WQES`] says so.
fn emulated(name: &str, case: fn(&Layout)) {
    let jobs = suite::recorded(|| case(&TWO_NODES_IBGDA_COUNTED));
    let (counts, lines) = suite::nic_counts(&jobs);
    let wqes = counts.get("WQEs").copied().unwrap_or(0);
    if POSTS_WQES.contains(&name) {
        assert!(lines > 0 && wqes > 0, "{name} is listed as posting WQEs, but its PEs' NICs ran {wqes} WQEs ({lines} PEs reported):\n{}", jobs.join("\n"));
    } else {
        assert_eq!(wqes, 0, "{name} posts WQEs to another node: add it to wqe_cases! so that it runs under the fault modes");
    }
    assert!(counts.iter().all(|(m, &n)| m == "WQEs" || n == 0), "no fault configured, yet the NIC counted some: {counts:?}");
}

/// Runs `case` under fault layout `l` and checks that fault `mode` was injected at least once.
fn under_fault(name: &str, l: &Layout, mode: &str, case: fn(&Layout)) {
    let jobs = suite::recorded(|| case(l));
    let (counts, lines) = suite::nic_counts(&jobs);
    assert!(lines > 0, "{name} under {:?}: no PE printed its NIC's fault counts at finalize:\n{}", l.env, jobs.join("\n"));
    let fired = counts.get(mode).copied().unwrap_or(0);
    assert!(fired >= 1, "{name} under {:?}: fault {mode:?} was never injected (the NICs counted {counts:?} over {lines} PEs)", l.env);
}

macro_rules! ibgda_tests {
    (everywhere: [$($case:ident),* $(,)?], one_node: [$($local:ident: $why:literal),* $(,)?] $(,)?) => {
        mod emulated {
            use super::*;
            $( #[test] fn $case() { super::emulated(stringify!($case), suite::$case) } )*
        }
        mod emulated_netns {
            use super::*;
            $( #[test] fn $case() { if TWO_NODES_IBGDA_NETNS.available() { suite::$case(&TWO_NODES_IBGDA_NETNS) } } )*
        }
    };
}
suite_cases!(ibgda_tests);

macro_rules! fault_tests {
    (one: [$($one:ident),* $(,)?], few: [$($few:ident),* $(,)?], many: [$($many:ident),* $(,)?] $(,)?) => {
        fault_tests!(@mode fault_fetch_delay, IBGDA_FETCH_DELAY, "delay", [$($one,)* $($few,)* $($many),*]);
        fault_tests!(@mode fault_dropped_doorbells, IBGDA_DROPPED_DOORBELLS, "drop", [$($few,)* $($many),*]);
        fault_tests!(@mode fault_index_wrap, IBGDA_INDEX_WRAP, "wrap", [$($many),*]);
        fault_tests!(@mode fault_full_send_queue, IBGDA_FULL_SEND_QUEUE, "full", [$($one,)* $($few,)* $($many),*]);
        fault_tests!(@mode fault_slow_completions, IBGDA_SLOW_COMPLETIONS, "slow", [$($one,)* $($few,)* $($many),*]);
    };
    (@mode $m:ident, $layout:ident, $mode:literal, [$($case:ident),*]) => {
        mod $m {
            use super::*;
            $( #[test] fn $case() { under_fault(stringify!($case), &$layout, $mode, suite::$case) } )*
        }
    };
}
wqe_cases!(fault_tests);

fn nic_bad(l: &Layout, scenario: &str, reason: &str) {
    let o = suite::rshmrun(l, 4, &[scenario], &[], Duration::from_secs(60));
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    for want in ["PE 0", "remote access error", "RDMA WRITE to PE 3", "syndrome 0x13", reason] {
        assert!(t.contains(want), "{scenario}: the message lacks {want:?}:\n{t}");
    }
    assert!(t.contains("rshmrun: PE 0"), "rshmrun does not name the failed PE:\n{t}");
}

#[test]
fn bad_rkey_ends_in_a_remote_access_error_naming_it() {
    nic_bad(&TWO_NODES_IBGDA, "nic_bad_key", "unknown rkey");
}

#[test]
fn remote_address_outside_the_heap_ends_in_a_remote_access_error() {
    nic_bad(&TWO_NODES_IBGDA, "nic_bad_addr", "remote range outside its memory region");
}

/// Four PEs of a node put 16 MiB each to one PE of the next node (4 nodes of 4 PEs) with the ibgda
/// transport (host RMA goes through its proxy): each lands in its own region with its own data.
#[test]
fn four_writers_per_target_on_four_nodes() {
    suite::host_rma_four_writers_per_target("ibgda");
}

/// `RSHMEM_REMOTE_TRANSPORT=ibgda` without a NIC says once, on PE 0, that the emulated NIC is used.
#[test]
fn emulated_nic_is_announced_once() {
    let o = suite::rshmrun(&TWO_NODES_IBGDA, 4, &["ring"], &[], Duration::from_secs(60));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert_eq!(t.matches("emulated NIC").count(), 1, "{t}");
    assert!(t.contains("[pe 0] rshmem warn [PE 0]: RSHMEM_REMOTE_TRANSPORT=ibgda: no usable RDMA NIC"), "{t}");
}

/// A bad fault list stops init naming the variable and the modes.
#[test]
fn bad_fault_list_is_refused_naming_it() {
    let o = suite::rshmrun(&TWO_NODES_IBGDA, 2, &["ring"], &[("RSHMEM_IBGDA_FAULTS", "delay=3parsecs")], Duration::from_secs(60));
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("RSHMEM_IBGDA_FAULTS") && t.contains("3parsecs"), "{t}");
}

/// The return slots in device memory, apart from the CQs (`RSHMEM_IBGDA_RET_SLOTS=device`, the real
/// NIC's placement): every fetching operation (g, fetching AMOs, the compare_swap lock, host AMOs racing
/// device AMOs) still returns the value the target had, across two nodes through the emulated NIC.
#[test]
fn return_slots_in_device_memory() {
    let cases = ["pg", "amo", "contention", "amo_mixed", "host_amo", "lock"];
    let o = suite::rshmrun(&TWO_NODES_IBGDA, 2, &cases, &[("RSHMEM_IBGDA_RET_SLOTS", "device")], Duration::from_secs(120));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for c in cases {
        for pe in 0..2 {
            assert!(t.contains(&format!("PE {pe}: {c} ok")), "PE {pe} did not pass {c}:\n{t}");
        }
    }
    let o = suite::rshmrun(&TWO_NODES_IBGDA, 2, &["ring"], &[("RSHMEM_IBGDA_RET_SLOTS", "gpu")], Duration::from_secs(60));
    let t = text(&o);
    assert!(!o.status.success() && t.contains("RSHMEM_IBGDA_RET_SLOTS") && t.contains("queues or device"), "{t}");
}

/// `RSHMEM_IBGDA_EMULATOR=device` (the device-resident NIC model; a host thread over the PE's memory on
/// the CPU backend): `rshmem-bench --posting` with 16 QPs per PE runs every case, prints plausible
/// figures, and the model completed exactly the WQEs the cases posted (4 launches of 100 `p`s per
/// thread for each case: warm-up and 3 repeats).
#[test]
fn posting_bench_on_the_device_resident_nic_model() {
    use std::process::{Command, Stdio};
    // rshmem-bench --posting on two nodes, CPU backend, the model, with `env` added.
    let bench = |env: &[(&str, &str)]| {
        let mut c = Command::new(common::tool("rshmrun"));
        c.args(["--nodes", "2", "-np", "2", "--timeout", "100"]).arg(common::tool("rshmem-bench"));
        c.args(["--posting", "--quick", "--grid", "2", "--threads", "4", "--posting-threads", "1,2"]);
        c.envs([("RSHMEM_BACKEND", "cpu"), ("RSHMEM_REMOTE_TRANSPORT", "ibgda"), ("RSHMEM_IBGDA_EMULATOR", "device")]).envs(env.iter().copied());
        c.stdin(Stdio::null()).output().expect("run rshmrun")
    };
    let out = bench(&[("RSHMEM_IBGDA_QPS_PER_PE", "16"), ("RSHMEM_DEBUG", "info")]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    for (case, grid, threads) in [("post_1thread", 1, 1), ("post_block", 1, 4), ("post_grid", 2, 1), ("post_grid", 2, 2)] {
        for (unit, lo, hi) in [("ns", 1.0, 1e8), ("MWQE/s", 1e-5, 1e4)] {
            let sfx = if unit == "ns" { "ns" } else { "rate" };
            let head = format!("case={case}_{sfx} scope=thread bytes=8 grid={grid} threads={threads} value=");
            let v: f64 = t
                .lines()
                .find_map(|l| l.split_once(&head).map(|(_, r)| r.split_whitespace().next().unwrap_or("").parse().unwrap_or(-1.0)))
                .unwrap_or_else(|| panic!("no {head}... line:\n{t}"));
            assert!(v > lo && v < hi && t.contains(&format!("{head}{v:.4} unit={unit}")), "{case} {grid}x{threads}: {v} {unit} is implausible:\n{t}");
        }
        // The whole kernel's time with its quiet, beside the posting phase's.
        assert!(t.contains(&format!("case={case}_kernel_ns scope=thread bytes=8 grid={grid} threads={threads} value=")), "no {case}_kernel_ns line:\n{t}");
    }
    assert!(t.contains("RSHMEM_IBGDA_EMULATOR=device: the NIC is a model in device memory"), "{t}");
    let wqes = 4 * 100 * (1 + 4 + 2 + 2 * 2);
    assert!(t.contains(&format!("[PE 0]: ibgda: the device-resident NIC model completed {wqes} WQEs")), "PE 0's model did not complete the {wqes} WQEs posted:\n{t}");
    assert!(!t.contains("error state"), "{t}");
    // No fault injection with the model: refused, naming both variables.
    let out = bench(&[("RSHMEM_IBGDA_FAULTS", "delay")]);
    let t = text(&out);
    assert!(!out.status.success() && t.contains("RSHMEM_IBGDA_EMULATOR=device has no fault injection"), "{t}");
}
