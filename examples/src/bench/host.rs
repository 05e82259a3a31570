//! `--cases host`: the host barrier, host-initiated and on-stream put bandwidth from this PE's heap, and
//! on GPUs what one on-stream put costs the host to enqueue and the stream to run.

use crate::cli::Opt;
use crate::harness::{median, result, Ctx};
use rshmem::SymSlice;
use std::time::Instant;

pub fn run(c: &Ctx) -> Result<(), rshmem::Error> {
    let Ctx { o, me, peer, gpu, sbuf, rbuf, maxb, reps, .. } = *c;
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
            put_sym(rbuf, sbuf, bytes, peer)?;
            let mut v = vec![];
            for _ in 0..reps {
                let t = Instant::now();
                for _ in 0..iters {
                    put_sym(rbuf, sbuf, bytes, peer)?;
                }
                v.push(t.elapsed().as_secs_f64());
            }
            result("host_put_bw", "-", bytes, &o, bytes as f64 * iters as f64 / median(v) / 1e9, "GBps");
            if gpu {
                let timer = rshmem::stream::Timer::new()?;
                let mut v = vec![];
                for _ in 0..reps {
                    v.push(stream_put_ms(&timer, rbuf, sbuf, bytes, peer, iters)?);
                }
                result("stream_put_bw", "-", bytes, &o, bytes as f64 * iters as f64 / median(v) / 1e6, "GBps");
            }
        }
        if gpu {
            for &bytes in &[4usize << 10, 64 << 10] {
                if bytes <= maxb {
                    enqueue_costs(&o, rbuf, sbuf, bytes, peer)?;
                }
            }
        }
    }
    Ok(())
}

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

/// The host `bw` rows at small sizes, taken apart (GPUs, mapped peer): what one on-stream put of
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
