//! Launching kernels written once with `rshmem_device::kernels!`: on the CUDA backend through the PTX
//! module (JIT-linked with the device library), on the CPU backend as host threads.
//!
//! Typed kernels (`fn name(args: Args)`, `Args` a `#[repr(C)]` Pod struct) are launched with
//! [`KernelSet::launch`] or a [`Kernel`] handle: asynchronously on a stream, with a 1-D, 2-D or 3-D
//! grid, the struct passed as the kernel's parameter (no argument buffer in device memory), its size
//! checked against the kernel's. Untyped kernels (`fn name(a)`, `u64` arguments) keep
//! [`KernelSet::run`], which waits.
//!
//! A 3-D launch, where every thread records its coordinates (on the CPU backend here: the set carries no
//! PTX, so on a GPU machine it runs with `RSHMEM_BACKEND=cpu`, as CI runs it; on GPUs the set would
//! carry its crate's PTX):
//!
//! ```
//! use rshmem::kernels::{DevPtr, KernelSet, LaunchConfig};
//! use rshmem_device::thread as t;
//!
//! #[repr(C)]
//! #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
//! pub struct Where {
//!     pub out: DevPtr<u32>,
//! }
//! mod k {
//!     use super::*;
//!     rshmem_device::kernels! {
//!         /// out[global thread] = block x, y, z and thread x, y, z, a digit each.
//!         fn coords(a: Where) {
//!             let (b, d, g, th) = (t::block_idx(), t::block_dim(), t::grid_dim(), t::thread_idx());
//!             let block = b.x + g.x * (b.y + g.y * b.z);
//!             let i = block * d.count().unwrap() + th.x + d.x * (th.y + d.y * th.z);
//!             let code = ((b.x * 10 + b.y) * 10 + b.z) * 1000 + (th.x * 10 + th.y) * 10 + th.z;
//!             *a.out.as_ptr().add(i as usize) = code;
//!         }
//!     }
//! }
//! static K: KernelSet = KernelSet::new(k::CPU_KERNELS, "");
//!
//! fn main() -> Result<(), rshmem::Error> {
//!     rshmem::init()?;
//!     let out = rshmem::SymSlice::<u32>::zeroed(2 * 3 * 1 * 4 * 2 * 1)?;
//!     let cfg = LaunchConfig::new((2, 3), (4, 2)); // 2 x 3 blocks of 4 x 2 threads
//!     // SAFETY: `out` holds one u32 per thread of the launch.
//!     unsafe { K.launch("coords", cfg, &Where { out: out.dev_ptr() })? };
//!     cfg.stream.synchronize()?;
//!     let v = out.to_vec()?;
//!     assert_eq!(v[0], 0);
//!     assert_eq!(v[1], 100); // thread (1, 0, 0) of block (0, 0, 0)
//!     assert_eq!(v[8 + 7], 100_000 + 310); // block (1, 0, 0), its last thread (3, 1, 0)
//!     assert_eq!(v[47], 120_000 + 310); // the last block (1, 2, 0)
//!     // The name and the argument size are checked before anything runs.
//!     assert!(K.kernel::<[u64; 2]>("coords").is_err()); // 16 bytes, the kernel takes 8
//!     assert!(K.kernel::<Where>("no_such_kernel").is_err());
//!     // SAFETY: refused before launching (empty grid).
//!     assert!(unsafe { K.launch("coords", LaunchConfig::new((0, 1), 1), &Where { out: out.dev_ptr() }) }.is_err());
//!     out.free()?;
//!     rshmem::finalize()
//! }
//! ```

use crate::api::stream::{self, with_backend, Stream};
use crate::error::{Error, Result};
use crate::platform::cuda::module::state_ptx;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, Weak};

pub use crate::platform::cuda::module::Module;
pub use rshmem_device::{CpuKernel, DevPtr, Dim3};

impl Module {
    /// Links `user_ptx` (Rust kernels written against rshmem-device) with the device library, loads
    /// the result into the runtime's context and fills in its device state.
    ///
    /// The module belongs to the running runtime instance: that instance keeps it (and writes its
    /// device state) until `finalize` drops the instance; then it is unloaded once every `Arc` to it is
    /// gone. After a second `init`, load the PTX again (`KernelSet` does): a module of an earlier
    /// instance still holds that instance's (stale) device state. Returns the module and the
    /// generation of the runtime instance it belongs to (`CudaBackend::generation`).
    pub fn load(user_ptx: &str) -> Result<(std::sync::Arc<Module>, u64)> {
        Module::load_bounded(user_ptx, None)
    }

