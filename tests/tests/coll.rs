//! Teams and collectives through real processes: the `coll*` scenarios of `rshmem-test-pe`
//! (tests/src/coll.rs) under `rshmrun`, on 1 to 4 PEs of one node, and on two simulated nodes (2 and
//! 4 PEs, the proxy transport between them; as root again with `--netns`). Every collective runs in
//! thread, warp and block scope from a kernel and from the host, on the predefined teams and on splits
//! of every kind, checked against a model; then seeded random cases; then mismatched collectives,
//! which must end with an error naming the problem, never a hang.

mod common;

use common::suite::{rshmrun, Layout, ONE_NODE, TWO_NODES_PROXY, TWO_NODES_PROXY_NETNS};
use common::text;
use std::time::{Duration, Instant};

const SCENARIOS: [&str; 3] = ["coll_teams", "coll", "coll_prop"];

/// Runs every collective scenario on `np` PEs of layout `l`: each PE must report each one ok.
fn all_collectives(l: &Layout, np: usize, env: &[(&str, &str)]) {
    if !l.available() {
        return;
    }
    // A hang becomes a failure naming the call (RSHMEM_WAIT_TIMEOUT) well before rshmrun's deadline.
    let mut env = env.to_vec();
    env.push(("RSHMEM_WAIT_TIMEOUT", "60"));
    let start = Instant::now();
    let o = rshmrun(l, np, &SCENARIOS, &env, Duration::from_secs(240));
    let t = text(&o);
    assert!(o.status.success(), "collectives on {np} PEs ({l:?}) failed:\n{t}");
    for pe in 0..np {
        for s in SCENARIOS {
            assert!(t.contains(&format!("[pe {pe}] PE {pe}: {s} ok")), "PE {pe} did not report {s} ok on {l:?}:\n{t}");
        }
    }
    assert!(t.contains("[pe 0] PE 0: coll_teams: 32 teams live, then the expected error: rshmem_team_split_strided: no free team slot"), "{t}");
    eprintln!("{np} PEs on {l:?}: {:.1} s", start.elapsed().as_secs_f64());
}

#[test]
fn one_pe() {
    all_collectives(&ONE_NODE, 1, &[]);
}
/// 40 threads a block: warp scope is warp 0 (32 threads) of two, thread scope the last thread.
#[test]
fn two_pes_two_warps() {
    all_collectives(&ONE_NODE, 2, &[("RSHMEM_TEST_THREADS", "40")]);
}
#[test]
fn three_pes() {
    all_collectives(&ONE_NODE, 3, &[]);
}
#[test]
fn four_pes() {
    all_collectives(&ONE_NODE, 4, &[]);
}
/// One PE on each node: every member of every team but the single ones is remote.
#[test]
fn two_nodes_two_pes() {
    all_collectives(&TWO_NODES_PROXY, 2, &[]);
}
#[test]
fn two_nodes_four_pes() {
    all_collectives(&TWO_NODES_PROXY, 4, &[]);
}
#[test]
fn two_nodes_four_pes_netns() {
    all_collectives(&TWO_NODES_PROXY_NETNS, 4, &[]);
}

// ---------------------------------------------------------------- mismatches

/// Runs mismatch scenario `s` on `np` PEs: the job must fail promptly (no hang) and some PE must print
/// one of `any_of` (each a whole part of the line after `rshmem: PE n: `).
fn mismatch_fails(l: &Layout, np: usize, s: &str, any_of: &[&str]) -> String {
    let start = Instant::now();
    let o = rshmrun(l, np, &[s], &[("RSHMEM_WAIT_TIMEOUT", "20")], Duration::from_secs(60));
    let t = text(&o);
    assert!(!o.status.success(), "{s} on {np} PEs ({l:?}) succeeded:\n{t}");
    assert!(start.elapsed() < Duration::from_secs(15), "{s}: took {:?} (a hang ended by a timeout?):\n{t}", start.elapsed());
    assert!(!t.contains("the mismatched collective completed") && !t.contains("wait timed out"), "{s}:\n{t}");
    let found = t.lines().any(|line| (0..np).any(|pe| any_of.iter().any(|m| line.starts_with(&format!("[pe {pe}] rshmem: PE {pe}: {m}")))));
    assert!(found, "{s} on {np} PEs ({l:?}): no PE said any of {any_of:#?}:\n{t}");
    t
}

