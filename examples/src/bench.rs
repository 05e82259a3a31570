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
//! - `rate` (issue 19's message rate): thread 0 of each of 1, 32 and 132 blocks (`--rate-grids`)
//!   issues `putmem_nbi` of 8 B, 64 B, 512 B and 4 KiB (`--rate-sizes`), and `p` of 8 bytes, back to back
//!   to the peer, then one quiet; `--rate-ops` operations per launch in all (default 20000 to another
//!   node, 10x that to a mapped one). Cases `msg_rate_put` / `msg_rate_p`, operations per second
//!   (`Mops`, 10^6/s) over the whole launch, the quiet included. The destination slots are poisoned
//!   before and checked on the peer after each case.
//! - `quiet` (issue 19's every-thread-quiet kernel): `--quiet-grid` x `--quiet-threads` (32 x 1024 on
//!   GPUs), each block makes `--quiet-calls` (100) `putmem_nbi_block` calls, `--quiet-sizes` (1 MiB,
//!   16 MiB, 256 MiB) in all per launch; then every thread quiets (`quiet_bw_all`), thread 0 of each
//!   block (`quiet_bw_block`), or thread 0 of the last block to arrive (`quiet_bw_one`, the one quiet of
//!   the grid). GB/s; the data is checked on the peer after each case.

use clap::Parser;
use rshmem::kernels::{DevPtr, Kernel, KernelSet, LaunchConfig};
use rshmem::{Sym, SymSlice};
use rshmem_example_kernels::{BenchAllPairs, BenchAmoRate, BenchBarrier, BenchBw, BenchLat, BenchPingpong, BenchPost, BenchQuiet, BenchRate, XBarrierRaw, XBwDeep};
use std::time::Instant;

static K: KernelSet = KernelSet::new(rshmem_example_kernels::CPU_KERNELS, include_str!(concat!(env!("OUT_DIR"), "/example_kernels.ptx")));

/// The benchmark's kernels (examples/kernels), each with its argument struct checked once.
#[derive(Clone, Copy)]
struct Kernels {
    bw: Kernel<BenchBw>,
    bw_deep: Kernel<XBwDeep>,
    all_pairs: Kernel<BenchAllPairs>,
    barrier_raw: Kernel<XBarrierRaw>,
    lat: Kernel<BenchLat>,
    pingpong: Kernel<BenchPingpong>,
    post: Kernel<BenchPost>,
    rate: Kernel<BenchRate>,
    quiet: Kernel<BenchQuiet>,
    amo_rate: Kernel<BenchAmoRate>,
    barrier: Kernel<BenchBarrier>,
}

impl Kernels {
    fn new() -> Result<Kernels, rshmem::Error> {
        Ok(Kernels {
            bw: K.kernel("bench_bw")?,
            bw_deep: K.kernel("x_bw_deep")?,
            all_pairs: K.kernel("bench_all_pairs")?,
            barrier_raw: K.kernel("x_barrier_raw")?,
            lat: K.kernel("bench_lat")?,
            pingpong: K.kernel("bench_pingpong")?,
            post: K.kernel("bench_post")?,
            rate: K.kernel("bench_rate")?,
            quiet: K.kernel("bench_quiet")?,
            amo_rate: K.kernel("bench_amo_rate")?,
            barrier: K.kernel("bench_barrier")?,
        })
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// A byte count: a number with an optional k, m or g suffix (powers of 1024).
fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mul) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1usize << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (&t[..], 1),
    };
    num.parse::<usize>().ok().and_then(|n| n.checked_mul(mul)).ok_or_else(|| format!("{s:?} is not a byte count (e.g. 4096, 64k, 256m)"))
}

/// The sections of `--cases`.
const SECTIONS: &[&str] = &["bw", "lat", "pingpong", "barrier", "all_pairs", "host", "rate", "quiet"];
const DEFAULT_SECTIONS: &[&str] = &["bw", "lat", "pingpong", "barrier", "all_pairs", "host"];

#[derive(Parser, Debug)]
#[command(name = "rshmem-bench", about = "rshmem's benchmarks between PE 0 and a peer (run under rshmrun -np 2 or more)")]
struct Cli {
    /// Blocks per launch of the bandwidth and rate kernels (default: 132 on GPUs, 1 on the CPU backend).
    #[arg(long)]
    grid: Option<u32>,
    /// Threads per block (default: 512 on GPUs, 2 on the CPU backend).
    #[arg(long)]
    threads: Option<u32>,
    /// Fewer sizes (x16 steps) and 3 repeats instead of 5.
    #[arg(long)]
    quick: bool,
    /// Microseconds the host waits between the timed launches of a case (default 0: back to back). A
    /// harness that did work between launches (as this one once allocated and freed each launch's
    /// argument buffer) left the GPU idle meanwhile; this compares like with like.
    #[arg(long, default_value_t = 0)]
    rep_pause_us: u64,
    /// Largest transfer (bytes; k/m/g suffixes; default 256m on GPUs, 16m on the CPU backend).
    #[arg(long, value_parser = parse_bytes)]
    max_bytes: Option<usize>,
    /// bw: the rounds of a row rotate over this many bytes of both buffers (k/m/g suffixes), region
    /// after region of the row's size, so that they measure the link and not lines cached from the
    /// round before (the device method: rotate inputs larger than the caches). Default 0: every round
    /// moves the same bytes, as NVSHMEM's perftests do. A row larger than this does not rotate.
    #[arg(long, value_parser = parse_bytes, default_value = "0")]
    rotate_bytes: usize,
    /// PE 0's partner (default: the first PE on another node, else PE 1).
    #[arg(long)]
    peer: Option<usize>,
    /// Only the posting-rate measurement (see `posting`), then exit.
    #[arg(long)]
    posting: bool,
    /// --posting: threads per block of the grid cases, comma-separated (default 32,64,128,256 on GPUs,
    /// 1,2 on the CPU backend); each runs on --grid blocks.
    #[arg(long, value_delimiter = ',')]
    posting_threads: Option<Vec<u32>>,
    /// Sections, comma-separated: bw, lat, pingpong, barrier, all_pairs, host, rate, quiet; `default`
    /// (the first six) or `all`.
    #[arg(long, value_delimiter = ',', default_value = "default")]
    cases: Vec<String>,
    /// rate: blocks per launch, comma-separated (default 1,32,132 on GPUs, 1,4 on the CPU backend).
    #[arg(long, value_delimiter = ',')]
    rate_grids: Option<Vec<u32>>,
    /// rate: put sizes, comma-separated (default 8,64,512,4k).
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes)]
    rate_sizes: Option<Vec<usize>>,
    /// rate: operations per launch, all blocks together (default 20000 to another node, 200000 to a
    /// mapped peer; the CPU backend 2000).
    #[arg(long)]
    rate_ops: Option<u64>,
    /// quiet: bytes per launch, comma-separated (default 1m,16m,256m; sizes above --max-bytes are left out).
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes)]
    quiet_sizes: Option<Vec<usize>>,
    /// quiet: blocks (default 32 on GPUs, 2 on the CPU backend).
    #[arg(long)]
    quiet_grid: Option<u32>,
    /// quiet: threads per block (default 1024 on GPUs, 4 on the CPU backend).
    #[arg(long)]
    quiet_threads: Option<u32>,
    /// quiet: putmem_nbi_block calls per block (default 100).
    #[arg(long, default_value_t = 100)]
    quiet_calls: u64,
}

