//! The remote engine's request ring (a "channel" here: the ring and its counters): device threads post
//! fixed-size requests into it in host memory (pinned and mapped on CUDA, shared memory on the CPU
//! backend); the engine's one sender thread drains it (`rshmem::transport::proxy::ring`, `send`) and
//! the engine reports completion through a counter the posters wait on.
//!
//! This file holds the ONE definition of a channel's layout (`RingHeader`, `Request`, the staging
//! chunks, `ChannelCounters`), used by the device code here and by the host side, and the device-side
//! calls that reserve, stage, publish and wait.
//!
//! # Layout of one channel ([`Channel`])
//! ```text
//! host memory, ring:     RingHeader (256 bytes)
//!                          line 0: magic, slots, chunk   written once by the host before any post
//!                          line 1: tail                  tickets < tail are drained; the proxy stores it
//!                          line 2: completed             requests 1..=completed are complete (proxy)
//!                        then `slots` request slots of 64 bytes (slot i: ticket t with t % slots == i)
//! host memory, staging:  `slots` chunks of `chunk` bytes: ticket t owns chunk t % slots
//! device memory:         ChannelCounters (256 bytes): head, tail_seen, completed_seen, poller
//! ```
//! Everything posters update is in device memory (on a GPU, fast atomics), everything the proxy reads
//! or writes is in host memory: a post costs no PCIe atomic and, while the ring is not full, no PCIe
//! read.
//!
//! # Protocol (ticket `t` = the value `fetch_add(head, k)` returned; sequence number `seq = t + 1`)
//! 1. A poster reserves `k` consecutive tickets `t..t+k` with one atomic add on `head` (device memory):
//!    one for a request, or as many as its staged data needs chunks (a put whose bytes travel in the
//!    channel: [`op::PUT_STAGED`]). Tickets are unique, so no two posters ever own the same slot or
//!    chunk in the same lap.
//! 2. It waits while the ring is full: `t + k - tail > slots`. It reads `tail_seen` (device memory, the
//!    largest `tail` any poster has seen) first and the real `tail` (host memory, acquire) only when that
//!    says full, raising `tail_seen` to what it read (after a release fence).
//! 3. It copies a staged put's bytes into the chunks of its tickets (wrapping at the end of the
//!    staging area), with every thread of its group, and writes the body of slot `t` (every word but
//!    `seq`) with plain stores.
//! 4. It publishes the request with one release store of `seq = t + 1` into slot `t`'s `seq` word
//!    (after a system-scope fence when other threads of its group wrote the staged bytes). The other
//!    slots of a multi-ticket request are never published: the proxy skips them.
//! 5. The proxy, expecting ticket `t`, polls that slot's `seq` (acquire) until it reads `t + 1`, copies
//!    the body out, clears `seq`, and hands the request on; it stores `tail` (release) past a batch of
//!    requests once it has sent their staged bytes. Whoever finishes a request marks its tickets done,
//!    and `completed` (release) is the largest complete prefix.
//! 6. `wait_completed(seq)`: `completed >= seq`, read through `completed_seen` (device memory): one
//!    waiting thread at a time (the one that takes `poller`) reads the host's `completed` and raises
//!    `completed_seen`; every other waiter polls device memory. Completion is in ticket order, so this
//!    covers every earlier request of the channel (`quiet` waits for `head` as it read it).
//!
//! # Memory ordering, step by step
//! - **Never a torn entry.** The proxy reads the body (and the staged bytes) only after its acquire load
//!   of `seq` returned `t + 1`, written by exactly one store: the poster's release store in step 4,
//!   after all its body stores in program order and after the group's staged stores (the group
//!   synchronizes, then the poster fences at system scope before publishing). Release/acquire at system
//!   scope (`st.release.sys` / the host's acquire load; on the CPU backend Rust's Release/Acquire,
//!   atomic across processes on shared memory) makes them visible to the proxy before it reads.
//! - **Never reuse of a slot or chunk the proxy still reads.** Slot and chunk `i` are written in lap `m`
//!   by tickets `i + m * slots` only; their poster waits until `tail` passed the previous lap's ticket.
//!   The proxy stores `tail` (release) only after it has read those bodies, cleared their `seq` and sent
//!   their staged bytes, and the poster's acquire (of `tail`, or of `tail_seen` raised by a poster that
//!   acquired `tail` and released before raising it) orders that before its own stores.
//! - **Completion visible to a polling GPU thread.** The proxy stores `completed` with a release store
//!   only after the operations are finished at the target (and, for data the proxy moved into GPU
//!   memory, the copy synchronized). The poller reads it with `ld.acquire.sys`, fences, and raises
//!   `completed_seen`; a waiter's acquire load of `completed_seen` orders its later loads (a fetched
//!   value, a GET's destination) after the proxy's stores.
//! - **No wrap-around.** Tickets and sequence numbers are u64 and never wrap in practice (584 years at
//!   10^9 requests per second); distances use wrapping subtraction, exact while `tail <= t`.
//!
//! # Failure
//! A poster waits on two things: room in the ring (the proxy must drain) and completion. `post` and
//! `wait_completed` wait through `arch::idle`, where the CPU backend enforces RSHMEM_WAIT_TIMEOUT and
//! stops the PE naming the call; the `_with` versions take the waiting policy from the caller (a
//! deadline) and return `Stalled`. A poster that gives up after reserving its tickets leaves a hole the
//! proxy will wait on forever: giving up is for failure paths that end the job.

