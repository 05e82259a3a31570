//! The proxy transport through real processes: `rshmrun --nodes 2 -np 4` with
//! `RSHMEM_REMOTE_TRANSPORT=proxy` (CPU backend, TCP between the PEs' proxies, and with `--netns` when
//! root: every node in its own network namespace). Scenarios in tests/src/remote.rs.

mod common;

use common::{text, tool};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `rshmrun --nodes 2 -np 4 [--netns] rshmem-test-pe SCENARIOS...` with the proxy transport. Returns
/// whether it succeeded, its output, and the wall-clock time (ms since the epoch) when it ended.
fn run_with(scenarios: &[&str], netns: bool, extra: &[(&str, &str)]) -> (bool, String, u128) {
    let deadline = Duration::from_secs(90);
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["--nodes", "2", "-np", "4", "--timeout", &deadline.as_secs().to_string()]);
    if netns {
        cmd.arg("--netns");
    }
    cmd.arg(tool("rshmem-test-pe")).args(scenarios);
    cmd.env("RSHMEM_REMOTE_TRANSPORT", "proxy").env("RSHMEM_BACKEND", "cpu").env("RSHMEM_SYMMETRIC_SIZE", "64m");
    cmd.env("RSHMEM_BOOTSTRAP_TIMEOUT", "10").env_remove("RSHMEM_TEST_NETNS").env_remove("RSHMEM_DEBUG");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    let end = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis();
    assert!(start.elapsed() < deadline + Duration::from_secs(10), "rshmrun overran its own --timeout");
    (out.status.success(), text(&out), end)
}

fn run(scenarios: &[&str]) -> (bool, String, u128) {
    run_with(scenarios, false, &[])
}

fn assert_ok(scenarios: &[&str], netns: bool) -> String {
    let (ok, text, _) = run_with(scenarios, netns, &[]);
    assert!(ok, "{scenarios:?} failed under the proxy transport:\n{text}");
    let all = ["ring", "pg", "rma", "amo", "contention", "lock", "fence", "put_signal", "wait", "barrier", "host_rma", "alloc", "teams"];
    let names: Vec<&str> = scenarios.iter().flat_map(|s| if *s == "all" { all.to_vec() } else { vec![*s] }).collect();
    for s in names {
        for pe in 0..4 {
            assert!(text.contains(&format!("[pe {pe}] PE {pe}: {s} ok")), "PE {pe} did not report {s} ok:\n{text}");
        }
    }
    assert!(!text.contains("rshmem error"), "a clean job reported an error:\n{text}");
    text
}

/// Whether the `--netns` part `what` can run (as root); otherwise says so in one line, or fails under
/// scripts/test.sh (`rshmem_test_support::skip`).
fn netns_allowed(what: &str) -> bool {
    if rshmem_test_support::is_root() {
        return true;
    }
    rshmem_test_support::skip(what, "--netns needs root (scripts/test.sh runs as root)");
    false
}

/// Host putmem/getmem from every PE to every PE (half of them through the proxy), 1 B to 16 MiB, and
/// the suite's own host_rma scenario.
#[test]
fn host_put_get_to_every_pe() {
    let text = assert_ok(&["proxy_rma", "host_rma"], false);
    assert!(text.contains("(2 through the proxy)"), "the scenario did not go through the proxy:\n{text}");
}

/// The whole multi-process suite (device kernels: p/g, put/get of every scope, AMOs, locks, fence,
/// put_signal, wait, device barrier; host RMA, allocation, teams) with half of every PE's peers on the
/// other node, reached through the proxy; with `--netns` too when root.
#[test]
fn whole_suite_across_two_nodes() {
    assert_ok(&["all"], false);
    if netns_allowed("whole_suite_across_two_nodes with --netns") {
        assert_ok(&["all"], true);
    }
}

/// init/finalize three times (the proxy's threads, connections and memory go and come back, no leak),
/// and a job of one PE (no peer to connect to).
#[test]
fn reinit_and_single_pe() {
    assert_ok(&["reinit", "host_rma"], false);
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["-np", "1", "--timeout", "60"]).arg(tool("rshmem-test-pe")).args(["reinit", "host_rma"]);
    cmd.env("RSHMEM_REMOTE_TRANSPORT", "proxy").env("RSHMEM_BACKEND", "cpu").env("RSHMEM_SYMMETRIC_SIZE", "64m");
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    let t = text(&out);
    assert!(out.status.success() && t.contains("PE 0: reinit ok") && t.contains("PE 0: host_rma ok"), "{t}");
}

