//! rshmem device API. `no_std`: compiled to PTX for GPUs (the device library nvcc links and the
//! modules rshmem loads) and to the host for the CPU backend, where a "kernel" runs on host threads.
//!
//! Every call takes symmetric addresses (from `rshmem::malloc`) and a PE number. PE numbers and heap
//! ranges are checked on every call; a bad one stops the PE with a message naming the call.
#![no_std]
#![deny(missing_docs)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx, asm_experimental_arch, allow_internal_unstable))]
#![allow(clippy::missing_safety_doc)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

// The layers, bottom to top: each module names only modules listed before it (the workspace's layer
// test checks it): types, state, arch, route, remote (frame, proxy, lane, wait, ibgda, then its mod.rs),
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
pub use types::{DevPtr, Dim3, Failure, Problem};
pub use state::{Cmp, CMP_EQ, CMP_GE, CMP_GT, CMP_LE, CMP_LT, CMP_NE, SIGNAL_ADD, SIGNAL_SET, TEAMS_MIN, TEAM_INVALID, TEAM_NODE, TEAM_SHARED, TEAM_WORLD};

/// Thread coordinates, the same on both backends: the linear index in the block (`block_rank`, of
/// `block_size`), the x dimension of the grid (`block_index`, of `grid_size`), and CUDA's
/// `threadIdx`/`blockDim`/`blockIdx`/`gridDim` in three dimensions (`thread_idx`, `block_dim`,
/// `block_idx`, `grid_dim`).
pub mod thread {
    pub use crate::arch::{block_dim, block_idx, block_index, block_rank, block_size, grid_dim, grid_size, sync_block, sync_warp, thread_idx, warp_rank, warp_size};
}

/// A kernel of a crate as the CPU backend's launcher sees it (`kernels!` lists them in `CPU_KERNELS`).
#[derive(Clone, Copy)]
pub struct CpuKernel {
    /// The kernel's name (its PTX entry point's too).
    pub name: &'static str,
    /// The host function that runs one thread of it, given a pointer to its arguments.
    pub run: unsafe fn(*const u64),
    /// For a typed kernel, the size of its argument struct; None for a kernel of `u64` arguments.
    pub arg_bytes: Option<usize>,
}

#[doc(hidden)]
pub use bytemuck as __bytemuck;

/// Defines kernels once for both backends. On the GPU each becomes a `ptx-kernel` entry point named
/// like the function; on the host a function, listed in `CPU_KERNELS` for the CPU backend's launcher.
/// Crates using it need `#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]`. Two forms, one per
/// invocation:
///
/// - **Typed** (`fn name(args: Args) { .. }`): the kernel takes one `#[repr(C)]` `bytemuck::Pod`
///   struct by value (a CUDA kernel parameter: no argument buffer in device memory), launched with
///   `rshmem::kernels::KernelSet::launch` / `Kernel::launch`, which check the struct's size against the
///   kernel's. Pointers travel as `u64` addresses or [`DevPtr`]s.
/// - **Untyped** (`fn name(a) { .. }`): the kernel takes a pointer to its `u64` arguments (in memory
///   the kernel can read: device memory on GPUs), launched with `KernelSet::run`.
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
        /// The kernels of this crate, for the CPU backend.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static CPU_KERNELS: &[$crate::CpuKernel] = &[ $( $crate::CpuKernel { name: stringify!($name), run: $name, arg_bytes: None } ),* ];
    };
    ($( $(#[$m:meta])* fn $name:ident($a:ident : $t:ty) $body:block )*) => {
        $crate::declare_device_state!();
        $(
            // The argument struct is plain data: it is copied into the launch as bytes.
            const _: fn() = || {
                fn pod<T: $crate::__bytemuck::Pod>() {}
                pod::<$t>();
            };
            $(#[$m])*
            ///
            /// # Safety
            /// The argument's values must satisfy the kernel's own contract (e.g. addresses of live
            /// symmetric allocations of the sizes it accesses); rshmem must be initialized.
            #[cfg(target_arch = "nvptx64")]
            #[no_mangle]
            #[allow(unused_unsafe)]
            pub unsafe extern "ptx-kernel" fn $name($a: $t) {
                // The struct is a kernel parameter (constant bank); copied once through an opaque
                // barrier, its fields stay in registers. Read in place, ptxas re-read fields from the
                // parameter space inside hot loops: the examples' message-rate loop lost 7-11% (H100
                // and H200) against kernels that read u64 arguments from global memory once.
                let $a: $t = core::hint::black_box($a);
                // SAFETY: the body is the kernel: the unsafe calls it makes rely on what its caller
                // promises (the `# Safety` contract above).
                unsafe { $body }
            }
            $(#[$m])*
            ///
            /// # Safety
            /// `args` points to the kernel's argument struct (any alignment), whose values satisfy the
            /// kernel's own contract; rshmem must be initialized.
            #[cfg(not(target_arch = "nvptx64"))]
            #[allow(unused_unsafe)]
            pub unsafe fn $name(args: *const u64) {
                // SAFETY: the caller's contract: `args` points to a whole argument struct.
                let $a: $t = unsafe { core::ptr::read_unaligned(args as *const $t) };
                // SAFETY: as the GPU version's: the caller's `# Safety` contract above.
                unsafe { $body }
            }
        )*
        /// The kernels of this crate, for the CPU backend.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static CPU_KERNELS: &[$crate::CpuKernel] =
            &[ $( $crate::CpuKernel { name: stringify!($name), run: $name, arg_bytes: Some(core::mem::size_of::<$t>()) } ),* ];
    };
}