use crate::arch;
use crate::route::fail;
use crate::state::Channel;
pub use crate::state::RingRef;
use crate::types::{Problem, Rmw};
use bytemuck::{Pod, Zeroable};

/// `RingHeader::magic` of an initialized ring ("RSHMPRX" v2: counters in device memory, staging).
pub const RING_MAGIC: u64 = 0x5253_484d_5052_5802;
/// Bytes of the header before the first slot.
pub const HEADER_BYTES: usize = 256;
/// Bytes of one request slot.
pub const SLOT_BYTES: usize = 64;
pub use crate::state::MAX_SLOTS;
/// Bytes of a staging chunk (each ticket owns one): a put of `len` staged bytes takes
/// `max(1, ceil(len / chunk))` tickets.
pub const DEFAULT_CHUNK: u64 = 1024;
/// Most bytes one staged request carries; larger staged puts are posted as several requests.
pub const MAX_STAGED: u64 = 256 << 10;

/// Bytes a ring of `slots` slots needs (header included; the staging chunks are apart).
pub const fn ring_bytes(slots: usize) -> usize {
    HEADER_BYTES + slots * SLOT_BYTES
}

/// The header of a ring (host memory). Counters are only ever accessed atomically (through the `arch`
/// atomics on the device, `AtomicU64::from_ptr` on the host); the Pod derive is for the layout,
/// zeroing and tests.
#[repr(C, align(64))]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq)]
pub struct RingHeader {
    /// `RING_MAGIC` once the host has set the ring up.
    pub magic: u64,
    /// Number of slots: a power of two in 1..=MAX_SLOTS.
    pub slots: u64,
    /// Bytes of one staging chunk (a power of two), 0 when the channel has no staging.
    pub chunk: u64,
    /// The rest of line 0 (reserved, 0).
    pub _r0: [u64; 5],
    /// Tickets below it are drained; their slots and chunks may be reused (proxy: release store).
    pub tail: u64,
    /// The rest of line 1: `tail` has its cache line to itself.
    pub _r1: [u64; 7],
    /// Requests with `seq <= completed` are complete (proxy: release store after the operation).
    pub completed: u64,
    /// The rest of line 2: `completed` has its cache line to itself.
    pub _r2: [u64; 7],
    /// Tickets below it have been drained and the sources they name read: a blocking put that names
    /// its source (not staged) may return once `consumed` passes its ticket (proxy: release store).
    pub consumed: u64,
    /// The rest of line 3: the header is `HEADER_BYTES`.
    pub _r3: [u64; 7],
}

/// A channel's counters in device memory (posters update them), one cache line each.
#[repr(C, align(64))]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq)]
pub struct ChannelCounters {
    /// Next ticket to hand out (posters: atomic add).
    pub head: u64,
    /// The rest of `head`'s cache line.
    pub _r0: [u64; 7],
    /// The largest `RingHeader::tail` a poster has read (atomic max).
    pub tail_seen: u64,
    /// The rest of `tail_seen`'s cache line.
    pub _r1: [u64; 7],
    /// The largest `RingHeader::completed` a poller has read (atomic max).
    pub completed_seen: u64,
    /// The rest of `completed_seen`'s cache line.
    pub _r2: [u64; 7],
    /// 1 while one waiter reads the host's `completed` for all (compare-and-swap 0 -> 1, release 0).
    pub poller: u64,
    /// The rest of `poller`'s cache line.
    pub _r3: [u64; 7],
}
/// Bytes of [`ChannelCounters`].
pub const COUNTERS_BYTES: usize = 256;

