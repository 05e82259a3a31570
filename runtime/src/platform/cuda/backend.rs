//! The CUDA backend. Each PE binds one GPU (node-local PE number modulo the GPU count). Its symmetric
//! heap is a reserved virtual range backed by `cuMemCreate` pieces (whole granules) exported as POSIX
//! fds; the fds travel to same-node PEs over the fd server (SCM_RIGHTS), which import and map them into
//! a range reserved for that peer, so `peer_base[pe] + offset` is a device pointer here. The heap grows
//! inside the collective malloc, by one piece covering what the allocation needs, mapped on every peer
//! before malloc returns.

use super::driver::{self, check, check_ctx};
use super::module::{Module, Stream, DEVICE_PTX};
use crate::config::Config;
use super::modules::Modules;
use super::services::CudaServices;
use crate::bootstrap::Bootstrap;
use crate::error::{Error, Result};
use crate::log;
use crate::node::fdpass::FdServer;
use crate::node::exchange::{exchange, Collective, Export, SEG_GRANULE0};
use crate::platform::backend::Backend;
use crate::platform::services::Services;
use cudarc::driver::sys as cu;
use rshmem_device::state::DeviceState;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Counts CUDA backend instances (one per `init`): modules and caches of an earlier instance are told
/// apart by it.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Why the CUDA backend could not start: no usable GPU (fall back to the CPU backend under
/// RSHMEM_BACKEND=auto) or a real failure (report it).
pub enum CudaInitError {
    /// No usable GPU, and why (the CUDA driver's answer).
    NoGpu(String),
    /// The GPU is there but setting the backend up failed.
    Failed(Error),
}

impl CudaInitError {
    /// Whether the failure is a missing GPU (the CPU fallback applies).
    pub fn is_no_gpu(&self) -> bool {
        matches!(self, CudaInitError::NoGpu(_))
    }
    /// The error to report (a missing GPU names `RSHMEM_BACKEND=cuda`).
    pub fn into_error(self) -> Error {
        match self {
            CudaInitError::NoGpu(m) => Error::new(format!("RSHMEM_BACKEND=cuda but no usable GPU: {m}")),
            CudaInitError::Failed(e) => e,
        }
    }
}

impl std::fmt::Display for CudaInitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CudaInitError::NoGpu(m) => f.write_str(m),
            CudaInitError::Failed(e) => write!(f, "{e}"),
        }
    }
}

impl From<Error> for CudaInitError {
    fn from(e: Error) -> Self {
        CudaInitError::Failed(e)
    }
}

struct Inner {
    /// Bytes of the heap backed so far, from its start (a whole number of granules; the same on every
    /// PE: growth is collective).
    backed: usize,
    /// Pieces of physical memory backing them so far (one per growth; their fd-server ids).
    chunks: usize,
    /// Our own allocation handles (unmapped and released at drop) and every mapping made.
    own: Vec<cu::CUmemGenericAllocationHandle>,
    mapped: Vec<(u64, usize)>,
}

/// The CUDA backend of one PE: its GPU's primary context, the heap's reserved ranges (its own and each
/// node-local peer's), the granules backing them, and the modules that share the device state.
pub struct CudaBackend {
    pub(crate) ctx: cu::CUcontext,
    dev: cu::CUdevice,
    me: usize,
    granule: usize,
    heap_size: usize,
    /// Reserved range of every node-local PE's heap in this process (0 for other nodes).
    bases: Vec<u64>,
    inner: Mutex<Inner>,
    /// The modules of this instance and the device state they share (the runtime's own module too).
    modules: Arc<Modules>,
    /// This instance's number (`GENERATION`), different for every `init` of the process.
    generation: u64,
    /// What the proxy transport's threads use (`Backend::services`).
    services: Arc<CudaServices>,
    /// The host RMA stream (made by `new`; a `CUstream` handle): host put/get to PEs of this node run on it, the nbi
    /// ones left queued until the next quiet. Non-blocking: a host put never waits for the user's
    /// kernels (`cuMemcpy` on the legacy stream plus `cuCtxSynchronize` did, and cost 10-20 us a call).
    rma_stream: usize,
    /// Where `rshmemi_point_op` leaves the value a host AMO or `g` returns: pinned host memory mapped
    /// for the GPU (made by `new`), which the host reads once the point operation's stream has run it,
    /// with no copy (a synchronous copy out of device memory runs on the legacy default stream behind
    /// any user kernel, and into pageable memory; see `point_op`). The host API is serialized, and the
    /// slot is read before the call returns.
    point_slot: crate::platform::services::HostShared,
    /// Argument blocks of untyped launches (`KernelSet::run`): pinned host memory mapped for the GPU,
    /// reused from launch to launch (see `with_arg_block`). Some are made by `new`.
    arg_blocks: Mutex<Vec<crate::platform::services::HostShared>>,
}