#[derive(Clone, Copy)]
struct Opt {
    grid: u32,
    threads: u32,
    quick: bool,
    max_bytes: usize,
    reps: usize,
    peer: Option<usize>,
    /// "p2p" or "remote": how PE 0 reaches its peer (printed in every RESULT line).
    route: &'static str,
    /// `--posting`: only the posting-rate measurement (`posting`), then exit.
    posting: bool,
}

/// `--posting-threads`, checked (1 to 1024 each).
fn posting_threads(cli: &Cli, gpu: bool) -> Result<Vec<u32>, rshmem::Error> {
    let v = cli.posting_threads.clone().unwrap_or(if gpu { vec![32, 64, 128, 256] } else { vec![1, 2] });
    if v.is_empty() || v.iter().any(|&t| t == 0 || t > 1024) {
        return Err(rshmem::Error::new(format!("--posting-threads {v:?}: 1 to 1024 threads per block each")));
    }
    Ok(v)
}

fn opts(cli: &Cli, gpu: bool) -> Result<Opt, rshmem::Error> {
    let o = Opt {
        grid: cli.grid.unwrap_or(if gpu { 132 } else { 1 }),
        threads: cli.threads.unwrap_or(if gpu { 512 } else { 2 }),
        quick: cli.quick,
        max_bytes: cli.max_bytes.unwrap_or(if gpu { 256 << 20 } else { 16 << 20 }),
        reps: if cli.quick { 3 } else { 5 },
        peer: cli.peer,
        route: "p2p",
        posting: cli.posting,
    };
    if o.grid == 0 || o.threads == 0 || o.threads > 1024 {
        return Err(rshmem::Error::new(format!("--grid {} --threads {}: at least 1 block and 1 to 1024 threads", o.grid, o.threads)));
    }
    Ok(o)
}

/// The sections `--cases` asks for.
fn sections(cli: &Cli) -> Result<Vec<&'static str>, rshmem::Error> {
    let mut v = vec![];
    for c in &cli.cases {
        match c.trim() {
            "default" => v.extend_from_slice(DEFAULT_SECTIONS),
            "all" => v.extend_from_slice(SECTIONS),
            name => match SECTIONS.iter().find(|s| **s == name) {
                Some(s) => v.push(*s),
                None => return Err(rshmem::Error::new(format!("--cases: unknown section {name:?} (one of {}, default, all)", SECTIONS.join(", ")))),
            },
        }
    }
    Ok(v)
}

fn result(case: &str, scope: &str, bytes: usize, o: &Opt, value: f64, unit: &str) {
    println!("RESULT lib=rshmem case={case} scope={scope} bytes={bytes} grid={} threads={} value={value:.4} unit={unit} route={}", o.grid, o.threads, o.route);
}

/// `--posting`: what posting costs the device side. One `p` to the partner per iteration: through
/// IBGDA one inline RDMA WRITE WQE, built, written into the send queue and announced (doorbell record,
/// doorbell) by the calling thread (the lanes of a warp reserve and ring together). Reports ns per WQE
/// and WQEs per second for one thread (`post_1thread`), one block (`post_block`, one SM, `--threads`)
/// and the grid (`post_grid`, `--grid` blocks of each of `--posting-threads`), then says whether the
/// grid's rate never fell as threads were added. With RSHMEM_IBGDA_EMULATOR=device the queues are in
/// GPU memory and the NIC is a GPU kernel that completes every WQE without moving data (what posting
/// costs on a real ConnectX); with `ack` the same on a host thread over pinned host memory. The figures
/// are the posting code's and the harness's, not a NIC's; the delivered values are not checked.
fn posting(k: &Kernels, o: &Opt, me: i32, peer: i32, gpu: bool, sweep: &[u32]) -> Result<(), rshmem::Error> {
    let most = sweep.iter().copied().chain([o.threads]).max().unwrap_or(1);
    let words = (o.grid * most).max(1) as usize;
    let dst = SymSlice::<u64>::zeroed(words)?;
    let span = SymSlice::<u64>::zeroed(2)?;
    rshmem::barrier_all()?;
    if me == 0 {
        let nic = std::env::var("RSHMEM_IBGDA_EMULATOR").unwrap_or_else(|_| "full".into());
        // The send queues' size and count, read with the runtime's own parsers (init already refused a
        // bad value; unset: the runtime's defaults, 512 WQEBBs and 2 QPs): the WQEs per thread are
        // chosen so that no queue fills during the posting phase.
        use rshmem::config::env;
        let depth = std::env::var(env::IBGDA_QP_DEPTH).ok().and_then(|v| env::parse_ibgda_depth(&v).ok()).map_or(512, |log| 1u64 << log);
        let qps = std::env::var(env::IBGDA_QPS_PER_PE).ok().and_then(|v| env::parse_ibgda_qps(&v).ok()).map_or(2, u64::from);
        println!("# posting: route={} RSHMEM_IBGDA_EMULATOR={nic} RSHMEM_IBGDA_QPS_PER_PE={qps} RSHMEM_IBGDA_QP_DEPTH={depth}", o.route);
        println!("# posting: *_ns and *_rate time the posting phase (first p to last, the global timer, before the quiet); *_kernel_ns the whole kernel with its quiet (waiting for the NIC)");
        let mut cases = vec![("post_1thread", 1u32, 1u32), ("post_block", 1, o.threads)];
        cases.extend(sweep.iter().map(|&t| ("post_grid", o.grid, t)));
        let mut grid_rates = vec![];
        for (case, grid, block) in cases {
            let threads = grid as u64 * block as u64;
            // A thread posts through its warp's QP: at most half of the QPs' WQEBBs during the phase.
            let used = qps.min(threads.div_ceil(32)).max(1);
            let per = if gpu { (depth / 2 * used / threads).clamp(8, 1000) } else { 100 };
            let args = BenchPost { dst: dst.dev_ptr(), per_thread: per, peer, _pad: 0, span: span.dev_ptr() };
            let cfg = LaunchConfig::new(grid, block);
            // SAFETY: bench_post's documented arguments: dst holds a u64 per thread of the launch
            // (words >= grid * block), span two u64, both live until the frees below; each launch is
            // waited for (launch_timed) before the next.
            unsafe { k.post.launch(cfg, &args)? };
            cfg.stream.synchronize()?;
            let (mut kernel, mut phase) = (vec![], vec![]);
            for _ in 0..o.reps {
                span.copy_from(&[0, 0])?;
                // SAFETY: as above.
                kernel.push(unsafe { k.post.launch_timed(cfg, &args)? });
                let s = span.to_vec()?;
                if s[1] != 0 {
                    phase.push(s[1].saturating_sub(!s[0]) as f64 / 1e6);
                }
            }
            let wqes = threads as f64 * per as f64;
            let p = Opt { grid, threads: block, ..*o };
            let kernel_ms = median(kernel);
            // Where the device has no timer (CPU backend) the kernel's time stands for the phase.
            let ms = if phase.is_empty() { kernel_ms } else { median(phase) };
            let rate = wqes / ms / 1e3;
            result(&format!("{case}_ns"), "thread", 8, &p, ms * 1e6 / wqes, "ns");
            result(&format!("{case}_rate"), "thread", 8, &p, rate, "MWQE/s");
            result(&format!("{case}_kernel_ns"), "thread", 8, &p, kernel_ms * 1e6 / wqes, "ns");
            if case == "post_grid" {
                grid_rates.push((block, rate));
            }
        }
        let fell: Vec<String> = grid_rates.windows(2).filter(|w| w[1].1 < w[0].1).map(|w| format!("{}x{} ({:.3}) < {}x{} ({:.3})", o.grid, w[1].0, w[1].1, o.grid, w[0].0, w[0].1)).collect();
        if fell.is_empty() {
            println!("# posting: post_grid never lower with more threads ({} cases)", grid_rates.len());
        } else {
            println!("# posting: post_grid LOWER with more threads: {}", fell.join(", "));
        }
    }
    rshmem::barrier_all()?;
    span.free()?;
    dst.free()
}

