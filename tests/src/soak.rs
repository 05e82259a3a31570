//! `rshmem-soak`: a randomized soak of the device API against a reference model. Run under rshmrun:
//!
//! ```text
//! rshmrun -np 4 rshmem-soak [--seed S] [--ops N] [--threads T] [--blocks B] [--per-thread P]
//!                           [--per-unit U] [--skip KIND,...] [--inject-fault]
//! ```
//!
//! Each round every thread, warp and block of every PE runs a random program (kernels and generator:
//! `rshmem_soak_kernels`), then the device barriers of the round run; the host barriers, and
//! every PE compares its whole buffer and the values its kernels fetched with the model
//! (`soak/model.rs`). Between rounds the host allocates and frees blocks of random sizes and checks
//! that live blocks keep their contents. Rounds go on until N device calls (one call by one thread
//! is one operation) have been made. On a mismatch the PE prints the seed, the round, the operation,
//! the PEs, the expected and the actual value, and exits 1.

#[path = "soak/model.rs"]
mod model;

use model::Model;
use rshmem::kernels::KernelSet;
use rshmem_soak_kernels::{self as soak, Layout, Rng, MAX_PES, SKIP_BARRIER, SKIP_CHURN, SKIP_NAMES};
use std::process::exit;
use std::time::Instant;

static K: KernelSet = KernelSet::new(soak::CPU_KERNELS, include_str!(concat!(env!("OUT_DIR"), "/soak_kernels.ptx")));

/// The soak's arguments (clap).
#[derive(clap::Parser)]
#[command(name = "rshmem-soak", about = "A randomized soak of the device API against a reference model (run under rshmrun).")]
struct Cli {
    /// Random seed (decimal or 0x hex); default: random, printed.
    #[arg(long, value_parser = parse_number)]
    seed: Option<u64>,
    /// Device calls to make in all, over all PEs and threads.
    #[arg(long, default_value_t = 100_000, value_parser = parse_number)]
    ops: u64,
    /// Threads per block (default 4 on the CPU backend, 128 on GPUs: a multiple of 32 there, at most
    /// 256: k_soak needs about 114 registers per thread on sm_90; the launch says so).
    #[arg(long)]
    threads: Option<u32>,
    /// Blocks per PE (default 2 on the CPU backend, 8 on GPUs).
    #[arg(long)]
    blocks: Option<u32>,
    /// Random operations per thread per round (1 to 10000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    per_thread: u64,
    /// Random group-scoped operations per warp and per block per round (at most 1000).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(0..=1000))]
    per_unit: u64,
    /// Kinds to leave out, comma-separated: p, g, put, get, amo_own, amo_shared, lock, signal, group,
    /// barrier, churn.
    #[arg(long, value_delimiter = ',', value_parser = parse_skip)]
    skip: Vec<String>,
    /// Corrupt one byte a put wrote (last PE, first round): the check must fail.
    #[arg(long = "inject-fault")]
    inject: bool,
}

struct Args {
    seed: Option<u64>,
    ops: u64,
    threads: Option<u32>,
    blocks: Option<u32>,
    per_thread: usize,
    per_unit: usize,
    skip: u32,
    skip_names: Vec<String>,
    inject: bool,
}

fn usage_error(msg: impl std::fmt::Display) -> ! {
    eprintln!("rshmem-soak: {msg} (rshmem-soak --help lists the options)");
    exit(2)
}

/// A number, decimal or 0x hex.
fn parse_number(v: &str) -> Result<u64, String> {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => v.parse(),
    }
    .map_err(|_| format!("{v:?} is not a number (decimal or 0x hex)"))
}

