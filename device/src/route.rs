//! Where a device call goes, before any transport: the device state as the API reads it ([`St`],
//! [`state`]), the translation of a symmetric address to PE `pe`'s mapping ([`locate`],
//! [`translate`]), the per-PE route of the remote transports ([`route`]), the check of a local
//! symmetric address ([`check_local`]), and the one way a call fails ([`fail`]).
//!
//! Below the transports (`remote`) and the API (`ops`, `coll`), above `arch` and `state`.

use crate::arch;
use crate::state::{Field, STATE_MAGIC};
use crate::types::{Failure, Problem};

/// Stops the PE: reports `call` (NUL-terminated), what went wrong, the target PE and the address
/// range involved (`arch::fail`: a message, then a trap on the GPU; the runtime's hook on the CPU
/// backend). Every failing device call ends here.
#[cold]
#[inline]
pub(crate) fn fail(call: &'static str, problem: Problem, pe: i32, addr: usize, len: usize) -> ! {
    arch::fail(Failure { call, problem, pe, addr: addr as u64, len: len as u64 })
}

/// The fields of the device state the API reads, loaded field by field (see `arch::state_u64`).
#[derive(Clone, Copy)]
pub(crate) struct St;

macro_rules! field {
    ($name:ident, $f:ident, u64) => {
        #[inline(always)]
        pub(crate) fn $name(self) -> u64 {
            arch::state_u64(Field::$f)
        }
    };
    ($name:ident, $f:ident, i32) => {
        #[inline(always)]
        pub(crate) fn $name(self) -> i32 {
            arch::state_u32(Field::$f) as i32
        }
    };
}
#[allow(dead_code)]
impl St {
    field!(heap_base, HEAP_BASE, u64);
    field!(heap_size, HEAP_SIZE, u64);
    field!(my_pe, MY_PE, i32);
    field!(n_pes, N_PES, i32);
    field!(checks, CHECKS, i32);
    field!(node_my_pe, NODE_MY_PE, i32);
    field!(node_n_pes, NODE_N_PES, i32);
    /// `peer_base[pe]` (the index taken modulo `MAX_PES`).
    #[inline(always)]
    pub(crate) fn peer_base(self, pe: usize) -> u64 {
        arch::state_u64(Field::peer_base(pe))
    }
    /// `node_pe[i]`: the job PE number of this node's `i`-th PE (the index taken modulo `MAX_PES`).
    #[inline(always)]
    pub(crate) fn node_pe(self, i: i32) -> i32 {
        arch::state_u32(Field::node_pe(i as usize)) as i32
    }
}

/// The initialized device state, or a failure naming `call`.
#[inline(always)]
pub(crate) fn state(call: &'static str) -> St {
    if arch::state_u64(Field::MAGIC) != STATE_MAGIC {
        fail(call, Problem::NotInitialized, -1, 0, 0);
    }
    St
}

/// Address in this process of the symmetric object at `local` (an address in my heap) on PE `pe`,
/// after checking the PE number and that `[local, local+len)` lies in the heap; 0 when PE `pe`'s heap
/// is not mapped here (a PE on another node): the caller then takes its remote arm (`crate::remote`),
/// which picks the PE's transport or stops naming the call.
#[inline(always)]
pub fn translate(call: &'static str, local: usize, len: usize, pe: i32) -> usize {
    let (r, mapped) = locate(call, local, len, pe);
    if mapped { r } else { 0 }
}

/// `translate` for the device calls: the address, and whether PE `pe`'s heap is mapped here. The flag
/// depends on the PE alone (its `peer_base`), not on the address: in a loop over one PE the compiler
/// hoists the test out of the loop, so the P2P hot path pays nothing per call for the remote arm.
#[inline(always)]
pub(crate) fn locate(call: &'static str, local: usize, len: usize, pe: i32) -> (usize, bool) {
    // All fields are loaded before any test (independent loads, issued together); the PE index is
    // masked so the peer-base load is in bounds whatever `pe` is.
    let f = St;
    let (magic, base) = arch::state_u64_pair(Field::MAGIC, Field::peer_base(pe as usize));
    let base = base as usize;
    let (heap_base, heap_size, n_pes, checks) = (f.heap_base() as usize, f.heap_size() as usize, f.n_pes(), f.checks());
    if magic != STATE_MAGIC {
        fail(call, Problem::NotInitialized, pe, local, len);
    }
    let off = local.wrapping_sub(heap_base);
    if checks != 0 {
        // One unsigned comparison covers pe < 0 and pe >= n_pes.
        if pe as u32 >= n_pes as u32 {
            fail(call, Problem::PeOutOfRange, pe, local, len);
        }
        if off > heap_size || len > heap_size - off {
            fail(call, Problem::NotInHeap, pe, local, len);
        }
    }
    (base.wrapping_add(off), base != 0)
}

/// Checks that a local symmetric address (one that is waited on) lies in my heap.
#[inline(always)]
pub(crate) fn check_local(call: &'static str, local: usize, len: usize) {
    let s = state(call);
    if s.checks() != 0 {
        let off = local.wrapping_sub(s.heap_base() as usize);
        let size = s.heap_size() as usize;
        if off > size || len > size - off {
            fail(call, Problem::NotInHeap, s.my_pe(), local, len);
        }
    }
}

/// The route of PE `pe` (`state::ROUTE_*`; the index is masked into the table, so any `pe` reads
/// inside it: callers check the PE's range first).
#[inline(always)]
pub(crate) fn route(pe: i32) -> u8 {
    let w = arch::state_u32(Field::route_word(pe as usize));
    (w >> (8 * (pe as usize & 3))) as u8
}

/// The heap offset of `local`, an address of this PE's heap (checked by `translate` before).
#[inline(always)]
pub(crate) fn heap_offset(local: usize) -> u64 {
    local.wrapping_sub(arch::state_u64(Field::HEAP_BASE) as usize) as u64
}
