//! Point operations the host asks for on symmetric memory: AMOs (NVSHMEM's host AMOs), `p` and `g`,
//! signal updates and waits (their `_on_stream` forms), and strided puts and gets (`iput` / `iget`).
//!
//! One implementation for every backend and route: the device operations of this crate, run by one
//! GPU thread in a kernel the host launches (`capi::rshmemi_point_op`, on the runtime's host stream or
//! the caller's stream), or called directly by a host thread on the CPU backend. So a host AMO is the
//! device AMO (P2P atomics to a mapped PE, the remote transport's AMO otherwise), and a host AMO racing
//! device AMOs on the same word is as atomic as two device AMOs.

use crate::ops::{self, Scope, Wait};
use crate::remote::proxy::amo as code;

/// What `run` does (`Op::what`).
pub mod what {
    /// AMO `Op::code` (`remote::proxy::amo`) of `Op::width` bytes on `dest` at `pe`; the old value is
    /// returned for the fetching codes.
    pub const AMO: u32 = 1;
    /// `p` of the low `width` bytes of `value` to `dest` at `pe`.
    pub const P: u32 = 2;
    /// `g` of `width` bytes from `dest` at `pe`, returned.
    pub const G: u32 = 3;
    /// signal_op (`Op::code` = SIGNAL_SET / SIGNAL_ADD) of `value` on the u64 `dest` at `pe`.
    pub const SIGNAL_OP: u32 = 4;
    /// Wait until the local `dest` (`width` bytes, `Op::signed`) compares (`Op::code` = CMP_*) true
    /// against `value`; with `n` > 1 (`wait_until_all`), every one of the `n` elements at `dest`
    /// (against `cond`, an array of `n` values, when non-zero: the `_vector` form), skipping element i
    /// when the `status` array (non-zero `aux`) has `status[i] != 0`. Returns the signal's value for a
    /// u64 wait (`signal_wait_until`).
    pub const WAIT: u32 = 5;
    /// Strided put: element i (`width` bytes) of local `src` (`aux`) at stride `sst` to `dest` at
    /// stride `dst` on `pe`, for `n` elements.
    pub const IPUT: u32 = 6;
    /// Strided get: element i of `src` (`aux`, symmetric) on `pe` at stride `sst` to the local `dest`
    /// at stride `dst`.
    pub const IGET: u32 = 7;
}

/// One point operation, as the host hands it over (kernel parameters, or a direct call).
#[derive(Clone, Copy, Debug, Default)]
pub struct Op {
    /// What to do: a `what::*` code.
    pub what: u32,
    /// AMO code, signal op or comparison.
    pub code: u32,
    /// Element width in bytes: 1, 2, 4, 8 (AMOs: 4 or 8; 16 for strided RMA of 128-bit elements).
    pub width: u32,
    /// Waits: the elements are signed.
    pub signed: bool,
    /// The target PE (unused by `WAIT`, which waits on this PE's memory).
    pub pe: i32,
    /// The symmetric address operated on (for `IGET` the local destination).
    pub dest: u64,
    /// The operand: the AMO's operand, `p`'s value, the signal value, or what a `WAIT` compares with.
    pub value: u64,
    /// A compare-and-swap's compare value; for `WAIT`, the address of `n` values to compare with
    /// (0: `value` for every element).
    pub cond: u64,
    /// Element count of `WAIT` (0 or 1: one element), `IPUT` and `IGET`.
    pub n: u64,
    /// For `IPUT` the local source, for `IGET` the symmetric source, for `WAIT` the address of the
    /// `n` statuses (0: none).
    pub aux: u64,
    /// Strides in elements (iput / iget).
    pub dst: i64,
    /// The source's stride in elements (`dst` is the destination's).
    pub sst: i64,
}

