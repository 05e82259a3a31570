//! rshmem device API. `no_std`: compiled to PTX for GPUs (the device library nvcc links and the
//! modules rshmem loads) and to the host for the CPU backend, where a "kernel" runs on host threads.
//!
//! Every call takes symmetric addresses (from `rshmem::malloc`) and a PE number. PE numbers and heap
//! ranges are checked on every call; a bad one stops the PE with a message naming the call.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(stdarch_nvptx, asm_experimental_arch))]
#![allow(clippy::missing_safety_doc)]

pub mod arch;
pub mod ops;
pub mod state;

#[cfg(target_arch = "nvptx64")]
pub mod capi;

pub use arch::{Failure, Problem};
pub use ops::*;
pub use state::{CMP_EQ, CMP_GE, CMP_GT, CMP_LE, CMP_LT, CMP_NE, SIGNAL_ADD, SIGNAL_SET, TEAM_NODE, TEAM_SHARED, TEAM_WORLD};

/// Thread coordinates, the same on both backends (x dimension of the grid; linear index in the block).
pub mod thread {
    pub use crate::arch::{block_index, block_rank, block_size, grid_size, sync_block, sync_warp, warp_rank, warp_size};
}
