//! Typed device collectives: elements by type ([`Elem`]), operators as an enum ([`Op`]), counts in
//! elements, and the call name that errors print derived from the operation and the scope. The untyped
//! functions of this module's parent take byte pointers, numeric codes and a name (they serve the C ABI,
//! which has its codes already).
//!
//! Every thread of the scope (one thread, a warp, a block) calls with the same arguments, as for the
//! untyped forms; every member PE of `team` calls the same collective.

use super::elem::{op, Elem};
use crate::types::Scope;

/// A reduction operator (NVSHMEM's `and`, `or`, `xor`, `min`, `max`, `sum`, `prod`; `MaxLoc` for
/// [`super::DoubleLoc`] only). The bitwise ones exist for the integer types only: another pairing stops
/// the PE with a message naming the type code and operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Bitwise AND (`op::AND`; integer types only).
    And,
    /// Bitwise OR (`op::OR`; integer types only).
    Or,
    /// Bitwise XOR (`op::XOR`; integer types only).
    Xor,
    /// Minimum (`op::MIN`).
    Min,
    /// Maximum (`op::MAX`).
    Max,
    /// Sum, wrapping for integers (`op::SUM`).
    Sum,
    /// Product, wrapping for integers (`op::PROD`).
    Prod,
    /// The largest value with its location, the smaller location on a tie (`op::MAXLOC`;
    /// [`super::DoubleLoc`] only).
    MaxLoc,
}

impl Op {
    /// The operator's code (`op::*`, NVSHMEM's `rdxn_ops_t` values).
    pub const fn code(self) -> u32 {
        match self {
            Op::And => op::AND,
            Op::Or => op::OR,
            Op::Xor => op::XOR,
            Op::Min => op::MIN,
            Op::Max => op::MAX,
            Op::Sum => op::SUM,
            Op::Prod => op::PROD,
            Op::MaxLoc => op::MAXLOC,
        }
    }
}

/// The NUL-terminated call name of collective `what` at `scope`, as the C API spells it.
macro_rules! call_name {
    ($scope:expr, $what:literal) => {
        match $scope {
            Scope::Thread => concat!("rshmem_", $what, "\0"),
            Scope::Warp => concat!("rshmem_", $what, "_warp\0"),
            Scope::Block => concat!("rshmem_", $what, "_block\0"),
        }
    };
}

/// Reduces `n` elements of every member's `src` with `op` into every member's `dest` (member order:
/// every PE gets bitwise the same result).
///
/// # Safety
/// `dest` and `src` symmetric, `n` elements each (they may be the same buffer); see the untyped form.
#[inline(always)]
pub unsafe fn reduce<T: Elem>(scope: Scope, team: i32, dest: *mut T, src: *const T, n: usize, op: Op) {
    // SAFETY: the caller's contract, with the element type and operator given by `T` and `op`.
    unsafe { super::reduce(scope, team, dest as *mut u8, src as *const u8, n, T::DTYPE, op.code(), false, call_name!(scope, "reduce")) }
}
/// Reduces `n_pes * n` elements of every member's `src`; member i keeps block i (`n` elements) in `dest`.
///
/// # Safety
/// As `reduce`, `src` of `n_pes(team) * n` elements.
#[inline(always)]
pub unsafe fn reducescatter<T: Elem>(scope: Scope, team: i32, dest: *mut T, src: *const T, n: usize, op: Op) {
    // SAFETY: as in `reduce`.
    unsafe { super::reduce(scope, team, dest as *mut u8, src as *const u8, n, T::DTYPE, op.code(), true, call_name!(scope, "reducescatter")) }
}
/// Copies `n` elements of member `root`'s `src` into every member's `dest`.
///
/// # Safety
/// `dest` symmetric and `src` readable on the root, `n` elements each.
#[inline(always)]
pub unsafe fn broadcast<T: Copy>(scope: Scope, team: i32, dest: *mut T, src: *const T, n: usize, root: i32) {
    // SAFETY: the caller's contract, in bytes.
    unsafe { super::broadcast(scope, team, dest as *mut u8, src as *const u8, n * core::mem::size_of::<T>(), root, call_name!(scope, "broadcast")) }
}
/// Concatenates every member's `n` elements of `src` in member order into every member's `dest`.
///
/// # Safety
/// `dest` symmetric of `n_pes(team) * n` elements, `src` of `n`.
#[inline(always)]
pub unsafe fn fcollect<T: Copy>(scope: Scope, team: i32, dest: *mut T, src: *const T, n: usize) {
    // SAFETY: the caller's contract, in bytes.
    unsafe { super::fcollect(scope, team, dest as *mut u8, src as *const u8, n * core::mem::size_of::<T>(), call_name!(scope, "fcollect")) }
}
/// Block j (`n` elements) of every member's `src` goes to member j, into block i of its `dest` (i: the
/// sender's number in the team).
///
/// # Safety
/// `dest` and `src` symmetric, `n_pes(team) * n` elements each.
#[inline(always)]
pub unsafe fn alltoall<T: Copy>(scope: Scope, team: i32, dest: *mut T, src: *const T, n: usize) {
    // SAFETY: the caller's contract, in bytes.
    unsafe { super::alltoall(scope, team, dest as *mut u8, src as *const u8, n * core::mem::size_of::<T>(), call_name!(scope, "alltoall")) }
}
