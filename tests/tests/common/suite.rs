//! THE definition of the multi-process suite: every case, once, run by `suite.rs` (one node, as
//! `rshmrun -np N`) and by `suite_nodes.rs` (`rshmrun --nodes 2 -np N` with
//! `RSHMEM_REMOTE_TRANSPORT=proxy`, and with `--netns` as root). A case is a function of the
//! [`Layout`] it runs on; [`suite_cases!`] lists them, split into the cases that run on every layout
//! and the few that are node-local by nature, each with its reason.

use super::{text, tool};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Where the PEs of a job run: one node (plain `rshmrun -np N`) or `nodes` simulated nodes whose PEs
/// reach each other through `remote` (RSHMEM_REMOTE_TRANSPORT), optionally in network namespaces.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub nodes: usize,
    pub netns: bool,
    pub remote: Option<&'static str>,
    /// More environment for every PE (the emulated NIC's fault modes).
    pub env: &'static [(&'static str, &'static str)],
}

pub const ONE_NODE: Layout = Layout { nodes: 1, netns: false, remote: None, env: &[] };
pub const TWO_NODES_PROXY: Layout = Layout { nodes: 2, netns: false, remote: Some("proxy"), env: &[] };
pub const TWO_NODES_PROXY_NETNS: Layout = Layout { nodes: 2, netns: true, remote: Some("proxy"), env: &[] };
/// IBGDA through the emulated mlx5 NIC (no NIC here): device threads post WQEs, the NIC carries them.
pub const TWO_NODES_IBGDA: Layout = Layout { nodes: 2, netns: false, remote: Some("ibgda"), env: &[] };
pub const TWO_NODES_IBGDA_NETNS: Layout = Layout { nodes: 2, netns: true, remote: Some("ibgda"), env: &[] };
/// IBGDA with `RSHMEM_IBGDA_FAULTS=none`: no fault, but every PE prints its NIC's counts at finalize,
/// WQEs included (which cases post work requests to another node, [`nic_counts`]).
pub const TWO_NODES_IBGDA_COUNTED: Layout = Layout { nodes: 2, netns: false, remote: Some("ibgda"), env: &[("RSHMEM_IBGDA_FAULTS", "none")] };
/// The same under each of the emulated NIC's fault modes (`RSHMEM_IBGDA_FAULTS`).
const fn ibgda_fault(faults: &'static [(&'static str, &'static str)]) -> Layout {
    Layout { nodes: 2, netns: false, remote: Some("ibgda"), env: faults }
}
pub const IBGDA_FETCH_DELAY: Layout = ibgda_fault(&[("RSHMEM_IBGDA_FAULTS", "delay=300us")]);
pub const IBGDA_DROPPED_DOORBELLS: Layout = ibgda_fault(&[("RSHMEM_IBGDA_FAULTS", "drop=2")]);
pub const IBGDA_INDEX_WRAP: Layout = ibgda_fault(&[("RSHMEM_IBGDA_FAULTS", "wrap=65520"), ("RSHMEM_IBGDA_QP_DEPTH", "64")]);
pub const IBGDA_FULL_SEND_QUEUE: Layout = ibgda_fault(&[("RSHMEM_IBGDA_FAULTS", "full=1ms"), ("RSHMEM_IBGDA_QP_DEPTH", "64")]);
pub const IBGDA_SLOW_COMPLETIONS: Layout = ibgda_fault(&[("RSHMEM_IBGDA_FAULTS", "slow=100us")]);

