//! The PE program of rshmem's multi-process test suite. Run under rshmrun (or mpirun) as
//! `rshmem-test-pe SCENARIO [SCENARIO...]` (or `all`); each scenario sets up buffers with random data,
//! runs one of the kernels of `rshmem-test-kernels` on every PE (host threads on the CPU backend, a GPU
//! kernel on the CUDA backend), and checks the outcome on the host. Prints `PE n: SCENARIO ok` or exits
//! non-zero with what differed.
//!
//! Environment: RSHMEM_TEST_THREADS (threads per block; default 8 on CPU, 256 on GPU),
//! RSHMEM_TEST_SEED (random data seed; default derived from the job key).

use rshmem::kernels::KernelSet;
use rshmem_device::{CMP_EQ, TEAM_NODE};
use std::process::exit;

mod coll;
mod port;
mod remote;
mod robust;
mod scaling;

/// Counts the bytes this process has allocated and not freed, for the re-init scenario's leak check.
struct Counting;
static LIVE_BYTES: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);
// SAFETY: every call is forwarded unchanged to the system allocator; the counter is only bookkeeping.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(l.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        LIVE_BYTES.fetch_sub(l.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: p came from alloc/realloc with layout l.
        unsafe { std::alloc::System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, new: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new as isize - l.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: as dealloc, with the caller's new size.
        unsafe { std::alloc::System.realloc(p, l, new) }
    }
}
#[global_allocator]
static ALLOC: Counting = Counting;

static K: KernelSet = KernelSet::new(rshmem_test_kernels::CPU_KERNELS, include_str!(concat!(env!("OUT_DIR"), "/test_kernels.ptx")));

struct Ctx {
    me: usize,
    n: usize,
    threads: u32,
    seed: u64,
    /// How long `rshmem::init` took.
    init: std::time::Duration,
}

fn die(msg: impl std::fmt::Display) -> ! {
    // known_pe: the PE number is known even when init itself failed.
    match rshmem::known_pe() {
        Some(pe) => eprintln!("PE {pe}: FAILED: {msg}"),
        None => eprintln!("PE ?: FAILED: {msg}"),
    }
    exit(1)
}
fn ck<T>(r: rshmem::Result<T>) -> T {
    r.unwrap_or_else(|e| die(e))
}

/// xorshift64*: reproducible data any PE can regenerate for any other PE. Distinct seeds give distinct
/// data: the seed goes through splitmix64's finalizer (a bijection) to a nonzero state, instead of
/// `seed | 1`, which gave PEs 2k and 2k+1 the same bytes.
fn fill(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    if x == 0 {
        x = 0x2545_f491_4f6c_dd1d; // xorshift's one fixed point; any nonzero state will do
    }
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545F4914F6CDD1D) >> 56) as u8
        })
        .collect()
}

fn put_bytes(p: *mut u8, b: &[u8]) {
    // SAFETY: p is a live symmetric allocation of at least b.len() bytes (scenario invariant).
    ck(unsafe { rshmem::copy_in(p, b) })
}
fn get_bytes(p: *const u8, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: as put_bytes.
    ck(unsafe { rshmem::copy_out(&mut v, p) });
    v
}
fn get_u64s(p: *const u8, n: usize) -> Vec<u64> {
    get_bytes(p, 8 * n).chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
}
fn barrier() {
    ck(rshmem::barrier_all())
}
fn run(name: &str, grid: u32, block: u32, args: &[u64]) {
    // SAFETY: every scenario passes the arguments its kernel documents (tests/kernels/src/lib.rs), with
    // pointers into its live symmetric allocations.
    ck(unsafe { K.run(name, grid, block, args) }.map_err(|e| e.context(name)))
}

fn ring(c: &Ctx) {
    let dst = ck(rshmem::malloc(4));
    put_bytes(dst, &(-1i32).to_le_bytes());
    barrier();
    run("k_ring_p", 1, 1, &[dst as u64]);
    barrier();
    let v = i32::from_le_bytes(get_bytes(dst, 4).try_into().unwrap());
    println!("{}: received message {v}", c.me);
    if v as usize != (c.me + c.n - 1) % c.n {
        die(format!("ring: received {v}, expected {}", (c.me + c.n - 1) % c.n));
    }
    ck(rshmem::free(dst));
}

fn rma(c: &Ctx) {
    let max = 1usize << 20;
    let dst = ck(rshmem::malloc(max + 64));
    let src = ck(rshmem::malloc(max + 64));
    let mut case = 0u64;
    for &bytes in &[1usize, 3, 8, 100, 4096 + 7, 65536 + 13, max] {
        for scope in 0..3u64 {
            for nbi in 0..2u64 {
                for dir in 0..2u64 {
                    case += 1;
                    let (doff, soff) = ((case % 4) as usize, ((case / 4) % 3) as usize * 5 % 16);
                    let seed_of = |pe: usize| c.seed ^ (case << 20) ^ pe as u64;
                    put_bytes(src, &fill(seed_of(c.me), max + 64));
                    let poison = fill(!seed_of(c.me), max + 64);
                    put_bytes(dst, &poison);
                    barrier();
                    // Put or get, the kernel writes dst + doff from src + soff (of the next or previous PE).
                    let (d, s) = (dst as u64 + doff as u64, src as u64 + soff as u64);
                    run("k_rma", 1, c.threads, &[d, s, bytes as u64, scope, nbi, dir]);
                    barrier();
                    let from = if dir == 0 { (c.me + c.n - 1) % c.n } else { (c.me + 1) % c.n };
                    let want = fill(seed_of(from), max + 64);
                    let got = get_bytes(dst, max + 64);
                    let what = format!("rma {} {bytes} bytes scope {scope} nbi {nbi} (dst+{doff}, src+{soff})", if dir == 0 { "put" } else { "get" });
                    if got[doff..doff + bytes] != want[soff..soff + bytes] {
                        let i = (0..bytes).find(|&i| got[doff + i] != want[soff + i]).unwrap();
                        die(format!("{what}: byte {i} is {:#x}, expected {:#x}", got[doff + i], want[soff + i]));
                    }
                    if got[..doff] != poison[..doff] || got[doff + bytes..] != poison[doff + bytes..] {
                        die(format!("{what}: bytes outside the target range were written"));
                    }
                }
            }
        }
    }
    ck(rshmem::free(src));
    ck(rshmem::free(dst));
}

fn pg(c: &Ctx) {
    let n = 64usize;
    let base = ck(rshmem::malloc(15 * n));
    let out = ck(rshmem::malloc(8 * n));
    put_bytes(base, &vec![0u8; 15 * n]);
    barrier();
    run("k_pg", 1, c.threads, &[base as u64, out as u64, n as u64]);
    barrier();
    let pat = |pe: usize, i: usize| ((pe as u64) << 56) | (i as u64 * 0x0101_0101);
    let got = get_u64s(out, n);
    for (i, &g) in got.iter().enumerate() {
        let v = pat(c.me, i);
        let want = v ^ (v as u32 as u64) ^ (v as u16 as u64) ^ (v as u8 as u64);
        if g != want {
            die(format!("p/g: element {i} read back {g:#x}, expected {want:#x}"));
        }
    }
    let mine = get_bytes(base, 15 * n);
    let prev = (c.me + c.n - 1) % c.n;
    for i in 0..n {
        let v = pat(prev, i);
        let x = u64::from_le_bytes(mine[8 * i..8 * i + 8].try_into().unwrap());
        let y = u32::from_le_bytes(mine[8 * n + 4 * i..8 * n + 4 * i + 4].try_into().unwrap());
        let z = u16::from_le_bytes(mine[12 * n + 2 * i..12 * n + 2 * i + 2].try_into().unwrap());
        let w = mine[14 * n + i];
        if x != v || y != v as u32 || z != v as u16 || w != v as u8 {
            die(format!("p: element {i} from PE {prev} is wrong ({x:#x} {y:#x} {z:#x} {w:#x}, expected from {v:#x})"));
        }
    }
    ck(rshmem::free(out));
    ck(rshmem::free(base));
}

