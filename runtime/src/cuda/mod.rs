//! CUDA backend. Each PE binds one GPU (node-local PE number modulo the GPU count). Its symmetric heap
//! is a reserved virtual range backed by `cuMemCreate` granules exported as POSIX fds; the fds travel to
//! same-node PEs over the fd server (SCM_RIGHTS), which import and map them into a range reserved for
//! that peer, so `peer_base[pe] + offset` is a device pointer here. The heap grows by granules inside the
//! collective malloc, mapped on every peer before malloc returns.
//!
//! The driver is loaded at run time (cudarc, dynamic loading): binaries build and run without CUDA.

pub mod driver;
mod module;

pub use module::{barrier_all_on_stream, copy_from_device, copy_to_device, device_alloc, device_free, getmem_on_stream, putmem_on_stream, quiet_on_stream, sync_all_on_stream, synchronize, Module, Stream, Timer};

use crate::backend::{Backend, Collective, SEG_GRANULE0};
use crate::bootstrap::Bootstrap;
use crate::error::{Error, Result};
use crate::fdpass::FdServer;
use crate::log;
use cudarc::driver::sys as cu;
use driver::{check, check_ctx};
use rshmem_device::state::DeviceState;
use std::sync::Mutex;

/// The device library as PTX, built from crate rshmem-device by build.rs (empty only in a CPU-only
/// build made on purpose with RSHMEM_SKIP_PTX=1).
pub const DEVICE_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/rshmem_device.ptx"));

/// Why the CUDA backend could not start: no usable GPU (fall back to the CPU backend under
/// RSHMEM_BACKEND=auto) or a real failure (report it).
pub enum CudaInitError {
    NoGpu(String),
    Failed(Error),
}

impl CudaInitError {
    pub fn is_no_gpu(&self) -> bool {
        matches!(self, CudaInitError::NoGpu(_))
    }
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
    /// Granules backed so far (the same count on every PE: growth is collective).
    granules: usize,
    /// Our own allocation handles (unmapped and released at drop) and every mapping made.
    own: Vec<cu::CUmemGenericAllocationHandle>,
    mapped: Vec<(u64, usize)>,
    /// Device addresses of `rshmemi_device_state` in every module that carries the device library
    /// (modules we loaded, and nvcc-linked programs that registered theirs).
    state_addrs: Vec<u64>,
    state: Option<DeviceState>,
}

pub struct CudaBackend {
    pub(crate) ctx: cu::CUcontext,
    dev: cu::CUdevice,
    me: usize,
    granule: usize,
    heap_size: usize,
    /// Reserved range of every node-local PE's heap in this process (0 for other nodes).
    bases: Vec<u64>,
    inner: Mutex<Inner>,
    /// The runtime's own module (device library + its kernels: barrier/quiet on stream), loaded at
    /// first use: JIT-compiling the device library takes a while and most programs never need it.
    module: Mutex<Option<std::sync::Arc<Module>>>,
}

// SAFETY: CUcontext is a handle usable from any thread once made current there (we do so in `bind`);
// all mutable state is behind the Mutex.
unsafe impl Send for CudaBackend {}
unsafe impl Sync for CudaBackend {}

impl CudaBackend {
    pub fn new(boot: &Bootstrap, fds: &FdServer, job: [u8; 16], heap_size: usize) -> std::result::Result<CudaBackend, CudaInitError> {
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
        let g = crate::env::get_size(crate::env::CUMEM_GRANULE, 512 << 20)? as usize;
        let granule = g.div_ceil(granule) * granule;
        let heap_size = heap_size.div_ceil(granule) * granule;
        let me = boot.pe();
        let mut bases = vec![0u64; boot.npes()];
        for &pe in boot.node_pes() {
            bases[pe] = driver::reserve(heap_size, granule)
                .map_err(|e| e.context(format!("reserving {heap_size} bytes of address space for PE {pe}'s heap")))?;
        }
        let be = CudaBackend {
            ctx,
            dev,
            me,
            granule,
            heap_size,
            bases,
            inner: Mutex::new(Inner { granules: 0, own: vec![], mapped: vec![], state_addrs: vec![], state: None }),
            module: Mutex::new(None),
        };
        // The first granule holds the runtime's internal area: back it now.
        be.grow(Collective { boot, fds, job }, 1)?;
        log::info(format!("PE {me}: GPU {ordinal}, heap {heap_size} bytes reserved, granule {granule} bytes"));
        Ok(be)
    }

