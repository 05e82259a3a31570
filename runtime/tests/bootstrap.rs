//! Bootstrap tests with real processes and sockets. Each PE is a child process running this test
//! binary again, restricted to the `probe` test (see there), with the variables rshmrun would give
//! it (without the listener fd: PE 0 binds the address itself); plus a unique-id test on threads.
//! Every wait is bounded: a hang fails the test.
//!
//! (Re-running the test binary instead of a separate `[[bin]]`: the rshmem library is also a cdylib,
//! so cargo gives its rlib no hashed file name, and a bin built with the dev profile's panic=abort
//! next to the tests' unwind build would overwrite the same `librshmem.rlib`.)

mod common;

use common::*;
use rshmem::bootstrap::{get_unique_id, Bootstrap, UniqueId};
use rshmem::config::Config;
use std::time::{Duration, Instant};

const KEY: &str = "00112233445566778899aabbccddeeff";
/// Set in a child: "<scenario> <arg>" for `probe` to run.
const PROBE_VAR: &str = "BOOTSTRAP_TEST_PROBE";

// ---- the PE side: runs in the child processes ----

/// Deterministic contents: PE `pe`'s data in round `round`.
fn data(pe: usize, round: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i.wrapping_mul(131) ^ pe.wrapping_mul(7) ^ round.wrapping_mul(13)) as u8).collect()
}

/// Payload sizes, 0 and 1 MiB included; PE-dependent so that sizes differ within one allgather.
fn size(pe: usize, round: usize) -> usize {
    const SIZES: [usize; 8] = [0, 1, 7, 100, 4096, 65_537, 1 << 20, 300_000];
    let s = SIZES[(round + pe) % SIZES.len()];
    if s == 1 << 20 {
        s
    } else {
        s + (pe * 3) % 5
    }
}

fn rounds(b: &Bootstrap, n: usize) -> Result<String, String> {
    let (me, npes) = (b.pe(), b.npes());
    for round in 0..n {
        let all = b.allgather("probe_allgather", &data(me, round, size(me, round))).map_err(|e| e.to_string())?;
        if all.len() != npes {
            return Err(format!("allgather gave {} parts", all.len()));
        }
        for (pe, part) in all.iter().enumerate() {
            if *part != data(pe, round, size(pe, round)) {
                return Err(format!("round {round}: wrong allgather data from PE {pe} ({} bytes)", part.len()));
            }
        }
        let root = round % npes;
        let len = size(root, round + 3);
        // Non-roots pass junk of another size: it must be ignored.
        let mine = if me == root { data(root, round, len) } else { vec![0xee; me] };
        let got = b.broadcast("probe_broadcast", root, &mine).map_err(|e| e.to_string())?;
        if got != data(root, round, len) {
            return Err(format!("round {round}: wrong broadcast data from root PE {root}"));
        }
        b.barrier("probe_barrier").map_err(|e| e.to_string())?;
    }
    Ok(format!("{n} rounds"))
}

