//! The API of user programs: everything here is above the runtime and finds the running instance with
//! `runtime::get`. The crate root re-exports each module (`rshmem::sym`, `rshmem::kernels`, ...) and the
//! plain host calls of [`host`] (`rshmem::malloc`); nothing names a path through `api`.
//!
//! - [`host`]: the plain host calls of NVSHMEM's core: the symmetric heap, host RMA, barrier_all, quiet.
//! - [`sym`]: typed symmetric memory ([`sym::Sym`], [`sym::SymSlice`]).
//! - [`kernels`]: launching kernels written with `rshmem_device::kernels!`, and loading their PTX.
//! - [`stream`]: streams and what runs on them (the on-stream calls, timers), device memory.
//! - [`coll`]: teams and collectives; [`team_init`]: teams from a unique id.
//! - [`point`]: the host's point operations (atomics, signals, waits).
//! - `interop`: cudarc's contexts, streams and slices (feature `cudarc-interop`).
//! - [`mpi`]: init over an MPI communicator.
//! - [`capi`]: the C ABI behind `nvshmem.h`, over the modules above.

pub mod capi;
pub mod coll;
pub mod host;
#[cfg(feature = "cudarc-interop")]
pub mod interop;
pub mod kernels;
pub mod mpi;
pub mod point;
pub mod stream;
pub mod sym;
pub mod team_init;