/// Kinds of request (`Request::op`). Fields per kind are listed with each; the proxy's transport
/// validates them against the target's heap before acting.
pub mod op {
    /// Copy `len` bytes from `src` (an address the proxy can read: pinned host or GPU memory of the
    /// posting PE) to `offset` in PE `pe`'s heap.
    pub const PUT: u16 = 1;
    /// Store the `len` (1, 2, 4 or 8) low bytes of `value` at `offset` in PE `pe`'s heap.
    pub const PUT_INLINE: u16 = 2;
    /// Copy `len` bytes from `offset` in PE `pe`'s heap to `src` (the local destination).
    pub const GET: u16 = 3;
    /// Atomic `sub` (an `amo` code) on the `len`-byte word at `offset` in PE `pe`'s heap with operand
    /// `value` (and `sig_value` as the compare value of a compare-and-swap); a fetched value goes to
    /// `src` when it is not 0.
    pub const AMO: u16 = 4;
    /// Signal only: `sub` (SIGNAL_SET / SIGNAL_ADD) of `sig_value` on the u64 at `sig_offset`.
    pub const SIGNAL: u16 = 5;
    /// Put (as PUT), then the signal (as SIGNAL) once the data is visible at the target.
    pub const PUT_SIGNAL: u16 = 6;
    /// No operation: completes in order (a marker, e.g. to wait for everything posted before it).
    pub const NOP: u16 = 7;
    /// Put `len` bytes that travel in the channel: they are in the staging chunks of the request's
    /// tickets (`tickets(chunk, len)` of them, from the request's own), and go to `offset` in PE `pe`'s
    /// heap. `src` is unused (0).
    pub const PUT_STAGED: u16 = 8;
    /// As `PUT_STAGED`, then the signal (as `PUT_SIGNAL`) once the data is visible at the target.
    pub const PUT_SIGNAL_STAGED: u16 = 9;
    /// A fence: every later request to a PE is applied there after every earlier one to it (`pe`,
    /// `offset`, `len` unused).
    pub const FENCE: u16 = 10;
    /// The largest valid kind.
    pub const LAST: u16 = FENCE;
}

/// One request: 64 bytes, one slot. `seq` is the valid word and is written last (release); every
/// other field is the body.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct Request {
    /// An `op::*` kind.
    pub op: u16,
    /// Sub-operation: AMO code or signal operator.
    pub sub: u16,
    /// Target PE.
    pub pe: u32,
    /// Byte offset in the target PE's heap.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Source address (PUT), destination address (GET, fetched AMO value), else 0.
    pub src: u64,
    /// Inline value or AMO operand.
    pub value: u64,
    /// Signal word's byte offset in the target PE's heap.
    pub sig_offset: u64,
    /// Signal operand (or the compare value of a compare-and-swap).
    pub sig_value: u64,
    /// Valid word: 0 while the slot is empty, `ticket + 1` once published. Set by `post`.
    pub seq: u64,
}

const _: () = assert!(core::mem::size_of::<Request>() == SLOT_BYTES);
const _: () = assert!(core::mem::align_of::<Request>() == 8);
const _: () = assert!(core::mem::offset_of!(Request, seq) == SLOT_BYTES - 8);
const _: () = assert!(core::mem::size_of::<RingHeader>() == HEADER_BYTES);
const _: () = assert!(core::mem::offset_of!(RingHeader, tail) == 64);
const _: () = assert!(core::mem::offset_of!(RingHeader, completed) == 128);
const _: () = assert!(core::mem::size_of::<ChannelCounters>() == COUNTERS_BYTES);

/// Flag in `Request::sub`: the request's result goes to its return slot (index `(seq - 1) % slots` of
/// the return area): the old value of a fetching AMO, or the `len` (1, 2, 4 or 8) bytes of a GET with
/// `src == 0` (`g`), zero-extended into `ReturnSlot::value`.
pub const SUB_RETURN: u16 = 0x8000;

