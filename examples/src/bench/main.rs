//! rshmem-bench: the cases of NVSHMEM's perftests between PE 0 and PE 1, printed as
//! `RESULT lib=rshmem case=... scope=... bytes=... grid=... threads=... value=... unit=...` lines that
//! `bench/compare.py` sets beside `bench/nvshmem/nvshmem_perf.cu`'s (same cases, same parameters).
//! Method: warm-up, then the median of R timed repeats (device events on GPUs), random source data,
//! poisoned destinations, and the 256 MiB put checked for delivery.
//!
//!     rshmrun [--nodes 2] -np 2 target/release/rshmem-bench [--grid G] [--threads T] [--quick]
//!         [--max-bytes N] [--peer P] [--cases LIST] [--rate-...] [--quiet-...]
//!
//! The pair measured is PE 0 and its peer: `--peer P`, by default the first PE that PE 0 cannot map
//! (another node: the remote transport, e.g. `RSHMEM_REMOTE_TRANSPORT=proxy`), else PE 1. Each RESULT
//! line says `route=p2p` or `route=remote`. The analysis variants that store through a pointer from
//! `rshmem_ptr` (x_*) need a mapped peer and are left out, saying so, for a remote one.
//!
//! The `bw` section also measures the block rows' hardware bounds between PE 0 and a mapped peer, in
//! the same run: `x_put_bw_deep8` / `x_get_bw_deep8` (scope block), the raw copy kernel `x_bw_deep`
//! (16-byte copies through the peer's address, no library call) with the block rows' launch shape at
//! 8, 16, 32 and 64 KiB (and --max-bytes from 16 MiB on; the block rows run at these sizes too); and
//! on GPUs `ce_put_bw` / `ce_get_bw` (scope `-`), the copy engine (`cuMemcpyDtoDAsync` through the
//! peer's address, timed with events on the default stream) at the bandwidth sizes from 8 MiB on.
//! Same iteration counts and median as the bandwidth rows; `bench/hw_bounds.py` sets the block rows
//! against them.
//!
//! `--cases` picks the sections (comma-separated; default `bw,lat,pingpong,barrier,all_pairs,host`,
//! `all` adds the two below):
//! - `rate` (the message rate): thread 0 of each of 1, 32 and 132 blocks (`--rate-grids`)
//!   issues `putmem_nbi` of 8 B, 64 B, 512 B and 4 KiB (`--rate-sizes`), and `p` of 8 bytes, back to back
//!   to the peer, then one quiet; `--rate-ops` operations per launch in all (default 20000 to another
//!   node, 10x that to a mapped one). Cases `msg_rate_put` / `msg_rate_p`, operations per second
//!   (`Mops`, 10^6/s) over the whole launch, the quiet included. The destination slots are poisoned
//!   before and checked on the peer after each case.
//! - `quiet` (the every-thread-quiet kernel): `--quiet-grid` x `--quiet-threads` (32 x 1024 on
//!   GPUs), each block makes `--quiet-calls` (100) `putmem_nbi_block` calls, `--quiet-sizes` (1 MiB,
//!   16 MiB, 256 MiB) in all per launch; then every thread quiets (`quiet_bw_all`), thread 0 of each
//!   block (`quiet_bw_block`), or thread 0 of the last block to arrive (`quiet_bw_one`, the one quiet of
//!   the grid). GB/s; the data is checked on the peer after each case.
//!
//! One file per section (`bw`, `lat`, `pingpong`, `barrier`, `all_pairs`, `host`, `rate`, `quiet`, and
//! `posting` for `--posting`); `cli` holds the command line, `harness` what the sections share. `main`
//! sets up the pair and the buffers and runs the chosen sections in that order.

mod all_pairs;
mod barrier;
mod bw;
mod cli;
mod harness;
mod host;
mod lat;
mod pingpong;
mod posting;
mod quiet;
mod rate;

use clap::Parser;
use cli::Cli;
use harness::{median, pe_data, result, Ctx, Kernels, REP_PAUSE_US};
use rshmem::kernels::LaunchConfig;
use rshmem::{Sym, SymSlice};
use std::time::Instant;

