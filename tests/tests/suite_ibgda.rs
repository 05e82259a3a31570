//! The multi-process suite across simulated nodes through the IBGDA transport: device threads post
//! mlx5 work requests to rshmem's emulated NIC (there is no NIC here), which carries them over TCP to
//! the target node's responder. Every case of `common/suite.rs` that runs across nodes runs here with
//! `rshmrun --nodes 2` and `RSHMEM_REMOTE_TRANSPORT=ibgda`, again with `--netns` as root, and again
//! under each of the emulated NIC's fault modes (`RSHMEM_IBGDA_FAULTS`: a delay between doorbell and
//! WQE fetch, dropped doorbells, WQE counts wrapping past 65536, a full send queue, slow completions),
//! which expose ordering bugs in the posting code that a fast NIC hides. Then the bad-input cases: a
//! WQE with a bad rkey or a remote address outside the target's heap ends in a clear error.

mod common;

use common::suite::{self, suite_cases, Layout};
use common::suite::{IBGDA_DROPPED_DOORBELLS, IBGDA_FETCH_DELAY, IBGDA_FULL_SEND_QUEUE, IBGDA_INDEX_WRAP, IBGDA_SLOW_COMPLETIONS, TWO_NODES_IBGDA, TWO_NODES_IBGDA_NETNS};
use common::text;
use std::time::Duration;

macro_rules! ibgda_tests {
    (everywhere: [$($case:ident),* $(,)?], one_node: [$($local:ident: $why:literal),* $(,)?] $(,)?) => {
        ibgda_tests!(@layout emulated, TWO_NODES_IBGDA, [$($case),*]);
        ibgda_tests!(@layout emulated_netns, TWO_NODES_IBGDA_NETNS, [$($case),*]);
        ibgda_tests!(@layout fault_fetch_delay, IBGDA_FETCH_DELAY, [$($case),*]);
        ibgda_tests!(@layout fault_dropped_doorbells, IBGDA_DROPPED_DOORBELLS, [$($case),*]);
        ibgda_tests!(@layout fault_index_wrap, IBGDA_INDEX_WRAP, [$($case),*]);
        ibgda_tests!(@layout fault_full_send_queue, IBGDA_FULL_SEND_QUEUE, [$($case),*]);
        ibgda_tests!(@layout fault_slow_completions, IBGDA_SLOW_COMPLETIONS, [$($case),*]);
    };
    (@layout $m:ident, $layout:ident, [$($case:ident),*]) => {
        mod $m {
            use super::*;
            $( #[test] fn $case() { if $layout.available() { suite::$case(&$layout) } } )*
        }
    };
}
suite_cases!(ibgda_tests);

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