/// Scenarios:
///   rounds N   N rounds of allgather (sizes differ per PE, 0 to 1 MiB), broadcast (rotating root)
///              and barrier, every byte checked
///   mismatch   PE 0 calls barrier("rshmem_barrier_all"), the others allgather("rshmem_malloc")
///   exit K     PE K exits right after init; the others enter barrier("rshmem_barrier_all")
///   bench N    N barriers; prints the mean time of one
///   init       init, one barrier, print the placement
fn scenario(name: &str, arg: usize) -> Result<String, String> {
    let b = Bootstrap::from_env().map_err(|e| e.to_string())?;
    let me = b.pe();
    match name {
        "rounds" => rounds(&b, arg),
        "mismatch" => {
            if me == 0 {
                b.barrier("rshmem_barrier_all").map_err(|e| e.to_string())?;
            } else {
                b.allgather("rshmem_malloc", &[1, 2, 3]).map_err(|e| e.to_string())?;
            }
            Ok("no error?".into())
        }
        "exit" => {
            if me == arg {
                println!("EXITING");
                std::process::exit(0);
            }
            b.barrier("rshmem_barrier_all").map_err(|e| e.to_string())?;
            Ok("no error?".into())
        }
        "bench" => {
            b.barrier("warmup").map_err(|e| e.to_string())?;
            let t = Instant::now();
            for _ in 0..arg {
                b.barrier("bench").map_err(|e| e.to_string())?;
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / arg.max(1) as f64;
            Ok(format!("barrier_us={us:.1}"))
        }
        "init" => {
            b.barrier("init").map_err(|e| e.to_string())?;
            Ok(format!(
                "pe={} npes={} local_pe={} local_npes={} node_pes={:?} key={:02x?}",
                b.pe(),
                b.npes(),
                b.local_pe(),
                b.local_npes(),
                b.node_pes(),
                &b.job_key()[..4]
            ))
        }
        other => Err(format!("unknown scenario {other:?}")),
    }
}

/// In a child process (PROBE_VAR set): runs one PE's scenario, prints "OK ..." and exits 0, or prints
/// "ERROR: <message>" and exits 1. In the test run itself: does nothing.
#[test]
fn probe() {
    let Ok(spec) = std::env::var(PROBE_VAR) else { return };
    let mut words = spec.split_whitespace();
    let name = words.next().unwrap_or("init").to_string();
    let arg = words.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    exit_with(scenario(&name, arg))
}

// ---- the launcher side ----


/// Starts one PE. `env` adds or overrides variables; launcher variables inherited from the
/// environment running the tests are removed.
fn spawn(pe: usize, npes: usize, port: u16, env: &[(&str, &str)], args: &[&str]) -> Proc {
    let mut cmd = probe_command();
    cmd.env(PROBE_VAR, args.join(" "))
        .env("RSHMEM_PE", pe.to_string())
        .env("RSHMEM_NPES", npes.to_string())
        .env("RSHMEM_BOOTSTRAP", format!("127.0.0.1:{port}"))
        .env("RSHMEM_JOB_KEY", KEY)
        .env("RSHMEM_BOOTSTRAP_TIMEOUT", "20")
        .env("RSHMEM_DEBUG", "warn");
    apply_env(&mut cmd, env);
    start(pe, cmd)
}


fn start_job(npes: usize, port: u16, env: &[(&str, &str)], args: &[&str]) -> Vec<Proc> {
    (0..npes).map(|pe| spawn(pe, npes, port, env, args)).collect()
}


#[test]
fn collectives_among_four_processes() {
    let port = free_port();
    let outs = wait_all(start_job(4, port, &[], &["rounds", "40"]), Duration::from_secs(120));
    assert_all_ok(&outs);
}

#[test]
fn rshmrun_style_local_numbering_is_accepted() {
    let port = free_port();
    let procs: Vec<Proc> = (0..3)
        .map(|pe| {
            let lp = pe.to_string();
            spawn(pe, 3, port, &[("RSHMEM_LOCAL_PE", &lp), ("RSHMEM_LOCAL_NPES", "3")], &["init"])
        })
        .collect();
    let outs = wait_all(procs, Duration::from_secs(60));
    assert_all_ok(&outs);
    for o in &outs {
        assert!(
            o.out.contains(&format!("pe={} npes=3 local_pe={} local_npes=3 node_pes=[0, 1, 2]", o.pe, o.pe)),
            "{}",
            o.out
        );
        assert!(o.out.contains("key=[00, 11, 22, 33]"), "{}", o.out);
    }
}

#[test]
fn missing_pe_fails_everyone_naming_it() {
    let port = free_port();
    let procs: Vec<Proc> =
        (0..3).map(|pe| spawn(pe, 4, port, &[("RSHMEM_BOOTSTRAP_TIMEOUT", "1")], &["init"])).collect();
    let outs = wait_all(procs, Duration::from_secs(30));
    for o in &outs {
        assert_eq!(o.code, Some(1), "PE {}: {}", o.pe, o.out);
        assert!(o.out.contains("timed out after 1 s waiting for PE 3 of 4"), "PE {}: {}", o.pe, o.out);
        assert!(o.out.contains("RSHMEM_BOOTSTRAP_TIMEOUT"), "PE {}: {}", o.pe, o.out);
        assert!(o.elapsed < Duration::from_secs(8), "PE {} took {:?}", o.pe, o.elapsed);
    }
}

#[test]
fn missing_pe0_is_reported_by_the_others() {
    let port = free_port();
    let procs: Vec<Proc> =
        (1..3).map(|pe| spawn(pe, 3, port, &[("RSHMEM_BOOTSTRAP_TIMEOUT", "0.5")], &["init"])).collect();
    let outs = wait_all(procs, Duration::from_secs(30));
    for o in &outs {
        assert_eq!(o.code, Some(1), "PE {}: {}", o.pe, o.out);
        assert!(
            o.out.contains(&format!("could not reach PE 0 at 127.0.0.1:{port} within 0.5 s")),
            "PE {}: {}",
            o.pe,
            o.out
        );
        assert!(o.elapsed < Duration::from_secs(8), "PE {} took {:?}", o.pe, o.elapsed);
    }
}

#[test]
fn wrong_job_key_is_refused_and_the_job_goes_on() {
    let port = free_port();
    let pe0 = spawn(0, 4, port, &[], &["rounds", "3"]);
    // A process of another job, claiming to be PE 1, gets there first.
    let intruder = spawn(1, 4, port, &[("RSHMEM_JOB_KEY", "ffeeddccbbaa99887766554433221100")], &["rounds", "3"]);
    let bad = wait_all(vec![intruder], Duration::from_secs(30));
    assert_eq!(bad[0].code, Some(1), "{}", bad[0].out);
    assert!(bad[0].out.contains("wrong job key"), "{}", bad[0].out);
    assert!(bad[0].out.contains(&format!("the process at 127.0.0.1:{port} did not prove that it knows the job key")), "{}", bad[0].out);
    // Then the real PEs 1..3.
    let mut procs = vec![pe0];
    procs.extend((1..4).map(|pe| spawn(pe, 4, port, &[], &["rounds", "3"])));
    let outs = wait_all(procs, Duration::from_secs(60));
    assert_all_ok(&outs);
    // PE 0 warned about the refused connection.
    assert!(outs[0].out.contains("wrong job key"), "{}", outs[0].out);
}

#[test]
fn mismatched_collectives_fail_every_pe() {
    let port = free_port();
    let outs = wait_all(start_job(4, port, &[], &["mismatch"]), Duration::from_secs(30));
    for o in &outs {
        assert_eq!(o.code, Some(1), "PE {}: {}", o.pe, o.out);
        assert!(o.out.contains("collective mismatch"), "PE {}: {}", o.pe, o.out);
        assert!(o.out.contains("rshmem_barrier_all") && o.out.contains("rshmem_malloc"), "PE {}: {}", o.pe, o.out);
    }
}

#[test]
fn a_pe_that_exits_is_named_by_the_others() {
    let port = free_port();
    let outs = wait_all(start_job(4, port, &[], &["exit", "2"]), Duration::from_secs(30));
    for o in &outs {
        if o.pe == 2 {
            assert_eq!(o.code, Some(0), "{}", o.out);
            continue;
        }
        assert_eq!(o.code, Some(1), "PE {}: {}", o.pe, o.out);
        assert!(o.out.contains("PE 2 (host"), "PE {}: {}", o.pe, o.out);
        assert!(o.out.contains("disconnected from the bootstrap during rshmem_barrier_all"), "PE {}: {}", o.pe, o.out);
        assert!(o.elapsed < Duration::from_secs(10), "PE {} took {:?}", o.pe, o.elapsed);
    }
}

#[test]
fn the_root_exiting_is_noticed_by_the_others() {
    let port = free_port();
    let outs = wait_all(start_job(3, port, &[], &["exit", "0"]), Duration::from_secs(30));
    for o in outs.iter().filter(|o| o.pe != 0) {
        assert_eq!(o.code, Some(1), "PE {}: {}", o.pe, o.out);
        assert!(o.out.contains("lost connection to the bootstrap root PE 0"), "PE {}: {}", o.pe, o.out);
        assert!(o.out.contains("rshmem_barrier_all"), "PE {}: {}", o.pe, o.out);
    }
}

#[test]
fn open_mpi_and_slurm_variables_place_the_pes() {
    // Open MPI: no RSHMEM_PE/NPES, only OMPI_* (and RSHMEM_BOOTSTRAP, which the user sets).
    let port = free_port();
    let procs: Vec<Proc> = (0..2)
        .map(|pe| {
            let r = pe.to_string();
            let env = [
                ("RSHMEM_PE", ""),
                ("RSHMEM_NPES", ""),
                ("OMPI_COMM_WORLD_RANK", r.as_str()),
                ("OMPI_COMM_WORLD_SIZE", "2"),
                ("OMPI_COMM_WORLD_LOCAL_RANK", r.as_str()),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ];
            spawn(pe, 2, port, &env, &["init"])
        })
        .collect();
    let outs = wait_all(procs, Duration::from_secs(60));
    assert_all_ok(&outs);
    for o in &outs {
        assert!(o.out.contains(&format!("pe={} npes=2 local_pe={} local_npes=2", o.pe, o.pe)), "{}", o.out);
    }
    // Slurm, local count computed by the bootstrap.
    let port = free_port();
    let procs: Vec<Proc> = (0..3)
        .map(|pe| {
            let r = pe.to_string();
            let env = [
                ("RSHMEM_PE", ""),
                ("RSHMEM_NPES", ""),
                ("SLURM_PROCID", r.as_str()),
                ("SLURM_NTASKS", "3"),
                ("SLURM_LOCALID", r.as_str()),
            ];
            spawn(pe, 3, port, &env, &["init"])
        })
        .collect();
    let outs = wait_all(procs, Duration::from_secs(60));
    assert_all_ok(&outs);
    for o in &outs {
        assert!(o.out.contains(&format!("pe={} npes=3 local_pe={} local_npes=3", o.pe, o.pe)), "{}", o.out);
    }
}

#[test]
fn inconsistent_launcher_numbering_is_an_error() {
    // The launcher puts each of the 3 PEs alone on its node, but they share one host.
    let port = free_port();
    let procs: Vec<Proc> = (0..3)
        .map(|pe| spawn(pe, 3, port, &[("RSHMEM_LOCAL_PE", "0"), ("RSHMEM_LOCAL_NPES", "1")], &["init"]))
        .collect();
    let outs = wait_all(procs, Duration::from_secs(30));
    for o in &outs {
        assert_eq!(o.code, Some(1), "PE {}: {}", o.pe, o.out);
        assert!(o.out.contains("node-local PE 0 of 1"), "PE {}: {}", o.pe, o.out);
        assert!(o.out.contains("disagree with where the PEs run"), "PE {}: {}", o.pe, o.out);
    }
}

#[test]
fn barrier_is_fast() {
    let port = free_port();
    let outs = wait_all(start_job(4, port, &[], &["bench", "2000"]), Duration::from_secs(120));
    assert_all_ok(&outs);
    for o in &outs {
        let us: f64 = o.out.split("barrier_us=").nth(1).unwrap().trim().parse().unwrap();
        eprintln!("PE {}: {us:.1} us per barrier", o.pe);
        // Well under 1 ms on an idle machine; generous here, as tests run in parallel.
        assert!(us < 5000.0, "PE {}: {us} us per barrier", o.pe);
    }
}

#[test]
fn unique_id_threads() {
    // The configuration of this process's environment, read once, as init reads it.
    let cfg = std::sync::Arc::new(Config::from_env().unwrap().0);
    let id = get_unique_id(&cfg).unwrap();
    let hex = id.to_hex();
    assert_eq!(UniqueId::from_hex(&hex).unwrap(), id);
    let threads: Vec<_> = (0..3)
        .map(|pe| {
            let (hex, cfg) = (hex.clone(), cfg.clone());
            std::thread::spawn(move || {
                // Each PE gets the id in text form, as from another launcher.
                let id = UniqueId::from_hex(&hex).unwrap();
                let b = Bootstrap::from_unique_id(&id, pe, 3, &cfg).unwrap();
                assert_eq!((b.pe(), b.npes(), b.local_npes()), (pe, 3, 3));
                let all = b.allgather("uid_allgather", &vec![pe as u8; pe * 1000]).unwrap();
                for (p, d) in all.iter().enumerate() {
                    assert_eq!(d, &vec![p as u8; p * 1000]);
                }
                assert_eq!(b.broadcast("uid_bcast", 2, &[pe as u8]).unwrap(), vec![2u8]);
                b.barrier("uid_barrier").unwrap();
                b.job_key()
            })
        })
        .collect();
    let keys: Vec<[u8; 16]> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(keys.iter().all(|k| *k == keys[0]) && keys[0] != [0; 16]);
}