/// Bytes of one argument block of an untyped launch: 512 `u64` arguments.
pub(crate) const ARG_BLOCK_BYTES: usize = 4096;
/// Argument blocks made by `CudaBackend::new` (more are made only when more untyped launches than this
/// run at once).
const ARG_BLOCKS: usize = 4;

// SAFETY: CUcontext is a handle usable from any thread once made current there (we do so in `bind`);
// all mutable state is behind the Mutex.
unsafe impl Send for CudaBackend {}
// SAFETY: as for Send; &self methods only read immutable handles or lock `inner`/`module`, and the
// driver API is thread-safe.
unsafe impl Sync for CudaBackend {}

impl CudaBackend {
    /// The host RMA stream (non-blocking; made by `new`), with the context bound on this thread.
    fn rma(&self) -> Result<cu::CUstream> {
        self.bind()?;
        Ok(self.rma_stream as cu::CUstream)
    }
    /// The point operations' result slot (made by `new`): (its device address, its host address).
    fn point_slot(&self) -> (u64, usize) {
        (self.point_slot.device_addr(), self.point_slot.host_ptr() as usize)
    }
    /// Runs point operation `op` (`rshmem_device::point`) as a one-thread kernel: on `stream`, or on
    /// the host RMA stream and waited for (`stream` None: the host API). `want`: wait for it and return
    /// the value it produced (a fetching AMO, a `g`, a signal wait).
    ///
    /// # Safety
    /// The runtime checked `op` (`point::run`'s contract); local buffers it names stay valid until it
    /// has run on the stream.
    pub(crate) unsafe fn point_op(&self, call: &str, op: &rshmem_device::point::Op, stream: Option<Stream>, want: bool) -> Result<u64> {
        let s = match stream {
            Some(s) => s.as_raw(),
            None => self.rma()?,
        };
        let (slot, slot_host) = if want { self.point_slot() } else { (0, 0) };
        let mut params = [op.word(), op.dest, op.value, op.cond, op.n, op.aux, op.dst as u64, op.sst as u64, slot];
        let mut args = params.each_mut().map(|p| p as *mut u64 as *mut std::ffi::c_void);
        // SAFETY: the parameters match rshmemi_point_op(u64 x 9) in order and size; the operation was
        // checked (our caller's contract); `s` is the caller's `Stream` (valid by `Stream::from_raw`'s
        // contract) or our live host RMA stream.
        unsafe { self.module()?.launch("rshmemi_point_op", 1, 1, 0, Stream::from_raw(s), &mut args)? };
        if stream.is_none() || want {
            // Polled, not cuStreamSynchronize: the kernel may wait for the proxy or the emulated NIC,
            // whose CUDA calls must get through meanwhile (driver::wait_stream_polling).
            // SAFETY: `s` is the caller's stream or our host RMA stream, live in this bound context.
            unsafe { driver::wait_stream_polling(s, &format!("{call}: waiting for the point operation"))? };
        }
        if !want {
            return Ok(0);
        }
        // Read in place: the kernel stored the value into this mapped host memory, and the stream's
        // completion (observed above) makes its stores visible here. A synchronous device-to-host copy
        // would run on the legacy default stream, behind any user kernel there (which may be waiting
        // for the emulated NIC), into pageable memory, while the NIC thread's own copies wait: the
        // IBGDA suite's host_amo scenario hung so on 2 x H100 with the return slots in GPU memory.
        std::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: slot_host is the 64-byte pinned slot (point_slot), 8-aligned; the kernel that wrote it
        // has completed and nothing else writes it (the host API is serialized).
        Ok(unsafe { std::ptr::read_volatile(slot_host as *const u64) })
    }
    /// Runs `f` with `args` in an argument block of untyped launches (the `u64`s in order, at the
    /// device address `f` gets), and gives the block back when `f` returns: `f` must return only once
    /// nothing reads the block any more (the kernel it launched has completed or never started).
    ///
    /// The block is pinned host memory mapped for the GPU, made at start and reused, so a launch makes
    /// no device allocation and no synchronous copy: `cuMemAlloc` and `cuMemFree` may wait for the
    /// kernels running on the device, and a thread waiting inside the driver holds up the other
    /// threads' CUDA calls. A kernel waiting on the emulated NIC, whose thread copies fetched values
    /// into GPU memory, then never ends (the IBGDA suite's `host_amo` after `contention` hung so on
    /// 2 x H100 with the return slots in GPU memory: the per-launch argument buffer of the kernel that
    /// ended first was freed while the host AMOs' kernels still waited on the NIC).
    pub(crate) fn with_arg_block<R>(&self, call: &str, args: &[u64], f: impl FnOnce(u64) -> Result<R>) -> Result<R> {
        if args.len() * 8 > ARG_BLOCK_BYTES {
            return Err(Error::new(format!("{call}: {} arguments; an untyped launch takes at most {}", args.len(), ARG_BLOCK_BYTES / 8)));
        }
        let taken = self.arg_blocks.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let block = match taken {
            Some(b) => b,
            None => self.services.pinned_shared(ARG_BLOCK_BYTES)?,
        };
        for (i, &a) in args.iter().enumerate() {
            // SAFETY: the block holds ARG_BLOCK_BYTES >= 8 * args.len() bytes (checked above), 64-aligned,
            // and is ours alone until pushed back below (no kernel reads it: the last one that did has
            // completed, the contract of `f`).
            unsafe { (block.host_ptr() as *mut u64).add(i).write_volatile(a) };
        }
        // The stores above reach the block before the launch that reads it is enqueued.
        std::sync::atomic::fence(Ordering::SeqCst);
        let r = f(block.device_addr());
        self.arg_blocks.lock().unwrap_or_else(|e| e.into_inner()).push(block);
        r
    }
    /// Waits for everything queued on the host RMA stream.
    fn rma_sync(&self, call: &str) -> Result<()> {
        let s = self.rma()?;
        // SAFETY: our live host RMA stream, in this bound context (rma() binds it).
        unsafe { driver::wait_stream_polling(s, &format!("{call}: waiting for the host RMA stream")) }
    }