fn main() -> Result<(), rshmem::Error> {
    let cli = Cli::parse();
    REP_PAUSE_US.store(cli.rep_pause_us, std::sync::atomic::Ordering::Relaxed);
    // As the NVSHMEM side does: create the CUDA context first (when a GPU is there), so init_s
    // compares the libraries' own initialization; the context time is printed separately.
    let ctx_s = context_first()?;
    let t0 = Instant::now();
    rshmem::init()?;
    let init_s = t0.elapsed().as_secs_f64();
    let (me, n) = (rshmem::my_pe(), rshmem::n_pes());
    if n < 2 {
        return Err(rshmem::Error::new("rshmem-bench needs at least 2 PEs (rshmrun -np 2 ...)"));
    }
    let k = Kernels::new()?;
    let gpu = rshmem::backend_name()? == "cuda";
    let mut o = cli::opts(&cli, gpu)?;
    let chosen = cli::sections(&cli)?;
    let has = |s: &str| chosen.contains(&s);
    let pair = choose_pair(me, n, o.peer)?;
    let peer = if me == 0 { pair } else { 0 };
    o.route = route_to(peer)?;
    let in_pair = me == 0 || me == pair;
    if me == 0 {
        println!("# rshmem-bench: {} backend, {n} PEs, grid {} x {} threads, median of {}", rshmem::backend_name()?, o.grid, o.threads, o.reps);
        println!("# pair: PE 0 and PE {pair} (route={}, RSHMEM_REMOTE_TRANSPORT={})", o.route, std::env::var("RSHMEM_REMOTE_TRANSPORT").unwrap_or_else(|_| "unset".into()));
        if let Some(c) = ctx_s {
            println!("# CUDA context creation before init: {c:.3} s (not part of init_s)");
        }
        result("init_s", "-", 0, &o, init_s, "s");
    }
    malloc_us(me, &o)?;
    if o.posting {
        posting::run(&k, &o, me, peer, gpu, &cli::posting_threads(&cli, gpu)?)?;
        return rshmem::finalize();
    }
    let maxb = o.max_bytes;
    let data = pe_data(me, maxb);
    // The bw rows' rotation (--rotate-bytes) needs both buffers that large; past maxb they hold more of
    // the same random bytes.
    let bufb = maxb.max(cli.rotate_bytes);
    let sbuf = if bufb == maxb { SymSlice::from_slice(&data)? } else { SymSlice::from_slice(&data.iter().copied().cycle().take(bufb).collect::<Vec<u8>>())? };
    let rbuf = SymSlice::from_slice(&vec![0xA5u8; bufb])?;
    if me == 0 && cli.rotate_bytes > 0 {
        println!("# bw rows: rounds rotate over {} bytes of both buffers (--rotate-bytes), region after region of the row's size", cli.rotate_bytes);
    }
    rshmem::barrier_all()?;
    let reps = o.reps;
    // Launch shapes: the command line's grid and block, and one thread.
    let wide = LaunchConfig::new(o.grid, o.threads);
    let one = LaunchConfig::new(1, 1);
    let mapped = o.route == "p2p";
    let it: u64 = if gpu { 10000 } else if o.quick { 1000 } else { 10000 };
    let out = Sym::<u64>::zeroed()?;
    // One u64 per thread for amo_rate, and at least 1 MiB for the latency loops.
    let lat = SymSlice::<u8>::zeroed((1usize << 20).max(8 * (o.grid * o.threads) as usize))?;
    rshmem::barrier_all()?;
    let c = Ctx { k, o, me, n, pair, peer, in_pair, gpu, mapped, sbuf: &sbuf, rbuf: &rbuf, data: &data, maxb, reps, lat: &lat, out: &out, wide, one, it };
    if has("bw") {
        bw::run(&c, &cli)?;
    }
    if has("lat") {
        lat::run(&c)?;
    }
    rshmem::barrier_all()?;
    if has("pingpong") {
        pingpong::run(&c)?;
    }
    if has("barrier") {
        barrier::run(&c)?;
    }
    if has("all_pairs") {
        all_pairs::run(&c)?;
    }
    if has("host") {
        host::run(&c)?;
    }
    rshmem::barrier_all()?;
    if has("rate") {
        rate::run(&c, &cli)?;
    }
    if has("quiet") {
        quiet::run(&c, &cli)?;
    }
    rshmem::barrier_all()?;
    lat.free()?;
    out.free()?;
    rbuf.free()?;
    sbuf.free()?;
    rshmem::finalize()
}

/// As the NVSHMEM side does: creates the CUDA context first (when a GPU is there), so that init_s
/// compares the libraries' own initialization; returns the seconds the context took (None without a
/// GPU), printed separately.
fn context_first() -> Result<Option<f64>, rshmem::Error> {
    let tc = Instant::now();
    Ok(match rshmem::platform::cuda::driver::device_count() {
        Ok(n) => {
            let local = std::env::var("RSHMEM_LOCAL_PE").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
            rshmem::platform::cuda::driver::bind_primary((local % n) as i32)?;
            Some(tc.elapsed().as_secs_f64())
        }
        Err(_) => None,
    })
}

/// Collective: PE 0's partner: `peer` (--peer), else the first PE whose heap PE 0 cannot map (another
/// node), else PE 1. PE 0 chooses and tells every PE (a host put, through whichever transport reaches
/// it). A bad --peer is refused before the allocation, which is not freed on an early return.
fn choose_pair(me: i32, n: i32, peer: Option<usize>) -> Result<i32, rshmem::Error> {
    if let (0, Some(p)) = (me, peer) {
        if p == 0 || p >= n as usize {
            return Err(rshmem::Error::new(format!("--peer {p}: expected a PE from 1 to {}", n - 1)));
        }
    }
    let choice = Sym::<u64>::zeroed()?;
    if me == 0 {
        let pair = match peer {
            Some(p) => p,
            None => (1..n as usize).find(|&q| rshmem::ptr(choice.as_ptr().cast::<u8>(), q as i32).is_null()).unwrap_or(1),
        };
        for q in 0..n {
            choice.put_to(q, pair as u64)?;
        }
    }
    rshmem::barrier_all()?;
    let pair = choice.read()? as i32;
    choice.free()?;
    Ok(pair)
}

/// Collective: how this PE reaches `partner`, "p2p" when its heap is mapped here, else "remote" (both
/// PEs of the pair agree).
fn route_to(partner: i32) -> Result<&'static str, rshmem::Error> {
    let probe = Sym::<u64>::zeroed()?;
    let route = if rshmem::ptr(probe.as_ptr().cast::<u8>(), partner).is_null() { "remote" } else { "p2p" };
    probe.free()?;
    Ok(route)
}

/// Collective: the time of a 1 MiB malloc and free, median of 20 (rshmem::malloc itself, beside
/// nvshmem_malloc, so not a SymSlice, which zeroes); PE 0 prints it.
fn malloc_us(me: i32, o: &cli::Opt) -> Result<(), rshmem::Error> {
    let mut ts = vec![];
    for _ in 0..20 {
        let t = Instant::now();
        let p = rshmem::malloc(1 << 20)?;
        ts.push(t.elapsed().as_secs_f64() * 1e6);
        rshmem::free(p)?;
    }
    if me == 0 {
        result("malloc_us", "-", 1 << 20, o, median(ts), "us");
    }
    Ok(())
}