impl Op {
    /// The kernel parameters' first word: what | code << 8 | width << 16 | signed << 24 | pe << 32.
    pub fn word(&self) -> u64 {
        (self.what as u64 & 0xff) | (self.code as u64 & 0xff) << 8 | (self.width as u64 & 0xff) << 16 | (self.signed as u64) << 24 | (self.pe as u32 as u64) << 32
    }
    /// The inverse of `word` for the other fields given.
    #[allow(clippy::too_many_arguments)]
    pub fn from_word(w: u64, dest: u64, value: u64, cond: u64, n: u64, aux: u64, dst: i64, sst: i64) -> Op {
        Op {
            what: (w & 0xff) as u32,
            code: (w >> 8 & 0xff) as u32,
            width: (w >> 16 & 0xff) as u32,
            signed: (w >> 24 & 1) != 0,
            pe: (w >> 32) as u32 as i32,
            dest,
            value,
            cond,
            n,
            aux,
            dst,
            sst,
        }
    }
}

/// Runs `op` from this thread; returns the fetched, read or waited-for value (0 for the others).
///
/// # Safety
/// The host checked `op` against this PE's heap: `dest` (and for IGET `aux`) a symmetric range of
/// `width` x `n` elements at their strides, naturally aligned for `width`; for IPUT `aux` and for IGET
/// `dest` local memory of that extent, readable or writable by this thread.
pub unsafe fn run(op: &Op) -> u64 {
    // SAFETY: every arm is the device operation of the same name under the contract above.
    unsafe {
        match op.what {
            what::AMO => match op.width {
                4 => amo::<u32>(op),
                _ => amo::<u64>(op),
            },
            what::P => {
                match op.width {
                    1 => ops::p(op.dest as *mut u8, op.value as u8, op.pe),
                    2 => ops::p(op.dest as *mut u16, op.value as u16, op.pe),
                    4 => ops::p(op.dest as *mut u32, op.value as u32, op.pe),
                    _ => ops::p(op.dest as *mut u64, op.value, op.pe),
                }
                0
            }
            what::G => match op.width {
                1 => ops::g(op.dest as *const u8, op.pe) as u64,
                2 => ops::g(op.dest as *const u16, op.pe) as u64,
                4 => ops::g(op.dest as *const u32, op.pe) as u64,
                _ => ops::g(op.dest as *const u64, op.pe),
            },
            what::SIGNAL_OP => {
                ops::signal_op(op.dest as *mut u64, op.value, op.code as i32, op.pe);
                0
            }
            what::WAIT => match (op.width, op.signed) {
                (2, true) => wait(op, |v| v as i16, |t| t as u16 as u64),
                (2, false) => wait(op, |v| v as u16, |t| t as u64),
                (4, true) => wait(op, |v| v as i32, |t| t as u32 as u64),
                (4, false) => wait(op, |v| v as u32, |t| t as u64),
                (_, true) => wait(op, |v| v as i64, |t| t as u64),
                (_, false) => wait(op, |v| v, |t| t),
            },
            what::IPUT | what::IGET => {
                strided(op, Scope::Thread);
                0
            }
            _ => 0,
        }
    }
}

/// # Safety
/// As `run`, with `T` of `op.width` bytes.
unsafe fn amo<T: crate::types::AmoInt + Into<u64> + Low>(op: &Op) -> u64 {
    let d = op.dest as *mut T;
    let v = T::low(op.value);
    let c = T::low(op.cond);
    // SAFETY: `d` is a checked, naturally aligned symmetric T (the caller's contract).
    unsafe {
        let old: T = match op.code as u16 {
            code::FETCH => ops::atomic_fetch(d, op.pe),
            code::SET => {
                ops::atomic_set(d, v, op.pe);
                return 0;
            }
            code::SWAP => ops::atomic_swap(d, v, op.pe),
            code::COMPARE_SWAP => ops::atomic_compare_swap(d, c, v, op.pe),
            code::FETCH_ADD => ops::atomic_fetch_add(d, v, op.pe),
            code::FETCH_AND => ops::atomic_fetch_and(d, v, op.pe),
            code::FETCH_OR => ops::atomic_fetch_or(d, v, op.pe),
            code::FETCH_XOR => ops::atomic_fetch_xor(d, v, op.pe),
            code::ADD => {
                ops::atomic_add(d, v, op.pe);
                return 0;
            }
            code::AND => {
                ops::atomic_and(d, v, op.pe);
                return 0;
            }
            code::OR => {
                ops::atomic_or(d, v, op.pe);
                return 0;
            }
            code::XOR => {
                ops::atomic_xor(d, v, op.pe);
                return 0;
            }
            _ => return 0,
        };
        old.into()
    }
}

