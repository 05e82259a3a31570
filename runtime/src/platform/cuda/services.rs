//! What the remote engine needs from the CUDA platform (`platform::services::Services`: `host_shared`,
//! `copy`, `service_kernel`...): pinned mapped host memory, copies on the runtime's own non-blocking
//! streams, and the launches of the runtime's service kernels (the engine's apply kernel applies what
//! arrives from other nodes on the GPU, `rshmem_device::remote::lane`: a CPU read-modify-write on GPU
//! memory is not atomic with the GPU's own atomics).
//!
//! # Why never the legacy default stream or `cuCtxSynchronize`
//! The engine's threads serve requests posted by the user's kernels, and those kernels may be spinning
//! (in `quiet`, `g`, a fetching AMO, a barrier) until the proxy completes them. The legacy default
//! stream synchronizes with every blocking stream, and `cuCtxSynchronize` waits for every kernel of the
//! context: either would wait for the spinning kernel, which waits for the proxy — a deadlock. Every
//! operation here runs on a stream created with `CU_STREAM_NON_BLOCKING`, and waits for that stream
//! only (`cuStreamSynchronize`).
//!
//! # Why every copy's host side is pinned
//! A copy from or to *pageable* host memory goes through the driver's own staging buffers. While a
//! user thread waits in such a copy (`cudaMemcpyAsync` of a kernel's result into a local variable,
//! behind a kernel spinning on the proxy, as NVSHMEM's own `simple_shift` does), another thread's
//! pageable copy waits for it (seen on 2 x H200: the proxy's receiver stuck in the driver, both
//! kernels spinning, the job hung). So the engine never hands the driver a pageable address: a copy
//! whose host side is pageable (a value delivered to a return slot, a host `getmem`'s destination) is
//! bounced through a pinned buffer of the pool, which is allocated up front (`prepare`), because
//! allocating pinned memory later may also wait for the device.
//! Measured on 2 x H200 (bench/results/2026-11-23-h200x2-remote-pes.md, call 5), with the earlier
//! design (one synchronized launch of an AMO service kernel per AMO): a remote fetch_add across two
//! simulated nodes took 52.2 us end to end, against 44.4 us for a remote `g` (no launch).
//!
//! # The engine's CUDA work while the target's kernel waits for it
//! On 2 x H200 (bench/results/2026-11-23-h200x2-remote-pes.md) the proxy's CUDA work sometimes did
//! not complete while a kernel on the target GPU spun waiting for the proxy, and the suite hung across
//! nodes. What answers it now:
//! - what arrives (puts, AMOs, signals, GET answers) needs no CUDA call of a host thread: the apply
//!   kernel, on a stream of its own made at setup (`service_kernel`), applies it from the lane's
//!   receive ring, and device threads that wait for something remote apply it themselves whenever no
//!   apply kernel runs (`rshmem_device::remote::lane`);
//! - every kernel of the runtime's modules is loaded up front (`Module::load_functions`): a lazily
//!   loaded kernel's first launch waited for the spinning kernel, and held up the proxy's copies too;
//! - the runtime's own waits do not park in `cuCtxSynchronize` (`cuda::wait_default_stream`).
//!
//! A few things still use CUDA copies (a thread's named source read for sending, a host get's bytes,
//! values delivered to return slots). A program thread waiting in a copy to or from pageable memory
//! behind a spinning kernel can hold them up (seen with the CUDA C++ ring shift under the engine's
//! earlier design).

use super::driver::{check, check_ctx};
use super::module::Stream;
use super::modules::Modules;
use crate::error::{Error, Result};
use crate::platform::services::{DeviceMem, HostShared, ServiceKernel, Services};
use cudarc::driver::sys as cu;
use std::sync::{Arc, Mutex};

