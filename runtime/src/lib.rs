//! rshmem host runtime: bootstrap, symmetric heap, host API, CPU and CUDA backends.
//!
//! # Layers: who may import whom
//!
//! From the top; a module may use the ones below it, never one above (no import circle):
//! 1. **API** — this file's free functions, [`kernels`] (kernel launch for user programs), [`capi`]
//!    (the C ABI) and `cuda/api.rs` (`cuda::Module::load`, device memory, on-stream calls): they find
//!    the running instance with `runtime::get`.
//! 2. **Runtime** — [`runtime`]: init/finalize, the collective allocator, host barrier and RMA. It owns
//!    the process-wide state and passes what the layers below need (bootstrap, fd server, job id, the
//!    platform) down as arguments; it tells [`log`] the PE number ([`log::set_pe`]).
//! 3. **Transports** — [`transport`]: which PEs this PE reaches and how. `transport::p2p` serves the
//!    node-local PEs (and does the one same-node fd exchange, `transport::p2p::exchange`, both
//!    platforms use); `RSHMEM_REMOTE_TRANSPORT` names the one for other nodes (`proxy`, `ibgda`),
//!    `transport::select` decides (with the host probes and the verbs checks). The proxy's pieces:
//!    `transport::{wire, tcp, ring}`; IBGDA's: `transport::ibgda` and, feature `verbs`,
//!    `transport::verbs` (a real NIC).
//! 4. **Platforms** — the host probes [`diagnose`] (sysfs, the CUDA driver, interfaces: what
//!    `rshmrun --diagnose` reports; it imports no transport), and [`backend::Backend`] implemented by
//!    [`cpu`] (memfd heap via [`segment`], kernels on host threads) and [`cuda`] (cuMem granules, modules; `cuda::{driver, module}` and the backend
//!    in `cuda/mod.rs`): where kernels run and memory lives, copies, zeroing, quiet, and exporting the
//!    heap as descriptors for the p2p exchange. [`hostsync`] (shared-memory host barrier) sits here too.
//! 5. **Services** — [`bootstrap`], [`fdpass`], [`heap`] (the allocator), [`jobstatus`], [`env`],
//!    [`log`], [`error`]: no rshmem layer above them.
//!
//! `transports_and_platforms_never_ask_the_runtime` (below) checks rule 1-vs-rest on the sources.
//!
//! ```no_run
//! rshmem::init().unwrap();
//! let me = rshmem::my_pe();
//! let n = rshmem::n_pes();
//! let dst = rshmem::malloc(4).unwrap() as usize;
//! // A CPU-backend "kernel": one block of one host thread (GPU kernels: see rshmem::kernels).
//! rshmem::cpu::launch(1, 1, || unsafe { rshmem_device::p(dst as *mut i32, me, (me + 1) % n) });
//! rshmem::barrier_all().unwrap();
//! rshmem::finalize().unwrap();
//! ```

pub mod backend;
pub mod capi;
pub mod bootstrap;
pub mod coll;
pub mod cpu;
pub mod cuda;
pub mod diagnose;
pub mod env;
pub mod error;
pub mod fdpass;
pub mod heap;
pub mod hostsync;
pub mod jobstatus;
pub mod kernels;
pub mod log;
pub mod mpi;
pub mod register;
pub mod runtime;
pub mod segment;
pub mod transport;
mod seqlock;

pub use bootstrap::UniqueId;
pub use error::{Error, Result};
pub use runtime::{finalize, init, init_with_unique_id, known_pe, my_pe, n_pes};

/// Creates the unique id PE 0 hands to the other PEs of a job started by another launcher.
pub fn get_unique_id() -> Result<UniqueId> {
    bootstrap::get_unique_id()
}

/// Collective: allocates `bytes` on every PE's symmetric heap; the same offset everywhere.
pub fn malloc(bytes: usize) -> Result<*mut u8> {
    runtime::get("rshmem_malloc")?.alloc("rshmem_malloc", bytes, heap::MIN_ALIGN, false)
}
/// Collective: `count * size` zeroed bytes.
pub fn calloc(count: usize, size: usize) -> Result<*mut u8> {
    let bytes = count
        .checked_mul(size)
        .ok_or_else(|| Error::new(format!("rshmem_calloc({count}, {size}): size overflows")))?;
    runtime::get("rshmem_calloc")?.alloc("rshmem_calloc", bytes, heap::MIN_ALIGN, true)
}
/// Collective: `bytes` aligned to `alignment` (a power of two).
pub fn align(alignment: usize, bytes: usize) -> Result<*mut u8> {
    runtime::get("rshmem_align")?.alloc("rshmem_align", bytes, alignment, false)
}
/// Collective: frees a symmetric allocation.
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

#[cfg(test)]
mod tests {
    /// The layering rule that breaks the old import circle: only the API files (and the runtime itself)
    /// name `crate::runtime`, `crate::kernels` or `crate::capi`; every other source file of this crate
    /// (platforms, transports, services), present and future, must not.
    #[test]
    fn transports_and_platforms_never_ask_the_runtime() {
        const ABOVE: &[&str] = &["lib.rs", "runtime.rs", "kernels.rs", "capi.rs", "coll.rs", "cuda/api.rs"];
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![];
        let mut dirs = vec![src.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    files.push(p);
                }
            }
        }
        assert!(files.len() > 20, "found only {} source files under {}", files.len(), src.display());
        let mut bad = vec![];
        for f in &files {
            let rel = f.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
            if ABOVE.contains(&rel.as_str()) {
                continue;
            }
            for (i, line) in std::fs::read_to_string(f).unwrap().lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for upper in ["crate::runtime", "crate::kernels", "crate::capi", "super::runtime", "crate::{"] {
                    if code.contains(upper) && (upper != "crate::{" || ["runtime", "kernels", "capi"].iter().any(|m| code.contains(m))) {
                        bad.push(format!("{rel}:{}: {}", i + 1, line.trim()));
                    }
                }
            }
        }
        assert!(bad.is_empty(), "lower layers import the API/runtime layer:\n{}", bad.join("\n"));
    }

    /// The host probes (`diagnose`) sit below the transports: the transports (the verbs module, the
    /// choice of the remote transport) use them, so they must not use a transport.
    #[test]
    fn the_host_probes_import_no_transport() {
        let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/diagnose.rs");
        let bad: Vec<String> = std::fs::read_to_string(&f)
            .unwrap()
            .lines()
            .enumerate()
            .filter(|(_, l)| l.split("//").next().unwrap_or("").contains("crate::transport"))
            .map(|(i, l)| format!("diagnose.rs:{}: {}", i + 1, l.trim()))
            .collect();
        assert!(bad.is_empty(), "diagnose.rs imports the transport layer:\n{}", bad.join("\n"));
    }
}