fn amo(c: &Ctx) {
    let vars = ck(rshmem::malloc(64));
    let res = ck(rshmem::malloc(8 * 40));
    let mut init = vec![0u8; 64];
    init[0..4].copy_from_slice(&5u32.to_le_bytes());
    init[8..16].copy_from_slice(&5u64.to_le_bytes());
    init[16..24].copy_from_slice(&0i64.to_le_bytes());
    init[24..32].copy_from_slice(&1.0f64.to_bits().to_le_bytes());
    put_bytes(vars, &init);
    put_bytes(res, &[0xEE; 320]);
    barrier();
    let v = vars as u64;
    run("k_amo", 1, c.threads, &[v, v + 8, v + 16, v + 24, res as u64]);
    barrier();
    let me = c.me as u64;
    let seq = [5, 10, 12, 12, 100, 100, 0xF0, 0x20, 0x65, 0x95, 77 + me];
    let mut want: Vec<u64> = seq.to_vec();
    want.extend_from_slice(&seq);
    want.extend_from_slice(&[0, (-10i64) as u64, 1.0f64.to_bits(), 2.5f64.to_bits(), (-1.25f64).to_bits()]);
    let got = get_u64s(res, want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if g != w {
            die(format!("atomics: result {i} is {g:#x}, expected {w:#x} (results {got:x?})"));
        }
    }
    let fin = get_bytes(vars, 32);
    let prev = ((c.me + c.n - 1) % c.n) as u64;
    let v32 = u32::from_le_bytes(fin[0..4].try_into().unwrap()) as u64;
    let v64 = u64::from_le_bytes(fin[8..16].try_into().unwrap());
    let vi = i64::from_le_bytes(fin[16..24].try_into().unwrap());
    let vf = f64::from_bits(u64::from_le_bytes(fin[24..32].try_into().unwrap()));
    if v32 != 77 + prev || v64 != 77 + prev || vi != -7 || vf != 0.5 {
        die(format!("atomics: final values {v32} {v64} {vi} {vf}, expected {} {} -7 0.5", 77 + prev, 77 + prev));
    }
    ck(rshmem::free(res));
    ck(rshmem::free(vars));
}

fn contention(c: &Ctx) {
    let iters = 50usize;
    let per_pe = c.threads as usize * iters;
    let ctr = ck(rshmem::calloc(2, 8));
    let out = ck(rshmem::malloc(8 * per_pe));
    barrier();
    run("k_contention", 1, c.threads, &[ctr as u64, out as u64, iters as u64, ctr as u64 + 8]);
    barrier();
    if c.me == 0 {
        let total = per_pe * c.n;
        let mut all = Vec::with_capacity(total);
        for pe in 0..c.n {
            let mut buf = vec![0u8; 8 * per_pe];
            // SAFETY: buf holds 8*per_pe bytes; out is symmetric of that size.
            ck(unsafe { rshmem::getmem(buf.as_mut_ptr(), out, buf.len(), pe as i32) });
            all.extend(buf.chunks(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())));
        }
        all.sort_unstable();
        if let Some(i) = (0..total).find(|&i| all[i] != i as u64) {
            die(format!("contention: fetch_add results are not {{0..{total}}}: sorted value #{i} is {}", all[i]));
        }
        let cnt = get_bytes(ctr, 16);
        let c64 = u64::from_le_bytes(cnt[0..8].try_into().unwrap());
        let c32 = u32::from_le_bytes(cnt[8..12].try_into().unwrap());
        if c64 != total as u64 || c32 != total as u32 {
            die(format!("contention: counters {c64} / {c32}, expected {total}"));
        }
    }
    barrier();
    ck(rshmem::free(out));
    ck(rshmem::free(ctr));
}

fn lock(c: &Ctx) {
    let iters = 20u64;
    let l = ck(rshmem::calloc(2, 8));
    barrier();
    run("k_lock", 1, c.threads, &[l as u64, l as u64 + 8, iters]);
    barrier();
    if c.me == 0 {
        let d = get_u64s(l.wrapping_add(8), 1)[0];
        let want = c.n as u64 * c.threads as u64 * iters;
        if d != want {
            die(format!("compare_swap lock: counter {d}, expected {want} (lost updates: the lock did not exclude)"));
        }
    }
    barrier();
    ck(rshmem::free(l));
}

fn fence(c: &Ctx) {
    let (rounds, words) = (300u64, 64u64);
    let data = ck(rshmem::calloc(words as usize, 8));
    let flags = ck(rshmem::calloc(2, 8));
    let stg = ck(rshmem::malloc(8 * words as usize));
    let errs = ck(rshmem::calloc(1, 8));
    barrier();
    let f = flags as u64;
    run("k_fence", 1, c.threads, &[data as u64, f, f + 8, stg as u64, rounds, words, errs as u64]);
    barrier();
    let e = get_u64s(errs, 1)[0];
    if e != 0 {
        die(format!("fence: {e} words were not yet delivered when the flag put after the fence was seen"));
    }
    for p in [errs, stg, flags, data] {
        ck(rshmem::free(p));
    }
}

fn put_signal(c: &Ctx) {
    let (rounds, bytes) = (60u64, 1000u64);
    let data = ck(rshmem::malloc(bytes as usize));
    let sigs = ck(rshmem::malloc(16));
    let stg = ck(rshmem::malloc(bytes as usize));
    let errs = ck(rshmem::malloc(8));
    for scope in 0..3u64 {
        for op in 0..2u64 {
            put_bytes(sigs, &[0; 16]);
            put_bytes(errs, &[0xFF; 8]);
            barrier();
            let s = sigs as u64;
            run("k_put_signal", 1, c.threads, &[data as u64, s, s + 8, stg as u64, rounds, bytes, errs as u64, scope, op]);
            barrier();
            let e = get_u64s(errs, 1)[0];
            if e != 0 {
                die(format!("put_signal (scope {scope}, op {}): {e} errors (payload incomplete when the signal was seen, or wrong signal value)", if op == 0 { "set" } else { "add" }));
            }
        }
    }
    for p in [errs, stg, sigs, data] {
        ck(rshmem::free(p));
    }
}

fn wait(c: &Ctx) {
    let v = ck(rshmem::calloc(3, 8));
    barrier();
    let b = v as u64;
    run("k_wait", 1, c.threads, &[b, b + 8, b + 16]);
    barrier();
    let ok = get_u64s(v.wrapping_add(16), 1)[0];
    if ok != 12 {
        die(format!("wait_until/test: {ok} of 12 checks passed"));
    }
    ck(rshmem::free(v));
}