    /// Binds this PE's GPU (node-local PE number modulo the GPU count), reserves the heap ranges of every
    /// node-local PE and backs the first granule (collective over the node). `heap_size` is rounded up
    /// to whole granules (`RSHMEM_CUMEM_GRANULE`).
    pub fn new(boot: &Bootstrap, fds: &FdServer, job: [u8; 16], heap_size: usize, cfg: &Config) -> std::result::Result<CudaBackend, CudaInitError> {
        let ndev = driver::device_count().map_err(CudaInitError::NoGpu)?;
        if DEVICE_PTX.trim().is_empty() {
            // Recorded by build.rs (rshmem-ptxbuild) when it made the empty PTX.
            let why = option_env!("RSHMEM_PTX_MISSING_WHY").filter(|w| !w.is_empty()).unwrap_or("reason not recorded");
            return Err(CudaInitError::Failed(Error::new(format!(
                "this rshmem was built without the device library PTX, so the CUDA backend cannot run: {why}. RSHMEM_BACKEND=cpu uses the CPU backend"
            ))));
        }
        let local = boot.local_pe();
        let ordinal = (local % ndev) as i32;
        if boot.node_pes().len() > ndev && local == 0 {
            log::warn(format!(
                "{} PEs on this node but {ndev} GPU(s): PEs share GPUs round-robin (PE with local rank r uses GPU r % {ndev})",
                boot.node_pes().len()
            ));
        }
        let (dev, ctx) = driver::bind_primary(ordinal)?;
        let granule = driver::granularity(dev)?;
        let g = cfg.cumem_granule.max(1);
        let granule = g.div_ceil(granule) * granule;
        let heap_size = heap_size.div_ceil(granule) * granule;
        let me = boot.pe();
        let mut bases = vec![0u64; boot.npes()];
        for &pe in boot.node_pes() {
            match driver::reserve(heap_size, granule) {
                Ok(va) => bases[pe] = va,
                Err(e) => {
                    for &b in bases.iter().filter(|&&b| b != 0) {
                        // SAFETY: reserved just above with heap_size bytes; nothing is mapped in it.
                        unsafe { driver::unreserve(b, heap_size) };
                    }
                    return Err(e.context(format!("reserving {heap_size} bytes of address space for PE {pe}'s heap")).into());
                }
            }
        }
        let modules = Arc::new(Modules::new(ctx));
        let services = Arc::new(CudaServices::new(modules.clone()));
        // The host RMA stream and the point operations' result slot are made now, before any user
        // kernel runs, not by the first host AMO (which may race a kernel that waits on the emulated
        // NIC, as the suite's host_amo scenario does): allocating then may wait for that kernel.
        let point_slot = services.pinned_shared(64)?;
        let arg_blocks = (0..ARG_BLOCKS).map(|_| services.pinned_shared(ARG_BLOCK_BYTES)).collect::<Result<Vec<_>>>()?;
        let mut rma: cu::CUstream = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; a non-blocking stream of the context bound above.
        check(unsafe { cu::cuStreamCreate(&mut rma, cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32) }, "cuStreamCreate (host RMA stream)")?;
        let be = CudaBackend {
            ctx,
            dev,
            me,
            granule,
            heap_size,
            bases,
            inner: Mutex::new(Inner { backed: 0, chunks: 0, own: vec![], mapped: vec![] }),
            services,
            rma_stream: rma as usize,
            point_slot,
            arg_blocks: Mutex::new(arg_blocks),
            modules,
            generation: GENERATION.fetch_add(1, Ordering::Relaxed) + 1,
        };
        // The first granule holds the runtime's internal area: back it now.
        be.grow(Collective { boot, fds, job }, granule)?;
        log::info(format!("PE {me}: GPU {ordinal}, heap {heap_size} bytes reserved, granule {granule} bytes"));
        Ok(be)
    }