const IS_BROADCAST: &str = "collective mismatch: the target PE (a member of this team) is in a broadcast of the team, or in this call with different arguments (root, count)";
const IS_FCOLLECT: &str = "collective mismatch: the target PE (a member of this team) is in an fcollect of the team, or in this call with a different count";
const IS_REDUCE: &str = "collective mismatch: the target PE (a member of this team) is in a reduction of the team, or in this call with a different count, type or operator";
const IS_REDUCESCATTER: &str = "collective mismatch: the target PE (a member of this team) is in a reducescatter of the team, or in this call with a different count, type or operator";
const IS_SYNC: &str = "collective mismatch: the target PE (a member of this team) is in a barrier or sync of the team";
const IS_SPLIT: &str = "collective mismatch: the target PE (a member of the parent team) is in a team split, or in this split with different arguments (start, stride, size)";

/// Every device-detected mismatch on layout `l` with `np` PEs.
fn device_mismatches(l: &Layout, np: usize) {
    let c = |call: &str, what: &str| format!("{call}: {what}");
    mismatch_fails(l, np, "coll_mm_root", &[&c("rshmem_broadcast (host)", IS_BROADCAST)]);
    mismatch_fails(l, np, "coll_mm_count", &[&c("rshmem_fcollect (host)", IS_FCOLLECT)]);
    mismatch_fails(l, np, "coll_mm_reduce_count", &[&c("rshmem_reduce (k_coll)", IS_REDUCE)]);
    mismatch_fails(l, np, "coll_mm_op", &[&c("rshmem_reduce (host)", IS_REDUCE)]);
    mismatch_fails(l, np, "coll_mm_type", &[&c("rshmem_reducescatter (k_coll)", IS_REDUCESCATTER)]);
    mismatch_fails(l, np, "coll_mm_kind", &[&c("rshmem_broadcast (k_coll)", IS_FCOLLECT), &c("rshmem_fcollect (k_coll)", IS_BROADCAST)]);
    mismatch_fails(l, np, "coll_mm_sync_reduce", &[&c("rshmem_team_sync (k_coll)", IS_REDUCE), &c("rshmem_reduce (k_coll)", IS_SYNC)]);
    mismatch_fails(l, np, "coll_mm_split_barrier", &[&c("rshmem_team_split (agreement)", IS_SYNC), &c("rshmem_barrier (host)", IS_SPLIT)]);
    mismatch_fails(l, np, "coll_mm_split_args_team", &[&c("rshmem_team_split (agreement)", IS_SPLIT)]);
    let t = mismatch_fails(
        l,
        np,
        "coll_bad_team",
        &["rshmem_broadcast (k_coll): invalid team (out of range, never created, or destroyed; target PE is the team handle) (target PE 6,"],
    );
    assert!(t.contains("expected error: rshmem_fcollect: team 6 does not exist (never created, or destroyed)"), "{t}");
}

/// Different roots, counts, operators, types and collectives on the PEs of one team, a split against
/// a barrier and a split with different arguments (non-world parents: the device agreement), and a
/// collective on a destroyed team: each ends the job at once with the device's message.
#[test]
fn device_mismatches_are_named() {
    device_mismatches(&ONE_NODE, 2);
    device_mismatches(&ONE_NODE, 3);
}
#[test]
fn device_mismatches_are_named_across_nodes() {
    device_mismatches(&TWO_NODES_PROXY, 4);
}