    /// As [`Module::load`], with every function of the link (the device library's included) compiled
    /// to at most `max_registers` registers per thread (`CU_JIT_MAX_REGISTERS`; `None`: no bound).
    /// A kernel's registers are the most that it or any device-library function it may call uses, so
    /// a kernel that must launch with many threads per block needs the bound on the whole link:
    /// [`crate::platform::cuda::module::register_bound`] gives the bound for a block size.
    pub fn load_bounded(user_ptx: &str, max_registers: Option<u32>) -> Result<(std::sync::Arc<Module>, u64)> {
        with_backend("rshmem::kernels::Module::load", |b| {
            // Kernels written with rshmem-device inline the whole device API; their only external
            // symbol is the device state. Linking a PTX that just defines it is far faster than JIT-
            // compiling the whole device library; fall back to the library if more is needed.
            let m = match Module::link(b.ctx, &[("rshmem_state.ptx", &state_ptx()), ("kernels.ptx", user_ptx)], max_registers) {
                Ok(m) => m,
                Err(_) => Module::load_in(b.ctx, &[("kernels.ptx", user_ptx)], max_registers)?,
            };
            let m = std::sync::Arc::new(m);
            b.adopt(&m)?;
            Ok((m, b.generation()))
        })
    }
}

/// The shape and stream of a kernel launch (CUDA's `<<<grid, block, shared, stream>>>`).
#[derive(Clone, Copy, Debug)]
pub struct LaunchConfig {
    /// Blocks of the grid, in up to three dimensions.
    pub grid: Dim3,
    /// Threads of each block, in up to three dimensions.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// The stream the launch is enqueued on (`Stream::DEFAULT`: the legacy default stream).
    pub stream: Stream,
}

impl LaunchConfig {
    /// `grid` blocks of `block` threads (each a `u32`, a pair or a triple), no dynamic shared memory,
    /// on the default stream.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> LaunchConfig {
        LaunchConfig { grid: grid.into(), block: block.into(), shared_mem_bytes: 0, stream: Stream::DEFAULT }
    }
    /// The same launch on stream `stream`.
    pub fn on(self, stream: Stream) -> LaunchConfig {
        LaunchConfig { stream, ..self }
    }
    /// The same launch with `bytes` of dynamic shared memory per block.
    pub fn shared(self, bytes: u32) -> LaunchConfig {
        LaunchConfig { shared_mem_bytes: bytes, ..self }
    }
}

/// A typed kernel of a [`KernelSet`], taking an `A` (see [`KernelSet::kernel`]).
pub struct Kernel<A> {
    set: &'static KernelSet,
    name: &'static str,
    _args: PhantomData<fn(A)>,
}

impl<A> Clone for Kernel<A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for Kernel<A> {}

impl<A: bytemuck::Pod> Kernel<A> {
    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
    /// Enqueues the kernel with `args` as `cfg` says (see [`KernelSet::launch`]).
    ///
    /// # Safety
    /// As [`KernelSet::launch`].
    pub unsafe fn launch(&self, cfg: LaunchConfig, args: &A) -> Result<()> {
        // SAFETY: the caller's contract is KernelSet::launch's.
        unsafe { self.set.launch(self.name, cfg, args) }
    }
    /// Runs the kernel and waits for it; returns the time the kernel itself took in milliseconds (see
    /// [`KernelSet::launch_timed`]).
    ///
    /// # Safety
    /// As [`KernelSet::launch`].
    pub unsafe fn launch_timed(&self, cfg: LaunchConfig, args: &A) -> Result<f64> {
        // SAFETY: the caller's contract is KernelSet::launch's.
        unsafe { self.set.launch_timed(self.name, cfg, args) }
    }
}

/// What a typed launch needs once checked: the GPU module, or the CPU backend's host function.
enum Prepared {
    Gpu(Arc<Module>),
    Cpu(unsafe fn(*const u64)),
}

/// A crate's kernels: their host functions and their PTX.
pub struct KernelSet {
    cpu: &'static [CpuKernel],
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
    /// The kernels `kernels!` defined in a crate: its `CPU_KERNELS` and its PTX (the build script's
    /// output, `include_str!`-ed).
    pub const fn new(cpu: &'static [CpuKernel], ptx: &'static str) -> KernelSet {
        KernelSet { cpu, ptx, modules: Mutex::new(Vec::new()) }
    }

    /// Typed kernel `name` taking an `A`. Its name and argument size are checked here against the
    /// CPU backend's table (always present), so a wrong name or struct fails before any launch.
    pub fn kernel<A: bytemuck::Pod>(&'static self, name: &'static str) -> Result<Kernel<A>> {
        self.check_typed(name, std::mem::size_of::<A>())?;
        Ok(Kernel { set: self, name, _args: PhantomData })
    }