    pub(crate) fn bind(&self) -> Result<()> {
        // Most calls find the context already current on their thread: asking is a thread-local read,
        // setting it again is not free (host-issued on-stream puts paid 0.4 us a call above the
        // driver's own copy, bench/results/2026-11-27-h100x2.md call U).
        let mut cur: cu::CUcontext = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        if unsafe { cu::cuCtxGetCurrent(&mut cur) } == cu::CUresult::CUDA_SUCCESS && cur == self.ctx {
            return Ok(());
        }
        // SAFETY: ctx is the retained primary context, valid for the backend's life.
        check(unsafe { cu::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    /// Backs the heap up to `want` bytes (a multiple of the granule) on every node-local PE and maps it
    /// here. Collective. The missing range is one piece of physical memory, created, exported and
    /// mapped by one exchange, whatever its size: a 16 GiB allocation costs one `cuMemCreate` and one
    /// mapping per PE, not one per granule (32 rounds of create, export, two barriers, import and map
    /// took 104 ms on 2 x H200 against NVSHMEM's 7 ms, bench/results/2026-11-27-h200x2.md).
    fn grow(&self, c: Collective, want: usize) -> Result<()> {
        self.bind()?;
        let mut inner = self.inner.lock().unwrap();
        if inner.backed >= want {
            return Ok(());
        }
        let idx = inner.chunks;
        let id = SEG_GRANULE0 + idx as u32;
        let off = inner.backed;
        let size = want - off;
        // Ours: create, map into our own range, export. Each step is timed for the log (RSHMEM_DEBUG=info):
        // a large allocation's cost is these driver calls and the exchange.
        let t0 = std::time::Instant::now();
        let h = driver::create(self.dev, size)?;
        inner.own.push(h);
        let t_create = t0.elapsed();
        let va = self.bases[self.me] + off as u64;
        driver::map(va, size, h, self.dev)?;
        inner.mapped.push((va, size));
        let t_map = t0.elapsed();
        let fd = driver::export_fd(h)?;
        let t_export = t0.elapsed();
        let mut t_peers = std::time::Duration::ZERO;
        let what = format!("heap piece {idx} (bytes {off}..{want})");
        let export = Export { id, fd, size: size as u64, what: &what, size_var: crate::config::env::CUMEM_GRANULE };
        let (dev, bases) = (self.dev, &self.bases);
        let mapped = &mut inner.mapped;
        exchange(c, "rshmem_malloc (heap growth)", export, |pe, pfd| {
            let tp = std::time::Instant::now();
            let ph = driver::import_fd(&pfd).map_err(|e| e.context(format!("importing PE {pe}'s heap piece {idx}")))?;
            let pva = bases[pe] + off as u64;
            let r = driver::map(pva, size, ph, dev).map_err(|e| e.context(format!("mapping PE {pe}'s heap (peer access between GPUs?)")));
            // The mapping keeps the memory; our import handle is no longer needed.
            // SAFETY: ph was imported above, is owned here and not used again.
            unsafe { driver::release(ph) };
            r?;
            mapped.push((pva, size));
            t_peers += tp.elapsed();
            Ok(())
        })?;
        inner.backed = want;
        inner.chunks += 1;
        let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
        log::info(format!(
            "PE {}: heap growth by {size} bytes in {:.0} us: cuMemCreate {:.0}, map and access {:.0}, export {:.0}, exchange {:.0} (of which importing and mapping the peers' pieces {:.0})",
            self.me,
            us(t0.elapsed()),
            us(t_create),
            us(t_map - t_create),
            us(t_export - t_map),
            us(t0.elapsed() - t_export),
            us(t_peers)
        ));
        Ok(())
    }

    /// The modules of this instance (device-state registry, the runtime's own module).
    pub fn modules(&self) -> &Modules {
        &self.modules
    }

    /// `rshmem_cumodule_init`: registers the module's device state (`Modules::register_module`).
    ///
    /// # Safety
    /// `module` must stay loaded until `unregister_module(module)` or until this instance is dropped.
    pub unsafe fn register_module(&self, module: cu::CUmodule) -> Result<()> {
        // SAFETY: forwarded contract (the modules retire when this instance is dropped).
        unsafe { self.modules.register_module(module) }
    }

    /// `rshmem_cumodule_finalize`: the module's device state is no longer written.
    pub fn unregister_module(&self, module: cu::CUmodule) -> Result<()> {
        self.modules.unregister_module(module)
    }

    /// Makes `m` (loaded in this instance's context) one of this instance's modules
    /// (`Modules::adopt`).
    pub(crate) fn adopt(&self, m: &Arc<Module>) -> Result<()> {
        self.modules.adopt(m)
    }

    /// The number of this instance: different for every `init` in the process. A module or cache made
    /// under another generation belongs to a finalized runtime.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The runtime's own module, loaded (and its device state filled in) on first use.
    pub fn module(&self) -> Result<Arc<Module>> {
        self.modules.own()
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn heap_base(&self) -> usize {
        self.bases[self.me] as usize
    }
    fn heap_size(&self) -> usize {
        self.heap_size
    }
    fn peer_base(&self, pe: usize) -> usize {
        self.bases.get(pe).copied().unwrap_or(0) as usize
    }
    fn ensure_backed(&self, c: Collective, upto: usize) -> Result<()> {
        self.grow(c, upto.div_ceil(self.granule) * self.granule)
    }
    fn backed(&self) -> usize {
        self.inner.lock().unwrap().backed
    }
    fn zero(&self, off: usize, len: usize) -> Result<()> {
        self.bind()?;
        let backed = self.backed();
        if off > backed || len > backed - off {
            return Err(Error::new(format!("zeroing {len} bytes at heap offset {off}: outside the {backed} backed bytes of the heap")));
        }
        // SAFETY: [off, off+len) is inside the backed part of our own heap (checked above), which
        // only holds symmetric objects the caller (the allocator) zeroes.
        check_ctx(unsafe { cu::cuMemsetD8_v2(self.bases[self.me] + off as u64, 0, len) }, "cuMemsetD8")?;
        // SAFETY: plain synchronization of the current context.
        check_ctx(unsafe { cu::cuCtxSynchronize() }, "cuCtxSynchronize")
    }
    fn quiet(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: plain synchronization of the current context.
        check_ctx(unsafe { cu::cuCtxSynchronize() }, "cuCtxSynchronize (rshmem quiet/barrier: a kernel of this PE failed?)")
    }
    unsafe fn copy_in(&self, dst: *mut u8, src: &[u8]) -> Result<()> {
        self.bind()?;
        // SAFETY: dst is valid device memory for src.len() bytes (this function's contract); src is a
        // live slice.
        unsafe { driver::htod(dst as u64, src.as_ptr(), src.len()) }
    }
    unsafe fn copy_out(&self, dst: &mut [u8], src: *const u8) -> Result<()> {
        self.bind()?;
        // SAFETY: src is valid device memory for dst.len() bytes (this function's contract); dst is a
        // live, exclusive slice.
        unsafe { driver::dtoh(dst.as_mut_ptr(), src as u64, dst.len()) }
    }
    unsafe fn putmem(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        // SAFETY: forwarded contract; waited for below.
        unsafe { self.putmem_nbi(dst, src, bytes, pe)? };
        self.rma_sync("rshmem_putmem")
    }
    unsafe fn getmem(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        // SAFETY: forwarded contract; waited for below.
        unsafe { self.getmem_nbi(dst, src, bytes, pe)? };
        self.rma_sync("rshmem_getmem")
    }
    unsafe fn putmem_nbi(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        let s = self.rma()?;
        let r = rshmem_device::ptr(dst, pe) as u64;
        // SAFETY: r is dst's mapping on pe (range checked by the runtime); src is readable for bytes
        // and unchanged until the next quiet (this function's contract), which synchronizes the
        // context and so this stream; unified addressing lets the copy take host or device sources.
        check_ctx(unsafe { cu::cuMemcpyAsync(r, src as u64, bytes, s) }, "rshmem_putmem: cuMemcpyAsync")
    }
    unsafe fn getmem_nbi(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        let s = self.rma()?;
        let r = rshmem_device::ptr(src, pe) as u64;
        // SAFETY: as in putmem_nbi, with dst writable for bytes and not read before the next quiet.
        check_ctx(unsafe { cu::cuMemcpyAsync(dst as u64, r, bytes, s) }, "rshmem_getmem: cuMemcpyAsync")
    }
    fn publish_state(&self, state: &DeviceState) -> Result<()> {
        self.modules.publish(state)
    }
    fn services(&self) -> Arc<dyn Services> {
        self.services.clone()
    }
}

/// Runs when the last reference to the finalized runtime goes. The primary context stays (retained for
/// the process's life), so a later `init` makes a fresh instance in the same context: new address
/// reservations, new granules, new modules (`generation` tells them apart).
impl Drop for CudaBackend {
    fn drop(&mut self) {
        let _ = self.bind();
        // SAFETY: synchronize before unmapping so no kernel still uses the heap.
        unsafe { cu::cuCtxSynchronize() };
        // The point slot (pinned host memory) is freed by its own drop, after this.
        // SAFETY: our stream, idle (the context was synchronized), destroyed once (only here).
        unsafe { cu::cuStreamDestroy_v2(self.rma_stream as cu::CUstream) };
        // Every module that still holds this instance's state reads "not initialized" from now on, and
        // our own modules go (the context was synchronized above).
        self.modules.retire();
        let inner = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        for &(va, size) in &inner.mapped {
            // SAFETY: every entry was mapped by `grow` exactly once and is unmapped only here; the
            // context is synchronized and the runtime that handed out pointers into it is gone.
            unsafe { driver::unmap(va, size) };
        }
        for &h in &inner.own {
            // SAFETY: our own granule handles, created by `grow`, released only here.
            unsafe { driver::release(h) };
        }
        for &b in &self.bases {
            if b != 0 {
                // SAFETY: b is a range reserved in `new` with heap_size bytes; everything mapped in
                // it was unmapped above.
                unsafe { driver::unreserve(b, self.heap_size) };
            }
        }
    }
}
