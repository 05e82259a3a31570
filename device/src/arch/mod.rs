//! The primitives the device API is built from. Everything above this module is one generic
//! implementation shared by the GPU and CPU backends; only these primitives differ:
//! - `nvptx`: special registers, `bar.sync`, PTX atomics and fences at system scope, 16-byte copies;
//! - `host`: the CPU backend, where a "kernel" is run by host threads of each PE process (their
//!   coordinates and block barriers come from hooks the runtime installs) and memory is shared memory.

#[cfg(target_arch = "nvptx64")]
mod nvptx;
#[cfg(target_arch = "nvptx64")]
pub use nvptx::*;

#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

// Re-exported for the paths `arch::Failure` etc. that users and the runtime name.
pub use crate::types::{nic_text, Failure, Problem, Rmw};
use crate::types::{AmoBits, Scope};

impl Scope {
    /// This thread's rank in the scope's group.
    #[inline(always)]
    pub fn rank(self) -> u32 {
        match self {
            Scope::Thread => 0,
            Scope::Warp => warp_rank(),
            Scope::Block => block_rank(),
        }
    }
    /// The number of threads of the group.
    #[inline(always)]
    pub fn size(self) -> u32 {
        match self {
            Scope::Thread => 1,
            Scope::Warp => warp_size(),
            Scope::Block => block_size(),
        }
    }
    /// `v` of the group's first thread, to every thread of the group (all of which call it).
    #[inline(always)]
    pub fn bcast(self, v: u64) -> u64 {
        match self {
            Scope::Thread => v,
            Scope::Warp => warp_group_bcast_u64(v),
            Scope::Block => block_bcast_u64(v),
        }
    }
    /// Barrier of the group.
    #[inline(always)]
    pub fn sync(self) {
        match self {
            Scope::Thread => {}
            Scope::Warp => sync_warp(),
            Scope::Block => sync_block(),
        }
    }
}

macro_rules! amo_bits {
    ($($t:ty: $rmw:ident, $cas:ident, $load:ident, $store:ident;)*) => {$(
        impl AmoBits for $t {
            unsafe fn rmw(op: Rmw, p: *mut $t, v: $t) -> $t {
                // SAFETY: the trait method's contract is the width op's.
                unsafe { $rmw(op, p, v) }
            }
            unsafe fn cas(p: *mut $t, c: $t, v: $t) -> $t {
                // SAFETY: as above.
                unsafe { $cas(p, c, v) }
            }
            unsafe fn load(p: *const $t) -> $t {
                // SAFETY: as above.
                unsafe { $load(p) }
            }
            unsafe fn store(p: *mut $t, v: $t) {
                // SAFETY: as above.
                unsafe { $store(p, v) }
            }
            fn one() -> $t {
                1
            }
            fn to_u64(self) -> u64 {
                self as u64
            }
            fn from_u64(v: u64) -> $t {
                v as $t
            }
        }
    )*};
}
amo_bits! {
    u32: rmw_u32, cas_u32, load_relaxed_u32, store_relaxed_u32;
    u64: rmw_u64, cas_u64, load_relaxed_u64, store_relaxed_u64;
}