/// The CUDA platform's services: non-blocking streams for proxy copies, reused across calls (a thread
/// takes one from the pool for the duration of a call, so several threads copy at once), pinned bounce
/// buffers, and the launches of the runtime's service kernels.
pub struct CudaServices {
    ctx: cu::CUcontext,
    /// The instance's modules: the runtime's own one holds the service kernels.
    modules: Arc<Modules>,
    streams: Mutex<Vec<usize>>,
    /// How many streams the pool has made (at most PROXY_STREAMS).
    made: std::sync::atomic::AtomicUsize,
    /// Pinned bounce buffers (BOUNCE_BYTES each) for copies whose host side is pageable.
    bounce: Mutex<Vec<HostShared>>,
}

/// Bytes of one pinned bounce buffer, and how many `prepare` allocates (one per thread that copies
/// through one at once: the engine's lane threads, a host get, the emulated NIC; more callers wait for
/// one).
const BOUNCE_BYTES: usize = 4 << 20;
const BOUNCE_BUFFERS: usize = 6;
/// Streams of the pool (see `take_stream`): this many of the engine's threads copy at once; more wait
/// for a stream.
const PROXY_STREAMS: usize = 3;

// SAFETY: CUcontext is a handle usable from any thread once made current there (`bind`); all mutable
// state is behind Mutexes or atomics.
unsafe impl Send for CudaServices {}
// SAFETY: as for Send; the driver API is thread-safe.
unsafe impl Sync for CudaServices {}

impl Drop for CudaServices {
    fn drop(&mut self) {
        for &s in self.streams.get_mut().unwrap_or_else(|e| e.into_inner()).iter() {
            // SAFETY: streams made by `stream()`, destroyed once here; nothing uses them any more (the
            // backend is being dropped).
            unsafe { cu::cuStreamDestroy_v2(s as cu::CUstream) };
        }
    }
}

impl CudaServices {
    /// The services of the backend whose modules are `modules` (streams and buffers are made on first
    /// use).
    pub fn new(modules: Arc<Modules>) -> CudaServices {
        CudaServices {
            ctx: modules.ctx(),
            modules,
            streams: Mutex::new(vec![]),
            made: Default::default(),
            bounce: Mutex::new(vec![]),
        }
    }