/// The randomized soak against its reference model (every device call kind, fences, quiet, messages,
/// locks, barriers) with PEs on two nodes: ordering at the target (a GET is not overtaken by a write
/// behind it), completion, fetched values. Fixed seeds (reproducible), with --netns too when root.
#[test]
fn soak_across_two_nodes() {
    for (seed, netns) in [("20261123", false), ("2", false), ("18099131915878047159", false), ("7", true)] {
        if netns && !netns_allowed(&format!("soak_across_two_nodes with --netns (seed {seed})")) {
            continue;
        }
        let mut cmd = Command::new(tool("rshmrun"));
        cmd.args(["--nodes", "2", "-np", "4", "--timeout", "120"]);
        if netns {
            cmd.arg("--netns");
        }
        cmd.arg(tool("rshmem-soak")).args(["--seed", seed, "--ops", "30000", "--threads", "4", "--blocks", "2"]);
        cmd.env("RSHMEM_REMOTE_TRANSPORT", "proxy").env("RSHMEM_BACKEND", "cpu").env("RSHMEM_SYMMETRIC_SIZE", "16m").env("RSHMEM_WAIT_TIMEOUT", "60");
        let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
        let t = text(&out);
        assert!(out.status.success() && t.contains("rshmem-soak: PASSED"), "soak seed {seed} across two nodes failed:\n{t}");
    }
}

/// Uneven nodes and one PE per node: every PE pair across nodes gets its connection.
#[test]
fn other_node_layouts() {
    for (nodes, np) in [(3, 4), (4, 4)] {
        let mut cmd = Command::new(tool("rshmrun"));
        cmd.args(["--nodes", &nodes.to_string(), "-np", &np.to_string(), "--timeout", "90"]);
        cmd.arg(tool("rshmem-test-pe")).args(["proxy_rma", "proxy_ops", "barrier"]);
        cmd.env("RSHMEM_REMOTE_TRANSPORT", "proxy").env("RSHMEM_BACKEND", "cpu").env("RSHMEM_SYMMETRIC_SIZE", "64m");
        let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
        let t = text(&out);
        assert!(out.status.success(), "--nodes {nodes} -np {np} failed:\n{t}");
        assert_eq!(t.matches(" ok (").count(), 3 * np, "--nodes {nodes} -np {np}:\n{t}");
    }
}

/// Four PEs of a node put 16 MiB each to one PE of the next node (4 nodes of 4 PEs): each lands in
/// its own region with its own data.
#[test]
fn four_writers_per_target_on_four_nodes() {
    common::suite::host_rma_four_writers_per_target("proxy");
}

/// Requests as device code posts them: AMOs of every kind (atomic against concurrent p2p atomics on the
/// same word), fetched values and `g` through return slots, inline puts, signals, put_signal.
#[test]
fn device_style_requests() {
    assert_ok(&["proxy_ops"], false);
}

/// The same, with each node in its own network namespace (root only; CI is root).
#[test]
fn across_network_namespaces() {
    if !netns_allowed("across_network_namespaces") {
        return;
    }
    assert_ok(&["proxy_rma", "proxy_ops"], true);
}

/// PE 3 is SIGKILLed in the middle of a 64 MiB+ stream of puts from PE 0, with a put half-way (PE 3
/// checks that the put's first bytes have arrived and its last have not): the job ends within 5 s,
/// nonzero, and a PE's proxy names PE 3.
#[test]
fn a_killed_pe_ends_the_job_within_5_s_naming_it() {
    for netns in [false, true] {
        if netns && !netns_allowed("a_killed_pe_ends_the_job_within_5_s_naming_it with --netns") {
            continue;
        }
        let (ok, text, end) = run_with(&["proxy_kill"], netns, &[]);
        assert!(!ok, "the job succeeded although PE 3 was killed:\n{text}");
        let line = text.lines().find_map(|l| l.split("PE 3: killing itself at ").nth(1)).unwrap_or_else(|| panic!("PE 3 did not say when it killed itself:\n{text}"));
        let killed: u128 = line.split(',').next().and_then(|t| t.trim().parse().ok()).unwrap_or_else(|| panic!("no time in {line:?}:\n{text}"));
        // "…, inside put K from PE 0 (first 8 bytes from put A, last 8 from put B)": A != B, K = max(A, B),
        // K >= 5 (the flag follows put 4).
        let puts: Vec<u64> = line.split("put ").skip(1).filter_map(|w| w.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()).collect();
        let puts = [puts[..].to_vec(), vec![0; 4]].concat();
        assert!(
            line.contains("inside put") && puts[1] != puts[2] && puts[0] == puts[1].max(puts[2]) && puts[0] >= 5,
            "PE 3 was not killed with a put of the stream half-way: {line:?}:\n{text}"
        );
        assert!(text.contains("64 MiB sent to PE 3"), "PE 0 had not streamed 64 MiB before the kill:\n{text}");
        let took = end.saturating_sub(killed);
        assert!(took < 5000, "the job ended {took} ms after PE 3 was killed (at most 5 s):\n{text}");
        // Named by a PE's proxy (its connection to PE 3 broke with data in flight, or a later request
        // found PE 3 gone: logged by the engine, or returned to the program by the put that waited on
        // it, which the scenario prints as FAILED), or by rshmrun, which saw PE 3 die first: whichever
        // notices first ends the job, and under mpirun/srun the proxy's message is the one there is.
        let by_proxy = text.lines().any(|l| {
            l.contains("PE 3") && ((l.contains("rshmem error") && l.contains("proxy:")) || (l.contains("FAILED: putmem") && l.contains("rshmem_putmem: lane")))
        });
        let by_launcher = text.contains("rshmrun: PE 3 (pid") && text.contains("killed by signal SIGKILL");
        assert!(by_proxy || by_launcher, "neither a proxy error nor rshmrun named PE 3:\n{text}");
        assert!(!text.contains("kept putting") && !text.contains("a barrier without PE 3 completed"), "{text}");
    }
}