/// A split of the world against barrier_all, and a split of the world with different arguments: host
/// errors on every PE naming both calls / both PEs' arguments (the job goes on after the latter).
fn host_split_mismatches(l: &Layout, np: usize) {
    let o = rshmrun(l, np, &["coll_mm_split_barrier_all"], &[("RSHMEM_WAIT_TIMEOUT", "20")], Duration::from_secs(60));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for pe in 0..np {
        let line = t.lines().find(|l| l.starts_with(&format!("[pe {pe}] PE {pe}: expected error: "))).unwrap_or_else(|| panic!("PE {pe} gave no error:\n{t}"));
        assert!(line.contains("collective mismatch: PE 0 called rshmem_team_split_strided") && line.contains("called rshmem_barrier_all"), "{line}\n{t}");
        assert!(t.contains(&format!("[pe {pe}] PE {pe}: coll_mm_split_barrier_all ok")), "{t}");
    }
    let o = rshmrun(l, np, &["coll_mm_split_args"], &[("RSHMEM_WAIT_TIMEOUT", "20")], Duration::from_secs(60));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let (p0, others) = ("(start 1, stride 1, size 1)", "(start 0, stride 1, size 1)");
    for pe in 0..np {
        let want = if pe == 0 {
            format!("PE 0 passed {p0}, PE 1 passed {others}")
        } else {
            format!("PE {pe} passed {others}, PE 0 passed {p0}")
        };
        let line = format!("[pe {pe}] PE {pe}: expected error: rshmem_team_split_strided: PEs split the team with different arguments: {want}; every member of the parent must pass the same");
        assert!(t.contains(&line), "PE {pe} did not say {line:?}:\n{t}");
        assert!(t.contains(&format!("[pe {pe}] PE {pe}: coll_mm_split_args ok")), "{t}");
    }
}

#[test]
fn host_split_mismatches_are_errors() {
    host_split_mismatches(&ONE_NODE, 3);
    host_split_mismatches(&TWO_NODES_PROXY, 4);
}

/// PE 0 syncs the world team while the others sync another team of the same PEs: the teams cannot see
/// each other, so nothing detects a mismatch; RSHMEM_WAIT_TIMEOUT ends it naming the call.
#[test]
fn collectives_on_different_teams_end_by_the_wait_timeout() {
    let start = Instant::now();
    let o = rshmrun(&ONE_NODE, 2, &["coll_mm_teams"], &[("RSHMEM_WAIT_TIMEOUT", "2")], Duration::from_secs(60));
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(start.elapsed() < Duration::from_secs(15), "took {:?}:\n{t}", start.elapsed());
    assert!(t.contains("rshmem_team_sync (host): wait timed out (RSHMEM_WAIT_TIMEOUT)"), "{t}");
}

/// PE 0 splits a team other than the world (the agreement is a device collective of that team) while
/// PE 1 enters barrier_all (a host barrier): neither sees the other's call; RSHMEM_WAIT_TIMEOUT ends
/// it (the host barrier's names PE 0).
/// (The job status board records host collectives only, so it cannot say that PE 0 is in the split.)
#[test]
fn split_of_a_team_against_barrier_all_ends_by_the_wait_timeout() {
    let start = Instant::now();
    let o = rshmrun(&ONE_NODE, 2, &["coll_mm_split_team_barrier_all"], &[("RSHMEM_WAIT_TIMEOUT", "2")], Duration::from_secs(60));
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(start.elapsed() < Duration::from_secs(15), "took {:?}:\n{t}", start.elapsed());
    // Whichever wait times out first ends the job: PE 1's host barrier, or PE 0's device wait.
    assert!(
        t.contains("[pe 1] PE 1: FAILED: rshmem_barrier_all (host collective #5): PE 1 waited 2 s (RSHMEM_WAIT_TIMEOUT) for PE 0")
            || t.contains("[pe 0] rshmem: PE 0: rshmem_team_split (agreement): wait timed out (RSHMEM_WAIT_TIMEOUT)"),
        "{t}"
    );
}