/// The AMO widths: the low bits of a u64 (the host passes every value widened to u64).
trait Low {
    fn low(v: u64) -> Self;
}
impl Low for u32 {
    fn low(v: u64) -> u32 {
        v as u32
    }
}
impl Low for u64 {
    fn low(v: u64) -> u64 {
        v
    }
}

/// # Safety
/// As `run`, with `T` of `op.width` bytes; `conv` takes the low bits of a u64 as `T`, `bits` gives a
/// `T`'s bits back.
unsafe fn wait<T: Wait>(op: &Op, conv: impl Fn(u64) -> T, bits: impl Fn(T) -> u64) -> u64 {
    let base = op.dest as *const T;
    let n = op.n.max(1) as usize;
    let status = op.aux as *const i32;
    let values = op.cond as *const T;
    for i in 0..n {
        // SAFETY: the status and value arrays have `n` elements when non-null (the caller's contract).
        let skip = !status.is_null() && unsafe { *status.add(i) } != 0;
        if skip {
            continue;
        }
        // SAFETY: as above.
        let want = if values.is_null() { conv(op.value) } else { unsafe { *values.add(i) } };
        // SAFETY: element i of a checked local symmetric array (the caller's contract).
        unsafe { ops::wait_until(base.add(i), op.code as i32, want) };
    }
    // signal_wait_until returns the value that satisfied the wait: read again after it.
    // SAFETY: as above.
    bits(unsafe { T::load_acquire(base) })
}

/// A strided put or get (`what::IPUT` / `IGET`) by the threads of a group at `scope`: each thread
/// moves every group-size-th element from its rank on, then the group waits for all of its threads
/// (the warp and block forms return when the whole transfer is done, as the other group RMA does).
/// A mapped PE takes loads and stores; any other, one `p`/`g` (or a 16-byte put/get) per element.
///
/// # Safety
/// As `run`; every thread of the group calls with the same `op`.
pub unsafe fn strided(op: &Op, scope: Scope) {
    let (rank, size) = (scope.rank() as usize, scope.size() as usize);
    let w = op.width as usize;
    let n = op.n as usize;
    let put = op.what == what::IPUT;
    let mut i = rank;
    while i < n {
        let d = (op.dest as i64 + i as i64 * op.dst * w as i64) as u64;
        let s = (op.aux as i64 + i as i64 * op.sst * w as i64) as u64;
        // SAFETY: element i of the ranges the caller's contract covers.
        unsafe {
            if put {
                match w {
                    1 => ops::p(d as *mut u8, *(s as *const u8), op.pe),
                    2 => ops::p(d as *mut u16, *(s as *const u16), op.pe),
                    4 => ops::p(d as *mut u32, *(s as *const u32), op.pe),
                    8 => ops::p(d as *mut u64, *(s as *const u64), op.pe),
                    _ => ops::putmem_scoped(Scope::Thread, d as *mut u8, s as *const u8, w, op.pe, "rshmem_iput\0"),
                }
            } else {
                match w {
                    1 => *(d as *mut u8) = ops::g(s as *const u8, op.pe),
                    2 => *(d as *mut u16) = ops::g(s as *const u16, op.pe),
                    4 => *(d as *mut u32) = ops::g(s as *const u32, op.pe),
                    8 => *(d as *mut u64) = ops::g(s as *const u64, op.pe),
                    _ => ops::getmem_scoped(Scope::Thread, d as *mut u8, s as *const u8, w, op.pe, "rshmem_iget\0"),
                }
            }
        }
        i += size;
    }
    scope.sync();
}