fn barrier_test(c: &Ctx) {
    let slots = ck(rshmem::calloc(c.n, 8));
    let errs = ck(rshmem::malloc(8));
    for variant in 0..4u64 {
        put_bytes(slots, &vec![0; 8 * c.n]);
        put_bytes(errs, &[0xFF; 8]);
        barrier();
        run("k_barrier", 1, c.threads, &[slots as u64, 100, errs as u64, variant]);
        barrier();
        let e = get_u64s(errs, 1)[0];
        if e != 0 {
            die(format!("device barrier variant {variant}: {e} slots not yet written after the barrier"));
        }
    }
    ck(rshmem::free(errs));
    ck(rshmem::free(slots));
}

/// Re-initialization: three init/finalize cycles in one process (the first uses main's init, the last
/// leaves the runtime initialized for main's finalize). Each cycle allocates (a different size every
/// time, with a different offset layout), runs a put kernel to the next PE and a device barrier kernel,
/// then a host barrier, and checks the received bytes: a stale device state or kernel module from an
/// earlier cycle (old heap base, old peer bases) puts into the wrong place or fails the device checks.
///
/// `reinit_stale` then finalizes once more and asks the device library for a peer address of a buffer of
/// the finalized heap: that must stop the PE naming the call, never hand out an address of the unmapped
/// heap.
/// The names of this process's threads, the main thread aside, that the runtime starts (`rshmem-`,
/// not the CPU backend's kernel threads `rshmem-b<block>t<thread>`, which a launch joins).
fn runtime_threads() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    let main = std::process::id().to_string();
    dir.filter_map(|t| t.ok())
        .filter(|t| t.file_name().to_str() != Some(main.as_str()))
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .filter(|n| n.starts_with("rshmem-") && !(n.starts_with("rshmem-b") && n[8..].starts_with(|c: char| c.is_ascii_digit())))
        .collect()
}

fn reinit(c: &Ctx, stale: bool) {
    let mut kept = std::ptr::null_mut();
    // Live bytes right after each finalize, when the runtime is fully stopped (its threads joined):
    // right after init the new runtime's threads may still be allocating their buffers.
    let mut live = Vec::with_capacity(2);
    for cycle in 0..3u64 {
        if cycle > 0 {
            ck(rshmem::finalize());
            live.push(LIVE_BYTES.load(std::sync::atomic::Ordering::Relaxed));
            // Every thread the runtime started has ended when finalize returns (a detached one still
            // holds what it references: the proxy's reaper kept the engine's lane rings alive).
            let left = runtime_threads();
            if !left.is_empty() {
                die(format!("reinit cycle {cycle}: threads of the runtime still run after finalize returned: {left:?}"));
            }
            if rshmem::my_pe() != -1 || rshmem::n_pes() != 0 {
                die(format!("reinit cycle {cycle}: after finalize my_pe {} n_pes {}", rshmem::my_pe(), rshmem::n_pes()));
            }
            ck(rshmem::init());
            if rshmem::my_pe() as usize != c.me || rshmem::n_pes() as usize != c.n {
                die(format!("reinit cycle {cycle}: init gave PE {} of {}, expected {} of {}", rshmem::my_pe(), rshmem::n_pes(), c.me, c.n));
            }
        }
        let bytes = [4096 + 8, 100_000 + 3, 777][cycle as usize];
        // A different layout each cycle: cycle 1 shifts every offset by a leading allocation.
        let lead = if cycle == 1 { Some(ck(rshmem::malloc(12345))) } else { None };
        let src = ck(rshmem::malloc(bytes));
        let dst = ck(rshmem::malloc(bytes));
        let slots = ck(rshmem::calloc(c.n, 8));
        let errs = ck(rshmem::malloc(8));
        let seed_of = |pe: usize| c.seed ^ (cycle << 40) ^ 0x4e1 ^ pe as u64;
        put_bytes(src, &fill(seed_of(c.me), bytes));
        let poison = fill(!seed_of(c.me), bytes);
        put_bytes(dst, &poison);
        put_bytes(errs, &[0xFF; 8]);
        barrier();
        run("k_rma", 1, c.threads, &[dst as u64, src as u64, bytes as u64, 2, 0, 0]);
        run("k_barrier", 1, c.threads, &[slots as u64, 20, errs as u64, cycle % 4]);
        barrier();
        let want = fill(seed_of((c.me + c.n - 1) % c.n), bytes);
        let got = get_bytes(dst, bytes);
        if got != want {
            let i = (0..bytes).find(|&i| got[i] != want[i]).unwrap();
            die(format!("reinit cycle {cycle}: byte {i} of {bytes} from PE {} is {:#x}, expected {:#x}", (c.me + c.n - 1) % c.n, got[i], want[i]));
        }
        let e = get_u64s(errs, 1)[0];
        if e != 0 {
            die(format!("reinit cycle {cycle}: device barrier: {e} slots not yet written after the barrier"));
        }
        println!("PE {}: reinit cycle {cycle}: {bytes} bytes received from PE {}", c.me, (c.me + c.n - 1) % c.n);
        for p in [errs, slots, dst, src] {
            ck(rshmem::free(p));
        }
        if let Some(p) = lead {
            ck(rshmem::free(p));
        }
        kept = ck(rshmem::malloc(64));
    }
    // Between the first and second finalize a whole cycle ran (init, work, finalize): the process must
    // not hold more memory after the second than after the first (each init used to leak a
    // DeviceState, 6 KiB).
    println!("PE {}: reinit: live heap bytes after the 1st and 2nd finalize {live:?}", c.me);
    if live[1] - live[0] >= 1024 {
        die(format!("reinit: {} bytes more live after the 2nd finalize than after the 1st: something leaks per init/finalize cycle", live[1] - live[0]));
    }
    if stale {
        ck(rshmem::finalize());
        let next = ((c.me + 1) % c.n) as i32;
        let p = rshmem_device::ptr(kept, next);
        die(format!("reinit_stale: after finalize the device library gave {p:p} for PE {next}'s copy of {kept:p}"));
    }
}

fn host_rma(c: &Ctx) {
    let len = 100_000usize;
    let buf = ck(rshmem::malloc(len));
    let data = fill(c.seed ^ 0x77 ^ c.me as u64, len);
    barrier();
    // SAFETY: data holds len bytes; buf is symmetric of len bytes.
    ck(unsafe { rshmem::putmem(buf, data.as_ptr(), len, ((c.me + 1) % c.n) as i32) });
    barrier();
    let prev = (c.me + c.n - 1) % c.n;
    if get_bytes(buf, len) != fill(c.seed ^ 0x77 ^ prev as u64, len) {
        die("host putmem: data from the previous PE differs");
    }
    let mut back = vec![0u8; len];
    // SAFETY: back holds len bytes.
    ck(unsafe { rshmem::getmem(back.as_mut_ptr(), buf, len, ((c.me + 1) % c.n) as i32) });
    if back != data {
        die("host getmem: the next PE's buffer differs from what this PE put there");
    }
    barrier();
    ck(rshmem::free(buf));
}

