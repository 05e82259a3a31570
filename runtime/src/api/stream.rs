//! Streams and what runs on them, for user programs: the on-stream calls (NVSHMEM's `*_on_stream`),
//! waiting for a stream, timers (event pairs on a stream), and the device memory that work uses
//! (`device_alloc`, copies to and from it). This file is above the runtime (it asks it for the running
//! instance, `crate::runtime::get`); the CUDA platform it builds on (`platform::cuda`: contexts,
//! modules, the driver) is below the runtime and never asks it. Loading a module of kernels is
//! `kernels`' (`Module::load`).

pub use crate::platform::cuda::backend::{CudaBackend, CudaInitError};
pub use crate::platform::cuda::module::{Stream, DEVICE_PTX};
use crate::error::{Error, Result};
use crate::platform::cuda::driver::{self, check, check_ctx};
use cudarc::driver::sys as cu;

/// The CUDA backend of the running runtime, if that is the backend in use.
pub fn with_backend<R>(call: &str, f: impl FnOnce(&CudaBackend) -> Result<R>) -> Result<R> {
    let rt = crate::runtime::get(call)?;
    let any = rt.backend().as_any();
    match any.downcast_ref::<CudaBackend>() {
        Some(b) => f(b),
        None => Err(Error::new(format!("{call}: needs the CUDA backend (this job runs on the {} backend)", rt.backend().name()))),
    }
}

// ------------------------------------------------------------------ host helpers for GPU programs

fn backend_op<R>(call: &str, f: impl FnOnce() -> Result<R>) -> Result<R> {
    with_backend(call, |b| {
        b.bind()?;
        f()
    })
}

/// Copies host bytes to device memory (symmetric or not) of this PE.
///
/// # Safety
/// `dst..dst+src.len()` must be device memory of this PE that the caller may overwrite (a symmetric
/// allocation or one from `device_alloc`, still live).
pub unsafe fn copy_to_device(dst: *mut u8, src: &[u8]) -> Result<()> {
    // SAFETY: src is a live slice; dst is the caller's promise (above).
    backend_op("rshmem::stream::copy_to_device", || unsafe { driver::htod(dst as u64, src.as_ptr(), src.len()) })
}
/// Copies device memory of this PE to host bytes.
///
/// # Safety
/// `src..src+dst.len()` must be readable device memory of this PE (a live symmetric allocation or one
/// from `device_alloc`).
pub unsafe fn copy_from_device(dst: &mut [u8], src: *const u8) -> Result<()> {
    // SAFETY: dst is a live, exclusive slice; src is the caller's promise (above).
    backend_op("rshmem::stream::copy_from_device", || unsafe { driver::dtoh(dst.as_mut_ptr(), src as u64, dst.len()) })
}
/// Waits until everything queued so far on the legacy default stream (and so, by its rules, on every
/// blocking stream) has run, by polling an event, not in `cuCtxSynchronize`.
///
/// Why polling: a kernel of this PE may spin until the proxy transport completes its requests, and the
/// proxy's own CUDA work (a copy into GPU memory, a launch of the inbound service) must get through the
/// driver meanwhile. A thread parked inside `cuCtxSynchronize` was seen to keep the proxy's launches
/// from completing on 2 x H200 (the suite's `amo` and `wait` scenarios across nodes). An event query
/// holds the driver only for the query; between queries this thread sleeps.
pub fn wait_default_stream(call: &str) -> Result<()> {
    wait_stream(call, Stream::DEFAULT)
}

/// Returns when everything enqueued on stream `s` so far has run, polling an event as
/// [`wait_default_stream`] does (and for its reason); `call` names the caller in errors.
pub fn wait_stream(call: &str, s: Stream) -> Result<()> {
    // SAFETY: `s` is null or a live stream of this PE's context (every `Stream` is: `Stream::from_raw`'s
    // contract); backend_op made the context current.
    backend_op(call, || unsafe { driver::wait_stream_polling(s.as_raw(), &format!("{call}: waiting for the stream's work")) })
}

impl Stream {
    /// Waits until everything enqueued on this stream so far has run (kernels launched with
    /// `KernelSet::launch`, on-stream collectives and RMA). On the CPU backend, where that work runs
    /// when it is enqueued, it returns at once.
    pub fn synchronize(self) -> Result<()> {
        let rt = crate::runtime::get("rshmem::stream::Stream::synchronize")?;
        if rt.backend().name() != "cuda" {
            return Ok(());
        }
        drop(rt);
        wait_stream("rshmem::stream::Stream::synchronize", self)
    }
}

/// The ordinal of the GPU this PE runs on (as `cuDeviceGet` numbers them); an error naming `call` on
/// the CPU backend.
pub fn device_ordinal(call: &str) -> Result<usize> {
    backend_op(call, || {
        let mut dev = 0;
        // SAFETY: out-pointer to a local; backend_op made the backend's context current.
        check(unsafe { cu::cuCtxGetDevice(&mut dev) }, "cuCtxGetDevice")?;
        Ok(dev.max(0) as usize)
    })
}

