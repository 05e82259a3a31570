//! rshmem device API. `no_std`: compiled to PTX for GPUs (the device library nvcc links and the
//! modules rshmem loads) and to the host for the CPU backend, where a "kernel" runs on host threads.
//!
//! Every call takes symmetric addresses (from `rshmem::malloc`) and a PE number. PE numbers and heap
//! ranges are checked on every call; a bad one stops the PE with a message naming the call.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx, asm_experimental_arch, allow_internal_unstable))]
#![allow(clippy::missing_safety_doc)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

// The layers, bottom to top: each module names only modules listed before it (the workspace's layer
// test checks it): types, state, arch, route, remote (proxy, inbound, wait, ibgda, then its mod.rs),
// ops, coll, capi, and this file.
pub mod types;
pub mod state;
pub mod arch;
mod route;
pub mod remote;
pub mod ops;
pub mod point;
pub mod coll;
#[cfg(target_arch = "nvptx64")]
pub mod capi;

pub use coll::{barrier_all, barrier_all_block, barrier_all_warp, sync_all, sync_all_block, sync_all_warp, team_my_pe, team_n_pes, team_translate_pe};
pub use ops::*;
pub use types::{Failure, Problem};
pub use state::{Cmp, CMP_EQ, CMP_GE, CMP_GT, CMP_LE, CMP_LT, CMP_NE, SIGNAL_ADD, SIGNAL_SET, TEAMS_MIN, TEAM_INVALID, TEAM_NODE, TEAM_SHARED, TEAM_WORLD};

/// Thread coordinates, the same on both backends (x dimension of the grid; linear index in the block).
pub mod thread {
    pub use crate::arch::{block_index, block_rank, block_size, grid_size, sync_block, sync_warp, warp_rank, warp_size};
}

/// Defines kernels once for both backends. Each kernel takes one argument, a pointer to its `u64`
/// arguments (in memory the kernel can read: device memory on GPUs). On the GPU each becomes a
/// `ptx-kernel` entry point named like the function; on the host a function, listed with its name in
/// `CPU_KERNELS` for the CPU backend's launcher. Crates using it need
/// `#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]`.
///
/// The body runs inside one `unsafe` block whose justification is the kernel's `# Safety` contract
/// (its arguments and the kernel's own preconditions are the launcher's promise), so kernel code calls
/// the device API without `unsafe` blocks of its own.
#[macro_export]
macro_rules! kernels {
    ($( $(#[$m:meta])* fn $name:ident($a:ident) $body:block )*) => {
        $crate::declare_device_state!();
        $(
            $(#[$m])*
            ///
            /// # Safety
            /// The argument must point to this kernel's `u64` arguments, readable by the kernel for the
            /// whole launch (device memory on GPUs), and they must satisfy the kernel's own contract
            /// (e.g. pointers into live symmetric allocations); rshmem must be initialized.
            #[cfg(target_arch = "nvptx64")]
            #[no_mangle]
            #[allow(unused_unsafe)]
            pub unsafe extern "ptx-kernel" fn $name($a: *const u64) {
                // SAFETY: the body is the kernel: the unsafe calls it makes rely on what its caller
                // promises (the `# Safety` contract above: readable arguments that satisfy the
                // kernel's own contract, an initialized rshmem).
                unsafe { $body }
            }
            $(#[$m])*
            ///
            /// # Safety
            /// As the GPU version: the argument points to this kernel's `u64` arguments, which satisfy
            /// the kernel's own contract; rshmem must be initialized.
            #[cfg(not(target_arch = "nvptx64"))]
            #[allow(unused_unsafe)]
            pub unsafe fn $name($a: *const u64) {
                // SAFETY: as the GPU version's: the caller's `# Safety` contract above.
                unsafe { $body }
            }
        )*
        /// The kernels of this crate by name, for the CPU backend.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static CPU_KERNELS: &[(&str, unsafe fn(*const u64))] = &[ $( (stringify!($name), $name) ),* ];
    };
}