fn alloc(c: &Ctx) {
    let sizes = [1usize, 100, 4096, 1 << 20, 7];
    let mut ptrs: Vec<*mut u8> = sizes.iter().map(|&s| ck(rshmem::malloc(s))).collect();
    ptrs.push(ck(rshmem::align(1 << 16, 10)));
    if !(ptrs[5] as usize).is_multiple_of(1 << 16) {
        die("rshmem::align: result not aligned");
    }
    let offs: Vec<u64> = ptrs.iter().map(|&p| rshmem::heap_offset(p).unwrap_or_else(|| die("allocation outside the heap")) as u64).collect();
    // Everyone sends its offsets to PE 0, which compares.
    let table = ck(rshmem::malloc(8 * offs.len() * c.n));
    let mine: Vec<u8> = offs.iter().flat_map(|o| o.to_le_bytes()).collect();
    // SAFETY: table has room for every PE's row.
    ck(unsafe { rshmem::putmem(table.add(c.me * mine.len()), mine.as_ptr(), mine.len(), 0) });
    barrier();
    if c.me == 0 {
        let all = get_u64s(table, offs.len() * c.n);
        for pe in 0..c.n {
            if all[pe * offs.len()..(pe + 1) * offs.len()] != offs[..] {
                die(format!("allocation offsets differ: PE 0 {:?}, PE {pe} {:?}", offs, &all[pe * offs.len()..(pe + 1) * offs.len()]));
            }
        }
    }
    // Free one in the middle, allocate the same size again: the block is reused.
    ck(rshmem::free(ptrs[2]));
    let again = ck(rshmem::malloc(4096));
    if again != ptrs[2] {
        die("free/reuse: a freed block was not reused for the same size");
    }
    ptrs[2] = again;
    // calloc of a dirty block gives zeros.
    put_bytes(ptrs[3], &vec![0xAB; 1 << 20]);
    ck(rshmem::free(ptrs[3]));
    let z = ck(rshmem::calloc(1 << 18, 4));
    if get_bytes(z, 1 << 20).iter().any(|&b| b != 0) {
        die("calloc: memory not zeroed");
    }
    ptrs[3] = z;
    // Exhaustion: a clear error, and the heap still works afterwards.
    match rshmem::malloc(rshmem::heap_size() * 2) {
        Ok(_) => die("malloc larger than the heap succeeded"),
        Err(e) if e.message().contains("exhausted") => println!("PE {}: expected error: {e}", c.me),
        Err(e) => die(format!("exhaustion error does not say so: {e}")),
    }
    let after = ck(rshmem::malloc(64));
    // Freeing something that is not a heap allocation.
    let mut local = 0u64;
    match rshmem::free(&mut local as *mut u64 as *mut u8) {
        Ok(()) => die("free of a stack pointer succeeded"),
        Err(e) if e.message().contains("not the start of a live symmetric allocation") => {}
        Err(e) => die(format!("free of a stack pointer: unclear error: {e}")),
    }
    ck(rshmem::free(after));
    ck(rshmem::free(table));
    for p in ptrs {
        ck(rshmem::free(p));
    }
    barrier();
}

fn alloc_mismatch(c: &Ctx) {
    match rshmem::malloc(64 * (c.me + 1)) {
        Ok(_) => die("malloc with different sizes on different PEs succeeded"),
        Err(e) => {
            let m = e.message();
            if !(m.contains("different sizes") && m.contains("PE 0 asked for 64 bytes") && m.contains("128 bytes")) {
                die(format!("size mismatch error does not name the sizes: {m}"));
            }
            println!("PE {}: expected error: {m}", c.me);
        }
    }
    // The heap is intact and the job goes on.
    let p = ck(rshmem::malloc(64));
    ck(rshmem::free(p));
}

fn free_bad(c: &Ctx) {
    let p = ck(rshmem::malloc(64));
    let mut local = 0u64;
    let arg = if c.me == 1 { &mut local as *mut u64 as *mut u8 } else { p };
    match rshmem::free(arg) {
        Ok(()) => die("a free with a bad pointer on PE 1 succeeded"),
        Err(e) => println!("PE {}: expected error: {e}", c.me),
    }
    ck(rshmem::free(p));
}

/// PE 0 enters barrier_all, the others malloc: every PE must get an error naming both calls.
fn mismatch_collective(c: &Ctx) {
    let r = if c.me == 0 { rshmem::barrier_all().map(|_| ()) } else { rshmem::malloc(64).map(|_| ()) };
    match r {
        Ok(()) => die("mismatched collectives succeeded"),
        Err(e) => {
            let m = e.message();
            if !(m.contains("rshmem_barrier_all") && m.contains("rshmem_malloc")) {
                die(format!("mismatch error does not name both calls: {m}"));
            }
            println!("PE {}: expected error: {m}", c.me);
            println!("PE {}: mismatch_collective ok", c.me);
            exit(0);
        }
    }
}

/// PE 1 leaves (exit 0, so no launcher notices) while the others enter barrier_all: they must fail
/// naming PE 1, not hang.
fn peer_exits(c: &Ctx) {
    if c.me == 1 {
        exit(0);
    }
    match rshmem::barrier_all() {
        Ok(()) => die("barrier_all with an exited PE succeeded"),
        Err(e) if e.message().contains("PE 1") => {
            println!("PE {}: expected error: {e}", c.me);
            println!("PE {}: peer_exits ok", c.me);
            exit(0)
        }
        Err(e) => die(format!("error does not name the exited PE: {e}")),
    }
}

/// Ends a scenario whose job must fail: a short pause first, so that every PE prints what it detected
/// before the first exit makes rshmrun stop the others.
fn fail_job_after_report() -> ! {
    std::thread::sleep(std::time::Duration::from_millis(500));
    exit(3)
}

/// PE 0 calls finalize while the others call barrier_all: every PE must report the mismatch, naming
/// both calls and the real PE numbers.
fn finalize_mismatch(c: &Ctx) {
    let r = if c.me == 0 { rshmem::finalize() } else { rshmem::barrier_all() };
    match r {
        Ok(()) => die("finalize on PE 0 against barrier_all on the others succeeded"),
        Err(e) => {
            let m = e.message();
            let me_call = if c.me == 0 { "rshmem_finalize" } else { "rshmem_barrier_all" };
            // The PE named beside PE 0 is this one where the node's shared barrier found it, and may
            // be any of the others where the bootstrap's barrier did (across nodes).
            let names_other = (1..c.n).any(|q| m.contains(&format!("PE {q} called rshmem_barrier_all")));
            if !(m.contains("mismatch") && m.contains("PE 0 called rshmem_finalize") && names_other && m.contains(me_call)) {
                die(format!("mismatch error does not name both calls and PEs: {m}"));
            }
            println!("PE {}: finalize_mismatch detected: {m}", c.me);
            fail_job_after_report()
        }
    }
}

/// Two collectives, then PE 1 sleeps in user code while the others enter barrier_all (run with
/// RSHMEM_WAIT_TIMEOUT): they must fail naming PE 1 and what it last entered.
fn stuck_pe(c: &Ctx) {
    let p = ck(rshmem::malloc(64));
    ck(rshmem::free(p));
    if c.me == 1 {
        std::thread::sleep(std::time::Duration::from_secs(60));
        die("PE 1 slept 60 s and nobody stopped the job");
    }
    let t = std::time::Instant::now();
    match rshmem::barrier_all() {
        Ok(()) => die("barrier_all with a stuck PE 1 succeeded"),
        Err(e) => {
            println!("PE {}: stuck_pe named after {:.1} s: {e}", c.me, t.elapsed().as_secs_f64());
            fail_job_after_report()
        }
    }
}