/// Flag in `Request::sub` of a `PUT_INLINE`, `SIGNAL` or `AMO`: applied at the target after every
/// earlier request of this PE to it, whatever lanes they took (a fence just before it: a barrier's
/// flag, which must follow the data the barrier completes).
pub const SUB_FENCED: u16 = 0x4000;

/// AMO codes (`Request::sub & 0xff` of an `op::AMO`; signals use `SET`/`ADD` on 8 bytes). The same
/// numbers as the wire's `AmoOp` (the runtime asserts it), so a request is forwarded without mapping.
pub mod amo {
    /// Atomic read of the word; fetches it (`nvshmem_atomic_fetch`).
    pub const FETCH: u16 = 1;
    /// Atomic store of the operand; fetches nothing (`nvshmem_atomic_set`).
    pub const SET: u16 = 2;
    /// Stores the operand; fetches the old value (`nvshmem_atomic_swap`).
    pub const SWAP: u16 = 3;
    /// Stores the operand if the word equals the compare value; fetches the old value
    /// (`nvshmem_atomic_compare_swap`).
    pub const COMPARE_SWAP: u16 = 4;
    /// Adds the operand (wrapping); fetches the old value (`nvshmem_atomic_fetch_add`).
    pub const FETCH_ADD: u16 = 5;
    /// Adds the operand (wrapping); fetches nothing (`nvshmem_atomic_add`).
    pub const ADD: u16 = 6;
    /// Bitwise AND with the operand; fetches the old value (`nvshmem_atomic_fetch_and`).
    pub const FETCH_AND: u16 = 7;
    /// Bitwise AND with the operand; fetches nothing (`nvshmem_atomic_and`).
    pub const AND: u16 = 8;
    /// Bitwise OR with the operand; fetches the old value (`nvshmem_atomic_fetch_or`).
    pub const FETCH_OR: u16 = 9;
    /// Bitwise OR with the operand; fetches nothing (`nvshmem_atomic_or`).
    pub const OR: u16 = 10;
    /// Bitwise XOR with the operand; fetches the old value (`nvshmem_atomic_fetch_xor`).
    pub const FETCH_XOR: u16 = 11;
    /// Bitwise XOR with the operand; fetches nothing (`nvshmem_atomic_xor`).
    pub const XOR: u16 = 12;
    /// The largest valid code.
    pub const LAST: u16 = XOR;
}

/// One return slot: the proxy delivers a result to the poster of request `seq` here.
///
/// Protocol (slot `i = (seq - 1) % slots`; the area is `slots` of these, zeroed by the host):
/// 1. The proxy waits until `seq` of the slot reads 0 (acquire): the poster of the previous request
///    that used this slot (`seq - slots`, which completed earlier) has taken its value.
/// 2. It writes `value`, then stores `seq` with release.
/// 3. The poster polls `seq` (acquire) until it equals its own sequence number, reads `value`, then
///    stores 0 into `seq` (release), giving the slot back.
///
/// Only requests with `SUB_RETURN` use their slot; the slot of any other request stays 0, so the
/// proxy never waits on a slot nobody will free. A poster of a returning request always waits for its
/// value, so step 1 waits at most as long as that poster takes to read it.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct ReturnSlot {
    /// The result: a fetching AMO's old value, or a GET's bytes zero-extended (written by the proxy
    /// before `seq`).
    pub value: u64,
    /// 0: free; otherwise the sequence number whose value is in `value`.
    pub seq: u64,
}
/// Bytes of one [`ReturnSlot`].
pub const RETURN_SLOT_BYTES: usize = 16;
const _: () = assert!(core::mem::size_of::<ReturnSlot>() == RETURN_SLOT_BYTES);

/// Bytes of the return area of a ring of `slots` slots.
pub const fn return_area_bytes(slots: usize) -> usize {
    slots * RETURN_SLOT_BYTES
}