/// A stranger with a wrong key is refused; one with the job's key and a bad frame (a PUT into a watched
/// buffer with a non-zero `op` field, which a PUT does not use; a PUT past the end of the heap) is cut
/// off with an error naming the field, answered with it, and nothing is written. The job goes on.
#[test]
fn garbage_is_cut_off_and_writes_nothing() {
    let text = assert_ok_allowing_errors(&["proxy_garbage"]);
    assert!(text.contains("refused the connection") && text.contains("wrong job key"), "no refusal of the wrong key:\n{text}");
    assert!(text.contains("PE 2 sent a bad PUT frame: field `op` is 0x7"), "the bad field is not named:\n{text}");
    assert!(text.contains("beyond the") && text.contains("bytes backed here"), "the out-of-heap frame is not named:\n{text}");
    assert!(text.contains("PE 2: rogue bad frame answered: ") && text.contains("cut off a connection"), "{text}");
}

fn assert_ok_allowing_errors(scenarios: &[&str]) -> String {
    let (ok, text, _) = run(scenarios);
    assert!(ok, "{scenarios:?} failed:\n{text}");
    for pe in 0..4 {
        assert!(text.contains(&format!("[pe {pe}] PE {pe}: {} ok", scenarios[0])), "PE {pe} did not finish:\n{text}");
    }
    text
}

/// A bad RSHMEM_PROXY_SLOTS stops init naming the variable; a small ring (2 slots: posters wait for
/// free slots all the time) still works.
#[test]
fn ring_size() {
    let (ok, text, _) = run_with(&["host_rma"], false, &[("RSHMEM_PROXY_SLOTS", "1000")]);
    assert!(!ok && text.contains("RSHMEM_PROXY_SLOTS") && text.contains("power of two"), "{text}");
    let (ok, text, _) = run_with(&["proxy_ops", "host_rma"], false, &[("RSHMEM_PROXY_SLOTS", "2")]);
    assert!(ok, "a 2-slot ring failed:\n{text}");
}

/// `rshmrun --info` lists the transport's variables.
#[test]
fn info_lists_the_variables() {
    let out = Command::new(tool("rshmrun")).arg("--info").output().expect("rshmrun --info");
    let t = text(&out);
    for v in ["RSHMEM_REMOTE_TRANSPORT", "RSHMEM_PROXY_SLOTS", "RSHMEM_PROXY_IFNAME"] {
        assert!(t.contains(v), "--info does not list {v}:\n{t}");
    }
}

/// Warp and block puts over several channels (CPU backend, blocks of 80 threads: three warps): every
/// thread of a group stages its share into the group's channel, whatever warp it is in. rshmem-bench's
/// put bandwidth at every scope and its delivery check of the largest put (poisoned destination,
/// random data) run through 4 channels.
#[test]
fn group_puts_over_several_channels() {
    for fence in ["one", "every"] {
        group_puts(fence);
    }
    let out = Command::new(tool("rshmrun"))
        .args(["--nodes", "2", "-np", "2", "--timeout", "60"])
        .arg(tool("rshmem-bench"))
        .args(["--cases", "bw", "--quick", "--max-bytes", "4k"])
        .env("RSHMEM_REMOTE_TRANSPORT", "proxy")
        .env("RSHMEM_BACKEND", "cpu")
        .env("RSHMEM_PROXY_GROUP_FENCE", "all")
        .stdin(Stdio::null())
        .output()
        .expect("run rshmrun");
    let t = text(&out);
    assert!(!out.status.success() && t.contains("RSHMEM_PROXY_GROUP_FENCE") && t.contains("one or every"), "a bad RSHMEM_PROXY_GROUP_FENCE was not refused:\n{t}");
}