impl Layout {
    /// `rshmrun [--nodes K [--netns]] -np N --timeout T PROGRAM`, with this layout's environment and
    /// the CPU backend. The caller adds the program's arguments.
    pub fn command(&self, np: usize, deadline: Duration, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(tool("rshmrun"));
        if self.nodes > 1 {
            cmd.args(["--nodes", &self.nodes.to_string()]);
            // A broken node setup shows as PEs that cannot reach PE 0: fail in 10 s, not 30.
            cmd.env("RSHMEM_BOOTSTRAP_TIMEOUT", "10");
        }
        if self.netns {
            cmd.arg("--netns");
        }
        cmd.arg("-np").arg(np.to_string()).arg("--timeout").arg(deadline.as_secs().to_string());
        cmd.arg(program);
        cmd.env("RSHMEM_SYMMETRIC_SIZE", "64m").env("RSHMEM_BACKEND", "cpu");
        match self.remote {
            Some(t) => cmd.env("RSHMEM_REMOTE_TRANSPORT", t),
            None => cmd.env_remove("RSHMEM_REMOTE_TRANSPORT"),
        };
        cmd.env_remove("RSHMEM_IBGDA_FAULTS");
        for (k, v) in self.env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// False (after saying so in one line) where this layout cannot run here: `--netns` needs root.
    /// Under scripts/test.sh (root) it must run: there a skip fails (`rshmem_test_support::skip`).
    pub fn available(&self) -> bool {
        if self.netns && !is_root() {
            rshmem_test_support::skip(&format!("{self:?}"), "--netns needs root (scripts/test.sh runs as root)");
            return false;
        }
        true
    }
}

pub use rshmem_test_support::is_root;

/// Runs `rshmrun ... -np N rshmem-test-pe ARGS` on layout `l` with a deadline; returns the output.
pub fn rshmrun(l: &Layout, np: usize, args: &[&str], env: &[(&str, &str)], deadline: Duration) -> Output {
    let mut cmd = l.command(np, deadline, tool("rshmem-test-pe"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let out = output(&mut cmd);
    assert!(start.elapsed() < deadline + Duration::from_secs(10), "rshmrun overran its own --timeout");
    out
}

thread_local! {
    /// The text of every job run by this thread since [`recorded`] started, while it runs.
    static RECORD: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Runs a job of a case (every case runs its jobs through here, so that [`recorded`] sees them all).
pub fn output(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run rshmrun");
    RECORD.with(|r| {
        if let Some(jobs) = r.borrow_mut().as_mut() {
            jobs.push(text(&out));
        }
    });
    out
}

/// Runs `f` (a case) and returns the output of every job it ran, in order.
pub fn recorded(f: impl FnOnce()) -> Vec<String> {
    RECORD.with(|r| *r.borrow_mut() = Some(Vec::new()));
    struct Stop;
    impl Drop for Stop {
        fn drop(&mut self) {
            RECORD.with(|r| *r.borrow_mut() = None);
        }
    }
    let _stop = Stop;
    f();
    RECORD.with(|r| r.borrow_mut().take().unwrap_or_default())
}

/// What the PEs' emulated NICs said at finalize under `RSHMEM_IBGDA_FAULTS` ("... this PE's emulated NIC
/// injected delay 3, drop 0, wrap 1, full 0, slow 0, scan 0 (120 WQEs)"), summed over every such line of
/// `jobs`: fault mode (and "WQEs") -> count, and how many lines there were.
pub fn nic_counts(jobs: &[String]) -> (BTreeMap<String, u64>, usize) {
    const MARK: &str = "this PE's emulated NIC injected ";
    let mut sum = BTreeMap::new();
    let mut lines = 0;
    for line in jobs.iter().flat_map(|t| t.lines()).filter(|l| l.contains(MARK)) {
        lines += 1;
        let rest = &line[line.find(MARK).unwrap() + MARK.len()..];
        let (modes, wqes) = rest.split_once(" (").unwrap_or_else(|| panic!("no WQE count in {line:?}"));
        let wqes = wqes.strip_suffix(" WQEs)").and_then(|n| n.parse::<u64>().ok()).unwrap_or_else(|| panic!("bad WQE count in {line:?}"));
        *sum.entry("WQEs".to_string()).or_insert(0) += wqes;
        for item in modes.split(", ") {
            let (mode, n) = item.split_once(' ').unwrap_or_else(|| panic!("bad count {item:?} in {line:?}"));
            *sum.entry(mode.to_string()).or_insert(0) += n.parse::<u64>().unwrap_or_else(|_| panic!("bad count {item:?} in {line:?}"));
        }
    }
    (sum, lines)
}

/// Runs `scenario` on `np` PEs; every PE must report it ok. Returns the output.
pub fn expect_ok(l: &Layout, np: usize, scenario: &str) -> String {
    let o = rshmrun(l, np, &[scenario], &[], Duration::from_secs(240));
    let t = text(&o);
    assert!(o.status.success(), "scenario {scenario} failed on {l:?}:\n{t}");
    for pe in 0..np {
        assert!(t.contains(&format!("[pe {pe}] PE {pe}: {scenario} ok")), "PE {pe} did not report {scenario} ok on {l:?}:\n{t}");
    }
    t
}

/// Every case of the suite, in two groups: `everywhere` (run on every layout) and `one_node` (run by
/// suite.rs only; the reason is the string beside each). `$then!` receives both lists and makes one
/// `#[test]` per case it runs, calling the function of the same name in this module.
#[allow(unused_macros)]
macro_rules! suite_cases {
    ($then:ident) => {
        $then! {
            everywhere: [
                ring_shift_scenario, p_and_g_all_sizes, put_get_every_scope_size_alignment,
                atomics_every_operation, fetch_add_contention_distinct_values, amo_mixed_local_and_remote,
                compare_swap_lock_excludes, fence_orders_data_before_flag, put_signal_payload_before_signal,
                wait_until_six_comparisons, device_barriers, host_put_get, reinit_after_finalize,
                device_call_after_finalize_names_the_call, allocation_offsets_reuse_exhaustion,
                allocation_size_mismatch_named_on_every_pe, free_of_foreign_pointer_is_an_error, teams_and_ptr,
                mismatched_collectives_name_both_calls, exited_pe_fails_the_host_barrier_naming_it,
                finalize_against_barrier_all_is_a_mismatch_on_every_pe, stuck_pe_is_named_with_what_it_last_entered,
                rshmrun_timeout_names_the_pe_everyone_waits_for, bad_peer_payload_is_an_error_naming_the_peer,
                garbage_environment_stops_init_naming_the_variable, bad_pe_in_device_call_stops_with_message,
                address_outside_heap_in_device_call_stops_with_message, pe_killed_mid_run_ends_job_naming_it,
                ring_shift_example_under_rshmrun, cudarc_interop_example_under_rshmrun, job_status_board_names_the_stuck_pe,
            ],
            one_node: [
                // mpirun starts the PEs, not rshmrun: there are no simulated nodes to ask for.
                ring_shift_under_mpirun: "runs under mpirun, which has no simulated nodes",
            ],
        }
    };
}
#[allow(unused_imports)]
pub(crate) use suite_cases;

pub fn ring_shift_scenario(l: &Layout) {
    let t = expect_ok(l, 4, "ring");
    for i in 0..4 {
        assert!(t.contains(&format!("[pe {i}] {i}: received message {}", (i + 3) % 4)), "{t}");
    }
}
pub fn p_and_g_all_sizes(l: &Layout) {
    expect_ok(l, 4, "pg");
}
pub fn put_get_every_scope_size_alignment(l: &Layout) {
    expect_ok(l, 4, "rma");
}
pub fn atomics_every_operation(l: &Layout) {
    expect_ok(l, 4, "amo");
}
pub fn fetch_add_contention_distinct_values(l: &Layout) {
    expect_ok(l, 4, "contention");
}
/// PE 0's own threads fetch_add its counter (device atomics) while every other PE's threads do too;
/// across nodes the others' arrive through the proxy: the count is exact, every fetched value distinct.
pub fn amo_mixed_local_and_remote(l: &Layout) {
    let t = expect_ok(l, 4, "amo_mixed");
    assert!(t.contains("[pe 0] PE 0: amo_mixed: "), "PE 0 did not report the totals:\n{t}");
}
pub fn compare_swap_lock_excludes(l: &Layout) {
    expect_ok(l, 4, "lock");
}
pub fn fence_orders_data_before_flag(l: &Layout) {
    expect_ok(l, 4, "fence");
}
pub fn put_signal_payload_before_signal(l: &Layout) {
    expect_ok(l, 4, "put_signal");
}
pub fn wait_until_six_comparisons(l: &Layout) {
    expect_ok(l, 4, "wait");
}
pub fn device_barriers(l: &Layout) {
    expect_ok(l, 4, "barrier");
}
pub fn host_put_get(l: &Layout) {
    expect_ok(l, 4, "host_rma");
}
/// init -> work -> finalize -> init again, three times in each PE process, with kernels, a device
/// barrier and allocations of different sizes every cycle.
pub fn reinit_after_finalize(l: &Layout) {
    let t = expect_ok(l, 3, "reinit");
    for pe in 0..3 {
        for cycle in 0..3 {
            assert!(t.contains(&format!("[pe {pe}] PE {pe}: reinit cycle {cycle}:")), "PE {pe} did not finish cycle {cycle}:\n{t}");
        }
    }
}

/// After the last finalize the device state is cleared: a device call stops the PE naming the call
/// instead of handing out an address in the unmapped heap of the finished runtime.
pub fn device_call_after_finalize_names_the_call(l: &Layout) {
    let o = rshmrun(l, 2, &["reinit_stale"], &[], Duration::from_secs(60));
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(!t.contains("reinit_stale: after finalize the device library gave"), "stale address handed out:\n{t}");
    assert!(t.contains("rshmem_ptr") && t.contains("called before rshmem init completed"), "{t}");
}
pub fn allocation_offsets_reuse_exhaustion(l: &Layout) {
    let t = expect_ok(l, 4, "alloc");
    assert!(t.contains("symmetric heap exhausted"), "{t}");
}
pub fn allocation_size_mismatch_named_on_every_pe(l: &Layout) {
    let t = expect_ok(l, 3, "alloc_mismatch");
    for pe in 0..3 {
        assert!(t.contains(&format!("[pe {pe}] PE {pe}: expected error:")), "{t}");
    }
}
pub fn free_of_foreign_pointer_is_an_error(l: &Layout) {
    let t = expect_ok(l, 3, "free_bad");
    assert!(t.contains("not the start of a live symmetric allocation"), "{t}");
    assert!(t.contains("PE 1 passed a pointer"), "{t}");
}
/// The node team and `rshmem_ptr` agree with the layout: 4 PEs on one node, or 2 + 2 on two nodes.
pub fn teams_and_ptr(l: &Layout) {
    let t = expect_ok(l, 4, "teams");
    let per_node = 4 / l.nodes;
    for pe in 0..4 {
        let want = format!("[pe {pe}] PE {pe}: teams: node team PE {} of {per_node}, ", pe % per_node);
        assert!(t.contains(&want), "PE {pe} did not report {want:?}:\n{t}");
    }
}

pub fn mismatched_collectives_name_both_calls(l: &Layout) {
    let o = rshmrun(l, 4, &["mismatch_collective"], &[], Duration::from_secs(60));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for pe in 0..4 {
        assert!(t.contains(&format!("[pe {pe}] PE {pe}: mismatch_collective ok")), "{t}");
    }
}

pub fn exited_pe_fails_the_host_barrier_naming_it(l: &Layout) {
    let o = rshmrun(l, 3, &["peer_exits"], &[], Duration::from_secs(60));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for pe in [0, 2] {
        assert!(t.contains(&format!("[pe {pe}] PE {pe}: peer_exits ok")), "{t}");
    }
}

/// Issue 7: finalize on PE 0 against barrier_all on the others was not detected (3 of 3 runs) and the
/// job ended with status 0. Now every PE reports the mismatch, naming both calls, in every run.
pub fn finalize_against_barrier_all_is_a_mismatch_on_every_pe(l: &Layout) {
    for run in 0..4 {
        let np = 2 + run % 2;
        let o = rshmrun(l, np, &["finalize_mismatch"], &[], Duration::from_secs(60));
        let t = text(&o);
        assert!(!o.status.success(), "run {run}: rshmrun exited 0 after a collective mismatch:\n{t}");
        for pe in 0..np {
            let other = if pe == 0 { 1 } else { pe };
            // On one node the shared host barrier detects it; across nodes the bootstrap's barrier,
            // which says so first ("rshmem bootstrap: collective mismatch: ...").
            let head = format!("[pe {pe}] PE {pe}: finalize_mismatch detected: ");
            let line = t
                .lines()
                .find(|l| {
                    l.strip_prefix(&head).is_some_and(|m| {
                        m.trim_start_matches("rshmem bootstrap: ").starts_with("collective mismatch: PE 0 called rshmem_finalize")
                    })
                })
                .unwrap_or_else(|| panic!("run {run}: PE {pe} did not report the mismatch:\n{t}"));
            // One node: each PE names itself beside PE 0. Across nodes the bootstrap names the first
            // PE it found calling barrier_all, which may be another.
            let named = |q: usize| line.contains(&format!("PE {q} called rshmem_barrier_all"));
            assert!(if l.nodes == 1 { named(other) } else { (1..np).any(named) }, "run {run}: {line}\n{t}");
        }
        assert!(!t.contains("exited while"), "run {run}: blamed an exit instead of the mismatch:\n{t}");
    }
}

/// Issue 7: a live PE that does not come to a host barrier was never named; the others waited
/// forever. With RSHMEM_WAIT_TIMEOUT they fail within seconds, naming it and what it last entered.
pub fn stuck_pe_is_named_with_what_it_last_entered(l: &Layout) {
    let start = Instant::now();
    let o = rshmrun(l, 3, &["stuck_pe"], &[("RSHMEM_WAIT_TIMEOUT", "2")], Duration::from_secs(40));
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(start.elapsed() < Duration::from_secs(15), "took {:?}:\n{t}", start.elapsed());
    for pe in [0, 2] {
        let line = t
            .lines()
            .find(|l| l.starts_with(&format!("[pe {pe}] PE {pe}: stuck_pe named after")))
            .unwrap_or_else(|| panic!("PE {pe} did not fail in its barrier:\n{t}"));
        // Every layout: the barrier, the stuck PE, what it last entered and the variable are named.
        let at = line.find("rshmem_barrier_all").unwrap_or_else(|| panic!("{line}\n{t}"));
        let stuck = &line[at..];
        assert!(
            (stuck.contains("PE 1, which last entered rshmem_free") || (stuck.contains("waits for PE 1 of 3") && stuck.contains(") last entered rshmem_free")))
                && line.contains("RSHMEM_WAIT_TIMEOUT"),
            "{line}\n{t}"
        );
        // On one node the shared host barrier counts host collectives, as the status board does;
        // across nodes the bootstrap counts its own collectives, and the board is quoted beside.
        if l.nodes == 1 {
            assert!(
                line.contains("rshmem_barrier_all (host collective #3)") && line.contains("PE 1, which last entered rshmem_free (host collective #2)"),
                "{line}\n{t}"
            );
            // The shared host barrier also says where this PE's device synchronizations stand (a PE
            // that never arrives may be stuck in one): its count and what each PE announced to it.
            let words = format!("[pe {pe}] device synchronizations of the world team on this PE: ");
            let w = t.lines().find(|l| l.starts_with(&words)).unwrap_or_else(|| panic!("PE {pe} did not print its device synchronization words:\n{t}"));
            assert!(w.contains(" entered; last announced here by PE 0: ") && w.contains(", PE 2: "), "{w}\n{t}");
        } else {
            let board = format!("[pe {pe}] job status: PEs 0, 2 wait in rshmem_barrier_all (host collective #3) for PE 1, which last entered rshmem_free (host collective #2)");
            assert!(t.contains(&board), "PE {pe} did not quote the status board:\n{t}");
        }
    }
}

/// rshmrun's own --timeout (no RSHMEM_WAIT_TIMEOUT: the PEs would wait forever) names the PE everyone
/// waits for, read from the job status board it handed to the PEs.
pub fn rshmrun_timeout_names_the_pe_everyone_waits_for(l: &Layout) {
    let start = Instant::now();
    let o = rshmrun(l, 3, &["stuck_pe"], &[], Duration::from_secs(3));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(124), "{t}");
    assert!(start.elapsed() < Duration::from_secs(12), "took {:?}:\n{t}", start.elapsed());
    assert!(
        t.contains("rshmrun: stalled: PEs 0, 2 wait in rshmem_barrier_all (host collective #3) for PE 1, which last entered rshmem_free (host collective #2) and left it"),
        "rshmrun did not name the stuck PE:\n{t}"
    );
}

/// The job status board through real processes: the PEs open it from RSHMEM_STATUS_FD (here a board
/// this test makes, reopened through /proc by a shell in front of each PE, so that the test holds it
/// whatever rshmrun hands down), record every host collective, and a PE whose barrier times out quotes
/// the board's view of the whole job. A descriptor that is not open is an init error naming the variable.
pub fn job_status_board_names_the_stuck_pe(l: &Layout) {
    use std::os::fd::AsRawFd;
    let (board, fd) = rshmem::node::jobstatus::JobStatus::create(3).unwrap();
    let open_board = format!("exec 9<>/proc/{}/fd/{}; RSHMEM_STATUS_FD=9 exec \"$0\" \"$@\"", std::process::id(), fd.as_raw_fd());
    let run = |script: &str, scenario: &str| {
        output(l.command(3, Duration::from_secs(40), "sh").args(["-c", script]).arg(tool("rshmem-test-pe")).arg(scenario).env("RSHMEM_WAIT_TIMEOUT", "2"))
    };
    let start = Instant::now();
    let o = run(&open_board, "stuck_pe");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(start.elapsed() < Duration::from_secs(15), "took {:?}:\n{t}", start.elapsed());
    let stall = "PEs 0, 2 wait in rshmem_barrier_all (host collective #3) for PE 1, which last entered rshmem_free (host collective #2) and left it";
    for pe in [0, 2] {
        assert!(t.contains(&format!("[pe {pe}] job status: {stall}")), "PE {pe} did not quote the board:\n{t}");
    }
    let snap = board.snapshot();
    assert_eq!(snap.len(), 3, "{snap:?}");
    assert!(snap.iter().all(|s| s.pid != 0), "{snap:?}");
    assert_eq!((snap[1].seq, snap[1].call.as_str(), snap[1].inside), (2, "rshmem_free", false), "{snap:?}");
    for pe in [0, 2] {
        assert_eq!((snap[pe].seq, snap[pe].call.as_str(), snap[pe].inside), (3, "rshmem_barrier_all", true), "{snap:?}");
    }
    assert_eq!(board.describe_stall().as_deref(), Some(stall));

    let o = run("RSHMEM_STATUS_FD=77 exec \"$0\" \"$@\"", "init_c");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("rshmem_init: RSHMEM_STATUS_FD=\"77\": not an open file descriptor"), "{t}");
    assert!(!t.contains("PE -1"), "{t}");
}

/// Issue 7: a peer's 0-byte all-gather payload made PE 0 panic inside rshmem_init (the C entry point)
/// and abort with SIGABRT; an oversized one was sliced to its first 8 bytes and accepted. Both are now
/// errors naming the peer, returned by rshmem_init.
pub fn bad_peer_payload_is_an_error_naming_the_peer(l: &Layout) {
    for (scenario, bytes) in [("peer_payload_empty", 0usize), ("peer_payload_big", 1 << 20)] {
        let o = rshmrun(l, 2, &[scenario], &[], Duration::from_secs(60));
        let t = text(&o);
        assert!(
            t.contains(&format!("[pe 0] rshmem: PE 0: rshmem_init: PE 1 sent {bytes} bytes as its heap size in the all-gather (expected 8)")),
            "{scenario}: no error naming PE 1:\n{t}"
        );
        assert!(t.contains("[pe 0] PE 0: rshmem_init returned 1"), "{scenario}: rshmem_init did not return an error:\n{t}");
        assert!(t.contains("PE 0 (pid") && t.contains("exited with code 1"), "{scenario}: not a normal error exit:\n{t}");
        assert!(!t.contains("SIGABRT") && !t.contains("panicked"), "{scenario}: {t}");
        assert!(!o.status.success(), "{scenario}: {t}");
    }
}

/// Issue 7: garbage RSHMEM_WAIT_TIMEOUT / RSHMEM_DEBUG were silently ignored; errors after a failed init
/// said "PE -1". Now init stops naming the variable and its value, with the real PE number.
pub fn garbage_environment_stops_init_naming_the_variable(l: &Layout) {
    for (var, value) in [("RSHMEM_WAIT_TIMEOUT", "soon"), ("RSHMEM_DEBUG", "loud"), ("RSHMEM_SYMMETRIC_SIZE", "lots")] {
        let o = rshmrun(l, 2, &["init_c"], &[(var, value)], Duration::from_secs(60));
        let t = text(&o);
        assert!(!o.status.success(), "{var}={value} was accepted:\n{t}");
        assert!(!t.contains("init_c ok"), "{var}={value} was accepted:\n{t}");
        let named = (0..2).any(|pe| {
            t.lines().any(|l| l.starts_with(&format!("[pe {pe}] rshmem: PE {pe}: rshmem_init: ")) && l.contains(&format!("{var}=\"{value}\"")))
        });
        assert!(named, "{var}={value}: no error naming the variable and the PE:\n{t}");
        assert!(!t.contains("PE -1"), "{var}={value}: {t}");
    }
    // An unknown RSHMEM_* name is a warning with the closest known name; the job runs.
    let o = rshmrun(l, 2, &["init_c"], &[("RSHMEM_WAIT_TIMOUT", "2")], Duration::from_secs(60));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("RSHMEM_WAIT_TIMOUT is not a variable rshmem reads") && t.contains("did you mean RSHMEM_WAIT_TIMEOUT?"), "{t}");
    assert!(t.contains("[pe 1] PE 1: init_c ok"), "{t}");
}

pub fn bad_pe_in_device_call_stops_with_message(l: &Layout) {
    let o = rshmrun(l, 2, &["bad_pe"], &[], Duration::from_secs(60));
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("rshmem_p") && t.contains("PE number out of range"), "{t}");
    assert!(!t.contains("completed instead of stopping"), "{t}");
}

