//! rshmem-onstream-bench: what one on-stream put and one on-stream all-reduce cost when called from
//! Rust, the baseline of the Python package's benchmark (python/bench/overhead.sh runs both and sets
//! them side by side). For 4 B, 64 KiB and 16 MiB:
//!
//! - `put` (`rshmem::cuda::putmem_on_stream` to the next PE; the CPU backend's blocking put there), and
//! - `allreduce` (`SymSlice::reduce_on_stream`, float32 sum over the world team),
//!
//! each called N times back to back on the default stream after a warm-up: `issue_us` is the host time
//! per call until the last one returned (what a caller pays to enqueue), `per_call_us` the time per
//! call until the stream has run them all, and `GBps` the bytes per call over that. PE 0 prints
//! `rust.OP.SIZE.METRIC: value` lines; the Python script prints `python.` lines measured the same way.
//!
//!     rshmrun -np 2 target/release/rshmem-onstream-bench [--quick]

use rshmem::coll::{ReduceOp, Team};
use rshmem::cuda::Stream;
use rshmem::SymSlice;
use std::time::Instant;

const SIZES: [(usize, &str); 3] = [(4, "4B"), (64 << 10, "64KiB"), (16 << 20, "16MiB")];

/// Calls per measurement for a size (fewer with --quick).
fn calls(bytes: usize, quick: bool) -> usize {
    let n = match bytes {
        b if b <= 4 => 2000,
        b if b <= 64 << 10 => 1000,
        _ => 20,
    };
    if quick { (n / 20).max(2) } else { n }
}

fn sync(gpu: bool) -> Result<(), rshmem::Error> {
    if gpu {
        Stream::DEFAULT.synchronize()?;
    }
    Ok(())
}

/// Runs `f` `n` times after a warm-up of `n / 10 + 1` calls; (issue, complete) seconds per call.
fn time(gpu: bool, n: usize, mut f: impl FnMut() -> Result<(), rshmem::Error>) -> Result<(f64, f64), rshmem::Error> {
    for _ in 0..n / 10 + 1 {
        f()?;
    }
    sync(gpu)?;
    rshmem::barrier_all()?;
    let t0 = Instant::now();
    for _ in 0..n {
        f()?;
    }
    let issued = t0.elapsed().as_secs_f64();
    sync(gpu)?;
    let done = t0.elapsed().as_secs_f64();
    rshmem::barrier_all()?;
    Ok((issued / n as f64, done / n as f64))
}

fn main() -> Result<(), rshmem::Error> {
    let quick = std::env::args().any(|a| a == "--quick");
    rshmem::init()?;
    let (me, npes) = (rshmem::my_pe(), rshmem::n_pes());
    let gpu = rshmem::backend_name()? == "cuda";
    let max = SIZES.iter().map(|s| s.0).max().unwrap();
    let dst = SymSlice::<f32>::zeroed(max / 4)?;
    let src = SymSlice::<f32>::zeroed(max / 4)?;
    let peer = (me + 1) % npes;
    let mut lines = Vec::new();
    for (bytes, name) in SIZES {
        let n = calls(bytes, quick);
        let (d, s) = (dst.as_ptr() as *mut u8, src.as_ptr() as *const u8);
        let (issue, done) = time(gpu, n, || {
            // SAFETY: both are live symmetric allocations of at least `bytes` bytes, freed only after
            // the stream has run everything (sync above); the default stream is always valid.
            unsafe {
                if gpu {
                    rshmem::cuda::putmem_on_stream(d, s, bytes, peer, Stream::DEFAULT)
                } else {
                    rshmem::putmem(d, s, bytes, peer)
                }
            }
        })?;
        lines.push(format!("rust.put.{name}.issue_us: {:.3}", issue * 1e6));
        lines.push(format!("rust.put.{name}.per_call_us: {:.3}", done * 1e6));
        lines.push(format!("rust.put.{name}.GBps: {:.3}", bytes as f64 / done / 1e9));
        let elems = bytes / 4;
        let (rd, rs) = (SymSlice::<f32>::zeroed(elems)?, SymSlice::<f32>::zeroed(elems)?);
        let (issue, done) = time(gpu, n, || rd.reduce_on_stream(Team::WORLD, ReduceOp::Sum, &rs, Stream::DEFAULT))?;
        lines.push(format!("rust.allreduce.{name}.issue_us: {:.3}", issue * 1e6));
        lines.push(format!("rust.allreduce.{name}.per_call_us: {:.3}", done * 1e6));
        lines.push(format!("rust.allreduce.{name}.GBps: {:.3}", bytes as f64 / done / 1e9));
        rd.free()?;
        rs.free()?;
    }
    if me == 0 {
        println!("rust.backend: {}", rshmem::backend_name()?);
        println!("rust.n_pes: {npes}");
        for l in lines {
            println!("{l}");
        }
    }
    dst.free()?;
    src.free()?;
    rshmem::finalize()
}