/// Waits for all GPU work of this PE.
pub fn synchronize() -> Result<()> {
    // SAFETY: plain context synchronization.
    backend_op("rshmem::stream::synchronize", || check_ctx(unsafe { cu::cuCtxSynchronize() }, "cuCtxSynchronize"))
}
/// Allocates ordinary (non-symmetric) device memory.
pub fn device_alloc(bytes: usize) -> Result<*mut u8> {
    backend_op("rshmem::stream::device_alloc", || {
        let mut p = 0;
        // SAFETY: out-pointer.
        check(unsafe { cu::cuMemAlloc_v2(&mut p, bytes.max(1)) }, "cuMemAlloc")?;
        Ok(p as *mut u8)
    })
}
/// Frees memory from `device_alloc`.
///
/// # Safety
/// `p` must come from `device_alloc` and not be freed yet, and no kernel or copy may still use it.
pub unsafe fn device_free(p: *mut u8) -> Result<()> {
    // SAFETY: the caller's contract above.
    backend_op("rshmem::stream::device_free", || check(unsafe { cu::cuMemFree_v2(p as u64) }, "cuMemFree"))
}

/// A pair of events for timing GPU work on a stream (milliseconds between them).
pub struct Timer {
    a: cu::CUevent,
    b: cu::CUevent,
}
// SAFETY: event handles are plain tokens.
unsafe impl Send for Timer {}
impl Timer {
    /// A pair of timing events in this PE's context.
    pub fn new() -> Result<Timer> {
        backend_op("rshmem::stream::Timer::new", || {
            let (mut a, mut b) = (std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: out-pointers.
            unsafe {
                check(cu::cuEventCreate(&mut a, 0), "cuEventCreate")?;
                check(cu::cuEventCreate(&mut b, 0), "cuEventCreate")?;
            }
            Ok(Timer { a, b })
        })
    }
    /// Records the start event on stream `s`.
    pub fn start(&self, s: Stream) -> Result<()> {
        // SAFETY: a live event; `s` is null or a live stream of this context (`Stream::from_raw`).
        check(unsafe { cu::cuEventRecord(self.a, s.as_raw()) }, "cuEventRecord")
    }
    /// Records the stop event on stream `s`.
    pub fn stop(&self, s: Stream) -> Result<()> {
        // SAFETY: as in `start`.
        check(unsafe { cu::cuEventRecord(self.b, s.as_raw()) }, "cuEventRecord")
    }
    /// Waits for the stop event and returns the elapsed milliseconds. The wait polls the event (not
    /// `cuEventSynchronize`, which parks this thread in the driver while the timed kernel may wait for
    /// the proxy's or the emulated NIC's CUDA calls: see [`wait_default_stream`]).
    pub fn elapsed_ms(&self) -> Result<f32> {
        // SAFETY: the stop event is live (made by `new`), of this PE's context.
        backend_op("rshmem::stream::Timer::elapsed_ms", || unsafe { driver::wait_event_polling(self.b, "waiting for the timer's stop event") })?;
        let mut ms = 0f32;
        // SAFETY: live events, both complete.
        check(unsafe { cu::cuEventElapsedTime_v2(&mut ms, self.a, self.b) }, "cuEventElapsedTime")?;
        Ok(ms)
    }
}
impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: events created in new().
        unsafe {
            cu::cuEventDestroy_v2(self.a);
            cu::cuEventDestroy_v2(self.b);
        }
    }
}

/// `nvshmemx_barrier_all_on_stream`: enqueues a barrier of all PEs (completing this PE's operations
/// first) on stream `s`, through the runtime's own module.
pub fn barrier_all_on_stream(s: Stream) -> Result<()> {
    // SAFETY: the kernel takes no parameters.
    with_backend("rshmem_barrier_all_on_stream", |b| unsafe { b.module()?.launch("rshmemi_barrier_all_kernel", 1, 1, 0, s, &mut []) })
}
/// `nvshmemx_sync_all_on_stream`: enqueues a synchronization of all PEs on stream `s`.
pub fn sync_all_on_stream(s: Stream) -> Result<()> {
    // SAFETY: the kernel takes no parameters.
    with_backend("rshmem_sync_all_on_stream", |b| unsafe { b.module()?.launch("rshmemi_sync_all_kernel", 1, 1, 0, s, &mut []) })
}
/// `nvshmemx_quiet_on_stream`: enqueues the completion of this PE's outstanding operations on `s`.
pub fn quiet_on_stream(s: Stream) -> Result<()> {
    // SAFETY: the kernel takes no parameters.
    with_backend("rshmem_quiet_on_stream", |b| unsafe { b.module()?.launch("rshmemi_quiet_kernel", 1, 1, 0, s, &mut []) })
}
/// Enqueues a copy into symmetric `dst` on `pe` (copy engine over NVLink/PCIe). The symmetric range
/// and the PE are checked.
///
/// # Safety
/// `src` must be readable for `bytes` (host or device memory) until the copy has run on `s`, and `s`
/// must be a live stream of this PE's context (or `Stream::DEFAULT`).
pub unsafe fn putmem_on_stream(dst: *mut u8, src: *const u8, bytes: usize, pe: i32, s: Stream) -> Result<()> {
    // SAFETY: the caller's contract above.
    unsafe { onstream_copy("rshmem_putmem_on_stream", dst, src, bytes, pe, s, true) }
}
/// Enqueues a copy from symmetric `src` on `pe`. The symmetric range and the PE are checked.
///
/// # Safety
/// `dst` must be writable for `bytes` (host or device memory), not used by anything else until the
/// copy has run on `s`, and `s` must be a live stream of this PE's context (or `Stream::DEFAULT`).
pub unsafe fn getmem_on_stream(dst: *mut u8, src: *const u8, bytes: usize, pe: i32, s: Stream) -> Result<()> {
    // SAFETY: the caller's contract above.
    unsafe { onstream_copy("rshmem_getmem_on_stream", dst, src, bytes, pe, s, false) }
}

