//! Launching kernels written once with `rshmem_device::kernels!`: on the CUDA backend through the PTX
//! module (JIT-linked with the device library), on the CPU backend as host threads.

use crate::cuda::{self, Module, Stream};
use crate::error::{Error, Result};
use std::sync::{Arc, Mutex, Weak};

/// A kernel's host function for the CPU backend (see `rshmem_device::kernels!`).
pub type CpuKernel = unsafe fn(*const u64);

/// A crate's kernels: their host functions and their PTX.
pub struct KernelSet {
    cpu: &'static [(&'static str, CpuKernel)],
    ptx: &'static str,
    /// The modules loaded for the running runtime instance: (instance generation, register bound
    /// (`None`: unbounded), module). The instance owns each module (and unloads it when finalized);
    /// this cache only refers to them, and a different generation (a later `init`) loads the PTX
    /// again, with the new device state.
    modules: Mutex<Vec<Linked>>,
}

/// One link of a set's PTX: (runtime instance generation, register bound, the module).
type Linked = (u64, Option<u32>, Weak<Module>);

impl KernelSet {
    pub const fn new(cpu: &'static [(&'static str, CpuKernel)], ptx: &'static str) -> KernelSet {
        KernelSet { cpu, ptx, modules: Mutex::new(Vec::new()) }
    }

    /// This set's module with register bound `bound` for the running runtime instance, linked on first
    /// use after each `init`.
    fn module(&self, bound: Option<u32>) -> Result<Arc<Module>> {
        let generation = cuda::with_backend("rshmem kernel launch", |b| Ok(b.generation()))?;
        let mut ms = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        // Modules of an earlier instance (a finalize and a new init since) are gone or stale.
        ms.retain(|(g, _, w)| *g == generation && w.strong_count() > 0);
        if let Some(module) = ms.iter().find(|(_, b, _)| *b == bound).and_then(|(_, _, w)| w.upgrade()) {
            return Ok(module);
        }
        if self.ptx.trim().is_empty() {
            return Err(Error::new("these kernels were built without PTX: their crate was built with RSHMEM_SKIP_PTX=1 (a CPU-only build on purpose); rebuild without it (`cargo build --release`) to run them on GPUs"));
        }
        let (module, g) = Module::load_bounded(self.ptx, bound)?;
        ms.push((g, bound, Arc::downgrade(&module)));
        Ok(module)
    }

    /// The module to launch kernel `name` from with `block` threads per block.
    ///
    /// A kernel's registers are the most that its own code or any device-library function it may call
    /// uses (the remote paths' functions take up to ~250 registers when nothing bounds them), and a
    /// block needs `block` x registers of the SM's 65536. So the set is first linked unbounded: the
    /// code of every kernel launched with a block that fits keeps all its registers (the P2P hot paths
    /// are not slowed by any bound). A launch with more threads than the kernel's unbounded code allows
    /// uses a second link of the same PTX with the registers bounded for that block size
    /// (`register_bound`: 128 for 512 threads, 64 for 1024, as NVSHMEM's kernels and the C++ device
    /// library archive have), made once per instance and bound when first needed. Only kernels launched
    /// that wide pay the bound (spills where their code needs more) and the one-time link.
    fn module_for(&self, name: &str, block: u32) -> Result<Arc<Module>> {
        let m = self.module(None)?;
        if block <= m.max_threads_per_block(name)? {
            return Ok(m);
        }
        let bound = crate::platform::cuda::module::register_bound(block);
        let b = self.module(Some(bound))?;
        let most = b.max_threads_per_block(name)?;
        if block > most {
            return Err(Error::new(format!(
                "kernel {name}: {block} threads per block cannot launch: linked with at most {bound} registers per thread it uses {} (at most {most} threads per block)",
                b.registers(name)?
            )));
        }
        Ok(b)
    }

    /// Runs kernel `name` on `grid` blocks of `block` threads with `args` and waits for it. The name
    /// and the launch shape are checked; the arguments cannot be.
    ///
    /// # Safety
    /// `args` must be what kernel `name` expects: at least as many values as it reads, and every value
    /// it uses as a pointer must satisfy its contract (typically a live symmetric allocation of the
    /// size it accesses, or memory this PE's kernels may read/write). The device API checks PE numbers
    /// and that symmetric ranges lie in the heap, but not that they are live allocations of the caller.
    pub unsafe fn run(&self, name: &str, grid: u32, block: u32, args: &[u64]) -> Result<()> {
        // SAFETY: the caller's contract (above) is run_with's.
        unsafe { self.run_with(name, grid, block, args, false) }
    }

    /// Like `run`, with all blocks resident at once (cooperative launch on GPUs), for kernels whose
    /// blocks wait on each other.
    ///
    /// # Safety
    /// As `run`.
    pub unsafe fn run_collective(&self, name: &str, grid: u32, block: u32, args: &[u64]) -> Result<()> {
        // SAFETY: the caller's contract (run's) is run_with's.
        unsafe { self.run_with(name, grid, block, args, true) }
    }

    /// Runs kernel `name` and returns the time the kernel itself took in milliseconds (device events
    /// around the launch on GPUs; wall clock around the host threads on the CPU backend).
    ///
    /// # Safety
    /// As `run`.
    pub unsafe fn run_timed(&self, name: &str, grid: u32, block: u32, args: &[u64]) -> Result<f64> {
        let rt = crate::runtime::get("rshmem kernel launch")?;
        if rt.backend().name() == "cuda" {
            if grid == 0 || block == 0 {
                return Err(Error::new(format!("kernel {name}: launch of {grid} blocks of {block} threads (both must be at least 1)")));
            }
            // SAFETY: the caller's contract (run's) is gpu_launch's.
            Ok(unsafe { self.gpu_launch(name, grid, block, args, false, true)? }.unwrap_or(0.0))
        } else {
            let t = std::time::Instant::now();
            // SAFETY: the caller's contract (run's) is run_with's.
            unsafe { self.run_with(name, grid, block, args, false)? };
            Ok(t.elapsed().as_secs_f64() * 1e3)
        }
    }

    /// Launches on the GPU with `args` in a temporary device buffer, waits, and (when `timed`) returns
    /// the kernel's time from events recorded around the launch.
    ///
    /// # Safety
    /// As `run`.
    unsafe fn gpu_launch(&self, name: &str, grid: u32, block: u32, args: &[u64], coop: bool, timed: bool) -> Result<Option<f64>> {
        let m = self.module_for(name, block)?;
        let dargs = cuda::device_alloc(args.len().max(1) * 8)?;
        let bytes: Vec<u8> = args.iter().flat_map(|a| a.to_le_bytes()).collect();
        let r = (|| {
            // SAFETY: dargs is a live device allocation of at least bytes.len() bytes (above).
            unsafe { cuda::copy_to_device(dargs, &bytes)? };
            let timer = if timed { Some(cuda::Timer::new()?) } else { None };
            let mut p = dargs as u64;
            let mut params = [&mut p as *mut u64 as *mut std::ffi::c_void];
            if let Some(t) = &timer {
                t.start(Stream::DEFAULT)?;
            }
            // SAFETY: every kernels! kernel takes exactly one pointer parameter (p: the device copy of
            // args); what the kernel does with the arguments is this function's caller's promise.
            unsafe {
                if coop {
                    m.launch_cooperative(name, grid, block, 0, Stream::DEFAULT, &mut params)?;
                } else {
                    m.launch(name, grid, block, 0, Stream::DEFAULT, &mut params)?;
                }
            }
            let ms = match &timer {
                Some(t) => {
                    t.stop(Stream::DEFAULT)?;
                    Some(t.elapsed_ms()? as f64)
                }
                None => None,
            };
            // Not cuCtxSynchronize: see wait_default_stream (the proxy must get through meanwhile).
            cuda::wait_default_stream(&format!("kernel {name}"))?;
            Ok(ms)
        })();
        if r.is_err() {
            // An early error may leave the kernel running: it must be done with dargs before the free.
            let _ = cuda::synchronize();
        }
        // SAFETY: dargs came from device_alloc above and is freed once here; the kernel that read it
        // has completed (synchronized on every path) or never started.
        let _ = unsafe { cuda::device_free(dargs) };
        r
    }

    /// Launches on whichever backend runs and waits.
    ///
    /// # Safety
    /// As `run`.
    unsafe fn run_with(&self, name: &str, grid: u32, block: u32, args: &[u64], coop: bool) -> Result<()> {
        let rt = crate::runtime::get("rshmem kernel launch")?;
        if grid == 0 || block == 0 {
            return Err(Error::new(format!("kernel {name}: launch of {grid} blocks of {block} threads (both must be at least 1)")));
        }
        if rt.backend().name() == "cuda" {
            // SAFETY: this function's contract is gpu_launch's.
            unsafe { self.gpu_launch(name, grid, block, args, coop, false) }.map(|_| ())
        } else {
            let f = self
                .cpu
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, f)| *f)
                .ok_or_else(|| Error::new(format!("no kernel named {name:?}")))?;
            let p = args.as_ptr() as usize;
            // SAFETY: the kernel reads its arguments from `args`, alive for the whole launch (launch
            // returns only when every kernel thread has ended); that they are what the kernel expects
            // is this function's caller's promise.
            crate::platform::cpu::launch(grid, block, || unsafe { f(p as *const u64) });
            Ok(())
        }
    }
}