/// Applies AMO `code` (an `amo::*`) of `width` bytes (4 or 8) at `p` with `value` (and `compare` for
/// COMPARE_SWAP); returns the old value (the stored value for SET, whose old value nobody reads), or
/// None for an unknown code or width, touching nothing. The one definition of what each AMO does at
/// the target, run by whoever applies the inbound queue (`remote::inbound`): device threads of the
/// target (on the GPU or, on the CPU backend, host threads), so a remote AMO is atomic with the
/// target's own device atomics on the same word.
///
/// # Safety
/// `p` must be non-null, aligned to `width` and point to memory of this process that, while this runs,
/// is accessed only atomically.
#[inline(always)]
pub unsafe fn apply_amo(code: u16, width: u32, p: *mut u8, value: u64, compare: u64) -> Option<u64> {
    use amo::*;
    // SAFETY: every arm's atomic is of the width tested, on `p` (the caller's contract: aligned to
    // `width`, live, accessed only atomically).
    unsafe {
        match width {
            4 => {
                let (p, v, c) = (p as *mut u32, value as u32, compare as u32);
                Some(match code {
                    FETCH => arch::load_relaxed_u32(p),
                    SET => {
                        arch::store_relaxed_u32(p, v);
                        v
                    }
                    SWAP => arch::rmw_u32(Rmw::Swap, p, v),
                    COMPARE_SWAP => arch::cas_u32(p, c, v),
                    FETCH_ADD | ADD => arch::rmw_u32(Rmw::Add, p, v),
                    FETCH_AND | AND => arch::rmw_u32(Rmw::And, p, v),
                    FETCH_OR | OR => arch::rmw_u32(Rmw::Or, p, v),
                    FETCH_XOR | XOR => arch::rmw_u32(Rmw::Xor, p, v),
                    _ => return None,
                } as u64)
            }
            8 => {
                let p = p as *mut u64;
                Some(match code {
                    FETCH => arch::load_relaxed_u64(p),
                    SET => {
                        arch::store_relaxed_u64(p, value);
                        value
                    }
                    SWAP => arch::rmw_u64(Rmw::Swap, p, value),
                    COMPARE_SWAP => arch::cas_u64(p, compare, value),
                    FETCH_ADD | ADD => arch::rmw_u64(Rmw::Add, p, value),
                    FETCH_AND | AND => arch::rmw_u64(Rmw::And, p, value),
                    FETCH_OR | OR => arch::rmw_u64(Rmw::Or, p, value),
                    FETCH_XOR | XOR => arch::rmw_u64(Rmw::Xor, p, value),
                    _ => return None,
                })
            }
            _ => None,
        }
    }
}

/// Byte offsets of the header's and the counters' words, for code that addresses them through a base
/// pointer.
pub const MAGIC_OFF: usize = core::mem::offset_of!(RingHeader, magic);
/// Byte offset of [`RingHeader::slots`].
pub const SLOTS_OFF: usize = core::mem::offset_of!(RingHeader, slots);
/// Byte offset of [`RingHeader::chunk`].
pub const CHUNK_OFF: usize = core::mem::offset_of!(RingHeader, chunk);
/// Byte offset of [`RingHeader::tail`] (64: line 1).
pub const TAIL_OFF: usize = core::mem::offset_of!(RingHeader, tail);
/// Byte offset of [`RingHeader::completed`] (128: line 2).
pub const COMPLETED_OFF: usize = core::mem::offset_of!(RingHeader, completed);
/// Byte offset of [`RingHeader::consumed`] (192: line 3).
pub const CONSUMED_OFF: usize = core::mem::offset_of!(RingHeader, consumed);
/// Byte offset of [`ChannelCounters::head`].
pub const HEAD_OFF: usize = core::mem::offset_of!(ChannelCounters, head);
/// Byte offset of [`ChannelCounters::tail_seen`].
pub const TAIL_SEEN_OFF: usize = core::mem::offset_of!(ChannelCounters, tail_seen);
/// Byte offset of [`ChannelCounters::completed_seen`].
pub const COMPLETED_SEEN_OFF: usize = core::mem::offset_of!(ChannelCounters, completed_seen);
/// Byte offset of [`ChannelCounters::poller`].
pub const POLLER_OFF: usize = core::mem::offset_of!(ChannelCounters, poller);
/// Offset of the valid word inside a slot.
pub const SEQ_OFF: usize = core::mem::offset_of!(Request, seq);

/// Tickets a request takes: `max(1, ceil(len / chunk))` for a staged put of `len` bytes, else 1.
#[inline(always)]
pub const fn tickets(op: u16, len: u64, chunk: u64) -> u64 {
    if (op == op::PUT_STAGED || op == op::PUT_SIGNAL_STAGED) && chunk != 0 && len > chunk {
        len.div_ceil(chunk)
    } else {
        1
    }
}

