//! rshmem: a PGAS runtime for GPUs, as NVSHMEM is for CUDA programmers. Kernels put, get, add atomically
//! and synchronize across the GPUs of a job (PEs), on one node through NVLink/PCIe mappings and across
//! nodes through a CPU proxy or GPU-initiated networking (IBGDA). This crate is the host side: init,
//! the symmetric heap, host and on-stream calls, teams and collectives, kernel launches, the C ABI
//! behind `nvshmem.h`. Device code uses `rshmem_device`. Programs run under `rshmrun`; without a GPU
//! everything runs on the CPU backend (kernels on host threads), which is how this example runs in CI:
//!
//! ```
//! use rshmem::kernels::{DevPtr, KernelSet, LaunchConfig};
//!
//! // A typed kernel takes one plain-data struct (by value on GPUs).
//! #[repr(C)]
//! #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
//! pub struct RingArgs {
//!     pub inbox: DevPtr<i32>,
//! }
//! mod kernels {
//!     use super::RingArgs;
//!     rshmem_device::kernels! {
//!         /// Each PE writes its number into `inbox` on the next PE.
//!         fn ring(a: RingArgs) {
//!             let me = rshmem_device::my_pe();
//!             rshmem_device::p(a.inbox.as_ptr(), me, (me + 1) % rshmem_device::n_pes());
//!         }
//!     }
//! }
//! // A real crate passes the PTX its build script made (see examples/); "" is the CPU backend's.
//! static KERNELS: KernelSet = KernelSet::new(kernels::CPU_KERNELS, "");
//!
//! fn main() -> Result<(), rshmem::Error> {
//! #   // CI has no GPU; on a GPU machine this example's empty PTX would not do: ask for the CPU.
//! #   std::env::set_var("RSHMEM_BACKEND", "cpu");
//!     rshmem::init()?;
//!     let (me, n) = (rshmem::my_pe(), rshmem::n_pes());
//!     let inbox = rshmem::Sym::<i32>::new(-1)?; // collective: every PE allocates it
//!     let ring = KERNELS.kernel::<RingArgs>("ring")?; // name and argument size checked
//!     let launch = LaunchConfig::new(1, 1); // 1 block of 1 thread, on the default stream
//!     // SAFETY: `inbox` is a live symmetric i32 on every PE, all that `ring` touches.
//!     unsafe { ring.launch(launch, &RingArgs { inbox: inbox.dev_ptr() })? };
//!     launch.stream.synchronize()?;
//!     rshmem::barrier_all()?;
//!     assert_eq!(inbox.read()?, ((me + n - 1) % n) as i32);
//!     inbox.free()?; // collective too
//!     rshmem::finalize()
//! }
//! ```
//!
//! Where to start: [`sym`] (typed symmetric memory), [`kernels`] (launches), [`coll`] (teams and
//! collectives), [`cuda`] (streams and the on-stream calls), `interop` (cudarc, feature
//! `cudarc-interop`), and the guide in the repository's `docs/`.
//!
//! # Layers: who may import whom
//!
//! The folders name the layers. From the bottom; a module may use the ones below it and its own
//! layer, never one above, and no two files import each other (directly or around a circle). The
//! layers are written down once, in the workspace's layer test (`tests/tests/layers.rs`), which reads
//! every `use crate::` edge of this crate and fails on an upward import or a circle:
//! 1. [`error`], [`config`] (every environment variable: the table, the getters, the pure value
//!    parsers), [`log`], [`heap`] (the allocator's free list, the registered-buffer table): services
//!    with nothing of rshmem above them.
//! 2. [`bootstrap`] (TCP rendezvous: all-gather, barrier, broadcast among PEs) and [`node`] (what the
//!    PEs of one node share: fd passing, the same-node exchange of exported memory, the job status
//!    board, the choice of a listener's address).
//! 3. [`platform`]: where kernels run and memory lives: the `Backend` interface, implemented by
//!    `platform::cpu` (memfd heap, kernels on host threads) and `platform::cuda` (cuMem granules,
//!    modules, streams); the services host threads use to serve device code (`platform::services`);
//!    the shared-memory host barrier (`platform::hostsync`).
//! 4. [`probe`]: what `rshmrun --diagnose` and automatic selection check (sysfs, the CUDA driver, the
//!    network); it imports no transport.
//! 5. [`transport`]: which PEs this PE reaches and how: one interface (`transport::interface`), the
//!    transports `p2p`, `proxy` and `ibgda` (with `verbs` for a real NIC, feature `verbs`), the wire
//!    they share, and `transport::select`, the one place that decides.
//! 6. [`teams`] (the team table), then [`runtime`]: init/finalize, the collective allocator, host
//!    barrier and RMA. It owns the process-wide state and passes what the layers below need
//!    (bootstrap, fd server, job id, the platform) down as arguments.
//! 7. The API: this file's free functions, [`kernels`], [`coll`], [`team_init`], [`cuda`] (the CUDA
//!    helpers of user programs), [`sym`], `interop`, [`mpi`], [`point`], then [`capi`] (the C ABI).
//!    They find the running instance with `runtime::get`.
//!
//! The untyped forms remain for code that works with raw symmetric addresses:
//!
//! ```
//! # std::env::set_var("RSHMEM_BACKEND", "cpu");
//! rshmem::init().unwrap();
//! let me = rshmem::my_pe();
//! let n = rshmem::n_pes();
//! let dst = rshmem::malloc(4).unwrap() as usize;
//! // A CPU-backend "kernel": one block of one host thread (GPU kernels: see rshmem::kernels).
//! // SAFETY: dst is a live symmetric allocation of 4 bytes on every PE.
//! rshmem::cpu::launch(1, 1, || unsafe { rshmem_device::p(dst as *mut i32, me, (me + 1) % n) });
//! rshmem::barrier_all().unwrap();
//! rshmem::free(dst as *mut u8).unwrap();
//! rshmem::finalize().unwrap();
//! ```