    /// The CPU table's entry of kernel `name`, which must be typed with an argument of `bytes` bytes.
    fn check_typed(&self, name: &str, bytes: usize) -> Result<&CpuKernel> {
        let k = self.cpu.iter().find(|k| k.name == name).ok_or_else(|| Error::new(format!("no kernel named {name:?} in this kernel set")))?;
        match k.arg_bytes {
            Some(b) if b == bytes => Ok(k),
            Some(b) => Err(Error::new(format!("kernel {name}: launched with {bytes} bytes of arguments, but it takes a {b}-byte argument struct"))),
            None => Err(Error::new(format!("kernel {name} takes u64 arguments (kernels! without a typed argument): launch it with KernelSet::run"))),
        }
    }

    /// Runs typed kernel `name` as [`KernelSet::launch`] does, waits for its stream, and returns the
    /// time the kernel took in milliseconds: device events recorded on the stream around the launch on
    /// GPUs, the wall clock around the host threads on the CPU backend.
    ///
    /// # Safety
    /// As [`KernelSet::launch`].
    pub unsafe fn launch_timed<A: bytemuck::Pod>(&self, name: &str, cfg: LaunchConfig, args: &A) -> Result<f64> {
        let m = match self.prepare::<A>(name, cfg)? {
            Prepared::Gpu(m) => m,
            Prepared::Cpu(run) => {
                let t = std::time::Instant::now();
                // SAFETY: the caller's contract is launch's.
                unsafe { Self::run_cpu(run, cfg, args) };
                return Ok(t.elapsed().as_secs_f64() * 1e3);
            }
        };
        // Every check and lookup is done: the events enclose the enqueue alone, as a CUDA program's
        // events around `kernel<<<...>>>` do.
        let timer = stream::Timer::new()?;
        timer.start(cfg.stream)?;
        // SAFETY: the caller's contract is launch's; `m` and the checks come from prepare.
        let launched = unsafe { Self::enqueue(&m, name, cfg, args) };
        timer.stop(cfg.stream)?;
        let waited = stream::wait_stream(&format!("kernel {name}"), cfg.stream);
        launched?;
        waited?;
        Ok(timer.elapsed_ms()? as f64)
    }

    /// The host function of untyped kernel `name` (`u64` arguments).
    fn untyped(&self, name: &str) -> Result<unsafe fn(*const u64)> {
        match self.cpu.iter().find(|k| k.name == name) {
            Some(CpuKernel { run, arg_bytes: None, .. }) => Ok(*run),
            Some(_) => Err(Error::new(format!("kernel {name} takes a typed argument struct: launch it with KernelSet::launch"))),
            None => Err(Error::new(format!("no kernel named {name:?} in this kernel set"))),
        }
    }

    /// Enqueues typed kernel `name` (defined with `fn name(args: A)` in `kernels!`) on `cfg.stream`
    /// with `args` as its parameter, and returns without waiting (wait with `cfg.stream.synchronize()`).
    /// On the CPU backend the kernel runs to completion before this returns (its host threads are the
    /// "stream"). The name, the argument size and the launch shape are checked.
    ///
    /// # Safety
    /// The values in `args` must satisfy kernel `name`'s contract (addresses of live symmetric
    /// allocations of the sizes it accesses, or other memory the kernel may use), and on GPUs stay
    /// valid until the stream has run the kernel. The device API checks PE numbers and that symmetric
    /// ranges lie in the heap, not that they are live allocations.
    pub unsafe fn launch<A: bytemuck::Pod>(&self, name: &str, cfg: LaunchConfig, args: &A) -> Result<()> {
        match self.prepare::<A>(name, cfg)? {
            // SAFETY: the caller's contract is enqueue's.
            Prepared::Gpu(m) => unsafe { Self::enqueue(&m, name, cfg, args) },
            Prepared::Cpu(run) => {
                // SAFETY: the caller's contract is run_cpu's.
                unsafe { Self::run_cpu(run, cfg, args) };
                Ok(())
            }
        }
    }

    /// Runs host function `run` of a typed kernel on the CPU backend's threads, shaped as `cfg` says,
    /// and returns when every one has ended.
    ///
    /// # Safety
    /// As `launch`.
    unsafe fn run_cpu<A: bytemuck::Pod>(run: unsafe fn(*const u64), cfg: LaunchConfig, args: &A) {
        let p = args as *const A as usize;
        // SAFETY: `args` stays borrowed for the whole launch (launch_shaped returns when every kernel
        // thread has ended) and is a whole `A`, which the host function reads unaligned; what its
        // values mean is the caller's promise.
        crate::platform::cpu::launch_shaped(cfg.grid, cfg.block, || unsafe { run(p as *const u64) });
    }