/// One kind of `--skip`.
fn parse_skip(v: &str) -> Result<String, String> {
    if SKIP_NAMES.iter().any(|(n, _)| *n == v) {
        Ok(v.to_string())
    } else {
        Err(format!("unknown kind {v:?} (one of {})", SKIP_NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")))
    }
}

fn parse() -> Args {
    use clap::Parser;
    let c = Cli::parse();
    let skip = c.skip.iter().map(|k| SKIP_NAMES.iter().find(|(n, _)| n == k).map_or(0, |(_, b)| *b)).fold(0, |a, b| a | b);
    Args {
        seed: c.seed,
        ops: c.ops,
        threads: c.threads,
        blocks: c.blocks,
        per_thread: c.per_thread as usize,
        per_unit: c.per_unit as usize,
        skip,
        skip_names: c.skip,
        inject: c.inject,
    }
}

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("rshmem-soak: PE {}: FAILED: {msg}", rshmem::my_pe());
    exit(1)
}
fn ck<T>(r: rshmem::Result<T>) -> T {
    r.unwrap_or_else(|e| die(e))
}
fn barrier() {
    ck(rshmem::barrier_all())
}
fn copy_out(p: *const u8, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: callers pass a live symmetric allocation of at least `len` bytes.
    ck(unsafe { rshmem::copy_out(&mut v, p) });
    v
}
fn get_from(p: *const u8, len: usize, pe: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: `v` holds `len` bytes; `p` is a live symmetric allocation of at least `len` bytes.
    ck(unsafe { rshmem::getmem(v.as_mut_ptr(), p, len, pe as i32) });
    v
}

fn pattern(seed: u64, id: u64, pe: usize, len: usize) -> Vec<u8> {
    let mut r = Rng::new(seed ^ 0xb10c, id, pe as u64, 9, 0);
    let mut v = vec![0u8; len];
    for c in v.chunks_mut(8) {
        let x = r.next_u64().to_le_bytes();
        c.copy_from_slice(&x[..c.len()]);
    }
    v
}

/// Host-side allocation churn: blocks of random sizes come and go; each holds a pattern that must
/// survive the rounds (and be readable from the next PE).
struct Churn {
    live: Vec<(*mut u8, usize, u64)>,
    next_id: u64,
    allocs: u64,
    frees: u64,
    refused: u64,
    high: usize,
}

impl Churn {
    fn step(&mut self, seed: u64, round: u64, me: usize) {
        let heap = rshmem::heap_size();
        let mut r = Rng::new(seed, round, 0, 0xc4, 0);
        for _ in 0..r.below(3) {
            if !self.live.is_empty() {
                let i = r.below(self.live.len() as u64) as usize;
                let (p, _, _) = self.live.swap_remove(i);
                ck(rshmem::free(p));
                self.frees += 1;
            }
        }
        let max = (heap / 32).max(4096);
        for _ in 0..r.below(4) {
            // Log-uniform sizes from 1 byte to heap/32; at most a quarter of the heap live.
            let bits = r.below(usize::BITS as u64 - max.leading_zeros() as u64);
            let len = (r.range(1u64 << bits, (2u64 << bits) - 1) as usize).min(max);
            let held: usize = self.live.iter().map(|l| l.1).sum();
            if held + len > heap / 4 {
                continue;
            }
            match rshmem::malloc(len) {
                Ok(p) => {
                    let id = self.next_id;
                    self.next_id += 1;
                    // SAFETY: p is a fresh symmetric allocation of len bytes.
                    ck(unsafe { rshmem::copy_in(p, &pattern(seed, id, me, len)) });
                    self.live.push((p, len, id));
                    self.allocs += 1;
                    let end = rshmem::heap_offset(p).unwrap_or(0) + len;
                    self.high = self.high.max(end);
                }
                // Fragmentation can refuse a block on every PE alike (the allocator is deterministic).
                Err(e) if e.message().contains("exhausted") => self.refused += 1,
                Err(e) => die(format!("churn malloc({len}): {e}")),
            }
        }
    }

    /// Every live block holds its pattern here, and the next PE's copy holds that PE's pattern.
    fn verify(&self, seed: u64, round: u64, me: usize, n: usize) {
        let next = (me + 1) % n;
        for &(p, len, id) in &self.live {
            if copy_out(p, len) != pattern(seed, id, me, len) {
                die(format!("MISMATCH (seed {seed}, round {round}): live allocation #{id} ({len} bytes at heap offset {:#x}) lost its contents on PE {me}", rshmem::heap_offset(p).unwrap_or(0)));
            }
            if get_from(p, len, next) != pattern(seed, id, next, len) {
                die(format!("MISMATCH (seed {seed}, round {round}): live allocation #{id} ({len} bytes) read from PE {next} with getmem differs from what PE {next} wrote"));
            }
        }
    }
}

/// The round in progress and since when (for the watchdog).
static IN_ROUND: std::sync::Mutex<Option<(u64, Instant)>> = std::sync::Mutex::new(None);

/// Names a stalled round (seed, round, where messages come from) before any wait timeout or
/// rshmrun --timeout ends the job, which would only name the waiting call.
fn watchdog(seed: u64, me: usize, n: usize, after: std::time::Duration) {
    std::thread::spawn(move || {
        let mut told = None;
        loop {
            std::thread::sleep(std::time::Duration::from_millis(500));
            let cur = *IN_ROUND.lock().unwrap();
            if let Some((round, t)) = cur {
                if t.elapsed() > after && told != Some(round) {
                    told = Some(round);
                    let from = (me + n - soak::distance(seed, round, n)) % n;
                    eprintln!(
                        "rshmem-soak: PE {me}: round {round} (seed {seed}) has run for {:.0} s: stalled? this round PE {me} receives messages from PE {from}",
                        t.elapsed().as_secs_f64()
                    );
                }
            }
        }
    });
}

fn random_seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    Rng::new(t, std::process::id() as u64, 0, 0, 0).next_u64()
}