#![deny(missing_docs)]

pub mod bootstrap;
pub mod capi;
pub mod coll;
pub mod config;
pub mod cuda;
pub mod error;
pub mod heap;
#[cfg(feature = "cudarc-interop")]
pub mod interop;
pub mod kernels;
pub mod log;
pub mod mpi;
pub mod node;
pub mod platform;
pub mod point;
pub mod probe;
pub mod runtime;
pub mod sym;
pub mod team_init;
pub mod teams;
pub mod transport;

/// The CPU backend's kernel launch (`rshmem::cpu::launch`) and platform.
pub use platform::cpu;
pub use bootstrap::UniqueId;
pub use error::{Error, Result};
pub use sym::{Sym, SymSlice};
/// bytemuck, whose `Pod` bounds typed memory and kernel arguments (re-exported so that crates using
/// rshmem's typed API name the same version).
pub use bytemuck;
pub use runtime::{finalize, global_exit, init, init_with_unique_id, known_pe, my_pe, n_pes};

/// Creates the unique id PE 0 hands to the other PEs of a job started by another launcher.
pub fn get_unique_id() -> Result<UniqueId> {
    bootstrap::get_unique_id()
}

/// Collective: allocates `bytes` on every PE's symmetric heap; the same offset everywhere. `bytes` 0
/// allocates nothing and returns null (OpenSHMEM's and NVSHMEM's rule; no barrier then).
pub fn malloc(bytes: usize) -> Result<*mut u8> {
    runtime::get("rshmem_malloc")?.alloc("rshmem_malloc", bytes, heap::alloc::MIN_ALIGN, false)
}
/// Collective: `count * size` zeroed bytes (null when either is 0, as [`malloc`]).
pub fn calloc(count: usize, size: usize) -> Result<*mut u8> {
    let bytes = count
        .checked_mul(size)
        .ok_or_else(|| Error::new(format!("rshmem_calloc({count}, {size}): size overflows")))?;
    runtime::get("rshmem_calloc")?.alloc("rshmem_calloc", bytes, heap::alloc::MIN_ALIGN, true)
}
/// Collective: `bytes` aligned to `alignment` (a power of two); null when `bytes` is 0, as [`malloc`].
pub fn align(alignment: usize, bytes: usize) -> Result<*mut u8> {
    runtime::get("rshmem_align")?.alloc("rshmem_align", bytes, alignment, false)
}
/// Collective: resizes a symmetric allocation (OpenSHMEM's shmem_realloc): a new allocation of `bytes`
/// whose first min(old, new) bytes are this PE's old contents, then the old one freed. A null `ptr` is
/// `malloc`; `bytes` 0 frees `ptr` and returns null. On an error the old allocation is kept.
///
/// # Safety
/// Nothing may use the old allocation while it moves, nor after it moved (it is freed); `ptr` is null or
/// the start of a live symmetric allocation (checked).
pub unsafe fn realloc(ptr: *mut u8, bytes: usize) -> Result<*mut u8> {
    let call = "rshmem_realloc";
    let rt = runtime::get(call)?;
    if ptr.is_null() {
        return rt.alloc(call, bytes, heap::alloc::MIN_ALIGN, false);
    }
    let old = rt.allocation_size(call, ptr)?;
    if bytes == 0 {
        rt.free(call, ptr)?;
        return Ok(std::ptr::null_mut());
    }
    let new = rt.alloc(call, bytes, heap::alloc::MIN_ALIGN, false)?;
    let keep = old.min(bytes);
    if keep > 0 {
        // SAFETY: both are live allocations of this PE's heap, of at least `keep` bytes, not overlapping
        // (the new one was just made while the old one is still allocated).
        unsafe { rt.putmem(new, ptr, keep, my_pe()) }?;
        rt.quiet()?;
    }
    rt.free(call, ptr)?;
    Ok(new)
}
/// Collective: frees a symmetric allocation; null is no action (the result of `malloc(0)`).
pub fn free(ptr: *mut u8) -> Result<()> {
    runtime::get("rshmem_free")?.free("rshmem_free", ptr)
}
/// Address through which this process reaches `ptr` on `pe` (same node), or null.
pub fn ptr(ptr: *const u8, pe: i32) -> *mut u8 {
    if runtime::get("rshmem_ptr").is_err() {
        return std::ptr::null_mut();
    }
    rshmem_device::ptr(ptr, pe)
}
/// Host barrier: completes this PE's outstanding operations, then waits for every PE.
pub fn barrier_all() -> Result<()> {
    runtime::get("rshmem_barrier_all")?.host_barrier("rshmem_barrier_all")
}
/// Host-initiated blocking put of `bytes` to symmetric `dst` on `pe`.
///
/// # Safety
/// `src` must be readable for `bytes` (the symmetric side is checked).
pub unsafe fn putmem(dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
    // SAFETY: our caller's contract (src readable for bytes) is Runtime::putmem's.
    unsafe { runtime::get("rshmem_putmem")?.putmem(dst, src, bytes, pe) }
}
/// Host-initiated blocking get of `bytes` from symmetric `src` on `pe`.
///
/// # Safety
/// `dst` must be writable for `bytes` (the symmetric side is checked).
pub unsafe fn getmem(dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
    // SAFETY: our caller's contract (dst writable for bytes) is Runtime::getmem's.
    unsafe { runtime::get("rshmem_getmem")?.getmem(dst, src, bytes, pe) }
}
/// Host-initiated put of `bytes` to symmetric `dst` on `pe` that completes by the next `quiet` (on
/// GPUs, to PEs of this node, a copy queued on the runtime's host-RMA stream; elsewhere the blocking
/// put).
///
/// # Safety
/// `src` must be readable for `bytes` and stay unchanged until the next `quiet`.
pub unsafe fn putmem_nbi(dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
    // SAFETY: our caller's contract is Runtime::putmem_nbi's.
    unsafe { runtime::get("rshmem_putmem_nbi")?.putmem_nbi(dst, src, bytes, pe) }
}
/// Host-initiated get that completes by the next `quiet` (as `putmem_nbi`).
///
/// # Safety
/// `dst` must be writable for `bytes` and not read before the next `quiet`.
pub unsafe fn getmem_nbi(dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
    // SAFETY: our caller's contract is Runtime::getmem_nbi's.
    unsafe { runtime::get("rshmem_getmem_nbi")?.getmem_nbi(dst, src, bytes, pe) }
}
/// Completes this PE's outstanding operations.
pub fn quiet() -> Result<()> {
    runtime::get("rshmem_quiet")?.quiet()
}
/// Name of the backend in use ("cpu" or "cuda").
pub fn backend_name() -> Result<&'static str> {
    Ok(runtime::get("rshmem_backend_name")?.backend().name())
}
pub use coll::{team_my_pe, team_n_pes, team_translate_pe, Team};