/// Before init. PE 0 initializes through the C entry point; PE 1 joins the bootstrap directly and
/// answers init's first collective (the all-gather "rshmem_init" of the 8-byte heap size) with
/// `bytes` bytes. PE 0 must fail with an error naming PE 1, returning from rshmem_init (no panic, no
/// abort).
fn peer_payload(bytes: usize) -> ! {
    let pe: usize = std::env::var("RSHMEM_PE").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    if pe == 1 {
        let boot = rshmem::bootstrap::Bootstrap::from_env().unwrap_or_else(|e| die(e));
        // The right heap size first (so a check that reads only 8 bytes would pass), then garbage.
        let mut payload = (64u64 << 20).to_le_bytes().to_vec();
        payload.resize(bytes, 0xAB);
        match boot.allgather("rshmem_init", &payload) {
            Ok(_) => println!("PE 1: sent a {bytes}-byte heap size"),
            Err(e) => die(format!("PE 1: the all-gather failed: {e}")),
        }
        // PE 0 fails and leaves; this returns when it does.
        let _ = boot.barrier("rshmem_init");
        exit(0)
    }
    let rc = rshmem::capi::rshmem_init();
    if rc == 0 {
        die(format!("rshmem_init accepted a {bytes}-byte heap size from PE 1"));
    }
    println!("PE {pe}: rshmem_init returned {rc}");
    exit(1)
}

/// Before init: init through the C entry point, then finalize (for the environment checks).
fn init_c() -> ! {
    if rshmem::capi::rshmem_init() != 0 {
        exit(1)
    }
    println!("PE {}: init_c ok", rshmem::my_pe());
    rshmem::capi::rshmem_finalize();
    exit(0)
}

fn bad_device_call(c: &Ctx, what: &str) {
    let buf = ck(rshmem::malloc(64));
    let mut local = 0u32;
    let (dst, pe) = if what == "bad_pe" { (buf as u64, c.n as u64) } else { (&mut local as *mut u32 as u64, 0) };
    barrier();
    // The call must stop the kernel with a message naming it: on the CPU backend the PE exits there;
    // on GPUs the kernel traps and its launch reports the failure. Completing normally is the bug.
    // SAFETY: k_bad takes [dst, pe]; the bad PE or address is the point, and the device call's checks
    // stop the kernel before any access (the behaviour under test).
    match unsafe { K.run("k_bad", 1, 1, &[dst, pe]) } {
        Ok(()) => die(format!("a device call with {what} completed instead of stopping the kernel")),
        Err(e) => {
            eprintln!("PE {}: {what}: kernel stopped as expected: {e}", c.me);
            exit(3)
        }
    }
}

/// IBGDA bad input (needs RSHMEM_REMOTE_TRANSPORT=ibgda across nodes): PE 0 posts an RDMA WRITE to the
/// last PE (on another node) with a corrupted rkey or a remote address outside the target's heap. The
/// target's NIC refuses it, and the error completion must stop PE 0 with a message naming the
/// operation, the PE and the syndrome. (That a refused operation touches nothing at the target is the
/// responder's property, checked with random frames in runtime/src/transport/proxy.rs.)
fn nic_bad(c: &Ctx, what: &str) {
    let buf = ck(rshmem::malloc(4096));
    put_bytes(buf, &[0x5au8; 4096]);
    barrier();
    if c.me == 0 {
        let mode = if what == "nic_bad_key" { 1 } else { 2 };
        // SAFETY: k_nic_bad takes [src, bytes, pe, mode]; src is a live 4 KiB symmetric buffer; the
        // bad key or address is the point (the target NIC refuses it).
        match unsafe { K.run("k_nic_bad", 1, 1, &[buf as u64, 64, (c.n - 1) as u64, mode]) } {
            Ok(()) => die(format!("{what}: an RDMA WRITE with a bad {} completed", if mode == 1 { "rkey" } else { "address" })),
            Err(e) => {
                eprintln!("PE 0: {what}: kernel stopped as expected: {e}");
                exit(3)
            }
        }
    }
    // The other PEs wait for the job to end (rshmrun stops them when PE 0 fails).
    std::thread::sleep(std::time::Duration::from_secs(30));
    exit(0)
}

/// The node team and `rshmem::ptr` on any layout (one node, or simulated nodes): `ptr` gives an
/// address exactly for the PEs of this node (a contiguous block of node-team size holding this PE,
/// the same block seen from each of them) and null for the others, and a store through it reaches
/// that PE. Prints `teams: node team PE i of n, peers with an address [..]` for the test to check
/// against the layout it asked for.
fn teams(c: &Ctx) {
    let (tp, tn) = (rshmem::team_my_pe(TEAM_NODE), rshmem::team_n_pes(TEAM_NODE));
    if tn < 1 || tp < 0 || tp >= tn || tn as usize > c.n {
        die(format!("team node: pe {tp} of {tn}"));
    }
    if !rshmem::ptr(std::ptr::null(), 0).is_null() {
        die("ptr(null) is not null");
    }
    let slots = ck(rshmem::calloc(c.n, 8));
    barrier();
    let reach: Vec<usize> = (0..c.n).filter(|&q| !rshmem::ptr(slots, q as i32).is_null()).collect();
    let first = c.me - tp as usize;
    let want: Vec<usize> = (first..first + tn as usize).collect();
    if reach != want {
        die(format!("rshmem::ptr gives an address for PEs {reach:?}; the node team (PE {tp} of {tn}) is PEs {want:?}"));
    }
    if rshmem::ptr(slots, c.me as i32) != slots {
        die("rshmem::ptr of this PE's own buffer is not the buffer");
    }
    // A store through each address lands in that PE's slot for this PE (on the CPU backend, where the
    // address is host memory; on GPUs it is device memory, which only kernels may store to).
    let cpu = ck(rshmem::backend_name()) == "cpu";
    for &q in reach.iter().filter(|_| cpu) {
        let p = rshmem::ptr(slots, q as i32) as *mut u64;
        // SAFETY: p is PE q's copy of `slots` (n u64), mapped here (ptr is non-null); slot c.me is
        // written by this PE only, and read by q after the barrier.
        unsafe { p.add(c.me).write_volatile(1000 + c.me as u64) };
    }
    barrier();
    let got = get_u64s(slots, c.n);
    for (q, &v) in got.iter().enumerate() {
        let w = if cpu && want.contains(&q) { 1000 + q as u64 } else { 0 };
        if v != w {
            die(format!("slot of PE {q} holds {v}, expected {w} (stores through rshmem::ptr from this node's PEs only)"));
        }
    }
    println!("PE {}: teams: node team PE {tp} of {tn}, peers with an address {reach:?}", c.me);
    barrier();
    ck(rshmem::free(slots));
    team_from_unique_id(c);
    let _ = CMP_EQ;
}