pub fn address_outside_heap_in_device_call_stops_with_message(l: &Layout) {
    let o = rshmrun(l, 2, &["bad_addr"], &[], Duration::from_secs(60));
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("rshmem_p") && t.contains("not inside the symmetric heap"), "{t}");
}

pub fn pe_killed_mid_run_ends_job_naming_it(l: &Layout) {
    // A PE that dies after init: the job ends promptly, the failed PE is named.
    let mut cmd = l.command(3, Duration::from_secs(60), "sh");
    cmd.args(["-c", "if [ $RSHMEM_PE = 2 ]; then sleep 0.5; kill -9 $$; fi; sleep 30"]);
    let start = Instant::now();
    let o = output(&mut cmd);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(start.elapsed() < Duration::from_secs(8), "took {:?}", start.elapsed());
    assert!(t.contains("PE 2") && t.contains("SIGKILL"), "{t}");
}

/// The README's command: `rshmrun [--nodes 2] -np 4 target/release/ring_shift`.
pub fn ring_shift_example_under_rshmrun(l: &Layout) {
    let o = output(l.command(4, Duration::from_secs(60), tool("ring_shift")).env("RSHMEM_SYMMETRIC_SIZE", "16m"));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for i in 0..4 {
        assert!(t.contains(&format!("[pe {i}] {i}: received message {}", (i + 3) % 4)), "{t}");
    }
}

