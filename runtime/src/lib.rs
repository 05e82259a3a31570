//! rshmem: a PGAS runtime for GPUs, as NVSHMEM is for CUDA programmers. Kernels put, get, add atomically
//! and synchronize across the GPUs of a job (PEs), on one node through NVLink/PCIe mappings and across
//! nodes through a CPU proxy or GPU-initiated networking (IBGDA). This crate is the host side: init,
//! the symmetric heap, host and on-stream calls, teams and collectives, kernel launches, the C ABI
//! behind `nvshmem.h`. Device code uses `rshmem_device`. Programs run under `rshmrun`; without a GPU
//! everything runs on the CPU backend (kernels on host threads). This example carries only the CPU
//! backend's kernels (no PTX), so it runs there: CI runs the documentation's examples with
//! `RSHMEM_BACKEND=cpu` (`scripts/test.sh`), which a machine without a GPU also picks by itself:
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
//! collectives), [`stream`] (streams, the on-stream calls, device memory and timers), `interop` (cudarc,
//! feature `cudarc-interop`), and the guide in the repository's `docs/`.
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
//! 7. The API of user programs, the folder `api/`: the plain host calls (`api/host.rs`, re-exported
//!    here: [`malloc`], [`putmem`], [`quiet`], ...), [`kernels`], [`coll`], [`team_init`], [`stream`],
//!    [`sym`], `interop`, [`mpi`], [`point`], then [`capi`] (the C ABI). They find the running instance
//!    with `runtime::get`. This file only re-exports them: every public path is `rshmem::<module>` or
//!    `rshmem::<item>`, never `rshmem::api::..`.
//!
//! The untyped forms remain for code that works with raw symmetric addresses (a CPU-backend launch
//! here, so, like the example above, it runs with `RSHMEM_BACKEND=cpu` on a GPU machine):
//!
//! ```
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
pub mod config;
pub mod error;
pub mod heap;
pub mod log;
pub mod node;
pub mod platform;
pub mod probe;
pub mod runtime;
pub mod teams;
pub mod transport;

mod api;
#[cfg(feature = "cudarc-interop")]
pub use api::interop;
pub use api::{capi, coll, kernels, mpi, point, stream, sym, team_init};
/// The former home of [`stream`]'s items and of [`kernels::Module`], kept so that code written against
/// it still builds.
#[doc(hidden)]
pub mod cuda {
    pub use crate::api::kernels::Module;
    pub use crate::api::stream::*;
}

/// The CPU backend's kernel launch (`rshmem::cpu::launch`) and platform.
pub use platform::cpu;
pub use bootstrap::UniqueId;
pub use error::{Error, Result};
pub use sym::{Sym, SymSlice};
/// bytemuck, whose `Pod` bounds typed memory and kernel arguments (re-exported so that crates using
/// rshmem's typed API name the same version).
pub use bytemuck;
pub use runtime::{finalize, global_exit, init, init_with_unique_id, known_pe, my_pe, n_pes};
pub use api::host::{
    align, backend_name, barrier_all, calloc, copy_in, copy_out, free, get_unique_id, getmem, getmem_nbi, heap_offset, heap_size, malloc, ptr,
    putmem, putmem_nbi, quiet, realloc,
};
pub use coll::{team_my_pe, team_n_pes, team_translate_pe, Team};