/// What a poster was waiting for when its waiting policy gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stalled {
    /// The ring stayed full: the proxy drained nothing (ticket `seq - 1` reserved, not published).
    RingFull {
        /// The sequence number of the first reserved ticket (the ticket + 1).
        seq: u64,
        /// `RingHeader::tail` as last read.
        tail: u64,
    },
    /// The proxy did not complete request `seq` (completed stayed at `completed`).
    NotCompleted {
        /// The sequence number waited for.
        seq: u64,
        /// `ChannelCounters::completed_seen` as last read.
        completed: u64,
    },
    /// The channel names no ring (null or misaligned header, bad slot count or chunk, no counters), or
    /// a request would take more tickets than the ring has.
    NotARing,
}

/// The address of word `off` of the channel's counters.
#[inline(always)]
fn counter(ch: &Channel, off: usize) -> *mut u64 {
    (ch.counters as usize + off) as *mut u64
}

/// Reserves `k` consecutive tickets and waits (`wait(spins)` in every spin; false gives up) until the
/// ring has room for them; returns the first, `t` (steps 1 and 2 of the protocol). The caller then
/// stages and publishes (`stage_copy`, `publish`) exactly once.
///
/// # Safety
/// `ch` must describe a channel set up by the host (`rshmem::transport::proxy::ring`): its ring, staging
/// and counters mapped here and accessed only through this module's protocol while this runs. (A `ch`
/// that fails `is_valid`, or `k` of 0 or more than the slots, is refused with `Stalled::NotARing`
/// before any access.)
#[inline(always)]
pub unsafe fn reserve_with(ch: &Channel, k: u64, mut wait: impl FnMut(u64) -> bool) -> Result<u64, Stalled> {
    if !ch.is_valid() || k == 0 || k > ch.slots {
        return Err(Stalled::NotARing);
    }
    let slots = ch.slots;
    // Step 1: reserve. Relaxed is enough: only atomicity matters (unique tickets); ordering with the
    // proxy comes from the tail acquire below and the seq release.
    // SAFETY: head is an 8-aligned u64 of the counters (device memory), accessed only atomically.
    let t = unsafe { arch::rmw_u64(Rmw::Add, counter(ch, HEAD_OFF), k) };
    let end = t + k;
    // Step 2: wait until tickets t..end are free: end - tail <= slots.
    let tail_p = (ch.ring as usize + TAIL_OFF) as *const u64;
    let mut spins = 0u64;
    loop {
        // SAFETY: tail_seen is a u64 of the counters, accessed atomically; acquire pairs with the
        // release fence of the poster that raised it after acquiring the real tail.
        let seen = unsafe { arch::load_acquire_u64(counter(ch, TAIL_SEEN_OFF)) };
        if end.wrapping_sub(seen) <= slots {
            return Ok(t);
        }
        // SAFETY: tail is an 8-aligned u64 of the ring header (host memory), accessed atomically.
        let tail = unsafe { arch::load_acquire_u64(tail_p) };
        if tail > seen {
            arch::fence_acq_rel();
            // SAFETY: as above.
            unsafe { arch::rmw_u64(Rmw::Max, counter(ch, TAIL_SEEN_OFF), tail) };
        }
        if end.wrapping_sub(tail) <= slots {
            return Ok(t);
        }
        spins += 1;
        if !wait(spins) {
            return Err(Stalled::RingFull { seq: t + 1, tail });
        }
    }
}

/// Copies `len` staged bytes from `src` into the chunks of tickets `t..`, as member `rank` of a group
/// of `size` threads (each copies its share; wraps at the end of the staging area).
///
/// # Safety
/// `ch` as in `reserve_with`, with a staging area; tickets `t..t + tickets(PUT_STAGED, len, chunk)`
/// reserved by this group and not published yet; `src` readable for `len` bytes; every member of the
/// group calls with the same arguments but `rank`.
#[inline(always)]
pub unsafe fn stage_copy(ch: &Channel, t: u64, src: *const u8, len: usize, rank: u32, size: u32) {
    let first = (t & (ch.slots - 1)) as usize;
    let room = (ch.slots as usize - first) * ch.chunk as usize;
    let a = len.min(room);
    let base = ch.stage as usize as *mut u8;
    // SAFETY: chunks first.. of the staging area (slots * chunk bytes) are ours (reserved, the ring's
    // protocol); the first piece ends at the area's end, the second starts at its beginning and is
    // shorter than the reserved tickets' chunks; src is readable for len bytes.
    unsafe {
        arch::copy(base.add(first * ch.chunk as usize), src, a, rank, size);
        if len > a {
            arch::copy(base, src.add(a), len - a, rank, size);
        }
    }
}

