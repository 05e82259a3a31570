//! GPU modules that carry the device library: the runtime's own (device library alone) and modules of
//! Rust kernels, JIT-linked with the device library (cuLink) so their calls into it resolve and they
//! share one `rshmemi_device_state`, which the runtime fills in.

use super::driver::{check, check_ctx};
use crate::error::{Error, Result};
use cudarc::driver::sys as cu;
use rshmem_device::Dim3;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::Mutex;

/// The device library as PTX, built from crate rshmem-device by build.rs (empty only in a CPU-only
/// build made on purpose with RSHMEM_SKIP_PTX=1).
pub const DEVICE_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/rshmem_device.ptx"));

/// A loaded module. Unloaded when dropped; its context is a primary context retained for the
/// process's life (`driver::bind_primary`), so the handle stays valid until then whichever runtime
/// instance loaded it.
pub struct Module {
    ctx: cu::CUcontext,
    module: cu::CUmodule,
    /// What launches need of each kernel, asked of the driver at the kernel's first launch only.
    kernels: Mutex<HashMap<String, KernelInfo>>,
}

/// One kernel of a module as launches use it: its handle, the most threads per block it can launch
/// with, and its parameters' sizes (None when the driver cannot say).
struct KernelInfo {
    f: cu::CUfunction,
    max_threads: u32,
    params: Option<Vec<usize>>,
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: ctx is a primary context retained for the process's life; module was loaded into
        // it by `link` and is unloaded only here, once. The context is synchronized first, so no
        // kernel of this module still runs when it goes.
        unsafe {
            cu::cuCtxSetCurrent(self.ctx);
            cu::cuCtxSynchronize();
            cu::cuModuleUnload(self.module);
        }
    }
}

// SAFETY: module handles are usable from any thread that has the context current (we bind first).
unsafe impl Send for Module {}
// SAFETY: &Module only reads the immutable handles and calls the (thread-safe) driver with them.
unsafe impl Sync for Module {}

/// A CUDA stream handle (a `cudaStream_t` from C is the same thing) that rshmem may enqueue work on.
/// Null is the legacy default stream ([`Stream::DEFAULT`]). Only [`Stream::from_raw`] (unsafe) makes
/// one from a raw handle, so every `Stream` that safe code holds is one whose maker promised it valid.
///
/// ```
/// use rshmem::stream::Stream;
/// // SAFETY: null is the legacy default stream.
/// let s = unsafe { Stream::from_raw(std::ptr::null_mut()) };
/// assert!(s.as_raw().is_null());
/// ```
/// Safe code cannot make one from an arbitrary pointer: the field is private,
/// ```compile_fail,E0423
/// let s = rshmem::stream::Stream(std::ptr::null_mut());
/// ```
/// and the constructor is `unsafe`:
/// ```compile_fail,E0133
/// let s = rshmem::stream::Stream::from_raw(std::ptr::null_mut());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Stream(cu::CUstream);
// SAFETY: a stream handle is a plain token usable from any thread.
unsafe impl Send for Stream {}
// SAFETY: as for Send: a copyable token with no interior state.
unsafe impl Sync for Stream {}
impl Stream {
    /// The legacy default stream (null).
    pub const DEFAULT: Stream = Stream(std::ptr::null_mut());

    /// The stream `handle` (a `CUstream` or `cudaStream_t`).
    ///
    /// # Safety
    /// `handle` is null (the legacy default stream) or a stream created in the context of this PE's
    /// GPU (its primary context, which rshmem uses), and it stays alive (not destroyed) for as long as
    /// the returned `Stream`, or a copy of it, is used: rshmem hands it to the CUDA driver.
    pub const unsafe fn from_raw(handle: cu::CUstream) -> Stream {
        Stream(handle)
    }

    /// The raw handle, for the CUDA driver.
    pub const fn as_raw(self) -> cu::CUstream {
        self.0
    }
}

impl Module {
    /// The device library linked with `extra`; `max_registers` as in [`Module::link`].
    pub(crate) fn load_in(ctx: cu::CUcontext, extra: &[(&str, &str)], max_registers: Option<u32>) -> Result<Module> {
        let state = state_ptx();
        let mut inputs = vec![("rshmem_state.ptx", state.as_str()), ("rshmem_device.ptx", DEVICE_PTX)];
        inputs.extend_from_slice(extra);
        Module::link(ctx, &inputs, max_registers)
    }

