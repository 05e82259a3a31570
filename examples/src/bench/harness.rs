//! What every section of rshmem-bench uses: the kernels, the set-up that `main` hands to each section
//! ([`Ctx`]), the timing of a kernel (warm-up, then the median), the RESULT line, and the poison and
//! check of the destination.

use crate::cli::Opt;
use rshmem::kernels::{Kernel, KernelSet, LaunchConfig};
use rshmem::{Sym, SymSlice};
use rshmem_example_kernels::{BenchAllPairs, BenchAmoRate, BenchBarrier, BenchBw, BenchLat, BenchPingpong, BenchPost, BenchQuiet, BenchRate, XBarrierRaw, XBwDeep};

static K: KernelSet = KernelSet::new(rshmem_example_kernels::CPU_KERNELS, include_str!(concat!(env!("OUT_DIR"), "/example_kernels.ptx")));

/// The benchmark's kernels (examples/kernels), each with its argument struct checked once.
#[derive(Clone, Copy)]
pub struct Kernels {
    pub bw: Kernel<BenchBw>,
    pub bw_deep: Kernel<XBwDeep>,
    pub all_pairs: Kernel<BenchAllPairs>,
    pub barrier_raw: Kernel<XBarrierRaw>,
    pub lat: Kernel<BenchLat>,
    pub pingpong: Kernel<BenchPingpong>,
    pub post: Kernel<BenchPost>,
    pub rate: Kernel<BenchRate>,
    pub quiet: Kernel<BenchQuiet>,
    pub amo_rate: Kernel<BenchAmoRate>,
    pub barrier: Kernel<BenchBarrier>,
}

impl Kernels {
    pub fn new() -> Result<Kernels, rshmem::Error> {
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

/// The median of `v` (not empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Prints one RESULT line (the format `bench/compare.py` reads).
pub fn result(case: &str, scope: &str, bytes: usize, o: &Opt, value: f64, unit: &str) {
    println!("RESULT lib=rshmem case={case} scope={scope} bytes={bytes} grid={} threads={} value={value:.4} unit={unit} route={}", o.grid, o.threads, o.route);
}

/// What the sections use from `main`'s set-up.
pub struct Ctx<'a> {
    pub k: Kernels,
    pub o: Opt,
    pub me: i32,
    pub n: i32,
    /// PE 0's partner.
    pub pair: i32,
    /// The PE this PE's kernels address: the pair's other PE.
    pub peer: i32,
    /// This PE is PE 0 or its partner.
    pub in_pair: bool,
    pub gpu: bool,
    /// The partner's heap is mapped here (`o.route` is "p2p").
    pub mapped: bool,
    /// Symmetric, `maxb` bytes each (more with `--rotate-bytes`): `sbuf` holds this PE's random data
    /// (`pe_data(me)`, `data`), `rbuf` is the destination.
    pub sbuf: &'a SymSlice<u8>,
    pub rbuf: &'a SymSlice<u8>,
    /// This PE's random bytes, `maxb` of them (what `sbuf` starts with).
    pub data: &'a [u8],
    pub maxb: usize,
    pub reps: usize,
    /// Symmetric scratch of the latency loops: at least 1 MiB, and one u64 per thread of `wide`.
    pub lat: &'a SymSlice<u8>,
    /// A symmetric u64 the latency kernel writes its result into.
    pub out: &'a Sym<u64>,
    /// Launch shapes: the command line's grid and block, and one thread.
    pub wide: LaunchConfig,
    pub one: LaunchConfig,
    /// Iterations of the latency, ping-pong and barrier loops.
    pub it: u64,
}

/// The random bytes `main` puts in PE `pe`'s source buffer.
pub fn pe_data(pe: i32, len: usize) -> Vec<u8> {
    let mut x = 0x9E3779B97F4A7C15u64 ^ pe as u64;
    (0..len).map(|_| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 }).collect()
}

/// Kernel `k` launched as `cfg` says: one warm-up launch (waited for), then the median of `reps`
/// timed launches, in ms.
///
/// # Safety
/// As `Kernel::launch`: `args` must satisfy the kernel's documented contract (examples/kernels),
/// pointers into live symmetric buffers of the sizes the kernel touches.
pub unsafe fn time_kernel<A: bytemuck::Pod>(k: Kernel<A>, cfg: LaunchConfig, args: &A, reps: usize) -> Result<f64, rshmem::Error> {
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
pub static REP_PAUSE_US: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Every PE poisons the first `len` bytes of its `rbuf` (0xA5), then all meet.
pub fn poison(c: &Ctx, len: usize) -> Result<(), rshmem::Error> {
    c.rbuf.copy_from(&vec![0xA5u8; len])?;
    rshmem::barrier_all()
}

/// On PE 0's partner: the ranges (offset, length) of its `rbuf` hold PE 0's source bytes at the same
/// offsets. All PEs meet afterwards.
pub fn check(c: &Ctx, what: &str, len: usize, ranges: &[(usize, usize)]) -> Result<(), rshmem::Error> {
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