/// What the `rate` and `quiet` sections use from `main`'s set-up.
struct Ctx<'a> {
    k: Kernels,
    o: Opt,
    me: i32,
    pair: i32,
    peer: i32,
    gpu: bool,
    /// Symmetric, `maxb` bytes each: `sbuf` holds this PE's random data (`pe_data(me)`), `rbuf` is the
    /// destination.
    sbuf: &'a SymSlice<u8>,
    rbuf: &'a SymSlice<u8>,
    maxb: usize,
    reps: usize,
}

/// The random bytes `main` puts in PE `pe`'s source buffer.
fn pe_data(pe: i32, len: usize) -> Vec<u8> {
    let mut x = 0x9E3779B97F4A7C15u64 ^ pe as u64;
    (0..len).map(|_| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 }).collect()
}

/// Kernel `k` launched as `cfg` says: one warm-up launch (waited for), then the median of `reps`
/// timed launches, in ms.
///
/// # Safety
/// As `Kernel::launch`: `args` must satisfy the kernel's documented contract (examples/kernels),
/// pointers into live symmetric buffers of the sizes the kernel touches.
unsafe fn time_kernel<A: bytemuck::Pod>(k: Kernel<A>, cfg: LaunchConfig, args: &A, reps: usize) -> Result<f64, rshmem::Error> {
    // SAFETY: the caller's contract; the launch is waited for before the buffers can go.
    unsafe { k.launch(cfg, args)? };
    cfg.stream.synchronize()?;
    let mut v = vec![];
    let pause = std::time::Duration::from_micros(REP_PAUSE_US.load(std::sync::atomic::Ordering::Relaxed));
    for _ in 0..reps {
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
        // SAFETY: the caller's contract (launch_timed waits for the kernel).
        v.push(unsafe { k.launch_timed(cfg, args)? });
    }
    Ok(median(v))
}

/// `--rep-pause-us`, for `time_kernel`.
static REP_PAUSE_US: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A blocking host put of the first `bytes` of this PE's `src` into `dst` on PE `pe`.
fn put_sym(dst: &SymSlice<u8>, src: &SymSlice<u8>, bytes: usize, pe: i32) -> Result<(), rshmem::Error> {
    if bytes > src.len() || bytes > dst.len() {
        return Err(rshmem::Error::new(format!("put of {bytes} bytes from {} into {} bytes", src.len(), dst.len())));
    }
    // SAFETY: src is a live symmetric allocation of this PE holding at least `bytes` bytes (checked
    // above), borrowed for the whole (blocking) put; putmem checks the symmetric destination range.
    unsafe { rshmem::putmem(dst.as_ptr(), src.as_ptr(), bytes, pe) }
}

/// GPUs: `iters` puts of the first `bytes` of this PE's `src` into `dst` on PE `pe`, enqueued on the
/// default stream between `timer`'s events; returns the milliseconds between them (waiting for them).
fn stream_put_ms(timer: &rshmem::stream::Timer, dst: &SymSlice<u8>, src: &SymSlice<u8>, bytes: usize, pe: i32, iters: usize) -> Result<f64, rshmem::Error> {
    if bytes > src.len() || bytes > dst.len() {
        return Err(rshmem::Error::new(format!("put of {bytes} bytes from {} into {} bytes", src.len(), dst.len())));
    }
    let s = rshmem::stream::Stream::DEFAULT;
    let timed = (|| {
        timer.start(s)?;
        for _ in 0..iters {
            // SAFETY: src is a live symmetric buffer of at least `bytes` bytes (checked above), borrowed
            // until this function returns, which is after the stream has run the copies (elapsed_ms
            // waits for the stop event; on an error, the synchronize below); s is the default stream.
            unsafe { rshmem::stream::putmem_on_stream(dst.as_ptr(), src.as_ptr(), bytes, pe, s)? };
        }
        timer.stop(s)?;
        Ok(timer.elapsed_ms()? as f64)
    })();
    if timed.is_err() {
        // Copies enqueued before the error must be done with src before it can go.
        let _ = s.synchronize();
    }
    timed
}

/// How an on-stream put of `bytes` bytes (this PE's `src` into `pe`'s `dst`) is enqueued: rshmem's
/// `putmem_on_stream`, or the driver's copy called directly, device to device (`cuMemcpyDtoDAsync`, what
/// NVSHMEM's `cudaMemcpyDeviceToDevice` amounts to) or by unified address (`cuMemcpyAsync`).
#[derive(Clone, Copy)]
enum Enqueue {
    Rshmem,
    DtoD,
    Unified,
}