/// Copies host bytes into this PE's memory (a symmetric buffer, or device memory on GPUs), whichever
/// backend runs.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of this PE's memory.
pub unsafe fn copy_in(dst: *mut u8, src: &[u8]) -> Result<()> {
    // SAFETY: our caller's contract (dst valid for src.len() bytes of this PE's memory) is copy_in's.
    unsafe { runtime::get("rshmem::copy_in")?.backend().copy_in(dst, src) }
}
/// Copies this PE's memory (symmetric or device) to host bytes.
///
/// # Safety
/// `src` must be valid for `dst.len()` bytes of this PE's memory.
pub unsafe fn copy_out(dst: &mut [u8], src: *const u8) -> Result<()> {
    // SAFETY: our caller's contract (src valid for dst.len() bytes of this PE's memory) is copy_out's.
    unsafe { runtime::get("rshmem::copy_out")?.backend().copy_out(dst, src) }
}
/// Offset of `p` in this PE's symmetric heap (the same on every PE for the same object), or None.
pub fn heap_offset(p: *const u8) -> Option<usize> {
    let rt = runtime::get("rshmem::heap_offset").ok()?;
    let off = (p as usize).wrapping_sub(rt.state.heap_base as usize);
    (off < rt.backend().heap_size()).then_some(off)
}
/// Size in bytes of this PE's symmetric heap.
pub fn heap_size() -> usize {
    runtime::get("rshmem::heap_size").map(|rt| rt.backend().heap_size()).unwrap_or(0)
}