    fn bind(&self) -> Result<()> {
        // SAFETY: ctx is the retained primary context, valid for the process's life.
        check(unsafe { cu::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    /// Pinned, mapped, zeroed host memory (`cuMemHostAlloc(DEVICEMAP | PORTABLE)`), with the address
    /// device code uses for it.
    pub fn pinned_shared(&self, bytes: usize) -> Result<HostShared> {
        self.bind()?;
        let bytes = bytes.max(64);
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        check(
            // SAFETY: out-pointer to a local; the flags are valid.
            unsafe { cu::cuMemHostAlloc(&mut p, bytes, cu::CU_MEMHOSTALLOC_DEVICEMAP | cu::CU_MEMHOSTALLOC_PORTABLE) },
            &format!("cuMemHostAlloc({bytes} bytes)"),
        )?;
        let mut d: cu::CUdeviceptr = 0;
        // SAFETY: p is a live mapped host allocation (above); out-pointer to a local.
        if let Err(e) = check(unsafe { cu::cuMemHostGetDevicePointer_v2(&mut d, p, 0) }, "cuMemHostGetDevicePointer") {
            // SAFETY: p was allocated above and is not used again.
            unsafe { cu::cuMemFreeHost(p) };
            return Err(e);
        }
        if !(p as usize).is_multiple_of(64) {
            // SAFETY: as above.
            unsafe { cu::cuMemFreeHost(p) };
            return Err(Error::new(format!("cuMemHostAlloc returned {p:p}, not 64-byte aligned")));
        }
        // SAFETY: p is valid for `bytes` (cuMemHostAlloc), zeroed just below before anyone sees it.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0, bytes) };
        // The memory may be freed on any thread (the last user of a proxy's buffers): make the
        // context current there first (the primary context, retained for the process's life).
        let ctx = self.ctx as usize;
        // SAFETY: zeroed, 64-aligned (checked), valid for bytes; d is its device address; freed once,
        // with cuMemFreeHost in the context that allocated it.
        Ok(unsafe {
            HostShared::from_raw(p as *mut u8, d, bytes, Box::new(move |p| {
                cu::cuCtxSetCurrent(ctx as cu::CUcontext);
                cu::cuMemFreeHost(p as *mut std::ffi::c_void);
            }))
        })
    }

    /// `Backend::device_mem` on CUDA: `cuMemAlloc`, zeroed on one of the services' streams and
    /// synchronized. (Not `cuMemsetD8`: it runs on the legacy default stream, which the services'
    /// non-blocking streams do not wait for, so a later copy into the memory could run before the
    /// memset and be wiped: seen on an H100, the IBGDA table read back as zeros.)
    fn device_zeroed(&self, bytes: usize) -> Result<DeviceMem> {
        self.bind()?;
        let bytes = bytes.max(256);
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: out-pointer to a local; our context is current.
        check(unsafe { cu::cuMemAlloc_v2(&mut p, bytes) }, &format!("cuMemAlloc({bytes} bytes)"))?;
        /// Frees the allocation in its context on drop (on whichever thread drops it last).
        struct Free(u64, usize);
        impl Drop for Free {
            fn drop(&mut self) {
                // SAFETY: the allocation made above, freed once, in the primary context (retained
                // for the process's life) made current on this thread first.
                unsafe {
                    cu::cuCtxSetCurrent(self.1 as cu::CUcontext);
                    cu::cuMemFree_v2(self.0);
                }
            }
        }
        let mem = DeviceMem { addr: p, bytes, _keep: Box::new(Free(p, self.ctx as usize)) };
        let s = self.take_stream()?;
        // SAFETY: p is a live allocation of `bytes` bytes; s is a live stream of our context.
        let r = check_ctx(unsafe { cu::cuMemsetD8Async(p, 0, bytes, s.as_raw()) }, "cuMemsetD8Async")
            // SAFETY: s is a live stream.
            .and_then(|_| check_ctx(unsafe { cu::cuStreamSynchronize(s.as_raw()) }, "cuStreamSynchronize"));
        self.give_stream(s);
        r.map(|_| mem)
    }

    /// A stream of the pool, waiting while all are taken. The pool is made once, at setup
    /// (`prepare_services`), and never grows: every stream occupies one of the device's hardware work
    /// queues (CUDA_DEVICE_MAX_CONNECTIONS), and a proxy stream that shares a queue with the stream of
    /// a user kernel spinning on the proxy waits behind that kernel forever (streams share queues
    /// round-robin by creation order). Few streams, made early, get queues of their own.
    fn take_stream(&self) -> Result<Stream> {
        let mut backoff = rshmem_common::Backoff::new();
        loop {
            if let Some(s) = self.streams.lock().unwrap().pop() {
                // SAFETY: the pool holds only streams `create_stream` made in this context, never
                // destroyed while the services live.
                return Ok(unsafe { Stream::from_raw(s as cu::CUstream) });
            }
            if self.made.load(std::sync::atomic::Ordering::Acquire) < PROXY_STREAMS {
                return self.new_stream();
            }
            backoff.snooze();
        }
    }
    fn new_stream(&self) -> Result<Stream> {
        let s = self.create_stream()?;
        self.made.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(s)
    }
    /// A non-blocking stream of the highest priority, not counted in the pool.
    fn create_stream(&self) -> Result<Stream> {
        self.bind()?;
        let (mut least, mut greatest) = (0i32, 0i32);
        // SAFETY: out-pointers to locals.
        check(unsafe { cu::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) }, "cuCtxGetStreamPriorityRange")?;
        let mut s: cu::CUstream = std::ptr::null_mut();
        check(
            // SAFETY: out-pointer to a local; CU_STREAM_NON_BLOCKING: the stream never synchronizes with
            // the legacy default stream (see the module's notes); the highest priority, so the proxy's small
            // launches and copies are scheduled ahead of queued user work.
            unsafe { cu::cuStreamCreateWithPriority(&mut s, cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32, greatest) },
            "cuStreamCreateWithPriority",
        )?;
        // SAFETY: just created in this context; the services destroy none of their streams while they
        // live.
        Ok(unsafe { Stream::from_raw(s) })
    }
    fn give_stream(&self, s: Stream) {
        self.streams.lock().unwrap().push(s.as_raw() as usize);
    }

    /// A copy between any two addresses (unified addressing), on a non-blocking stream of the pool,
    /// waited for on that stream only. A small aligned copy into GPU memory (a proxied `p`, a device
    /// barrier's 8-byte epoch) is expected to land as one PCIe write, so a polling kernel does not see
    /// it torn; this is not verified on the GPU yet (TODO with the AMO latency measurement).
    ///
    /// # Safety
    /// `src` readable, `dst` writable for `len` bytes, not overlapping.
    unsafe fn proxy_copy(&self, dst: *mut u8, src: *const u8, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.bind()?;
        let (dst_ok, src_ok) = (driver_visible(dst as u64), driver_visible(src as u64));
        if !dst_ok && !src_ok {
            // Host to host: no device involved.
            // SAFETY: the caller's contract (valid, non-overlapping).
            unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
            return Ok(());
        }
        if !dst_ok || !src_ok {
            // SAFETY: forwarded contract.
            return unsafe { self.bounced_copy(dst, src, len, dst_ok) };
        }
        let s = self.take_stream()?;
        // SAFETY: the caller's contract; s is a live stream of our context.
        let r = check_ctx(unsafe { cu::cuMemcpyAsync(dst as u64, src as u64, len, s.as_raw()) }, "proxy copy: cuMemcpyAsync")
            // SAFETY: s is a live stream.
            .and_then(|_| check_ctx(unsafe { cu::cuStreamSynchronize(s.as_raw()) }, "proxy copy: cuStreamSynchronize"));
        self.give_stream(s);
        r
    }



    /// `Services::post_request` on CUDA: `rshmemi_proxy_request` on `stream` (None: one of the services'
    /// non-blocking streams, synchronized before returning). The request travels in the kernel's
    /// parameters (copied at launch), so nothing here must outlive the call.
    ///
    /// # Safety
    /// As `Services::post_request`.
    unsafe fn post_from_gpu(&self, req: &rshmem_device::remote::proxy::Request, stream: Option<u64>) -> Result<()> {
        let module = self.modules.own()?;
        let mut w = [
            req.op as u64 | (req.sub as u64) << 16 | (req.pe as u64) << 32,
            req.offset,
            req.len,
            req.src,
            req.value,
            req.sig_offset,
            req.sig_value,
            1u64, // wait for completion
        ];
        let mut params: Vec<*mut std::ffi::c_void> = w.iter_mut().map(|v| v as *mut u64 as *mut std::ffi::c_void).collect();
        if let Some(stream) = stream {
            // SAFETY: eight u64 parameters as the kernel declares them; `stream` is a `Stream`'s handle
            // (`cuda::onstream_remote` passes `Stream::as_raw`), valid by `Stream::from_raw`'s contract.
            return unsafe { module.launch("rshmemi_proxy_request", 1, 1, 0, Stream::from_raw(stream as cu::CUstream), &mut params) };
        }
        let s = self.take_stream()?;
        // SAFETY: as above, on our own live non-blocking stream, synchronized before the parameters go.
        let r = unsafe { module.launch("rshmemi_proxy_request", 1, 1, 0, s, &mut params) }
            // SAFETY: s is a live stream.
            .and_then(|_| check_ctx(unsafe { cu::cuStreamSynchronize(s.as_raw()) }, "proxy request from the GPU: cuStreamSynchronize"));
        self.give_stream(s);
        r
    }

    /// Allocates what the proxy's copies need before any kernel runs (see the module notes).
    fn prepare_services(&self) -> Result<()> {
        let mut b = self.bounce.lock().unwrap();
        while b.len() < BOUNCE_BUFFERS {
            b.push(self.pinned_shared(BOUNCE_BYTES)?);
        }
        drop(b);
        // And the streams (one per concurrent caller), so none is created while kernels run.
        let streams: Vec<Stream> = (0..PROXY_STREAMS).map(|_| self.take_stream()).collect::<Result<_>>()?;
        for s in streams {
            self.give_stream(s);
        }
        Ok(())
    }

    /// A copy with a pageable host side (`dst` pageable unless `dst_visible`), through a pinned bounce
    /// buffer, chunk by chunk, on a non-blocking stream.
    ///
    /// # Safety
    /// As `proxy_copy`.
    unsafe fn bounced_copy(&self, dst: *mut u8, src: *const u8, len: usize, dst_visible: bool) -> Result<()> {
        let mut backoff = rshmem_common::Backoff::new();
        let buf = loop {
            if let Some(b) = self.bounce.lock().unwrap().pop() {
                break b;
            }
            backoff.snooze();
        };
        let s = match self.take_stream() {
            Ok(s) => s,
            Err(e) => {
                self.bounce.lock().unwrap().push(buf);
                return Err(e);
            }
        };
        let stage = buf.host_ptr();
        let mut r = Ok(());
        let mut done = 0usize;
        while done < len && r.is_ok() {
            let n = (len - done).min(BOUNCE_BYTES);
            // SAFETY: the caller's contract covers [done, done+n) of both ranges; the bounce buffer holds
            // BOUNCE_BYTES >= n bytes and is ours until pushed back; the stream is synchronized before
            // the buffer is read or reused.
            r = unsafe {
                if dst_visible {
                    // Pageable source: into the bounce buffer by the CPU, then DMA.
                    std::ptr::copy_nonoverlapping(src.add(done), stage, n);
                    check_ctx(cu::cuMemcpyAsync(dst.add(done) as u64, stage as u64, n, s.as_raw()), "proxy copy: cuMemcpyAsync (bounced)")
                        .and_then(|_| check_ctx(cu::cuStreamSynchronize(s.as_raw()), "proxy copy: cuStreamSynchronize"))
                } else {
                    // Pageable destination: DMA into the bounce buffer, then the CPU.
                    check_ctx(cu::cuMemcpyAsync(stage as u64, src.add(done) as u64, n, s.as_raw()), "proxy copy: cuMemcpyAsync (bounced)")
                        .and_then(|_| check_ctx(cu::cuStreamSynchronize(s.as_raw()), "proxy copy: cuStreamSynchronize"))
                        .map(|_| std::ptr::copy_nonoverlapping(stage, dst.add(done), n))
                }
            };
            done += n;
        }
        self.give_stream(s);
        self.bounce.lock().unwrap().push(buf);
        r
    }
}

impl Services for CudaServices {
    fn host_shared(&self, bytes: usize) -> Result<HostShared> {
        self.pinned_shared(bytes)
    }
    fn device_mem(&self, bytes: usize) -> Result<DeviceMem> {
        self.device_zeroed(bytes)
    }
    unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.proxy_copy(dst, src, len) }
    }
    fn prepare_proxy(&self) -> Result<()> {
        self.prepare_services()?;
        self.modules.own().map(|_| ())
    }
    unsafe fn post_request(&self, req: &rshmem_device::remote::proxy::Request, stream: Option<u64>) -> Result<bool> {
        // SAFETY: forwarded contract.
        unsafe { self.post_from_gpu(req, stream)? };
        Ok(true)
    }
    fn service_kernel(&self, name: &'static str, threads: u32, args: &[u64]) -> Result<Option<Box<dyn ServiceKernel>>> {
        let module = self.modules.own()?;
        let stream = self.create_stream()?.as_raw();
        let mut event: cu::CUevent = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        if let Err(e) = check(unsafe { cu::cuEventCreate(&mut event, cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32) }, "cuEventCreate") {
            // SAFETY: the stream made above, unused, destroyed once.
            unsafe { cu::cuStreamDestroy_v2(stream) };
            return Err(e);
        }
        Ok(Some(Box::new(CudaServiceKernel { ctx: self.ctx, module, name, threads, args: args.to_vec(), stream, event })))
    }
}