/// A team made from a unique id (`Team::from_unique_id`, NVSHMEM's team_init): all PEs numbered in
/// reverse, so its member table, not a stride, says who is who; used by host collectives (on GPUs a
/// kernel reading that table from the device heap).
fn team_from_unique_id(c: &Ctx) {
    let (me, n) = (c.me as i32, c.n as i32);
    let uid = ck(rshmem::Sym::<u64>::zeroed());
    if me == 0 {
        let id = ck(rshmem::Team::unique_id());
        for pe in 0..n {
            ck(uid.put_to(pe, id));
        }
    }
    barrier();
    let team = ck(rshmem::Team::from_unique_id(ck(uid.read()), n, n - 1 - me));
    if team.my_pe() != n - 1 - me || team.n_pes() != n || team.translate_pe(0, rshmem::Team::WORLD) != Some(n - 1) {
        die(format!("team from a unique id: my_pe {} of {}, member 0 is world PE {:?}", team.my_pe(), team.n_pes(), team.translate_pe(0, rshmem::Team::WORLD)));
    }
    let src = ck(rshmem::SymSlice::<i64>::from_slice(&[me as i64, 1]));
    let dst = ck(rshmem::SymSlice::<i64>::zeroed(2 * c.n));
    // SAFETY: src and dst are live symmetric slices of 2 and 2n i64 on every PE.
    ck(unsafe { rshmem::coll::reduce(team, rshmem::coll::ReduceOp::Sum, dst.as_ptr(), src.as_ptr(), 2) });
    let sum = ck(dst.to_vec());
    if sum[..2] != [(n * (n - 1) / 2) as i64, n as i64] {
        die(format!("team from a unique id: sum reduction gave {:?}", &sum[..2]));
    }
    ck(team.barrier());
    // SAFETY: as above (fcollect writes 2n values).
    ck(unsafe { rshmem::coll::fcollect(team, dst.as_ptr(), src.as_ptr(), 2) });
    let all = ck(dst.to_vec());
    let want: Vec<i64> = (0..n).flat_map(|k| [(n - 1 - k) as i64, 1]).collect();
    if all != want {
        die(format!("team from a unique id: fcollect in member order gave {all:?}, expected {want:?}"));
    }
    ck(team.destroy());
    barrier();
    ck(dst.free());
    ck(src.free());
    ck(uid.free());
}

/// Device fetch_add on one counter of PE 0 from every thread of every PE (k_contention on several
/// blocks), PE 0's own threads included and running 4 times as many iterations, so that its local
/// device atomics overlap the whole stream of the others'. Across nodes those arrive through the proxy
/// transport: the proxy's AMOs must be atomic with the target's own device atomics. The final counts
/// (64- and 32-bit) are exact and the fetched 64-bit values are exactly 0..total, each once.
/// Host AMOs racing device AMOs on one word (PE 0's u64): while a kernel's threads fetch_add it, this
/// PE's host thread fetch_adds it as well (`rshmem::point::amo`: the device AMO, run for the host by a
/// one-thread kernel on a GPU, on the calling thread on the CPU backend). Every value fetched, by a
/// device thread or a host call of any PE, must be distinct, and together they must be 0..total.
fn host_amo(c: &Ctx) {
    use rshmem_device::remote::proxy::amo::FETCH_ADD;
    let (grid, iters, host_n, threads) = (2u32, 20usize, 200usize, c.threads);
    let per_kernel = (grid * threads) as usize * iters;
    let per = per_kernel + host_n;
    let ctr = ck(rshmem::calloc(2, 8));
    let out = ck(rshmem::malloc(8 * per));
    barrier();
    let (ctr_a, out_a) = (ctr as u64, out as u64);
    let host_vals: Vec<u64> = std::thread::scope(|s| {
        let kernel = s.spawn(move || run("k_contention", grid, threads, &[ctr_a, out_a, iters as u64, ctr_a + 8]));
        let vals = (0..host_n).map(|_| ck(rshmem::point::amo("host_amo", FETCH_ADD as i32, 8, ctr_a as *mut u8, 1, 0, 0))).collect();
        if kernel.join().is_err() {
            die("host_amo: the kernel's thread panicked");
        }
        vals
    });
    let bytes: Vec<u8> = host_vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    put_bytes(out.wrapping_add(8 * per_kernel), &bytes);
    barrier();
    if c.me == 0 {
        let total = per * c.n;
        let mut all = Vec::with_capacity(total);
        for pe in 0..c.n {
            let mut buf = vec![0u8; 8 * per];
            // SAFETY: buf holds 8*per bytes, the size of every PE's out.
            ck(unsafe { rshmem::getmem(buf.as_mut_ptr(), out, buf.len(), pe as i32) });
            all.extend(buf.chunks(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())));
        }
        all.sort_unstable();
        if let Some(i) = (0..total).find(|&i| all[i] != i as u64) {
            die(format!("host_amo: fetched values are not {{0..{total}}}: sorted value #{i} is {} (a lost or doubled update between host and device AMOs)", all[i]));
        }
        let c64 = u64::from_le_bytes(get_bytes(ctr, 8).try_into().unwrap());
        if c64 != total as u64 {
            die(format!("host_amo: counter {c64}, expected {total}"));
        }
        println!("PE 0: host_amo: {total} fetch_adds, {} from host calls", host_n * c.n);
    }
    barrier();
    ck(rshmem::free(out));
    ck(rshmem::free(ctr));
}

/// Typed symmetric memory (`rshmem::SymSlice`, `rshmem::Sym`): collective typed allocation, copies from
/// and to slices, typed puts and gets to other PEs, bounds named in errors, explicit collective free.
fn sym(c: &Ctx) {
    let (me, n) = (c.me as i32, c.n as i32);
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    let a = ck(rshmem::SymSlice::<u32>::from_slice(&[me as u32 * 10, me as u32 * 10 + 1, 7]));
    let f = ck(rshmem::Sym::<f64>::new(0.5 + me as f64));
    barrier();
    if ck(a.to_vec()) != vec![me as u32 * 10, me as u32 * 10 + 1, 7] {
        die(format!("sym: from_slice did not keep this PE's values: {:?}", a.to_vec()));
    }
    barrier();
    ck(a.put_at(next, 1, &[1000 + me as u32]));
    ck(f.put_to(next, -(me as f64)));
    barrier();
    let got = ck(a.to_vec());
    if got != vec![me as u32 * 10, 1000 + prev as u32, 7] {
        die(format!("sym: after the previous PE's put: {got:?}"));
    }
    if ck(f.read()) != -(prev as f64) || ck(f.get_from(next)) != -(me as f64) {
        die("sym: Sym<f64> put/get");
    }
    let mut two = [0u32; 2];
    ck(a.get_at(next, 1, &mut two));
    if two != [1000 + me as u32, 7] {
        die(format!("sym: get_at from the next PE: {two:?}"));
    }
    match a.put_at(next, 2, &[1, 2]) {
        Err(e) if e.message().contains("values 2..4 are outside its 3 values") => {}
        other => die(format!("sym: a put past the end was not refused by name: {other:?}")),
    }
    barrier();
    ck(f.free());
    ck(a.free());
}

/// The typed device API (`coll::typed`, `Cmp`) from a kernel, checked through the typed host API.
fn typed(c: &Ctx) {
    let (me, n) = (c.me as i64, c.n);
    let src = ck(rshmem::SymSlice::<i64>::from_slice(&[me + 1, 2 * (me + 1), 3 * (me + 1), 4 * (me + 1)]));
    let dst = ck(rshmem::SymSlice::<i64>::zeroed(4));
    let fsrc = ck(rshmem::SymSlice::<u16>::from_slice(&[100 + me as u16]));
    let fdst = ck(rshmem::SymSlice::<u16>::zeroed(n));
    let flag = ck(rshmem::Sym::<u64>::zeroed());
    barrier();
    run("k_typed", 1, c.threads, &[src.addr(), dst.addr(), fsrc.addr(), fdst.addr(), flag.addr()]);
    barrier();
    let tri = (n * (n + 1) / 2) as i64;
    let want: Vec<i64> = (1..=4).map(|k| k * tri).collect();
    if ck(dst.to_vec()) != want {
        die(format!("typed: reduce(sum) gave {:?}, expected {want:?}", ck(dst.to_vec())));
    }
    let wantf: Vec<u16> = (0..n as u16).map(|p| 100 + p).collect();
    if ck(fdst.to_vec()) != wantf {
        die(format!("typed: fcollect gave {:?}, expected {wantf:?}", ck(fdst.to_vec())));
    }
    if ck(flag.read()) != 1 {
        die("typed: the flag the previous PE set is not 1");
    }
    barrier();
    for s in [flag.free(), fdst.free(), fsrc.free(), dst.free(), src.free()] {
        ck(s);
    }
}