    /// Everything a typed launch checks and looks up before it enqueues: the kernel's name and
    /// argument size, the shape, and on GPUs the module (linked on first use) and the PTX's parameter.
    fn prepare<A: bytemuck::Pod>(&self, name: &str, cfg: LaunchConfig) -> Result<Prepared> {
        let k = self.check_typed(name, std::mem::size_of::<A>())?;
        let (blocks, threads) = (cfg.grid.count().unwrap_or(0), cfg.block.count().unwrap_or(0));
        if blocks == 0 || threads == 0 {
            return Err(Error::new(format!(
                "kernel {name}: launch of grid {:?} of blocks {:?} (every dimension must be at least 1)",
                cfg.grid, cfg.block
            )));
        }
        if crate::runtime::get("rshmem kernel launch")?.backend().name() != "cuda" {
            return Ok(Prepared::Cpu(k.run));
        }
        let m = self.module_for(name, threads)?;
        if let Some(sizes) = m.param_mismatch(name, &[std::mem::size_of::<A>()])? {
            return Err(Error::new(format!(
                "kernel {name}: its PTX takes parameters of {sizes:?} bytes, launched with one {}-byte struct: is the PTX from the same build as CPU_KERNELS?",
                std::mem::size_of::<A>()
            )));
        }
        Ok(Prepared::Gpu(m))
    }

    /// Enqueues typed kernel `name` of module `m` (checked by `prepare`).
    ///
    /// # Safety
    /// As `launch`.
    unsafe fn enqueue<A: bytemuck::Pod>(m: &Module, name: &str, cfg: LaunchConfig, args: &A) -> Result<()> {
        let mut value = *args;
        let mut params = [&mut value as *mut A as *mut std::ffi::c_void];
        // SAFETY: the kernel takes exactly one parameter, an `A` by value (kernels!' typed form; size
        // checked by prepare); cuLaunchKernel copies it before returning. What the values mean is the
        // caller's promise.
        unsafe { m.launch_shaped(name, cfg.grid, cfg.block, cfg.shared_mem_bytes, cfg.stream, &mut params) }
    }

    /// This set's module with register bound `bound` for the running runtime instance, linked on first
    /// use after each `init`.
    fn module(&self, bound: Option<u32>) -> Result<Arc<Module>> {
        let generation = stream::with_backend("rshmem kernel launch", |b| Ok(b.generation()))?;
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

    /// Launches on the GPU with `args` in one of the backend's argument blocks (pinned host memory the
    /// kernel reads through its mapping, reused: no device allocation per launch, see
    /// `CudaBackend::with_arg_block`), waits, and (when `timed`) returns the kernel's time from events
    /// recorded around the launch.
    ///
    /// # Safety
    /// As `run`.
    unsafe fn gpu_launch(&self, name: &str, grid: u32, block: u32, args: &[u64], coop: bool, timed: bool) -> Result<Option<f64>> {
        self.untyped(name)?;
        let m = self.module_for(name, block)?;
        stream::with_backend("rshmem kernel launch", |be| {
            be.with_arg_block(&format!("kernel {name}"), args, |dargs| {
                let r = (|| {
                    let timer = if timed { Some(stream::Timer::new()?) } else { None };
                    let mut p = dargs;
                    let mut params = [&mut p as *mut u64 as *mut std::ffi::c_void];
                    if let Some(t) = &timer {
                        t.start(Stream::DEFAULT)?;
                    }
                    // SAFETY: every kernels! kernel takes exactly one pointer parameter (p: the
                    // argument block, holding args); what the kernel does with the arguments is this
                    // function's caller's promise.
                    unsafe {
                        if coop {
                            m.launch_cooperative(name, grid, block, 0, Stream::DEFAULT, &mut params)?;
                        } else {
                            m.launch(name, grid, block, 0, Stream::DEFAULT, &mut params)?;
                        }
                    }
                    // Not cuCtxSynchronize: see wait_default_stream (the proxy must get through
                    // meanwhile); the timer's stop event is waited for by polling too.
                    let ms = match &timer {
                        Some(t) => {
                            t.stop(Stream::DEFAULT)?;
                            Some(t.elapsed_ms()? as f64)
                        }
                        None => None,
                    };
                    stream::wait_default_stream(&format!("kernel {name}"))?;
                    Ok(ms)
                })();
                if r.is_err() {
                    // An early error may leave the kernel running: it must be done with the argument
                    // block before the block is reused.
                    let _ = stream::synchronize();
                }
                r
            })
        })
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
            let f = self.untyped(name)?;
            let p = args.as_ptr() as usize;
            // SAFETY: the kernel reads its arguments from `args`, alive for the whole launch (launch
            // returns only when every kernel thread has ended); that they are what the kernel expects
            // is this function's caller's promise.
            crate::platform::cpu::launch(grid, block, || unsafe { f(p as *const u64) });
            Ok(())
        }
    }
}