/// The cudarc interoperability example (examples/src/cudarc_interop.rs): on GPUs a cudarc kernel, an
/// rshmem reduction on the cudarc stream and a cudarc copy; on the CPU backend its host path. Every PE
/// checks every sum.
pub fn cudarc_interop_example_under_rshmrun(l: &Layout) {
    let o = output(l.command(4, Duration::from_secs(60), tool("cudarc_interop")).env("RSHMEM_SYMMETRIC_SIZE", "16m"));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for i in 0..4 {
        assert!(t.contains(&format!("[pe {i}] PE {i}: cudarc interop ok (")), "{t}");
    }
}

/// `proxy_rma` on 4 nodes of 4 PEs through `transport`: the 4 PEs of each node put 16 MiB each to the
/// same PE of the next node, each into its own region there, with data of its own; every target
/// checks all four. (On 2 nodes of 2 PEs two writers per target hid writers sharing one buffer.)
pub fn host_rma_four_writers_per_target(transport: &'static str) {
    let l = Layout { nodes: 4, netns: false, remote: Some(transport), env: &[] };
    // 4 regions of 16 MiB on every PE.
    let o = rshmrun(&l, 16, &["proxy_rma"], &[("RSHMEM_SYMMETRIC_SIZE", "96m")], Duration::from_secs(120));
    let t = text(&o);
    assert!(o.status.success(), "proxy_rma on 4 nodes of 4 PEs through {transport} failed:\n{t}");
    for pe in 0..16 {
        let line = t
            .lines()
            .find(|l| l.starts_with(&format!("[pe {pe}] PE {pe}: proxy_rma: ")))
            .unwrap_or_else(|| panic!("PE {pe} did not report proxy_rma:\n{t}"));
        let next = (pe / 4 + 1) % 4 * 4;
        assert!(line.contains(&format!("16 MiB to PE {next} (region {} of 4 there)", pe % 4)), "PE {pe}: {line}\n{t}");
        let writers = if pe % 4 == 0 { format!("{:?}", ((pe + 12) % 16..(pe + 12) % 16 + 4).collect::<Vec<_>>()) } else { "[]".into() };
        assert!(line.contains(&format!("16 MiB from PEs {writers} checked")), "PE {pe}: {line}\n{t}");
        assert!(t.contains(&format!("[pe {pe}] PE {pe}: proxy_rma ok")), "{t}");
    }
}