/// One enqueue of `how` on stream `s`.
///
/// # Safety
/// `dst_peer` is `pe`'s address of `dst` mapped here, and both buffers hold at least `bytes` bytes and
/// stay live until `s` has run the copy.
unsafe fn enqueue(how: Enqueue, dst: &SymSlice<u8>, dst_peer: u64, src: &SymSlice<u8>, bytes: usize, pe: i32, s: rshmem::stream::Stream) -> Result<(), rshmem::Error> {
    use rshmem::interop::cudarc::driver::sys as cu;
    let r = match how {
        // SAFETY: the caller's contract (live symmetric buffers of at least `bytes` bytes).
        Enqueue::Rshmem => return unsafe { rshmem::stream::putmem_on_stream(dst.as_ptr(), src.as_ptr(), bytes, pe, s) },
        // SAFETY: device memory this context reaches (the peer's heap is mapped here), the caller's
        // sizes; the context is current (the caller's Timer bound it).
        Enqueue::DtoD => unsafe { cu::cuMemcpyDtoDAsync_v2(dst_peer, src.as_ptr() as u64, bytes, s.as_raw()) },
        // SAFETY: as above, by unified address.
        Enqueue::Unified => unsafe { cu::cuMemcpyAsync(dst_peer, src.as_ptr() as u64, bytes, s.as_raw()) },
    };
    if r != cu::CUresult::CUDA_SUCCESS {
        return Err(rshmem::Error::new(format!("enqueueing a copy of {bytes} bytes: {r:?}")));
    }
    Ok(())
}

