//! Platforms: where kernels run and the heap lives. [`backend::Backend`] is the interface; [`cpu`]
//! (memfd heap via [`segment`], kernels on host threads) and [`cuda`] (cuMem granules, modules,
//! streams) implement it. [`hostsync`] is the shared-memory host barrier of a single-node job.

pub mod backend;
pub mod cpu;
pub mod cuda;
pub mod hostsync;
pub mod segment;
pub mod services;