/// `group_puts_over_several_channels` with `RSHMEM_PROXY_GROUP_FENCE=fence`.
fn group_puts(fence: &str) {
    let out = Command::new(tool("rshmrun"))
        .args(["--nodes", "2", "-np", "2", "--timeout", "100"])
        .arg(tool("rshmem-bench"))
        .args(["--cases", "bw", "--grid", "3", "--threads", "80", "--quick", "--max-bytes", "64k"])
        .env("RSHMEM_REMOTE_TRANSPORT", "proxy")
        .env("RSHMEM_BACKEND", "cpu")
        .env("RSHMEM_SYMMETRIC_SIZE", "64m")
        .env("RSHMEM_PROXY_LANES", "4")
        .env("RSHMEM_PROXY_GROUP_FENCE", fence)
        .env_remove("RSHMEM_DEBUG")
        .stdin(Stdio::null())
        .output()
        .expect("run rshmrun");
    let t = text(&out);
    assert!(out.status.success(), "rshmem-bench over 4 channels (RSHMEM_PROXY_GROUP_FENCE={fence}) failed:\n{t}");
    for scope in ["thread", "warp", "block"] {
        assert!(t.contains(&format!("case=put_bw scope={scope} bytes=65536")), "no {scope} put of 64 KiB:\n{t}");
    }
    assert!(t.contains("verified on PE 1 (route=remote)"), "the delivery check did not run:\n{t}");
}

/// `RSHMEM_PROXY_STATS=1`: every PE prints its stage counters at finalize, and they count what the job
/// did: every PE drained the requests of its puts, AMOs and signals into frames and sent them, and
/// received, checked and acknowledged the frames of the others; a bad value stops init naming the
/// variable.
#[test]
fn stats_count_the_stages() {
    let (ok, text, _) = run_with(&["proxy_ops"], false, &[("RSHMEM_PROXY_STATS", "1")]);
    assert!(ok, "proxy_ops with RSHMEM_PROXY_STATS=1 failed:\n{text}");
    let field = |pe: usize, name: &str| -> u64 {
        let line = text.lines().find(|l| l.contains(&format!("rshmem proxy stats [PE {pe}]"))).unwrap_or_else(|| panic!("PE {pe} printed no stats:\n{text}"));
        let v = line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{name}="))).unwrap_or_else(|| panic!("no {name} in {line}"));
        v.parse().unwrap_or_else(|_| panic!("{name}={v} in {line}"))
    };
    for pe in 0..4 {
        assert!(field(pe, "requests") > 0, "PE {pe} drained no request:\n{text}");
        assert!(field(pe, "frames") > 0, "PE {pe} received no frame:\n{text}");
        assert!(field(pe, "sends") > 0 && field(pe, "sent_bytes") > 0, "PE {pe} sent nothing:\n{text}");
        assert!(field(pe, "recvs") > 0 && field(pe, "recv_bytes") > 0, "PE {pe} received nothing:\n{text}");
        assert!(field(pe, "acks") > 0, "PE {pe} acknowledged nothing:\n{text}");
    }
    let (ok, text, _) = run_with(&["proxy_ops"], false, &[("RSHMEM_PROXY_STATS", "maybe")]);
    assert!(!ok && text.contains("RSHMEM_PROXY_STATS"), "a bad RSHMEM_PROXY_STATS was not refused:\n{text}");
    let (ok, text, _) = run(&["proxy_ops"]);
    assert!(ok && !text.contains("rshmem proxy stats"), "stats printed without RSHMEM_PROXY_STATS:\n{text}");
}

/// The proxy's provider is named at init: TCP when asked for, and TCP with the reason under auto on
/// this machine (no RDMA NIC, or a build without the verbs feature); the scenarios pass either way.
#[test]
fn the_provider_is_named_and_tcp_without_a_nic() {
    for (value, why) in [("tcp", "RSHMEM_PROXY_PROVIDER=tcp"), ("auto", "")] {
        let (ok, t, _) = run_with(&["ring", "amo"], false, &[("RSHMEM_PROXY_PROVIDER", value), ("RSHMEM_DEBUG", "info")]);
        assert!(ok, "RSHMEM_PROXY_PROVIDER={value}:\n{t}");
        assert!(t.contains("proxy provider: tcp (") && t.contains(why), "RSHMEM_PROXY_PROVIDER={value}: the provider or its reason is not named:\n{t}");
        assert!(t.contains("[pe 3] PE 3: amo ok"), "{t}");
    }
}