/// Writes `req` (its `seq` is ignored) into slot `t` and publishes it (steps 3 and 4); returns its
/// sequence number `t + 1`.
///
/// # Safety
/// `ch` as in `reserve_with`; ticket `t` reserved by the caller and not published yet.
#[inline(always)]
pub unsafe fn publish(ch: &Channel, t: u64, req: &Request) -> u64 {
    // SAFETY: slot t % slots lies inside the ring (the caller maps ring_bytes(slots) bytes); we own it
    // exclusively for this lap (the protocol's ordering notes).
    unsafe {
        let slot = (ch.ring as usize + HEADER_BYTES + (t & (ch.slots - 1)) as usize * SLOT_BYTES) as *mut u64;
        // Seven unrolled word stores (a loop here became a copy through local memory on nvptx).
        // Not `bytemuck::cast_ref`: its (unreachable) size-mismatch panic path would be exported from
        // the device library as a function of its own.
        // SAFETY: Request is a Pod of exactly 64 bytes with 8-byte alignment (asserted above), so its
        // bytes are a valid [u64; 8] at the same address.
        let w: &[u64; 8] = &*(req as *const Request as *const [u64; 8]);
        core::ptr::write(slot, w[0]);
        core::ptr::write(slot.add(1), w[1]);
        core::ptr::write(slot.add(2), w[2]);
        core::ptr::write(slot.add(3), w[3]);
        core::ptr::write(slot.add(4), w[4]);
        core::ptr::write(slot.add(5), w[5]);
        core::ptr::write(slot.add(6), w[6]);
        // Step 4: publish with one release store of the valid word at system scope.
        arch::store_release_u64(slot.add(SEQ_OFF / 8), t + 1);
    }
    t + 1
}

/// Posts `req` (one ticket; its `seq` is ignored) and returns its sequence number; waits while the ring
/// is full, calling `wait(spins)` in every spin: false gives up (then `Stalled::RingFull`).
///
/// # Safety
/// As `reserve_with`.
#[inline(always)]
pub unsafe fn post_with(ch: &Channel, req: &Request, wait: impl FnMut(u64) -> bool) -> Result<u64, Stalled> {
    // SAFETY: forwarded contract; the ticket is ours and published once.
    unsafe {
        let t = reserve_with(ch, 1, wait)?;
        Ok(publish(ch, t, req))
    }
}

/// Tickets handed out so far on the channel (`head`): a `quiet` waits until they are all complete.
///
/// # Safety
/// As `reserve_with` (a valid channel).
#[inline(always)]
pub unsafe fn head(ch: &Channel) -> u64 {
    // SAFETY: forwarded contract: a u64 of the counters, accessed only atomically.
    unsafe { arch::load_acquire_u64(counter(ch, HEAD_OFF)) }
}

/// Waits until the proxy has completed request `seq` (and so every request posted before it), calling
/// `wait(spins)` in every spin: false gives up (then `Stalled::NotCompleted`). One waiter at a time
/// reads the host's `completed` (the one that takes `poller`); the others read `completed_seen` in
/// device memory (step 6).
///
/// # Safety
/// As `reserve_with`.
#[inline(always)]
pub unsafe fn wait_completed_with(ch: &Channel, seq: u64, mut wait: impl FnMut(u64) -> bool) -> Result<(), Stalled> {
    if !ch.is_valid() {
        return Err(Stalled::NotARing);
    }
    let host_p = (ch.ring as usize + COMPLETED_OFF) as *const u64;
    let mut spins = 0u64;
    loop {
        // SAFETY: completed_seen is a u64 of the counters, accessed atomically; acquire pairs with the
        // poller's release fence before it raised it.
        let c = unsafe { arch::load_acquire_u64(counter(ch, COMPLETED_SEEN_OFF)) };
        if c >= seq {
            return Ok(());
        }
        // SAFETY: poller is a u64 of the counters, accessed only atomically.
        if unsafe { arch::cas_u64(counter(ch, POLLER_OFF), 0, 1) } == 0 {
            // Acquire at system scope: the effects the proxy completed before its release store of
            // `completed` are visible to this thread's later loads, and (fence, then the raise) to
            // every waiter that reads the raised `completed_seen` with acquire.
            // SAFETY: completed is an 8-aligned u64 of the ring header, accessed atomically.
            let h = unsafe { arch::load_acquire_u64(host_p) };
            arch::fence_acq_rel();
            // SAFETY: the counters' words, accessed only atomically.
            unsafe {
                if h > c {
                    arch::rmw_u64(Rmw::Max, counter(ch, COMPLETED_SEEN_OFF), h);
                }
                arch::store_release_u64(counter(ch, POLLER_OFF), 0);
            }
            if h >= seq {
                return Ok(());
            }
        }
        spins += 1;
        if !wait(spins) {
            return Err(Stalled::NotCompleted { seq, completed: c });
        }
    }
}

