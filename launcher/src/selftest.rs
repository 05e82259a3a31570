//! `rshmrun --selftest`: for a user on a new machine or cluster, a short run of every remote operation
//! over each remote transport this machine can use, between two simulated nodes (`--nodes 2 -np 2`:
//! every peer remote), with one line per check: pass or fail, what it measured, and what to do on a
//! failure.
//!
//! For each transport (IBGDA on the NIC when every `--diagnose` check passes, else IBGDA on the
//! emulated NIC; the proxy over verbs when this host's NIC is usable for host verbs, else a line saying
//! it is skipped and why; the TCP proxy) it runs, as jobs of this rshmrun:
//! - `rshmem-test-pe` with the remote scenarios (put/get of every size and scope, `p`/`g`, atomics,
//!   fence, put_signal, wait_until, barriers), each checked on both PEs;
//! - `rshmem-bench --cases lat,bw --quick`: p + quiet, g and fetch_add latency, block put bandwidth.
//!
//! Both programs ship beside rshmrun (`cargo build --release` puts them in `target/release`);
//! `RSHMRUN_SELFTEST_DIR` names another directory.

use rshmem::config::Vars;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The scenarios of `rshmem-test-pe` that the self-test runs over each transport.
const SCENARIOS: [&str; 9] = ["ring", "pg", "rma", "amo", "fence", "put_signal", "wait", "barrier", "host_rma"];
/// What to do when a check fails.
const FIX: &str = "rshmrun --diagnose checks the NIC and the network; RSHMEM_DEBUG=trace logs every remote request and frame";

fn line(ok: bool, what: &str) {
    println!("rshmrun selftest: {} {what}", if ok { "PASS" } else { "FAIL" });
}

/// Where the helper programs are: RSHMRUN_SELFTEST_DIR (in `vars`, rshmrun's environment), else beside
/// this rshmrun.
fn helpers_dir(vars: &Vars) -> PathBuf {
    if let Some(d) = vars.raw("RSHMRUN_SELFTEST_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf)).unwrap_or_else(|| PathBuf::from("."))
}

/// One transport the self-test checks: `RSHMEM_REMOTE_TRANSPORT`, the proxy's provider
/// (`RSHMEM_PROXY_PROVIDER`, None for the ibgda transport) and the label of its lines.
struct Transport {
    remote: &'static str,
    provider: Option<&'static str>,
    label: String,
}

/// Runs `program args` under this rshmrun on two simulated nodes over transport `t`; (succeeded,
/// output). `vars`: rshmrun's environment (a heap size set there is kept).
fn job(t: &Transport, program: &Path, args: &[&str], vars: &Vars) -> (bool, String) {
    let me = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("rshmrun"));
    let mut cmd = Command::new(me);
    cmd.args(["--nodes", "2", "-np", "2", "--timeout", "120"]).arg(program).args(args);
    cmd.env("RSHMEM_REMOTE_TRANSPORT", t.remote).stdin(Stdio::null());
    if let Some(p) = t.provider {
        // Asked for explicitly: a proxy over verbs that cannot be set up fails instead of passing over TCP.
        cmd.env("RSHMEM_PROXY_PROVIDER", p);
    }
    if vars.lookup(rshmem::config::env::SYMMETRIC_SIZE).is_none() {
        cmd.env("RSHMEM_SYMMETRIC_SIZE", "256m");
    }
    match cmd.output() {
        Ok(o) => (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))),
        Err(e) => (false, format!("cannot run rshmrun: {e}")),
    }
}

/// The last `n` lines of `text` that say something went wrong, for a failure line.
fn errors(text: &str, n: usize) -> String {
    let bad: Vec<&str> = text.lines().filter(|l| l.contains("error") || l.contains("FAILED") || l.contains("rshmrun:")).collect();
    let pick = if bad.is_empty() { text.lines().rev().take(n).collect::<Vec<_>>().into_iter().rev().collect() } else { bad[bad.len().saturating_sub(n)..].to_vec() };
    pick.join(" | ")
}

