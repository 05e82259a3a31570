//! The CUDA platform, below the runtime: it is handed what it needs (bootstrap, fd server, job id) and
//! never asks the runtime. The driver is loaded at run time (cudarc, dynamic loading): binaries build
//! and run without CUDA.
//! - [`driver`]: the driver calls (contexts, VMM granules, copies) and their errors;
//! - [`module`]: loaded modules, streams, the device library's PTX;
//! - [`modules`]: one instance's modules and the device state they share;
//! - [`services`]: what the proxy's threads use (pinned memory, copies on non-blocking streams, the
//!   service kernels);
//! - [`backend`]: the heap and the `Backend` implementation.
//!
//! The user API over it, above the runtime: `Module::load` in `api/kernels.rs`, streams, device memory,
//! timers and the on-stream calls in `api/stream.rs`.

pub mod backend;
pub mod driver;
pub mod module;
pub mod modules;
pub mod services;
