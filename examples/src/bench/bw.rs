//! `--cases bw`: put and get bandwidth of thread, warp and block scope from 8 bytes to `--max-bytes`
//! (PE 0 to its partner), the block rows' hardware bounds in the same run (the raw copy kernel and, on
//! GPUs, the copy engine; mapped peer only), and the delivery check of the largest put.

use crate::cli::Cli;
use crate::harness::{median, pe_data, result, time_kernel, Ctx};
use rshmem::SymSlice;
use rshmem_example_kernels::{BenchBw, XBwDeep};
use std::time::Instant;

pub fn run(c: &Ctx, cli: &Cli) -> Result<(), rshmem::Error> {
    let Ctx { k, o, me, pair, peer, gpu, mapped, sbuf, rbuf, data, maxb, reps, wide, .. } = *c;
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
                    ce_copy_ms(&timer, sbuf, rbuf, bytes, peer, put, 1)?;
                    let mut v = vec![];
                    for _ in 0..reps {
                        v.push(ce_copy_ms(&timer, sbuf, rbuf, bytes, peer, put, iters)?);
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