/// Issue 20's host `bw` rows at small sizes, taken apart (GPUs, mapped peer): what one on-stream put of
/// `bytes` bytes costs the host to enqueue (`host_enqueue_us`: the wall clock of 200 enqueues without
/// waiting, per call; 200 stay below the stream's queue depth, so the host never waits for the GPU),
/// and what it costs the stream to run (`stream_copy_us`: events around 200 copies enqueued back to
/// back, per copy). A loop of puts runs at the larger of the two. Each for rshmem's
/// `putmem_on_stream` and for the driver's copy called directly (device to device, and by unified
/// address), on the legacy default stream. Prints `RESULT` lines; PE 0 only.
fn enqueue_costs(o: &Opt, dst: &SymSlice<u8>, src: &SymSlice<u8>, bytes: usize, pe: i32) -> Result<(), rshmem::Error> {
    let Some(dst_peer) = dst.peer_ptr(pe) else {
        println!("# host_enqueue_us, stream_copy_us left out: PE {pe}'s heap is not mapped here");
        return Ok(());
    };
    if bytes > src.len() || bytes > dst.len() {
        return Err(rshmem::Error::new(format!("enqueue costs: {bytes} bytes between buffers of {} and {}", src.len(), dst.len())));
    }
    let timer = rshmem::stream::Timer::new()?;
    let s = rshmem::stream::Stream::DEFAULT;
    let n = 200;
    for (how, name) in [(Enqueue::Rshmem, "rshmem"), (Enqueue::DtoD, "dtod"), (Enqueue::Unified, "unified")] {
        let (mut host, mut dev) = (vec![], vec![]);
        for rep in 0..=o.reps {
            let t = Instant::now();
            for _ in 0..n {
                // SAFETY: live symmetric buffers of at least `bytes` bytes (checked above), borrowed
                // until the synchronize below; dst_peer is `pe`'s address of dst.
                unsafe { enqueue(how, dst, dst_peer as u64, src, bytes, pe, s)? };
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
            s.synchronize()?;
            timer.start(s)?;
            for _ in 0..n {
                // SAFETY: as above.
                unsafe { enqueue(how, dst, dst_peer as u64, src, bytes, pe, s)? };
            }
            timer.stop(s)?;
            let ms = timer.elapsed_ms()? as f64;
            s.synchronize()?;
            // The first round warms up.
            if rep > 0 {
                host.push(us);
                dev.push(ms * 1e3 / n as f64);
            }
        }
        result("host_enqueue_us", name, bytes, o, median(host), "us");
        result("stream_copy_us", name, bytes, o, median(dev), "us");
    }
    Ok(())
}

/// The sizes of the raw copy kernel's rows (`x_put_bw_deep8` / `x_get_bw_deep8`), the hardware bound of
/// the block rows at 8-64 KiB; the block rows run at each of them too.
const DEEP_SIZES: [usize; 4] = [8 << 10, 16 << 10, 32 << 10, 64 << 10];

/// Rounds per timed launch of the bandwidth rows at `bytes` bytes (and of their hardware bounds).
fn bw_iters(bytes: usize) -> u64 {
    if bytes < 1 << 20 {
        200
    } else if bytes < 16 << 20 {
        50
    } else {
        10
    }
}

/// GPUs: the copy engine's rate between this PE and PE `pe` (mapped here), the bound of the block put
/// and get at large sizes. `iters` plain device-to-device copies of `bytes` bytes (`cuMemcpyDtoDAsync`
/// through cudarc, not rshmem's put path) enqueued on the default stream between `timer`'s events:
/// put, this PE's `sbuf` into `pe`'s `rbuf` through its mapped address (`SymSlice::peer_ptr`); get,
/// `pe`'s `sbuf` into this PE's `rbuf`. Returns the milliseconds between the events (waiting for them).
fn ce_copy_ms(timer: &rshmem::stream::Timer, sbuf: &SymSlice<u8>, rbuf: &SymSlice<u8>, bytes: usize, pe: i32, put: bool, iters: usize) -> Result<f64, rshmem::Error> {
    use rshmem::interop::cudarc::driver::result::memcpy_dtod_async;
    if bytes > sbuf.len() || bytes > rbuf.len() {
        return Err(rshmem::Error::new(format!("copy-engine copy of {bytes} bytes between buffers of {} and {} bytes", sbuf.len(), rbuf.len())));
    }
    let (dst, src) = if put {
        (rbuf.peer_ptr(pe), Some(sbuf.as_ptr()))
    } else {
        (Some(rbuf.as_ptr()), sbuf.peer_ptr(pe))
    };
    let (Some(dst), Some(src)) = (dst, src) else {
        return Err(rshmem::Error::new(format!("copy-engine copy: PE {pe}'s heap is not mapped here (no peer address)")));
    };
    let s = rshmem::stream::Stream::DEFAULT;
    let timed = (|| {
        timer.start(s)?;
        for _ in 0..iters {
            // SAFETY: dst and src are this PE's and PE `pe`'s addresses of live symmetric allocations
            // of at least `bytes` bytes (checked above), device memory that this context reaches
            // (unified addressing, the peer's mapped here); both buffers are borrowed until this
            // function returns, after the stream has run the copies (elapsed_ms waits for the stop
            // event; on an error, the synchronize below). The context is current on this thread
            // (Timer::new bound it); s is the legacy default stream.
            unsafe { memcpy_dtod_async(dst as u64, src as u64, bytes, s.as_raw()) }.map_err(|e| rshmem::Error::new(format!("cuMemcpyDtoDAsync of {bytes} bytes: {e:?}")))?;
        }
        timer.stop(s)?;
        Ok(timer.elapsed_ms()? as f64)
    })();
    if timed.is_err() {
        // Copies enqueued before the error must be done with the buffers before they can go.
        let _ = s.synchronize();
    }
    timed
}

/// Every PE poisons the first `len` bytes of its `rbuf` (0xA5), then all meet.
fn poison(c: &Ctx, len: usize) -> Result<(), rshmem::Error> {
    c.rbuf.copy_from(&vec![0xA5u8; len])?;
    rshmem::barrier_all()
}

/// On PE 0's partner: the ranges (offset, length) of its `rbuf` hold PE 0's source bytes at the same
/// offsets. All PEs meet afterwards.
fn check(c: &Ctx, what: &str, len: usize, ranges: &[(usize, usize)]) -> Result<(), rshmem::Error> {
    if c.me == c.pair {
        let mut got = vec![0u8; len];
        c.rbuf.copy_to(&mut got)?;
        let want = pe_data(0, len);
        for &(off, n) in ranges {
            if let Some(i) = (off..off + n).find(|&i| got[i] != want[i]) {
                return Err(rshmem::Error::new(format!("{what}: byte {i} on PE {} is {:#x}, PE 0 sent {:#x}", c.pair, got[i], want[i])));
            }
        }
    }
    rshmem::barrier_all()
}

/// `--cases rate`: operations per second of puts and `p`s issued back to back by one thread per block.
fn rate(c: &Ctx, cli: &Cli) -> Result<(), rshmem::Error> {
    let grids = cli.rate_grids.clone().unwrap_or(if c.gpu { vec![1, 32, 132] } else { vec![1, 4] });
    let sizes = cli.rate_sizes.clone().unwrap_or(vec![8, 64, 512, 4096]);
    let ops = cli.rate_ops.unwrap_or(match (c.gpu, c.o.route) {
        (false, _) => 2000,
        (true, "remote") => 20_000,
        (true, _) => 200_000,
    });
    let mut shown = false;
    for &grid in &grids {
        // (kind, bytes): the puts, then p of 8 bytes.
        for (kind, bytes) in sizes.iter().map(|&b| (0u32, b)).chain([(1u32, 8usize)]) {
            let case = if kind == 0 { "msg_rate_put" } else { "msg_rate_p" };
            // Each block cycles through up to 64 slots of its own.
            let slots = (c.maxb / (grid.max(1) as usize * bytes.max(8))).min(64);
            if grid == 0 || bytes == 0 || slots == 0 {
                if c.me == 0 {
                    println!("# {case} {bytes} B from {grid} blocks left out: {grid} x {bytes} bytes exceed --max-bytes {}", c.maxb);
                }
                continue;
            }
            let per = (ops / grid as u64).max(1);
            let used = (per as usize).min(slots);
            let len = grid as usize * slots * bytes;
            poison(c, len)?;
            if c.me == 0 {
                if !shown {
                    println!("# message rate: thread 0 of each block, {ops} operations per launch in all, then one quiet per block");
                    shown = true;
                }
                let args = BenchRate { dst: c.rbuf.dev_ptr(), src: c.sbuf.dev_ptr(), bytes: bytes as u64, per_block: per, slots: slots as u64, peer: c.peer, kind };
                // SAFETY: bench_rate's documented arguments: block b writes the slots
                // [(b * slots) * bytes, (b * slots + slots) * bytes) of rbuf from the same bytes of sbuf,
                // inside the grid * slots * bytes <= maxb bytes of both.
                let ms = unsafe { time_kernel(c.k.rate, LaunchConfig::new(grid, 1), &args, c.reps)? };
                let o = Opt { grid, threads: 1, ..c.o };
                result(case, "thread", bytes, &o, (per * grid as u64) as f64 / ms / 1e3, "Mops");
            }
            rshmem::barrier_all()?;
            let n = if kind == 0 { bytes } else { 8 };
            let ranges: Vec<(usize, usize)> = (0..grid as usize).flat_map(|b| (0..used).map(move |k| ((b * slots + k) * bytes, n))).collect();
            check(c, &format!("{case} {bytes} B from {grid} blocks"), len, &ranges)?;
        }
    }
    Ok(())
}

/// `--cases quiet`: issue 19's every-thread-quiet kernel beside the same with fewer quiets.
fn quiet(c: &Ctx, cli: &Cli) -> Result<(), rshmem::Error> {
    let grid = cli.quiet_grid.unwrap_or(if c.gpu { 32 } else { 2 });
    let threads = cli.quiet_threads.unwrap_or(if c.gpu { 1024 } else { 4 });
    let calls = cli.quiet_calls.max(1);
    let sizes = cli.quiet_sizes.clone().unwrap_or(vec![1 << 20, 16 << 20, 256 << 20]);
    let arrivals = Sym::<u32>::zeroed()?;
    rshmem::barrier_all()?;
    for &total in &sizes {
        let chunk = (total / (grid as usize * calls as usize)) & !7;
        let covered = grid as usize * calls as usize * chunk;
        if total > c.maxb || chunk == 0 {
            if c.me == 0 {
                println!("# quiet_bw at {total} bytes left out: over --max-bytes {} or under 8 bytes per call", c.maxb);
            }
            continue;
        }
        for (mode, case) in [(0u32, "quiet_bw_all"), (1, "quiet_bw_block"), (2, "quiet_bw_one")] {
            poison(c, covered)?;
            if c.me == 0 {
                let args = BenchQuiet { dst: c.rbuf.dev_ptr(), src: c.sbuf.dev_ptr(), total: total as u64, calls, arrivals: arrivals.dev_ptr(), peer: c.peer, mode };
                // SAFETY: bench_quiet's documented arguments: the grid x calls chunks cover
                // covered <= total <= maxb bytes of both buffers; arrivals is a symmetric u32 that only
                // this kernel touches.
                let ms = unsafe { time_kernel(c.k.quiet, LaunchConfig::new(grid, threads), &args, c.reps)? };
                let o = Opt { grid, threads, ..c.o };
                result(case, "block", total, &o, covered as f64 / ms / 1e6, "GBps");
            }
            rshmem::barrier_all()?;
            check(c, &format!("{case} at {total} bytes"), covered, &[(0, covered)])?;
        }
    }
    arrivals.free()
}

fn main() -> Result<(), rshmem::Error> {
    let cli = Cli::parse();
    REP_PAUSE_US.store(cli.rep_pause_us, std::sync::atomic::Ordering::Relaxed);
    // As the NVSHMEM side does: create the CUDA context first (when a GPU is there), so init_s
    // compares the libraries' own initialization; the context time is printed separately.
    let tc = Instant::now();
    let ctx_s = match rshmem::platform::cuda::driver::device_count() {
        Ok(n) => {
            let local = std::env::var("RSHMEM_LOCAL_PE").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
            rshmem::platform::cuda::driver::bind_primary((local % n) as i32)?;
            Some(tc.elapsed().as_secs_f64())
        }
        Err(_) => None,
    };
    let t0 = Instant::now();
    rshmem::init()?;
    let init_s = t0.elapsed().as_secs_f64();
    let (me, n) = (rshmem::my_pe(), rshmem::n_pes());
    if n < 2 {
        return Err(rshmem::Error::new("rshmem-bench needs at least 2 PEs (rshmrun -np 2 ...)"));
    }
    let k = Kernels::new()?;
    let gpu = rshmem::backend_name()? == "cuda";
    let mut o = opts(&cli, gpu)?;
    let chosen = sections(&cli)?;
    let has = |s: &str| chosen.contains(&s);
    // PE 0's partner: --peer, else the first PE whose heap PE 0 cannot map (another node), else PE 1.
    // PE 0 chooses and tells every PE (a host put, through whichever transport reaches it).
    // (A bad --peer is refused before the allocation, which is not freed on an early return.)
    if let (0, Some(p)) = (me, o.peer) {
        if p == 0 || p >= n as usize {
            return Err(rshmem::Error::new(format!("--peer {p}: expected a PE from 1 to {}", n - 1)));
        }
    }
    let choice = Sym::<u64>::zeroed()?;
    if me == 0 {
        let pair = match o.peer {
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
    // Both PEs of the pair agree on the route: the partner's heap is mapped here or not.
    let partner = if me == 0 { pair } else { 0 };
    let probe = Sym::<u64>::zeroed()?;
    o.route = if rshmem::ptr(probe.as_ptr().cast::<u8>(), partner).is_null() { "remote" } else { "p2p" };
    probe.free()?;
    let peer = partner;
    let in_pair = me == 0 || me == pair;
    if me == 0 {
        println!("# rshmem-bench: {} backend, {n} PEs, grid {} x {} threads, median of {}", rshmem::backend_name()?, o.grid, o.threads, o.reps);
        println!("# pair: PE 0 and PE {pair} (route={}, RSHMEM_REMOTE_TRANSPORT={})", o.route, std::env::var("RSHMEM_REMOTE_TRANSPORT").unwrap_or_else(|_| "unset".into()));
        if let Some(c) = ctx_s {
            println!("# CUDA context creation before init: {c:.3} s (not part of init_s)");
        }
        result("init_s", "-", 0, &o, init_s, "s");
    }
    // malloc time: collective 1 MiB malloc + free, median of 20 (malloc timed: rshmem::malloc itself,
    // beside nvshmem_malloc, so not a SymSlice, which zeroes).
    let mut ts = vec![];
    for _ in 0..20 {
        let t = Instant::now();
        let p = rshmem::malloc(1 << 20)?;
        ts.push(t.elapsed().as_secs_f64() * 1e6);
        rshmem::free(p)?;
    }
    if me == 0 {
        result("malloc_us", "-", 1 << 20, &o, median(ts), "us");
    }
    if o.posting {
        posting(&k, &o, me, peer, gpu, &posting_threads(&cli, gpu)?)?;
        return rshmem::finalize();
    }
    let maxb = o.max_bytes;
    let mut x = 0x9E3779B97F4A7C15u64 ^ me as u64;
    let data: Vec<u8> = (0..maxb).map(|_| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 }).collect();
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
    if has("bw") {
        // Bandwidth sweeps.
        let mut sizes = vec![];
        let mut b = 8usize;
        while b <= maxb && b <= 128 << 20 {
            sizes.push(b);
            b *= if o.quick { 16 } else { 4 };
        }
        if maxb >= 64 << 10 && !sizes.contains(&(64 << 10)) {
            sizes.push(64 << 10);
            sizes.sort_unstable();
        }
        if maxb >= 256 << 20 {
            sizes.push(256 << 20);
        }
        for (dir, case) in [(0u32, "put_bw"), (1, "get_bw")] {
            for (scope, sname) in [(0u32, "thread"), (1, "warp"), (2, "block")] {
                // The block rows also at every size of the raw copy kernel's rows below (8-64 KiB), the
                // sizes of their hardware bound.
                let mut scope_sizes = sizes.clone();
                if scope == 2 {
                    scope_sizes.extend(DEEP_SIZES.iter().copied().filter(|&b| b <= maxb && !sizes.contains(&b)));
                    scope_sizes.sort_unstable();
                }
                for &bytes in &scope_sizes {
                    if me == 0 {
                        let iters = bw_iters(bytes);
                        // To another node every transfer is a network operation of tens of microseconds
                        // (thousands of them per round at thread scope): fewer rounds.
                        let iters = if o.route == "remote" { (iters / 50).max(1) } else { iters };
                        let slots = (cli.rotate_bytes / bytes).clamp(1, u32::MAX as usize) as u32;
                        let args = BenchBw { dst: rbuf.dev_ptr(), src: sbuf.dev_ptr(), bytes: bytes as u64, iters, peer, scope, dir, slots };
                        // SAFETY: bench_bw's documented arguments: both buffers are live symmetric
                        // allocations of bufb >= slots * bytes (and >= maxb >= bytes) bytes.
                        let ms = unsafe { time_kernel(k.bw, wide, &args, reps)? };
                        result(case, sname, bytes, &o, bytes as f64 * iters as f64 / ms / 1e6, "GBps");
                        if !gpu && dir == 0 && scope == 2 {
                            // CPU backend: a plain memcpy of the same size in the same run, for scale.
                            let mut dst = vec![0u8; bytes];
                            let mut v = vec![];
                            for _ in 0..reps {
                                let t = Instant::now();
                                for _ in 0..iters {
                                    dst.copy_from_slice(std::hint::black_box(&data[..bytes]));
                                }
                                std::hint::black_box(&dst);
                                v.push(t.elapsed().as_secs_f64() * 1e3);
                            }
                            result("memcpy_bw", "-", bytes, &o, bytes as f64 * iters as f64 / median(v) / 1e6, "GBps");
                        }
                    }
                }
                rshmem::barrier_all()?;
            }
        }
        // Hardware bounds of the block rows, measured in the same run (mapped peer only).
        if me == 0 && !mapped {
            println!("# x_put_bw_deep8, x_get_bw_deep8, ce_put_bw, ce_get_bw, x_raw_*, x_barrier_raw left out: they go through rshmem_ptr, null for a remote peer");
        }
        if me == 0 && mapped {
            // The raw copy kernel (16-byte copies through the peer's address, eight loads in flight per
            // thread) with the block rows' launch shape: the bound of the block put and get at 8-64 KiB.
            let mut deep: Vec<usize> = DEEP_SIZES.iter().copied().filter(|&b| b <= maxb).collect();
            if maxb >= 16 << 20 {
                deep.push(maxb);
            }
            for (dir, case) in [(0u32, "x_put_bw_deep8"), (1, "x_get_bw_deep8")] {
                if dir == 1 {
                    // This PE's rbuf holds the get rows' data: poison it, so the check below sees the
                    // raw get's own.
                    rbuf.copy_from(&vec![0xA5u8; deep.last().copied().unwrap_or(0)])?;
                }
                for &bytes in &deep {
                    let iters = bw_iters(bytes);
                    let args = XBwDeep { dst: rbuf.dev_ptr(), src: sbuf.dev_ptr(), bytes: bytes as u64, iters, peer, dir };
                    // SAFETY: x_bw_deep's documented arguments: both buffers are live symmetric
                    // allocations of maxb >= bytes bytes, and the peer's heap is mapped here (`mapped`).
                    let ms = unsafe { time_kernel(k.bw_deep, wide, &args, reps)? };
                    result(case, "block", bytes, &o, bytes as f64 * iters as f64 / ms / 1e6, "GBps");
                }
            }
            // The last raw get brought the peer's source bytes into this PE's rbuf: check what it covers.
            if let Some(&bytes) = deep.last() {
                let covered = o.grid as usize * ((bytes / o.grid as usize) & !15);
                let mut got = vec![0u8; covered];
                rbuf.copy_to(&mut got[..])?;
                let want = pe_data(pair, covered);
                if let Some(i) = (0..covered).find(|&i| got[i] != want[i]) {
                    return Err(rshmem::Error::new(format!("x_get_bw_deep8 check: byte {i} on PE 0 is {:#x}, PE {pair} holds {:#x}", got[i], want[i])));
                }
                println!("# x_get_bw_deep8 of {covered} bytes verified on PE 0");
            }
            // The copy engine (a plain device-to-device copy through the peer's address, not rshmem's
            // put path): the bound of the block put and get at the large sizes.
            let large: Vec<usize> = sizes.iter().copied().filter(|&b| b >= 8 << 20).collect();
            if !gpu {
                println!("# ce_put_bw, ce_get_bw left out: the CPU backend has no copy engine (memcpy_bw is the host copy's rate)");
            } else if large.is_empty() {
                println!("# ce_put_bw, ce_get_bw left out: they run at the bandwidth sizes from 8 MiB on, above --max-bytes {maxb}");
            } else {
                let timer = rshmem::stream::Timer::new()?;
                for (put, case) in [(true, "ce_put_bw"), (false, "ce_get_bw")] {
                    for &bytes in &large {
                        let iters = bw_iters(bytes) as usize;
                        // Warm-up, then the median of the timed rounds (as time_kernel does).
                        ce_copy_ms(&timer, &sbuf, &rbuf, bytes, peer, put, 1)?;
                        let mut v = vec![];
                        for _ in 0..reps {
                            v.push(ce_copy_ms(&timer, &sbuf, &rbuf, bytes, peer, put, iters)?);
                        }
                        result(case, "-", bytes, &o, bytes as f64 * iters as f64 / median(v) / 1e6, "GBps");
                    }
                }
            }
        }
        rshmem::barrier_all()?;
        // Delivery check of the largest put: PE 0's partner holds PE 0's data.
        if me == 0 {
            let args = BenchBw { dst: rbuf.dev_ptr(), src: sbuf.dev_ptr(), bytes: maxb as u64, iters: 1, peer, scope: 2, dir: 0, slots: 1 };
            // SAFETY: bench_bw's documented arguments: both buffers are live symmetric allocations of
            // maxb bytes, and the launch is waited for below.
            unsafe { k.bw.launch(wide, &args)? };
            wide.stream.synchronize()?;
        }
        rshmem::barrier_all()?;
        if me == pair {
            let got = rbuf.to_vec()?;
            let mut x = 0x9E3779B97F4A7C15u64;
            let want: Vec<u8> = (0..maxb).map(|_| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 }).collect();
            // The block put moves grid chunks rounded down to 8 bytes: check exactly what it covers.
            let covered = o.grid as usize * ((maxb / o.grid as usize) & !7);
            if let Some(i) = (0..covered).find(|&i| got[i] != want[i]) {
                return Err(rshmem::Error::new(format!("put bandwidth check: byte {i} on PE {pair} is {:#x}, PE 0 sent {:#x}", got[i], want[i])));
            }
            println!("# put of {covered} bytes verified on PE {pair} (route={})", o.route);
        }
        rshmem::barrier_all()?;
    }
    // Latencies (one thread).
    if me == 0 && has("lat") {
        for (kind, case) in [(0u32, "p_lat"), (1, "g_lat"), (2, "put_lat"), (3, "get_lat"), (4, "amo_fetch_add_lat"), (5, "amo_cswap_lat"), (6, "x_raw_st_fence_sc"), (7, "x_raw_st_fence_acqrel"), (8, "x_quiet_only"), (9, "x_raw_fetch_add")] {
            if !mapped && matches!(kind, 6 | 7 | 9) {
                continue;
            }
            let args = BenchLat { buf: lat.dev_ptr(), iters: it, out: out.dev_ptr(), peer, kind };
            // SAFETY: bench_lat's documented arguments: lat is a live symmetric buffer of at least
            // 1 MiB, out a live u64 of this PE; the analysis kinds 6, 7 and 9 only with a mapped peer.
            let ms = unsafe { time_kernel(k.lat, one, &args, reps)? };
            result(case, "-", if kind == 2 || kind == 3 { 8 } else { 4 }, &o, ms * 1e3 / it as f64, "us");
        }
        let per = if o.route == "remote" { 2u64 } else { 100 };
        let args = BenchAmoRate { ctrs: DevPtr::from_addr(lat.addr()), per_thread: per, peer, _pad: 0 };
        // SAFETY: bench_amo_rate's documented arguments: lat holds a u64 per thread of the launch.
        let ms = unsafe { time_kernel(k.amo_rate, wide, &args, reps)? };
        result("amo_rate", "-", 8, &o, (o.grid * o.threads) as f64 * per as f64 / ms / 1e3, "Mops");
    }
    rshmem::barrier_all()?;
    if has("pingpong") {
        // Ping-pongs (PE 0 <-> PE 1).
        for (kind, case) in [(0u32, "pingpong"), (1, "put_signal_pingpong")] {
            // The flag at byte 0 of lat, the put's 8 bytes at 1024, the signal at 2048.
            let args = BenchPingpong {
                flag: DevPtr::from_addr(lat.addr()),
                data: DevPtr::from_addr(lat.addr_of(1024)?),
                sig: DevPtr::from_addr(lat.addr_of(2048)?),
                iters: it as i32,
                peer,
                kind,
                _pad: 0,
            };
            let mut v = vec![];
            for _ in 0..reps {
                lat.copy_from(&[0u8; 4096])?;
                rshmem::barrier_all()?;
                if in_pair {
                    // SAFETY: bench_pingpong's documented arguments: the flag, data and signal lie in
                    // lat's first 4096 bytes (zeroed above), a live symmetric buffer.
                    v.push(unsafe { k.pingpong.launch_timed(one, &args)? });
                }
                rshmem::barrier_all()?;
            }
            if me == 0 {
                result(case, "-", if kind == 0 { 4 } else { 8 }, &o, median(v) * 1e3 / it as f64 / 2.0, "us");
            }
        }
    }
    if has("barrier") {
        // Device barriers (all PEs).
        for (kind, case) in [(0u32, "barrier_all"), (1, "sync_all")] {
            // SAFETY: bench_barrier takes no pointers; every PE launches it alike.
            unsafe { k.barrier.launch(one, &BenchBarrier { iters: 10, kind, _pad: 0 })? };
            one.stream.synchronize()?;
            let mut v = vec![];
            for _ in 0..reps {
                rshmem::barrier_all()?;
                // SAFETY: as above.
                v.push(unsafe { k.barrier.launch_timed(one, &BenchBarrier { iters: it, kind, _pad: 0 })? });
            }
            if me == 0 {
                result(case, "-", 0, &o, median(v) * 1e3 / it as f64, "us");
            }
        }
        // Analysis variant: the flag exchange alone.
        {
            let slots = SymSlice::<u64>::zeroed(n as usize)?;
            rshmem::barrier_all()?;
            // GPUs only: it spins without yielding, which host threads sharing cores cannot afford.
            if gpu && n <= 8 && rshmem::team_n_pes(rshmem_device::TEAM_NODE) == n {
                // SAFETY: x_barrier_raw's documented arguments: slots holds a u64 per PE, and every PE's
                // heap is mapped here (all on this node); the launch is waited for below.
                unsafe { k.barrier_raw.launch(one, &XBarrierRaw { slots: slots.dev_ptr(), iters: 10 })? };
                one.stream.synchronize()?;
                let mut v = vec![];
                for _ in 0..reps {
                    slots.copy_from(&vec![0u64; n as usize])?;
                    rshmem::barrier_all()?;
                    // SAFETY: as above (launch_timed waits for the kernel).
                    v.push(unsafe { k.barrier_raw.launch_timed(one, &XBarrierRaw { slots: slots.dev_ptr(), iters: it })? });
                }
                if me == 0 {
                    result("x_barrier_raw", "-", 0, &o, median(v) * 1e3 / it as f64, "us");
                }
            }
            rshmem::barrier_all()?;
            slots.free()?;
        }
    }
    if has("all_pairs") {
        // All pairs: every PE puts to every other PE at once (4+ PEs is where this matters).
        {
            let np = n as usize;
            let top = 64usize << 20;
            let recv = SymSlice::<u8>::zeroed(np * top.min(maxb / np))?;
            let times = SymSlice::<f64>::zeroed(np)?;
            for &bytes in &[64usize << 10, 1 << 20, 16 << 20, 64 << 20] {
                if bytes > maxb / np || bytes > top {
                    continue;
                }
                let iters: u64 = if bytes >= 16 << 20 { 10 } else { 20 };
                if o.grid < n as u32 - 1 {
                    break;
                }
                let args = BenchAllPairs { dst: recv.dev_ptr(), src: sbuf.dev_ptr(), bytes: bytes as u64, iters };
                rshmem::barrier_all()?;
                // SAFETY: bench_all_pairs' documented arguments: recv holds n_pes x bytes and sbuf
                // maxb >= bytes bytes, live symmetric buffers; the launch is waited for below.
                unsafe { k.all_pairs.launch(wide, &args)? };
                wide.stream.synchronize()?;
                let mut v = vec![];
                for _ in 0..reps {
                    rshmem::barrier_all()?;
                    // SAFETY: as above (launch_timed waits for the kernel).
                    v.push(unsafe { k.all_pairs.launch_timed(wide, &args)? });
                }
                let mine = median(v);
                times.put_at(0, me as usize, &[mine])?;
                rshmem::barrier_all()?;
                if me == 0 {
                    let t = times.to_vec()?;
                    let bw: Vec<f64> = t.iter().map(|ms| (np - 1) as f64 * bytes as f64 * iters as f64 / ms / 1e6).collect();
                    result("all_pairs_put_bw", "block", bytes, &o, bw.iter().cloned().fold(f64::INFINITY, f64::min), "GBps");
                    result("all_pairs_put_bw_total", "block", bytes, &o, bw.iter().sum(), "GBps");
                }
                rshmem::barrier_all()?;
            }
            times.free()?;
            recv.free()?;
        }
    }
    if has("host") {
        // Host barrier.
        for _ in 0..50 {
            rshmem::barrier_all()?;
        }
        let hb = 1000;
        let t = Instant::now();
        for _ in 0..hb {
            rshmem::barrier_all()?;
        }
        if me == 0 {
            result("host_barrier_all", "-", 0, &o, t.elapsed().as_secs_f64() * 1e6 / hb as f64, "us");
        }
        // Host-initiated and on-stream put bandwidth (from this PE's heap).
        if me == 0 {
            for &bytes in &[256usize << 10, 4 << 20, 64 << 20, 256 << 20] {
                if bytes > maxb {
                    continue;
                }
                let iters = if bytes >= 64 << 20 { 5 } else { 20 };
                put_sym(&rbuf, &sbuf, bytes, peer)?;
                let mut v = vec![];
                for _ in 0..reps {
                    let t = Instant::now();
                    for _ in 0..iters {
                        put_sym(&rbuf, &sbuf, bytes, peer)?;
                    }
                    v.push(t.elapsed().as_secs_f64());
                }
                result("host_put_bw", "-", bytes, &o, bytes as f64 * iters as f64 / median(v) / 1e9, "GBps");
                if gpu {
                    let timer = rshmem::stream::Timer::new()?;
                    let mut v = vec![];
                    for _ in 0..reps {
                        v.push(stream_put_ms(&timer, &rbuf, &sbuf, bytes, peer, iters)?);
                    }
                    result("stream_put_bw", "-", bytes, &o, bytes as f64 * iters as f64 / median(v) / 1e6, "GBps");
                }
            }
            if gpu {
                for &bytes in &[4usize << 10, 64 << 10] {
                    if bytes <= maxb {
                        enqueue_costs(&o, &rbuf, &sbuf, bytes, peer)?;
                    }
                }
            }
        }
    }
    rshmem::barrier_all()?;
    let ctx = Ctx { k, o, me, pair, peer, gpu, sbuf: &sbuf, rbuf: &rbuf, maxb, reps };
    if has("rate") {
        rate(&ctx, &cli)?;
    }
    if has("quiet") {
        quiet(&ctx, &cli)?;
    }
    rshmem::barrier_all()?;
    lat.free()?;
    out.free()?;
    rbuf.free()?;
    sbuf.free()?;
    rshmem::finalize()
}
