//! `rshmrun --diagnose` on the machine the tests run on: it prints one line per check, exits 0, and
//! says what a job spanning nodes would use. On a machine without an RDMA NIC (CI, the GPU machines)
//! it must say that there is no NIC and what the job falls back to. Every run is bounded.

mod common;

use common::collect;
use rshmem::transport::select::RemoteChoice;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::sleep;
use std::time::{Duration, Instant};

const RSHMRUN: &str = env!("CARGO_BIN_EXE_rshmrun");
/// The diagnosis must end well within this, even on a loaded machine (its own probes are bounded).
const LIMIT: Duration = Duration::from_secs(60);

/// The variables the diagnosis reads; each test sets the ones it means.
const READS: &[&str] = &[
    "RSHMEM_REMOTE_TRANSPORT",
    "RSHMEM_IB_HCA",
    "RSHMEM_BOOTSTRAP",
    "RSHMEM_BOOTSTRAP_IFNAME",
    "RSHMEM_PROXY_IFNAME",
];

struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs rshmrun with `args` and the environment `envs` (the variables of READS removed first).
fn rshmrun(args: &[&str], envs: &[(&str, &str)]) -> Ran {
    let mut cmd = Command::new(RSHMRUN);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for v in READS {
        cmd.env_remove(v);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().expect("start rshmrun");
    let (out, err) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let readers = [collect(child.stdout.take().unwrap(), Arc::clone(&out)), collect(child.stderr.take().unwrap(), Arc::clone(&err))];
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for rshmrun") {
            break s;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rshmrun {args:?} did not end within {LIMIT:?}; output so far:\n{}", String::from_utf8_lossy(&out.lock().unwrap()));
        }
        sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    for r in readers {
        r.join().unwrap();
    }
    let text = |b: &Arc<Mutex<Vec<u8>>>| String::from_utf8_lossy(&b.lock().unwrap()).into_owned();
    Ran { status, stdout: text(&out), stderr: text(&err), took }
}

fn diagnose(envs: &[(&str, &str)]) -> Ran {
    let r = rshmrun(&["--diagnose"], envs);
    assert_eq!(r.status.code(), Some(0), "rshmrun --diagnose {envs:?} failed:\n{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.is_empty(), "rshmrun --diagnose wrote to stderr:\n{}", r.stderr);
    // A header of two lines, then one tagged line per check.
    let checks: Vec<&str> = r.stdout.lines().skip(2).collect();
    assert!(checks.len() >= 7, "too few lines:\n{}", r.stdout);
    for l in &checks {
        assert!(["[PASS] ", "[FAIL] ", "[INFO] ", "[SKIP] "].iter().any(|t| l.starts_with(t)), "untagged line {l:?} in:\n{}", r.stdout);
    }
    r
}

/// The line of check `name` (the first one whose name starts so).
fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines().find(|l| l.get(7..).is_some_and(|rest| rest.starts_with(name))).unwrap_or_else(|| panic!("no {name:?} line in:\n{out}"))
}

/// Whether this machine has an RDMA device at all.
fn has_rdma_device() -> bool {
    std::fs::read_dir("/sys/class/infiniband").map(|d| d.count() > 0).unwrap_or(false)
}

#[test]
fn nothing_set_says_what_a_job_spanning_nodes_uses() {
    let r = diagnose(&[]);
    let out = &r.stdout;
    println!("{out}");
    assert!(r.took < Duration::from_secs(45), "took {:?}", r.took);
    // (With the `verbs` feature the verbs module names its own lines instead of "DevX and GPU-mapped UAR".)
    for name in ["RDMA devices", "GPUDirect RDMA", "GPU-NIC affinity", "bootstrap interface", "proxy interface"] {
        line(out, name);
    }
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("[INFO] remote transport: a job with PEs on other nodes and RSHMEM_REMOTE_TRANSPORT unset (auto) uses "), "{out}");
    if !cfg!(feature = "verbs") {
        let v = line(out, "DevX and GPU-mapped UAR");
        assert!(v.starts_with("[FAIL] ") && v.contains("`verbs` feature") && v.contains("cargo build --release --features rshmem/verbs"), "{v}");
    }
    if !has_rdma_device() {
        let l = line(out, "RDMA devices");
        assert!(l.starts_with("[FAIL] RDMA devices: no RDMA device (/sys/class/infiniband is empty or missing)"), "{l}");
        assert!(l.contains("modprobe mlx5_core mlx5_ib") && l.contains("use the proxy over TCP"), "{l}");
        assert!(line(out, "GPU-NIC affinity").starts_with("[SKIP] "), "{out}");
        assert!(last.contains(RemoteChoice::Proxy.describe()), "{last}");
        assert!(last.contains("no usable NIC: auto picks ibgda only on a NIC that passes every check above"), "{last}");
    }
    if !std::path::Path::new("/proc/driver/nvidia").exists() {
        // No NVIDIA driver: no GPU, which is normal here: SKIP lines, not FAIL.
        assert!(line(out, "GPUDirect RDMA").starts_with("[SKIP] GPUDirect RDMA: no GPU ("), "{out}");
        assert!(line(out, "GPU-NIC affinity").starts_with("[SKIP] GPU-NIC affinity: no GPU"), "{out}");
    }
    assert!(line(out, "bootstrap interface").contains("RSHMEM_BOOTSTRAP unset"), "{out}");
}

