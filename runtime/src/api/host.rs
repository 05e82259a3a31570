//! The plain host calls of a PE, NVSHMEM's core: the unique id, the symmetric heap (malloc, calloc,
//! align, realloc, free), host RMA (putmem, getmem and their non-blocking forms), barrier_all, quiet,
//! and copies between host bytes and this PE's memory. The crate root re-exports every one of them
//! (`rshmem::malloc`), beside init and finalize; the typed forms are in [`sym`](crate::api::sym).

use crate::bootstrap::{self, UniqueId};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::heap;
use crate::runtime::{self, my_pe};

/// Creates the unique id PE 0 hands to the other PEs of a job started by another launcher. Reads this
/// process's environment once and checks every variable, as init does (a bad value is an error naming
/// it); the bootstrap interface (`RSHMEM_BOOTSTRAP_IFNAME`) is taken from there.
pub fn get_unique_id() -> Result<UniqueId> {
    let (cfg, _warnings) = Config::from_env()?;
    bootstrap::get_unique_id(&cfg)
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