fn amo_mixed(c: &Ctx) {
    let (grid, base) = (2u32, 40usize);
    let iters = |pe: usize| if pe == 0 { 4 * base } else { base };
    let per = |pe: usize| (grid * c.threads) as usize * iters(pe);
    let ctr = ck(rshmem::calloc(2, 8));
    let out = ck(rshmem::malloc(8 * per(0)));
    barrier();
    run("k_contention", grid, c.threads, &[ctr as u64, out as u64, iters(c.me) as u64, ctr as u64 + 8]);
    barrier();
    if c.me == 0 {
        let total: usize = (0..c.n).map(per).sum();
        let mut all = Vec::with_capacity(total);
        for pe in 0..c.n {
            let mut buf = vec![0u8; 8 * per(pe)];
            // SAFETY: buf holds 8*per(pe) bytes; out is symmetric of 8*per(0) >= that.
            ck(unsafe { rshmem::getmem(buf.as_mut_ptr(), out, buf.len(), pe as i32) });
            all.extend(buf.chunks(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())));
        }
        all.sort_unstable();
        if let Some(i) = (0..total).find(|&i| all[i] != i as u64) {
            let dup = all.windows(2).filter(|w| w[0] == w[1]).count();
            die(format!("amo_mixed: fetched values are not {{0..{total}}}: sorted value #{i} is {} ({dup} duplicates)", all[i]));
        }
        let cnt = get_bytes(ctr, 16);
        let c64 = u64::from_le_bytes(cnt[0..8].try_into().unwrap());
        let c32 = u32::from_le_bytes(cnt[8..12].try_into().unwrap());
        if c64 != total as u64 || c32 != total as u32 {
            die(format!("amo_mixed: counters {c64} / {c32}, expected {total} (lost updates)"));
        }
        let remote = (0..c.n).filter(|&q| rshmem::ptr(ctr, q as i32).is_null()).count();
        println!("PE 0: amo_mixed: {total} fetch_adds ({} by PE 0's threads), {remote} PEs without a mapped heap", per(0));
    }
    barrier();
    ck(rshmem::free(out));
    ck(rshmem::free(ctr));
}

/// Simulated nodes (`rshmrun --nodes K`, K in RSHMEM_TEST_NODES): the launcher's split, the node team,
/// allocations and host barriers across nodes, host put/get that reach the PEs of this node and refuse
/// the others by name. With RSHMEM_TEST_NETNS=1 (`--netns`) also: the bootstrap is on node 0's address,
/// node 0's loopback is its own, node 0's address is reachable from every node; and each PE prints its
/// network namespace and pid, for the test to check that nothing is left after the job.
fn nodes(c: &Ctx) {
    let num = |k: &str| -> usize {
        let v = std::env::var(k).unwrap_or_else(|_| die(format!("{k} is not set (run under rshmrun --nodes, with RSHMEM_TEST_NODES)")));
        v.parse().unwrap_or_else(|_| die(format!("{k}={v:?} is not a number")))
    };
    let k = num("RSHMEM_TEST_NODES");
    // The split, computed here on its own: contiguous blocks, the first n % k nodes one PE larger.
    let size_of = |node: usize| c.n / k + usize::from(node < c.n % k);
    let node_pes: Vec<Vec<usize>> = {
        let mut v = Vec::new();
        let mut first = 0;
        for node in 0..k {
            v.push((first..first + size_of(node)).collect::<Vec<_>>());
            first += size_of(node);
        }
        v
    };
    let my_node = node_pes.iter().position(|p| p.contains(&c.me)).unwrap_or_else(|| die("not on any node"));
    let mine = &node_pes[my_node];
    let local = c.me - mine[0];
    let got = (num("RSHMEM_NODE_ID"), num("RSHMEM_LOCAL_PE"), num("RSHMEM_LOCAL_NPES"));
    if got != (my_node, local, mine.len()) {
        die(format!("rshmrun placed PE {} as (node, local PE, local PEs) {got:?}; expected {:?}", c.me, (my_node, local, mine.len())));
    }
    let team = (rshmem::team_my_pe(TEAM_NODE), rshmem::team_n_pes(TEAM_NODE));
    if team != (local as i32, mine.len() as i32) {
        die(format!("TEAM_NODE: my_pe {} of {}; expected {local} of {} (node {my_node}: PEs {mine:?})", team.0, team.1, mine.len()));
    }
    // Allocations and host barriers (through the bootstrap: no host barrier is shared across nodes).
    let len = 4096usize;
    let bufs: Vec<*mut u8> = [len, 100, 1 << 20].iter().map(|&s| ck(rshmem::malloc(s))).collect();
    let buf = bufs[0];
    put_bytes(buf, &vec![0u8; len]);
    for _ in 0..5 {
        barrier();
    }
    for q in 0..c.n {
        let mut back = vec![0u8; 8];
        let data = (c.me as u64 * 1000 + q as u64).to_le_bytes();
        // SAFETY: buf is symmetric of len bytes; slot c.me (8 bytes) is inside it; data and back hold 8.
        let put = unsafe { rshmem::putmem(buf.add(8 * c.me), data.as_ptr(), 8, q as i32) };
        // SAFETY: as above.
        let get = unsafe { rshmem::getmem(back.as_mut_ptr(), buf.add(8 * c.me), 8, q as i32) };
        let p = rshmem::ptr(buf, q as i32);
        if mine.contains(&q) {
            ck(put);
            ck(get);
            if back != data {
                die(format!("host put/get to PE {q} of this node: read back {back:?}, wrote {data:?}"));
            }
            if p.is_null() {
                die(format!("rshmem::ptr gives null for PE {q}, which is on this node"));
            }
        } else if remote_transport() {
            // Another node, reached through the remote transport (auto or proxy): the put lands and
            // reads back, but never through a mapping.
            ck(put);
            ck(get);
            if back != data {
                die(format!("host put/get to PE {q} (another node, remote transport): read back {back:?}, wrote {data:?}"));
            }
            if !p.is_null() {
                die(format!("rshmem::ptr gives an address for PE {q}, which is on another node"));
            }
        } else {
            for (what, r) in [("putmem", put), ("getmem", get)] {
                match r {
                    Ok(()) => die(format!("host {what} to PE {q} (another node) succeeded: the nodes share memory")),
                    Err(e) => {
                        let e = e.to_string();
                        if !(e.contains(&format!("PE {q} ")) && e.contains("another node") && e.contains("no transport") && e.contains("asked: p2p")) {
                            die(format!("host {what} to PE {q} (another node) failed without naming it and the transport asked: {e}"));
                        }
                    }
                }
            }
            if !p.is_null() {
                die(format!("rshmem::ptr gives an address for PE {q}, which is on another node"));
            }
        }
    }
    barrier();
    // Each node's PEs wrote only into this node's heaps: the slots of this node's PEs hold what they wrote.
    let slots = get_u64s(buf, c.n);
    for (q, &slot) in slots.iter().enumerate() {
        let want = if mine.contains(&q) || remote_transport() { q as u64 * 1000 + c.me as u64 } else { 0 };
        if slot != want {
            die(format!("slot of PE {q} holds {slot}; expected {want}"));
        }
    }
    if std::env::var("RSHMEM_TEST_NETNS").as_deref() == Ok("1") {
        netns_checks(c, my_node);
    }
    barrier();
    for b in bufs {
        ck(rshmem::free(b));
    }
}