/// Waits until the engine has read the source of request `seq` (`RingHeader::consumed`: a blocking
/// put that names its source returns then), through `arch::idle`.
///
/// # Safety
/// As `reserve_with` (a valid channel).
#[inline(always)]
pub unsafe fn wait_consumed(ch: &Channel, seq: u64) {
    const CALL: &str = "rshmem put (waiting for the engine to read the source)\0";
    let p = (ch.ring as usize + CONSUMED_OFF) as *const u64;
    let mut s = 0u64;
    // SAFETY: forwarded contract: an 8-aligned u64 of the header, accessed only atomically.
    while unsafe { arch::load_acquire_u64(p) } < seq {
        arch::idle(&mut s, CALL);
    }
}

/// The number of requests the proxy has completed so far (acquire), from the host's word.
///
/// # Safety
/// As `reserve_with` (a valid channel).
#[inline(always)]
pub unsafe fn completed(ch: &Channel) -> u64 {
    // SAFETY: forwarded contract: an 8-aligned u64 of the header, accessed only atomically.
    unsafe { arch::load_acquire_u64((ch.ring as usize + COMPLETED_OFF) as *const u64) }
}

#[cold]
#[inline]
fn fail_not_a_ring(call: &'static str, ch: &Channel) -> ! {
    fail(call, Problem::NotInitialized, -1, ch.ring as usize, ch.slots as usize)
}

/// Reserves `k` tickets (waiting through `arch::idle`, which enforces RSHMEM_WAIT_TIMEOUT on the CPU
/// backend, while the ring is full). A channel that is none stops the PE naming the call.
///
/// # Safety
/// As `reserve_with`.
#[inline(always)]
pub unsafe fn reserve(ch: &Channel, k: u64) -> u64 {
    const CALL: &str = "rshmem proxy post (waiting for room in the request ring)\0";
    let mut s = 0u64;
    // SAFETY: forwarded contract.
    match unsafe {
        reserve_with(ch, k, |_| {
            arch::idle(&mut s, CALL);
            true
        })
    } {
        Ok(t) => t,
        Err(_) => fail_not_a_ring("rshmem proxy post (not a request channel: null or misaligned ring, bad slot count or chunk, no counters, or a request larger than the ring)\0", ch),
    }
}

/// Posts `req` (one ticket) and returns its sequence number (see `reserve`).
///
/// # Safety
/// As `reserve_with`.
#[inline(always)]
pub unsafe fn post(ch: &Channel, req: &Request) -> u64 {
    // SAFETY: forwarded contract.
    unsafe {
        let t = reserve(ch, 1);
        publish(ch, t, req)
    }
}

/// Waits until the proxy has completed request `seq` and everything posted before it on the channel
/// (a `quiet` over the channel), through `arch::idle`.
///
/// # Safety
/// As `reserve_with`.
#[inline(always)]
pub unsafe fn wait_completed(ch: &Channel, seq: u64) {
    const CALL: &str = "rshmem proxy quiet (waiting for the proxy to complete requests)\0";
    let mut s = 0u64;
    // SAFETY: forwarded contract. The policy never gives up, so the only error is a channel that is none.
    let r = unsafe {
        wait_completed_with(ch, seq, |_| {
            arch::idle(&mut s, CALL);
            true
        })
    };
    if r.is_err() {
        fail_not_a_ring("rshmem proxy quiet (not a request channel: null or misaligned ring, bad slot count or chunk, or no counters)\0", ch)
    }
}