    pub(crate) fn bind(&self) -> Result<()> {
        // SAFETY: ctx is the retained primary context, valid for the backend's life.
        check(unsafe { cu::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    /// Backs granules until `want` are backed on every node-local PE and mapped here. Collective.
    fn grow(&self, c: Collective, want: usize) -> Result<()> {
        self.bind()?;
        let mut inner = self.inner.lock().unwrap();
        while inner.granules < want {
            let idx = inner.granules;
            let id = SEG_GRANULE0 + idx as u32;
            let off = idx * self.granule;
            // Our granule: create, map into our own range, export.
            let h = driver::create(self.dev, self.granule)?;
            inner.own.push(h);
            let va = self.bases[self.me] + off as u64;
            driver::map(va, self.granule, h, self.dev)?;
            inner.mapped.push((va, self.granule));
            let fd = driver::export_fd(h)?;
            c.fds.offer(id, fd, self.granule as u64);
            c.boot.barrier("rshmem_malloc (heap growth)")?;
            for &pe in c.boot.node_pes() {
                if pe == self.me {
                    continue;
                }
                let (pfd, size) = c.fds.fetch(c.job, pe, id)?;
                if size as usize != self.granule {
                    return Err(Error::new(format!("PE {pe}'s heap granule is {size} bytes, ours {}: set the same RSHMEM_CUMEM_GRANULE everywhere", self.granule)));
                }
                let ph = driver::import_fd(&pfd).map_err(|e| e.context(format!("importing PE {pe}'s heap granule {idx}")))?;
                let pva = self.bases[pe] + off as u64;
                driver::map(pva, self.granule, ph, self.dev).map_err(|e| e.context(format!("mapping PE {pe}'s heap (peer access between GPUs?)")))?;
                // The mapping keeps the memory; our import handle is no longer needed.
                driver::release(ph);
                inner.mapped.push((pva, self.granule));
            }
            c.boot.barrier("rshmem_malloc (heap growth)")?;
            c.fds.withdraw(id);
            inner.granules += 1;
        }
        Ok(())
    }

    /// Writes the device state into every registered module.
    fn publish_all(&self, inner: &Inner) -> Result<()> {
        if let Some(st) = inner.state.as_ref() {
            for &a in &inner.state_addrs {
                driver::htod(a, st as *const DeviceState as *const u8, std::mem::size_of::<DeviceState>())?;
            }
        }
        Ok(())
    }

    /// Registers another module's `rshmemi_device_state` and fills it in.
    pub fn register_state(&self, addr: u64) -> Result<()> {
        self.bind()?;
        let mut inner = self.inner.lock().unwrap();
        if !inner.state_addrs.contains(&addr) {
            inner.state_addrs.push(addr);
        }
        self.publish_all(&inner)
    }

    /// The runtime's own module, loaded (and its device state filled in) on first use.
    pub fn module(&self) -> Result<std::sync::Arc<Module>> {
        let mut m = self.module.lock().unwrap();
        if m.is_none() {
            let loaded = Module::load_in(self.ctx, &[])?;
            let mut addr = None;
            loaded.with_state_addr(|a| addr = Some(a));
            if let Some(a) = addr {
                self.register_state(a)?;
            }
            *m = Some(std::sync::Arc::new(loaded));
        }
        Ok(m.clone().unwrap())
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
        self.grow(c, upto.div_ceil(self.granule))
    }
    fn zero(&self, off: usize, len: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: [off, off+len) is inside our backed heap (allocator + ensure_backed).
        check_ctx(unsafe { cu::cuMemsetD8_v2(self.bases[self.me] + off as u64, 0, len) }, "cuMemsetD8")?;
        check_ctx(unsafe { cu::cuCtxSynchronize() }, "cuCtxSynchronize")
    }
    fn quiet(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: plain synchronization of the current context.
        check_ctx(unsafe { cu::cuCtxSynchronize() }, "cuCtxSynchronize (rshmem quiet/barrier: a kernel of this PE failed?)")
    }
    unsafe fn copy_in(&self, dst: *mut u8, src: &[u8]) -> Result<()> {
        self.bind()?;
        driver::htod(dst as u64, src.as_ptr(), src.len())
    }
    unsafe fn copy_out(&self, dst: &mut [u8], src: *const u8) -> Result<()> {
        self.bind()?;
        driver::dtoh(dst.as_mut_ptr(), src as u64, dst.len())
    }
    unsafe fn putmem(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        self.bind()?;
        let r = rshmem_device::ptr(dst, pe) as u64;
        // SAFETY: r is dst's mapping on pe (range checked by the runtime); unified addressing lets
        // cuMemcpy take host or device sources.
        check_ctx(unsafe { cu::cuMemcpy(r, src as u64, bytes) }, "rshmem_putmem: cuMemcpy")?;
        check_ctx(unsafe { cu::cuCtxSynchronize() }, "cuCtxSynchronize")
    }
    unsafe fn getmem(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        self.bind()?;
        let r = rshmem_device::ptr(src, pe) as u64;
        // SAFETY: as in putmem.
        check_ctx(unsafe { cu::cuMemcpy(dst as u64, r, bytes) }, "rshmem_getmem: cuMemcpy")?;
        check_ctx(unsafe { cu::cuCtxSynchronize() }, "cuCtxSynchronize")
    }
    fn publish_state(&self, state: &DeviceState) -> Result<()> {
        self.bind()?;
        let mut inner = self.inner.lock().unwrap();
        inner.state = Some(*state);
        self.publish_all(&inner)
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        let _ = self.bind();
        // SAFETY: synchronize before unmapping so no kernel still uses the heap.
        unsafe { cu::cuCtxSynchronize() };
        let inner = self.inner.get_mut().unwrap();
        for &(va, size) in &inner.mapped {
            driver::unmap(va, size);
        }
        for &h in &inner.own {
            driver::release(h);
        }
        for &b in &self.bases {
            if b != 0 {
                driver::unreserve(b, self.heap_size);
            }
        }
    }
}

/// The CUDA backend of the running runtime, if that is the backend in use.
pub fn with_backend<R>(call: &str, f: impl FnOnce(&CudaBackend) -> Result<R>) -> Result<R> {
    let rt = crate::runtime::get(call)?;
    let any = rt.backend().as_any();
    match any.downcast_ref::<CudaBackend>() {
        Some(b) => f(b),
        None => Err(Error::new(format!("{call}: needs the CUDA backend (this job runs on the {} backend)", rt.backend().name()))),
    }
}