fn main() {
    let args = parse();
    // A lost message or signal must end the run naming the wait, not hang it (CPU backend).
    if std::env::var_os("RSHMEM_WAIT_TIMEOUT").is_none() {
        std::env::set_var("RSHMEM_WAIT_TIMEOUT", "60");
    }
    ck(rshmem::init());
    let (me, n) = (rshmem::my_pe() as usize, rshmem::n_pes() as usize);
    if n > MAX_PES {
        die(format!("{n} PEs: the soak supports at most {MAX_PES}"));
    }
    let backend = ck(rshmem::backend_name());
    let gpu = backend == "cuda";
    let threads = args.threads.unwrap_or(if gpu { 128 } else { 4 });
    let blocks = args.blocks.unwrap_or(if gpu { 8 } else { 2 });
    if threads == 0 || threads > 1024 || blocks == 0 || blocks > 1024 {
        usage_error("--threads must be 1..=1024 and --blocks 1..=1024");
    }
    if gpu && !threads.is_multiple_of(32) {
        // Warp-scoped calls synchronize full warps on GPUs.
        usage_error("on GPUs --threads must be a multiple of 32");
    }

    // Every PE uses PE 0's seed.
    let word = ck(rshmem::malloc(8));
    if me == 0 {
        let s = args.seed.unwrap_or_else(random_seed).to_le_bytes();
        for pe in 0..n {
            // SAFETY: `s` holds 8 bytes; `word` is a symmetric allocation of 8 bytes.
            ck(unsafe { rshmem::putmem(word, s.as_ptr(), 8, pe as i32) });
        }
    }
    barrier();
    let seed = u64::from_le_bytes(copy_out(word, 8).try_into().unwrap());
    barrier();
    ck(rshmem::free(word));

    let per_thread = args.per_thread;
    let lay = Layout::new(n, blocks as usize, threads as usize, per_thread);
    let skip_text = if args.skip_names.is_empty() { String::new() } else { format!(" --skip {}", args.skip_names.join(",")) };
    if me == 0 {
        println!(
            "rshmem-soak: seed {seed} ({n} PEs, {backend} backend, {blocks} blocks x {threads} threads per PE, {per_thread} operations per thread and {} per warp/block per round, {} operations in all, buffer {} bytes, heap {} bytes{})",
            args.per_unit,
            args.ops,
            lay.size,
            rshmem::heap_size(),
            if skip_text.is_empty() { String::new() } else { format!(", skipping {}", args.skip_names.join(",")) }
        );
        println!(
            "rshmem-soak: reproduce with: rshmrun -np {n} rshmem-soak --seed {seed} --ops {} --threads {threads} --blocks {blocks} --per-thread {per_thread} --per-unit {}{skip_text}",
            args.ops, args.per_unit
        );
    }
    // Exhaustion is a clear error, and the heap goes on working.
    match rshmem::malloc(rshmem::heap_size()) {
        Ok(_) => die("malloc of the whole heap succeeded"),
        Err(e) if e.message().contains("exhausted") => {}
        Err(e) => die(format!("malloc of the whole heap: unclear error: {e}")),
    }

    watchdog(seed, me, n, std::time::Duration::from_secs(20));
    let start = Instant::now();
    let mut churn = Churn { live: vec![], next_id: 0, allocs: 0, frees: 0, refused: 0, high: 0 };
    let mut total = 0u64;
    let mut kinds: std::collections::BTreeMap<&'static str, u64> = Default::default();
    let mut buf: *mut u8 = std::ptr::null_mut();
    let mut round = 0u64;
    while total < args.ops {
        let m = Model::build(seed, round, me, n, blocks as usize, threads as usize, per_thread, args.per_unit, args.skip);
        if args.skip & SKIP_CHURN == 0 {
            churn.step(seed, round, me);
        }
        // A new buffer each round (allocated before the old one is freed, so it moves around).
        let nb = ck(rshmem::malloc(lay.size));
        if !buf.is_null() {
            ck(rshmem::free(buf));
        }
        buf = nb;
        churn.high = churn.high.max(rshmem::heap_offset(buf).unwrap_or(0) + lay.size);
        // SAFETY: buf is a symmetric allocation of lay.size bytes = m.start.len().
        ck(unsafe { rshmem::copy_in(buf, &m.start) });
        barrier();
        *IN_ROUND.lock().unwrap() = Some((round, Instant::now()));
        let b = buf as u64;
        // SAFETY: k_soak and k_soak_barrier read exactly these arguments; `b` is the live symmetric
        // allocation of lay.size bytes their layout (derived from the same parameters) addresses.
        ck(unsafe { K.run_collective("k_soak", blocks, threads, &[b, seed, round, per_thread as u64, args.per_unit as u64, args.skip as u64]) }
            .map_err(|e| e.context("k_soak")));
        if args.skip & SKIP_BARRIER == 0 {
            // SAFETY: as above.
            ck(unsafe { K.run("k_soak_barrier", 1, threads, &[b, seed, round, per_thread as u64, blocks as u64]) }
                .map_err(|e| e.context("k_soak_barrier")));
        }
        barrier();
        *IN_ROUND.lock().unwrap() = None;
        if args.inject && round == 0 && me == n - 1 {
            let off = m.fault_target(me);
            // SAFETY: off < lay.size: a byte of this PE's buffer.
            let p = unsafe { buf.add(off) };
            let v = copy_out(p, 1)[0];
            // SAFETY: as above.
            ck(unsafe { rshmem::copy_in(p, &[v ^ 0x5a]) });
            eprintln!("rshmem-soak: --inject-fault: PE {me} changed byte {off:#x} of its buffer ({}) from {v:#04x} to {:#04x}", m.region(off), v ^ 0x5a);
        }
        let actual = copy_out(buf, lay.size);
        // SAFETY: lay.res < lay.size: the results area inside the buffer.
        let res_ptr = unsafe { buf.add(lay.res) };
        let res: Vec<Vec<u8>> = (0..n).map(|pe| if pe == me { actual[lay.res..].to_vec() } else { get_from(res_ptr, lay.size - lay.res, pe) }).collect();
        if let Err(msg) = m.check(me, &actual, &res) {
            eprintln!("rshmem-soak: {msg}");
            eprintln!(
                "rshmem-soak: reproduce with: rshmrun -np {n} rshmem-soak --seed {seed} --ops {} --threads {threads} --blocks {blocks} --per-thread {per_thread} --per-unit {}{skip_text}",
                args.ops, args.per_unit
            );
            exit(1);
        }
        if args.skip & SKIP_CHURN == 0 {
            churn.verify(seed, round, me, n);
        }
        // Nobody reuses its buffer before every PE has read the others' records.
        barrier();
        total += m.total_calls;
        for (k, v) in &m.by_kind {
            *kinds.entry(k).or_default() += v;
        }
        round += 1;
    }
    if me == 0 {
        let secs = start.elapsed().as_secs_f64();
        let list: Vec<String> = kinds.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("rshmem-soak: calls by kind: {}", list.join(", "));
        println!(
            "rshmem-soak: heap churn: {} allocations, {} frees, {} refused (heap full), highest offset used {:#x} of {:#x}",
            churn.allocs,
            churn.frees,
            churn.refused,
            churn.high,
            rshmem::heap_size()
        );
        println!("rshmem-soak: PASSED: {total} operations in {round} rounds, {n} PEs, seed {seed}, {secs:.1} s");
    }
    ck(rshmem::free(buf));
    for (p, _, _) in churn.live.drain(..) {
        ck(rshmem::free(p));
    }
    ck(rshmem::finalize());
}