#[test]
fn ibgda_without_a_usable_nic_is_the_emulated_nic() {
    let r = diagnose(&[("RSHMEM_REMOTE_TRANSPORT", "ibgda")]);
    println!("{}", r.stdout);
    let last = r.stdout.lines().last().unwrap();
    assert!(last.starts_with("[INFO] remote transport: a job with PEs on other nodes and RSHMEM_REMOTE_TRANSPORT=ibgda uses ibgda"), "{last}");
    if !has_rdma_device() || !cfg!(feature = "verbs") {
        assert!(last.contains(RemoteChoice::IbgdaEmulated.describe()), "{last}");
    }
    let r = diagnose(&[("RSHMEM_REMOTE_TRANSPORT", "proxy")]);
    assert!(r.stdout.lines().last().unwrap().contains(RemoteChoice::Proxy.describe()), "{}", r.stdout);
    let r = diagnose(&[("RSHMEM_REMOTE_TRANSPORT", "none")]);
    assert!(r.stdout.lines().last().unwrap().contains(RemoteChoice::None.describe()), "{}", r.stdout);
}

#[test]
fn bad_values_are_fail_lines_not_errors() {
    let r = diagnose(&[("RSHMEM_REMOTE_TRANSPORT", "tcp")]);
    let l = line(&r.stdout, "remote transport");
    assert!(l.starts_with("[FAIL] ") && l.contains("\"tcp\" is not a transport") && l.contains("auto, none, proxy or ibgda"), "{l}");
    let r = diagnose(&[("RSHMEM_IB_HCA", "mlx5_0:x")]);
    let l = line(&r.stdout, "RDMA devices");
    assert!(l.starts_with("[FAIL] RDMA devices: RSHMEM_IB_HCA=\"mlx5_0:x\" is not valid"), "{l}");
    let r = diagnose(&[("RSHMEM_PROXY_IFNAME", "no-such-if0"), ("RSHMEM_BOOTSTRAP_IFNAME", "no-such-if0")]);
    let l = line(&r.stdout, "proxy interface");
    assert!(l.starts_with("[FAIL] ") && l.contains("RSHMEM_PROXY_IFNAME=no-such-if0: no such interface"), "{l}");
    let l = line(&r.stdout, "bootstrap interface");
    assert!(l.starts_with("[FAIL] ") && l.contains("RSHMEM_BOOTSTRAP_IFNAME=no-such-if0: no such interface"), "{l}");
}

#[test]
fn interfaces_follow_the_variables() {
    let r = diagnose(&[("RSHMEM_PROXY_IFNAME", "lo")]);
    let l = line(&r.stdout, "proxy interface");
    assert!(l.starts_with("[INFO] proxy interface: the proxy listens on 127.0.0.1 (lo): RSHMEM_PROXY_IFNAME=lo"), "{l}");
    let r = diagnose(&[("RSHMEM_BOOTSTRAP", "127.0.0.1:29500")]);
    assert!(line(&r.stdout, "bootstrap interface").contains("RSHMEM_BOOTSTRAP=127.0.0.1:29500 (127.0.0.1:29500): loopback"), "{}", r.stdout);
    assert!(line(&r.stdout, "proxy interface").contains("the proxy listens on 127.0.0.1"), "{}", r.stdout);
}

#[test]
fn diagnose_is_exclusive_and_documented() {
    for args in [&["--diagnose", "-np", "2", "true"][..], &["--diagnose", "--info"], &["--diagnose", "true"]] {
        let r = rshmrun(args, &[]);
        assert_eq!(r.status.code(), Some(2), "{args:?}:\n{}{}", r.stdout, r.stderr);
        assert!(r.stdout.is_empty(), "{args:?} ran something:\n{}", r.stdout);
    }
    let r = rshmrun(&["--help"], &[]);
    assert!(r.status.success());
    assert!(r.stdout.contains("      --diagnose") && r.stdout.contains("Diagnosis: `rshmrun --diagnose`"), "{}", r.stdout);
    let r = rshmrun(&[], &[]);
    assert!(r.stderr.contains("rshmrun --diagnose"), "the usage lists --diagnose:\n{}", r.stderr);
}