/// The ring shift under Open MPI's mpirun (rank from OMPI_COMM_WORLD_RANK, rendezvous from
/// RSHMEM_BOOTSTRAP). Skipped, saying so in one line, where mpirun is not installed, and a failure then
/// under scripts/test.sh (whose scripts/setup.sh installs it).
pub fn ring_shift_under_mpirun(l: &Layout) {
    assert_eq!(l.nodes, 1, "mpirun runs one node here");
    let which = Command::new("sh").args(["-c", "command -v mpirun"]).output().expect("run sh");
    if !which.status.success() {
        return rshmem_test_support::skip("ring_shift_under_mpirun", "mpirun is not installed (scripts/setup.sh installs Open MPI)");
    }
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let o = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "4", "-x", "RSHMEM_BOOTSTRAP", "-x", "RSHMEM_JOB_KEY", "-x", "RSHMEM_SYMMETRIC_SIZE", "-x", "RSHMEM_BACKEND"])
        .arg(tool("ring_shift"))
        .env("RSHMEM_BOOTSTRAP", format!("127.0.0.1:{port}"))
        // Outside rshmrun a job of several PEs needs a secret key (README: export RSHMEM_JOB_KEY=...).
        .env("RSHMEM_JOB_KEY", {
            let mut k = [0u8; 16];
            std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut k).unwrap();
            k.iter().map(|b| format!("{b:02x}")).collect::<String>()
        })
        .env("RSHMEM_SYMMETRIC_SIZE", "16m")
        .env("RSHMEM_BACKEND", "cpu")
        .env("OMPI_MCA_plm_rsh_agent", "")
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "mpirun ring shift failed:\n{t}");
    for i in 0..4 {
        assert!(t.contains(&format!("{i}: received message {}", (i + 3) % 4)), "{t}");
    }
}