/// Whether PEs on other nodes are reachable: `RSHMEM_REMOTE_TRANSPORT` is anything but `none` (unset
/// means auto, the proxy across nodes).
fn remote_transport() -> bool {
    !std::env::var("RSHMEM_REMOTE_TRANSPORT").is_ok_and(|v| v.trim().eq_ignore_ascii_case("none"))
}

fn netns_checks(c: &Ctx, my_node: usize) {
    use std::net::{Ipv4Addr, TcpListener, TcpStream};
    let boot = std::env::var("RSHMEM_BOOTSTRAP").unwrap_or_default();
    if !boot.starts_with("10.99.0.1:") {
        die(format!("under --netns RSHMEM_BOOTSTRAP is {boot:?}, not node 0's 10.99.0.1"));
    }
    let ns = std::fs::read_link("/proc/self/ns/net").unwrap_or_else(|e| die(format!("/proc/self/ns/net: {e}")));
    println!("PE {}: node {my_node} netns {} pid {}", c.me, ns.display(), std::process::id());
    // Node 0's namespace is private, so a port below the ephemeral range is free there.
    const PORT: u16 = 29999;
    let node0 = Ipv4Addr::new(10, 99, 0, 1);
    let listeners = (c.me == 0).then(|| {
        let lo = TcpListener::bind((Ipv4Addr::LOCALHOST, PORT)).unwrap_or_else(|e| die(format!("bind 127.0.0.1:{PORT}: {e}")));
        let eth = TcpListener::bind((node0, PORT)).unwrap_or_else(|e| die(format!("bind {node0}:{PORT}: {e}")));
        (lo, eth)
    });
    barrier();
    let lo = TcpStream::connect((Ipv4Addr::LOCALHOST, PORT));
    if my_node == 0 && lo.is_err() {
        die(format!("node 0 cannot reach its own loopback listener: {:?}", lo.err()));
    }
    if my_node != 0 && lo.is_ok() {
        die(format!("node {my_node} reached node 0's loopback listener: the namespaces are not separate"));
    }
    if let Err(e) = TcpStream::connect((node0, PORT)) {
        die(format!("node {my_node} cannot reach node 0's address {node0}:{PORT}: {e}"));
    }
    barrier();
    drop(listeners);
}

/// The test PE's arguments (clap).
#[derive(clap::Parser)]
#[command(name = "rshmem-test-pe", about = "One PE of rshmem's multi-process test suite (run under rshmrun).")]
struct Cli {
    /// Scenarios to run in order (`all`: the standard set; see `main` for every name).
    #[arg(required = true, value_name = "SCENARIO")]
    scenarios: Vec<String>,
}

fn main() {
    use clap::Parser;
    let args = Cli::parse().scenarios;
    // Scenarios that run before (or instead of) a plain init.
    match args[0].as_str() {
        "peer_payload_empty" => peer_payload(0),
        "peer_payload_big" => peer_payload(1 << 20),
        "init_c" => init_c(),
        _ => {}
    }
    let init_start = std::time::Instant::now();
    ck(rshmem::init());
    let init = init_start.elapsed();
    let (me, n) = (rshmem::my_pe() as usize, rshmem::n_pes() as usize);
    let gpu = ck(rshmem::backend_name()) == "cuda";
    let threads = std::env::var("RSHMEM_TEST_THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(if gpu { 256 } else { 8 });
    let seed = std::env::var("RSHMEM_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .or_else(|| std::env::var("RSHMEM_JOB_KEY").ok().map(|k| k.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3))))
        .unwrap_or(0x5eed);
    let c = Ctx { me, n, threads, seed, init };
    let all = ["ring", "pg", "rma", "amo", "contention", "amo_mixed", "host_amo", "sym", "typed", "lock", "fence", "put_signal", "wait", "barrier", "host_rma", "alloc", "teams"];
    let list: Vec<String> = args.iter().flat_map(|a| if a == "all" { all.iter().map(|s| s.to_string()).collect::<Vec<_>>() } else { vec![a.clone()] }).collect();
    for s in &list {
        let t = std::time::Instant::now();
        match s.as_str() {
            "ring" => ring(&c),
            "pg" => pg(&c),
            "rma" => rma(&c),
            "amo" => amo(&c),
            "contention" => contention(&c),
            "amo_mixed" => amo_mixed(&c),
            "host_amo" => host_amo(&c),
            "sym" => sym(&c),
            "typed" => typed(&c),
            "lock" => lock(&c),
            "fence" => fence(&c),
            "put_signal" => put_signal(&c),
            "wait" => wait(&c),
            "barrier" => barrier_test(&c),
            "host_rma" => host_rma(&c),
            "reinit" | "reinit_stale" => reinit(&c, s == "reinit_stale"),
            "alloc" => alloc(&c),
            "teams" => teams(&c),
            "nodes" => nodes(&c),
            "alloc_mismatch" => alloc_mismatch(&c),
            "free_bad" => free_bad(&c),
            "mismatch_collective" => mismatch_collective(&c),
            "peer_exits" => peer_exits(&c),
            "finalize_mismatch" => finalize_mismatch(&c),
            "stuck_pe" => stuck_pe(&c),
            "bad_pe" | "bad_addr" => bad_device_call(&c, s),
            "nic_bad_key" | "nic_bad_addr" => nic_bad(&c, s),
            "coll_teams" => coll::teams_scenario(&c),
            "coll" => coll::coll_scenario(&c),
            "coll_prop" => coll::prop_scenario(&c),
            m if m.starts_with("coll_mm_") || m == "coll_bad_team" => coll::mismatch(&c, m),
            "proxy_rma" => remote::rma(&c),
            "proxy_ops" => remote::ops(&c),
            "proxy_kill" => remote::kill(&c),
            "proxy_garbage" => remote::garbage(&c),
            "remote_scaling" => scaling::scenario(&c),
            "port_init" => port::init_time(&c),
            "port_hello" => port::hello_refusals(&c),
            "port_flood" => port::flood(&c),
            "port_cut_idle" | "port_cut_busy" => port::cut(&c, s == "port_cut_busy"),
            "quiet_after_finalize" => robust::after_finalize(&c, "quiet"),
            "fence_after_finalize" => robust::after_finalize(&c, "fence"),
            "null_rma" => robust::null_rma(&c),
            "null_c_put" | "null_c_get" => robust::null_c(&c, s == "null_c_put"),
            "internal_area" => robust::internal_area(&c),
            "alloc_zero" => robust::alloc_zero(&c),
            "reinit_env" => robust::reinit_env(&c),
            other => die(format!("unknown scenario {other:?}")),
        }
        println!("PE {me}: {s} ok ({} backend, {n} PEs, {threads} threads, {:.2} s)", if gpu { "cuda" } else { "cpu" }, t.elapsed().as_secs_f64());
    }
    ck(rshmem::finalize());
}
