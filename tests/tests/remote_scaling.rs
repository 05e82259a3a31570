//! More blocks must never make remote traffic slower: a CI model of what made them slower on GPUs.
//!
//! The same 16 MiB go to a PE on another node (CPU backend, `rshmrun --nodes 2 -np 2`, the proxy
//! transport) in the two shapes of NVSHMEM's shmem_put_bw at 1 x 32 and 32 x 32: one stream of
//! 128 KiB puts, or 32 concurrent streams of 4 KiB puts (scenario `remote_scaling`,
//! tests/src/scaling.rs, each shape in a job of its own, every byte checked at the target).
//!
//! On a 2-core CI machine the CPU backend's times say little about a GPU target, where the cost was
//! per piece: the engine that this one replaced copied each received piece with its own copy-engine
//! call (about 10 us each on an H200) and settled every batch (a stream synchronization: 26 us at
//! 1 x 32, 242 us at 32 x 32), so 32 streams of small puts took 5 times longer than one stream of large
//! ones. This test therefore prices the target's own stage counters (`RSHMEM_PROXY_STATS`) at GPU
//! costs, the same prices for every engine, and requires the 32-stream shape to cost at most
//! `BOUND` x the one-stream shape:
//!   - each frame the target received: `FRAME_US` (its head read over PCIe and its apply);
//!   - each settle (a batch's wait for its copies): `SETTLE_US`;
//!   - each operation queued for device threads (`inbound_ops`): `INBOUND_US` (0.68 M/s measured);
//!   - each apply-kernel launch: `LAUNCH_US`;
//!   - the bytes, at one loopback TCP stream's rate (`BYTES_GBPS`).
//!
//! An engine that pays per piece fails (32 x as many frames); one that merges neighbouring puts
//! across blocks and applies them in order, without settles, passes. The CPU times of both shapes are
//! printed too.

mod common;

use common::{text, tool};
use std::collections::HashMap;
use std::process::{Command, Stdio};

const BOUND: f64 = 1.1;
const FRAME_US: f64 = 2.0;
const SETTLE_US: f64 = 26.0;
const INBOUND_US: f64 = 1.5;
const LAUNCH_US: f64 = 10.0;
const BYTES_GBPS: f64 = 4.0;

/// One job of one shape: its `remote_scaling:` line and the target's stage counters.
fn run_shape(shape: &str) -> (String, HashMap<String, f64>) {
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["--nodes", "2", "-np", "2", "--timeout", "120"]).arg(tool("rshmem-test-pe")).arg("remote_scaling");
    cmd.env("RSHMEM_REMOTE_TRANSPORT", "proxy").env("RSHMEM_BACKEND", "cpu").env("RSHMEM_SYMMETRIC_SIZE", "128m");
    cmd.env("RSHMEM_BOOTSTRAP_TIMEOUT", "10").env("RSHMEM_WAIT_TIMEOUT", "100").env("RSHMEM_PROXY_STATS", "1");
    cmd.env("RSHMEM_TEST_SCALE_SHAPE", shape).env("RSHMEM_TEST_SCALE_REPS", "2");
    for k in ["RSHMEM_DEBUG", "RSHMEM_TEST_SCALE_BYTES", "RSHMEM_TEST_SCALE_PIECE", "RSHMEM_TEST_NETNS", "RSHMEM_PROXY_LANES", "RSHMEM_PROXY_LANE_BYTES"] {
        cmd.env_remove(k);
    }
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    let t = text(&out);
    assert!(out.status.success(), "the remote_scaling job ({shape}) failed:\n{t}");
    let line = t.lines().find(|l| l.contains("PE 0: remote_scaling:")).unwrap_or_else(|| panic!("no remote_scaling line:\n{t}"));
    let stats = t.lines().find(|l| l.contains("rshmem proxy stats [PE 1]:")).unwrap_or_else(|| panic!("no stage counters of the target, PE 1:\n{t}"));
    let counters = stats
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| v.parse::<f64>().ok().map(|v| (k.to_string(), v)))
        .collect();
    (line.trim().to_string(), counters)
}

/// The shape's cost at the GPU prices above (microseconds), and how it was reached.
fn priced(c: &HashMap<String, f64>) -> (f64, String) {
    let n = |k: &str| c.get(k).copied().unwrap_or(0.0);
    let bytes = n("recv_bytes").max(16.0 * 1048576.0);
    let parts = [
        ("frames", n("frames") * FRAME_US),
        ("settles", n("settles") * SETTLE_US),
        ("inbound_ops", n("inbound_ops") * INBOUND_US),
        ("apply_launches", n("apply_launches") * LAUNCH_US),
        ("bytes", bytes / (BYTES_GBPS * 1e3)),
    ];
    let total = parts.iter().map(|p| p.1).sum();
    let how = parts.iter().map(|(k, us)| format!("{k} {:.0} -> {us:.0} us", if *k == "bytes" { bytes } else { n(k) })).collect::<Vec<_>>().join(", ");
    (total, how)
}

#[test]
fn thirty_two_streams_of_small_puts_cost_no_more_than_one_stream_at_gpu_prices() {
    let (one_line, one) = run_shape("one");
    let (many_line, many) = run_shape("many");
    let (t1, how1) = priced(&one);
    let (t32, how32) = priced(&many);
    let ratio = t32 / t1;
    println!("one stream: {one_line}\n  priced {t1:.0} us: {how1}\n32 streams: {many_line}\n  priced {t32:.0} us: {how32}\nratio {ratio:.3}");
    assert!(
        ratio <= BOUND,
        "32 streams of 4 KiB puts cost {ratio:.2} x one stream of 128 KiB puts at GPU prices (bound {BOUND}):\n  one stream {t1:.0} us: {how1}\n  32 streams {t32:.0} us: {how32}"
    );
}