    /// JIT-links `inputs` (PTX) into a module and loads every kernel of it. `max_registers`: a bound on
    /// the registers per thread of every function compiled in this link (`CU_JIT_MAX_REGISTERS`, as
    /// nvcc's `-maxrregcount`), for kernels that must launch with more threads per block than their
    /// unbounded code allows ([`register_bound`]); `None` leaves the compiler free.
    pub(crate) fn link(ctx: cu::CUcontext, inputs: &[(&str, &str)], max_registers: Option<u32>) -> Result<Module> {
        // SAFETY: ctx is a live primary context.
        check(unsafe { cu::cuCtxSetCurrent(ctx) }, "cuCtxSetCurrent")?;
        let mut log = vec![0u8; 16384];
        let mut opts = vec![cu::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, cu::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        let mut vals = vec![log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
        if let Some(r) = max_registers {
            // A value option: the number itself travels in the pointer-sized slot.
            opts.push(cu::CUjit_option::CU_JIT_MAX_REGISTERS);
            vals.push(r as usize as *mut c_void);
        }
        let mut link = std::ptr::null_mut();
        // SAFETY: option arrays (opts.len() entries each) live until cuLinkDestroy below; the log buffer too.
        check(unsafe { cu::cuLinkCreate_v2(opts.len() as u32, opts.as_mut_ptr(), vals.as_mut_ptr(), &mut link) }, "cuLinkCreate")?;
        let result = (|| {
            for &(name, ptx) in inputs {
                let data = CString::new(ptx).map_err(|_| Error::new(format!("{name}: PTX contains a NUL byte")))?;
                let cname = CString::new(name).unwrap();
                // SAFETY: data/cname outlive the call (the linker copies the input).
                let r = unsafe {
                    cu::cuLinkAddData_v2(
                        link,
                        cu::CUjitInputType::CU_JIT_INPUT_PTX,
                        data.as_ptr() as *mut c_void,
                        data.as_bytes_with_nul().len(),
                        cname.as_ptr(),
                        0,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                check(r, &format!("linking {name}")).map_err(|e| e.context(log_text(&log)))?;
            }
            let mut cubin = std::ptr::null_mut();
            let mut size = 0usize;
            // SAFETY: the cubin stays valid until cuLinkDestroy; we load it before that.
            check(unsafe { cu::cuLinkComplete(link, &mut cubin, &mut size) }, "cuLinkComplete")
                .map_err(|e| e.context(log_text(&log)))?;
            let mut module = std::ptr::null_mut();
            // SAFETY: cubin is a complete image produced by the linker.
            check(unsafe { cu::cuModuleLoadData(&mut module, cubin) }, "cuModuleLoadData")?;
            let m = Module { ctx, module, kernels: Mutex::new(HashMap::new()) };
            m.load_functions()?;
            Ok(m)
        })();
        // SAFETY: link was created above.
        unsafe { cu::cuLinkDestroy(link) };
        result
    }

    /// Loads the code of every kernel of the module now. Under CUDA's lazy loading (the default since
    /// CUDA 12.2) a kernel's code is loaded at its first launch, and that load may wait for the kernels
    /// already running on the device. The runtime's service kernels (`rshmemi_inbound_service`,
    /// `rshmemi_proxy_request`) are first launched exactly while a user kernel spins waiting for the
    /// proxy, so a lazy first launch waits for a kernel that waits for it. Seen on 2 x H200
    /// (bench/results/2026-11-23-h200x2-remote-pes.md): the remote `g`, `fence`, `lock` and
    /// `put_signal` scenarios hung across nodes, the kicker thread in its first launch holding up the
    /// proxy's copies. `cuFuncLoad` (CUDA 12.4) loads each function up front, while nothing spins.
    fn load_functions(&self) -> Result<()> {
        let mut n: std::ffi::c_uint = 0;
        // SAFETY: out-pointer to a local; module is loaded.
        check(unsafe { cu::cuModuleGetFunctionCount(&mut n, self.module) }, "cuModuleGetFunctionCount")?;
        let mut fs: Vec<cu::CUfunction> = vec![std::ptr::null_mut(); n as usize];
        // SAFETY: fs has room for n handles; module is loaded.
        check(unsafe { cu::cuModuleEnumerateFunctions(fs.as_mut_ptr(), n, self.module) }, "cuModuleEnumerateFunctions")?;
        for f in fs {
            // SAFETY: f is a function handle of this live module (enumerated above).
            check(unsafe { cu::cuFuncLoad(f) }, "cuFuncLoad (loading a kernel of the module up front)")?;
        }
        Ok(())
    }

    /// Calls `f` with the device address of this module's `rshmemi_device_state`.
    pub(crate) fn with_state_addr(&self, mut f: impl FnMut(u64)) {
        let mut addr = 0;
        let mut bytes = 0;
        let name = CString::new(rshmem_device::state::STATE_SYMBOL).unwrap();
        // SAFETY: out-pointers to locals; module is loaded.
        if unsafe { cu::cuModuleGetGlobal_v2(&mut addr, &mut bytes, self.module, name.as_ptr()) } == cu::CUresult::CUDA_SUCCESS {
            f(addr)
        }
    }

    /// The most threads per block kernel `name` of this module can be launched with (its registers
    /// per thread, and the device's limit, decide it).
    pub(crate) fn max_threads_per_block(&self, name: &str) -> Result<u32> {
        self.kernel(name, |k| k.max_threads)
    }

    /// Registers per thread of kernel `name` in this module (callees included: the linker gives a
    /// kernel the most that any function it may call uses).
    pub(crate) fn registers(&self, name: &str) -> Result<u32> {
        let f = self.function(name)?;
        let mut n = 0;
        // SAFETY: out-pointer to a local; f is a kernel of this loaded module.
        check(unsafe { cu::cuFuncGetAttribute(&mut n, cu::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS, f) }, "cuFuncGetAttribute")?;
        Ok(n.max(0) as u32)
    }

    fn function(&self, name: &str) -> Result<cu::CUfunction> {
        self.kernel(name, |k| k.f)
    }

    /// `read` of kernel `name`'s [`KernelInfo`], which the first call for a name asks of the driver
    /// (a typed launch reads all of it: the lookups are not repeated on every launch).
    fn kernel<R>(&self, name: &str, read: impl FnOnce(&KernelInfo) -> R) -> Result<R> {
        let mut ks = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = ks.get(name) {
            return Ok(read(k));
        }
        let cname = CString::new(name).map_err(|_| Error::new("kernel name contains NUL"))?;
        let mut f = std::ptr::null_mut();
        // SAFETY: out-pointer; module is loaded.
        check(unsafe { cu::cuModuleGetFunction(&mut f, self.module, cname.as_ptr()) }, &format!("kernel {name:?} not found in module: cuModuleGetFunction"))?;
        let mut n = 0;
        // SAFETY: out-pointer to a local; f is a kernel of this loaded module.
        check(unsafe { cu::cuFuncGetAttribute(&mut n, cu::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) }, "cuFuncGetAttribute")?;
        let k = KernelInfo { f, max_threads: n.max(0) as u32, params: param_sizes_of(f) };
        let r = read(&k);
        ks.insert(name.to_string(), k);
        Ok(r)
    }

    /// Launches kernel `name` with `args` (each a pointer to one kernel parameter's value).
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number, order and types.
    pub unsafe fn launch(&self, name: &str, grid: u32, block: u32, shared: u32, stream: Stream, args: &mut [*mut c_void]) -> Result<()> {
        // SAFETY: the caller's contract is launch_shaped's.
        unsafe { self.launch_shaped(name, Dim3::from(grid), Dim3::from(block), shared, stream, args) }
    }

    /// [`Module::launch`] with a 1-D, 2-D or 3-D grid and block.
    ///
    /// # Safety
    /// As `launch`.
    pub unsafe fn launch_shaped(&self, name: &str, grid: Dim3, block: Dim3, shared: u32, stream: Stream, args: &mut [*mut c_void]) -> Result<()> {
        let f = self.function(name)?;
        // SAFETY: ctx is the retained primary context this module lives in.
        check(unsafe { cu::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")?;
        let p = if args.is_empty() { std::ptr::null_mut() } else { args.as_mut_ptr() };
        // SAFETY: f is a kernel of this loaded module; `args` matches its parameters (the caller's
        // contract); the stream is the caller's.
        let r = unsafe { cu::cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared, stream.as_raw(), p, std::ptr::null_mut()) };
        if r == cu::CUresult::CUDA_SUCCESS {
            return Ok(());
        }
        check_ctx(r, &format!("launching {name} (grid {}x{}x{}, block {}x{}x{})", grid.x, grid.y, grid.z, block.x, block.y, block.z))
    }

    /// The sizes in bytes of kernel `name`'s parameters, in order (`cuFuncGetParamInfo`, CUDA 12.4 and
    /// later), when they are not `expected`; None when they are, or when the driver cannot say.
    pub fn param_mismatch(&self, name: &str, expected: &[usize]) -> Result<Option<Vec<usize>>> {
        self.kernel(name, |k| k.params.as_ref().filter(|p| p.as_slice() != expected).cloned())
    }

    /// Launches kernel `name` cooperatively (all blocks resident at once, so they may wait on each
    /// other, e.g. through rshmem barriers across the grid). Fails clearly when the grid cannot fit.
    ///
    /// # Safety
    /// As `launch`.
    pub unsafe fn launch_cooperative(&self, name: &str, grid: u32, block: u32, shared: u32, stream: Stream, args: &mut [*mut c_void]) -> Result<()> {
        let f = self.function(name)?;
        // SAFETY: ctx is the retained primary context this module lives in.
        check(unsafe { cu::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")?;
        let mut per_sm = 0;
        // SAFETY: out-pointer to a local; f is a kernel of this loaded module.
        check(unsafe { cu::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut per_sm, f, block as i32, shared as usize) }, "cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
        let mut dev = 0;
        // SAFETY: out-pointer to a local; a context is current (above).
        check(unsafe { cu::cuCtxGetDevice(&mut dev) }, "cuCtxGetDevice")?;
        let mut sms = 0;
        // SAFETY: out-pointer to a local; dev is the current context's device.
        check(unsafe { cu::cuDeviceGetAttribute(&mut sms, cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) }, "cuDeviceGetAttribute")?;
        if grid as i64 > per_sm as i64 * sms as i64 {
            return Err(Error::new(format!(
                "collective launch of {name}: {grid} blocks of {block} threads cannot all be resident ({per_sm} per SM x {sms} SMs)"
            )));
        }
        let p = if args.is_empty() { std::ptr::null_mut() } else { args.as_mut_ptr() };
        // SAFETY: as in `launch`; the grid fits the device (checked above).
        check_ctx(unsafe { cu::cuLaunchCooperativeKernel(f, grid, 1, 1, block, 1, 1, shared, stream.as_raw(), p) }, &format!("collective launch of {name}"))
    }
}

/// The register bound that lets a kernel launch with `threads` per block: an SM's 65536 registers
/// shared by the block's warps, in the per-thread allocation unit of 8 (sm_70 and later), at most 255.
/// 1024 threads: 64; 768: 80; 512: 128; 256 or fewer: 255 (no bound needed).
pub fn register_bound(threads: u32) -> u32 {
    let lanes = threads.max(1).div_ceil(32) * 32;
    ((65536 / lanes) & !7).min(255)
}

/// A PTX module that only defines the device state (in the constant bank; every other PTX declares it
/// `.extern`).
pub(crate) fn state_ptx() -> String {
    format!(
        ".version 7.0\n.target sm_70\n.address_size 64\n.visible .const .align 8 .b8 {}[{}];\n",
        rshmem_device::state::STATE_SYMBOL,
        std::mem::size_of::<rshmem_device::state::DeviceState>()
    )
}

fn log_text(log: &[u8]) -> String {
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let t = String::from_utf8_lossy(&log[..end]).trim().to_string();
    if t.is_empty() { "JIT link".into() } else { format!("JIT link log: {t}") }
}

/// The sizes in bytes of kernel `f`'s parameters, in order (`cuFuncGetParamInfo`, CUDA 12.4 and
/// later); None when the driver cannot say.
fn param_sizes_of(f: cu::CUfunction) -> Option<Vec<usize>> {
    let mut sizes = Vec::new();
    loop {
        let (mut off, mut size) = (0usize, 0usize);
        // SAFETY: out-pointers to locals; f is a kernel of a loaded module (the caller's).
        match unsafe { cu::cuFuncGetParamInfo(f, sizes.len(), &mut off, &mut size) } {
            cu::CUresult::CUDA_SUCCESS => sizes.push(size),
            // Past the last parameter.
            cu::CUresult::CUDA_ERROR_INVALID_VALUE => return Some(sizes),
            // An older driver, or no such entry point in this one.
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::register_bound;

    #[test]
    fn register_bounds_fit_the_block() {
        for (threads, want) in [(1024, 64), (1000, 64), (768, 80), (640, 96), (512, 128), (257, 224), (256, 255), (32, 255), (1, 255)] {
            assert_eq!(register_bound(threads), want, "{threads} threads");
            // The bound times the block's lanes (whole warps) fits an SM's 65536 registers.
            assert!(want * threads.div_ceil(32) * 32 <= 65536 || want == 255);
        }
    }
}