/// `value` of the `RESULT` line of `case` (and `scope`, `bytes`) in rshmem-bench's output.
fn result(text: &str, case: &str, scope: &str, bytes: u64) -> Option<f64> {
    text.lines().find_map(|l| {
        let f: Vec<(&str, &str)> = l.split_whitespace().filter_map(|w| w.split_once('=')).collect();
        let get = |k: &str| f.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        (get("case") == Some(case) && get("scope") == Some(scope) && get("bytes") == Some(&bytes.to_string())).then(|| get("value")?.parse().ok())?
    })
}

/// Runs the self-test; returns rshmrun's exit status (0: every check passed).
/// `vars`: rshmrun's environment.
pub fn run(vars: &Vars) -> i32 {
    let dir = helpers_dir(vars);
    let (pe, bench) = (dir.join("rshmem-test-pe"), dir.join("rshmem-bench"));
    let mut failed = 0;
    for p in [&pe, &bench] {
        if !p.is_file() {
            line(false, &format!("{} not found: the self-test runs it (cargo build --release builds it beside rshmrun; RSHMRUN_SELFTEST_DIR names another directory)", p.display()));
            failed += 1;
        }
    }
    if failed > 0 {
        return 1;
    }
    let nic = rshmem::transport::select::nic_usable(vars.get(rshmem::config::env::IB_HCA).as_deref());
    let ibgda = if nic { "ibgda (NIC)" } else { "ibgda (emulated NIC: no usable NIC here)" };
    let mut transports = vec![Transport { remote: "ibgda", provider: None, label: ibgda.into() }];
    match rshmem::transport::proxy::provider::verbs_usable(vars.get(rshmem::config::env::IB_HCA).as_deref()) {
        Ok(port) => transports.push(Transport { remote: "proxy", provider: Some("verbs"), label: format!("proxy (verbs, {port})") }),
        Err(why) => println!("rshmrun selftest: SKIP proxy (verbs): skipped: {why}"),
    }
    transports.push(Transport { remote: "proxy", provider: Some("tcp"), label: "proxy (TCP)".into() });
    println!("rshmrun selftest: two simulated nodes (--nodes 2 -np 2: every peer remote), {} transports", transports.len());
    for t in &transports {
        let label = t.label.as_str();
        let start = Instant::now();
        let (ok, out) = job(t, &pe, &SCENARIOS, vars);
        for s in SCENARIOS {
            let passed = (0..2).all(|i| out.contains(&format!("PE {i}: {s} ok")));
            if !passed {
                failed += 1;
            }
            line(passed, &format!("{label}: {s}"));
        }
        if !ok {
            failed += 1;
            line(false, &format!("{label}: the job failed after {:.1} s: {}; {FIX}", start.elapsed().as_secs_f64(), errors(&out, 3)));
            continue;
        }
        let (ok, out) = job(t, &bench, &["--cases", "lat,bw", "--quick", "--max-bytes", "1m"], vars);
        let p = result(&out, "p_lat", "-", 4);
        let g = result(&out, "g_lat", "-", 4);
        let fadd = result(&out, "amo_fetch_add_lat", "-", 4);
        let bw = result(&out, "put_bw", "block", 512 << 10);
        let measured = ok && p.is_some() && bw.is_some();
        if !measured {
            failed += 1;
        }
        let f = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.1}"));
        line(
            measured,
            &format!(
                "{label}: p + quiet {} us, g {} us, fetch_add {} us, block put of 512 KiB {} GB/s{}",
                f(p),
                f(g),
                f(fadd),
                bw.map_or("n/a".to_string(), |v| format!("{v:.2}")),
                if measured { String::new() } else { format!("; rshmem-bench: {}; {FIX}", errors(&out, 3)) }
            ),
        );
    }
    println!("rshmrun selftest: {}", if failed == 0 { "every check passed".to_string() } else { format!("{failed} checks failed") });
    i32::from(failed > 0)
}