/// # Safety
/// As `putmem_on_stream` (`put`) or `getmem_on_stream` for the local side and the stream.
unsafe fn onstream_copy(call: &str, dst: *mut u8, src: *const u8, bytes: usize, pe: i32, s: Stream, put: bool) -> Result<()> {
    let rt = crate::runtime::get(call)?;
    let (sym, local) = if put { (dst, src) } else { (src as *mut u8, dst as *const u8) };
    let t = rt.check_rma_local(call, sym, local, bytes, pe, put)?;
    if t.peer_base(pe as usize) == 0 {
        // SAFETY: forwarded contract; the range and the route were checked.
        return unsafe { onstream_remote(call, dst, src, bytes, pe, s, put) };
    }
    let remote = rshmem_device::ptr(sym, pe) as u64;
    let (d, sr) = if put { (remote, src as u64) } else { (dst as u64, remote) };
    // The local side in this PE's heap (the usual case: a symmetric source or destination) is device
    // memory, so the copy is device to device and the driver need not look up what either address is;
    // any other local pointer (host memory, a cudaMalloc buffer) goes through the unified-address copy.
    let local = if put { src as usize } else { dst as usize };
    let (base, size) = (rt.backend().heap_base(), rt.backend().heap_size());
    let local_in_heap = local >= base && local - base <= size && size - (local - base) >= bytes;
    with_backend(call, |b| {
        b.bind()?;
        if local_in_heap {
            // SAFETY: both ranges lie in device memory reachable from this context (this PE's heap and
            // the peer's mapped heap, checked); the stream is null or live in this context
            // (`Stream::from_raw`).
            check_ctx(unsafe { cu::cuMemcpyDtoDAsync_v2(d, sr, bytes, s.as_raw()) }, &format!("{call}: cuMemcpyDtoDAsync"))
        } else {
            // SAFETY: both ranges checked (symmetric side) or the caller's (local side); unified addressing;
            // the stream as above.
            check_ctx(unsafe { cu::cuMemcpyAsync(d, sr, bytes, s.as_raw()) }, &format!("{call}: cuMemcpyAsync"))
        }
    })
}

/// An on-stream put/get to a PE on another node: a one-thread kernel on `s` (`rshmemi_proxy_request`)
/// posts the request into this PE's proxy ring and waits until the proxy has completed it. Stream
/// order gives the on-stream semantics: the request is posted after everything enqueued before it on
/// `s` (e.g. the kernel that produced `src`), and everything enqueued after it starts once it is
/// complete at the target. A GPU thread posts, not a host function: the ring's counters are advanced by
/// GPU atomics, which a CPU atomic on the same pinned word would not be atomic with
/// (`Backend::post_request`). The proxy's own copies run on its non-blocking streams, so the waiting
/// kernel never waits for work queued behind it.
///
/// # Safety
/// As `onstream_copy`.
unsafe fn onstream_remote(call: &str, dst: *mut u8, src: *const u8, bytes: usize, pe: i32, s: Stream, put: bool) -> Result<()> {
    use rshmem_device::remote::proxy::{op, Request};
    if bytes == 0 {
        return Ok(());
    }
    let rt = crate::runtime::get(call)?;
    let base = rt.backend().heap_base() as u64;
    let r = if put {
        Request { op: op::PUT, pe: pe as u32, offset: dst as u64 - base, len: bytes as u64, src: src as u64, ..Request::default() }
    } else {
        Request { op: op::GET, pe: pe as u32, offset: src as u64 - base, len: bytes as u64, src: dst as u64, ..Request::default() }
    };
    // SAFETY: the symmetric range and the route were checked by the caller (onstream_copy); the local
    // buffer's validity until the stream has run the request is this function's contract.
    let posted = unsafe { rt.backend().services().post_request(&r, Some(s.as_raw() as u64)) }.map_err(|e| e.context(call))?;
    if !posted {
        return Err(Error::new(format!("{call}: this platform posts no proxy requests from a stream")));
    }
    Ok(())
}