/// The CUDA `ServiceKernel`: its stream (non-blocking, highest priority, made at setup) and an event
/// recorded after each launch, whose query says whether the launch still runs.
struct CudaServiceKernel {
    ctx: cu::CUcontext,
    module: Arc<super::module::Module>,
    name: &'static str,
    threads: u32,
    args: Vec<u64>,
    stream: cu::CUstream,
    event: cu::CUevent,
}

// SAFETY: the context, stream and event are driver handles usable from any thread once the context is
// current there (each method makes it so); the rest is plain data and an Arc of a Sync module.
unsafe impl Send for CudaServiceKernel {}
// SAFETY: as above; the driver calls on the handles are thread-safe.
unsafe impl Sync for CudaServiceKernel {}

impl ServiceKernel for CudaServiceKernel {
    fn launch(&self) -> Result<()> {
        let mut a = self.args.clone();
        let mut params: Vec<*mut std::ffi::c_void> = a.iter_mut().map(|v| v as *mut u64 as *mut std::ffi::c_void).collect();
        // SAFETY: the kernel takes `args.len()` u64 parameters (the caller of `service_kernel` named
        // them); our live stream (made in this context, destroyed only in drop); the parameters are
        // copied at launch.
        unsafe { self.module.launch(self.name, 1, self.threads, 0, Stream::from_raw(self.stream), &mut params)? };
        // SAFETY: our live event and stream (the module's launch made the context current).
        check_ctx(unsafe { cu::cuEventRecord(self.event, self.stream) }, "cuEventRecord (service kernel)")
    }
    fn running(&self) -> Result<bool> {
        // SAFETY: ctx is the retained primary context, valid for the process's life.
        check(unsafe { cu::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")?;
        // SAFETY: our live event (never recorded: complete).
        match unsafe { cu::cuEventQuery(self.event) } {
            cu::CUresult::CUDA_SUCCESS => Ok(false),
            cu::CUresult::CUDA_ERROR_NOT_READY => Ok(true),
            r => check_ctx(r, &format!("{} (service kernel): cuEventQuery", self.name)).map(|_| false),
        }
    }
}

impl Drop for CudaServiceKernel {
    fn drop(&mut self) {
        // A launch that still runs keeps its stream and event (left behind rather than waited for: the
        // owner waited a bounded time and said so).
        if matches!(self.running(), Ok(false)) {
            // SAFETY: our event and stream, idle, destroyed once.
            unsafe {
                cu::cuEventDestroy_v2(self.event);
                cu::cuStreamDestroy_v2(self.stream);
            }
        }
    }
}


/// Whether the driver knows `p` (device memory, or host memory it pinned/registered): such addresses
/// are copied by DMA without the driver's pageable staging.
fn driver_visible(p: u64) -> bool {
    let mut ty: u32 = 0;
    // SAFETY: out-pointer to a local u32 (the attribute's type is CUmemorytype, an unsigned int); the
    // call only inspects the address. Unknown (pageable) addresses return an error.
    let r = unsafe {
        cu::cuPointerGetAttribute(&mut ty as *mut u32 as *mut std::ffi::c_void, cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p)
    };
    r == cu::CUresult::CUDA_SUCCESS && ty != 0
}
