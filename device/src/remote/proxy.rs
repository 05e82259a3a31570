//! The proxy request channel: device threads post fixed-size requests into a ring in host memory
//! (pinned and mapped on CUDA, shared memory on the CPU backend); one CPU proxy thread per PE drains it
//! (`rshmem::transport::proxy::ring`) and reports completion through a counter the posters poll.
//!
//! This file holds the ONE definition of the ring's layout (`RingHeader`, `Request`), used by the
//! device code here and by the host side, and the device-side calls `post` and `wait_completed`.
//!
//! # Layout
//! ```text
//! base + 0                      RingHeader (256 bytes: 4 cache lines)
//!   line 0: magic, slots             written once by the host before any post (posters hold a
//!                                    `RingRef` and never read them; the proxy checks them on attach)
//!   line 1: head                     next ticket; posters fetch_add it
//!   line 2: tail                     tickets < tail are drained and their slots free; the proxy stores it
//!   line 3: completed                requests 1..=completed are complete; the proxy stores it
//! base + 256 + 64 * i           Request slot i, i in 0..slots (slots: a power of two)
//! ```
//! Each counter has its own cache line so that posters hammering `head` do not slow the proxy's
//! stores of `tail`/`completed` (and the polls of those) by false sharing.
//!
//! # Protocol (ticket `t` = the value `fetch_add(head, 1)` returned; sequence number `seq = t + 1`)
//! 1. A poster reserves ticket `t` with one atomic fetch_add on `head` (system scope). Tickets are
//!    unique, so no two posters ever own the same (slot, lap).
//! 2. It waits while the ring is full: `t - tail >= slots`, with `tail` read by an acquire load.
//! 3. It writes the body of slot `t % slots` (every word but `seq`) with plain stores.
//! 4. It publishes the entry with one release store of `seq = t + 1` into the slot's `seq` word.
//! 5. The proxy, expecting ticket `t`, polls that slot's `seq` (acquire) until it reads `t + 1`, copies
//!    the body out, clears `seq` to 0, and (after the batch of consecutive published entries) stores
//!    `tail = t + 1` (release). It then hands the copy to its callback; when the callback has finished
//!    the operation it stores `completed = t + 1` (release).
//! 6. `wait_completed(seq)` polls `completed` (acquire) until `completed >= seq`. Completion is in
//!    ticket order, so this also covers every earlier request of the calling thread (its `quiet`).
//!
//! # Memory ordering, step by step
//! - **Never a torn entry.** The proxy reads the body only after its acquire load of `seq` returned
//!   `t + 1`. That value is written by exactly one store, the poster's release store in step 4, which
//!   comes after all its body stores in program order. Release/acquire at system scope
//!   (`st.release.sys` / the host's acquire load; on the CPU backend Rust's Release/Acquire, which are
//!   atomic across processes on shared memory) makes every body store visible to the proxy before it
//!   reads the body. A slot whose `seq` is anything but `0` or `t + 1` is corruption (see below), and
//!   the proxy stops with an error instead of reading it.
//! - **Never reuse of a slot a thread still writes / the proxy still reads.** Slot `i` is written in
//!   lap `k` by ticket `i + k * slots` only. That poster waits until `tail > t - slots`, i.e. until the
//!   proxy has finished ticket `t - slots` (the same slot, previous lap): the proxy stores `tail`
//!   (release) only after it has read that body and cleared `seq`, and the poster's acquire load of
//!   `tail` orders those reads and that clear before the poster's own stores into the slot. Conversely
//!   the proxy never looks at the body of ticket `t` before its `seq` is published (previous point),
//!   and after `tail` has moved past `t` it never touches the slot again until it expects `t + slots`.
//!   So a full ring makes posters wait; it never overwrites an entry.
//! - **Why the clear.** Because `seq` values differ per lap, the clear is not needed for correctness;
//!   it makes a stale or foreign value detectable: while the proxy expects ticket `t`, the slot holds
//!   0 (not yet published) or `t + 1`. Anything else means some writer broke the protocol.
//! - **Completion visible to a polling GPU thread.** The proxy stores `completed` with a release store
//!   only after the callback has finished the operation, including the effects at the target (data
//!   copied, AMO done, and for data the proxy moved into GPU memory, the copy synchronized). The
//!   poster reads it with `ld.acquire.sys`, a system-scope acquire that is not served from a stale
//!   L1 line and orders the poster's later loads (e.g. of a fetched value the proxy delivered) after
//!   it. On the CPU backend: Release/Acquire.
//! - **No doorbell.** The proxy learns of new entries by polling the `seq` word of the one slot it
//!   expects next; that word is already the publication. A doorbell (a second counter the posters bump
//!   after publishing) would add a system-scope write per request (or per batch, which needs a leader
//!   among independent threads), and it could not replace the per-slot valid words anyway: `head`
//!   counts reservations, not publications, so it cannot tell the proxy which entries are complete.
//!   Batching happens on the proxy side: it drains every consecutive published entry it finds.
//! - **No wrap-around.** Tickets and sequence numbers are u64. At 10^9 requests per second (far above
//!   what one ring sustains) a u64 lasts 584 years, so `head`, `tail` and `completed` never wrap; the
//!   code still uses wrapping subtraction for the distance `t - tail`, which is exact whenever
//!   `tail <= t` (always: `tail` counts drained tickets, and `t` is not drained yet).
//!
//! # Not done yet (GPU throughput)
//! On a GPU every post costs a PCIe atomic (`head`) and a PCIe read (`tail`). Two known remedies, for
//! when the GPU figures ask for them: a cached copy of `tail` in device memory, read first, so the
//! real `tail` is read only when the ring looks full (MSCCL++'s FIFO does this), and one `head`
//! reservation per warp for the warp's requests (warp-aggregated fetch_add).
//!
//! # Failure
//! A poster waits on two things: a free slot (the proxy must drain) and completion. `post` and
//! `wait_completed` wait through `arch::idle`, where the CPU backend enforces RSHMEM_WAIT_TIMEOUT and
//! stops the PE naming the call; `post_with` / `wait_completed_with` take the waiting policy from the
//! caller (a deadline) and return `Stalled`. A poster that gives up after reserving its ticket leaves a
//! hole the proxy will wait on forever: giving up is for failure paths that end the job.

use crate::arch;
use crate::route::fail;
use crate::types::{Problem, Rmw};
use bytemuck::{Pod, Zeroable};

/// `RingHeader::magic` of an initialized ring ("RSHMPRX" v1).
pub const RING_MAGIC: u64 = 0x5253_484d_5052_5801;
/// Bytes of the header before the first slot.
pub const HEADER_BYTES: usize = 256;
/// Bytes of one request slot.
pub const SLOT_BYTES: usize = 64;
// The device state holds a ring as a `RingRef` (its address and slot count): both are defined with
// the state, below this module, and are part of the ring's interface here.
pub use crate::state::{RingRef, MAX_SLOTS};

/// Bytes a ring of `slots` slots needs (header included).
pub const fn ring_bytes(slots: usize) -> usize {
    HEADER_BYTES + slots * SLOT_BYTES
}

/// The header of a ring. Counters are only ever accessed atomically (through the `arch` atomics on
/// the device, `AtomicU64::from_ptr` on the host); the Pod derive is for the layout, zeroing and tests.
#[repr(C, align(64))]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq)]
pub struct RingHeader {
    /// `RING_MAGIC` once the host has set the ring up.
    pub magic: u64,
    /// Number of slots: a power of two in 1..=MAX_SLOTS.
    pub slots: u64,
    pub _r0: [u64; 6],
    /// Next ticket to hand out (posters: fetch_add).
    pub head: u64,
    pub _r1: [u64; 7],
    /// Tickets below it are drained; their slots may be reused (proxy: release store).
    pub tail: u64,
    pub _r2: [u64; 7],
    /// Requests with `seq <= completed` are complete (proxy: release store after the operation).
    pub completed: u64,
    pub _r3: [u64; 7],
}

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
    /// The largest valid kind.
    pub const LAST: u16 = NOP;
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
const _: () = assert!(core::mem::offset_of!(RingHeader, head) == 64);
const _: () = assert!(core::mem::offset_of!(RingHeader, tail) == 128);
const _: () = assert!(core::mem::offset_of!(RingHeader, completed) == 192);

/// Flag in `Request::sub`: the request's result goes to its return slot (index `(seq - 1) % slots` of
/// the return area): the old value of a fetching AMO, or the `len` (1, 2, 4 or 8) bytes of a GET with
/// `src == 0` (`g`), zero-extended into `ReturnSlot::value`.
pub const SUB_RETURN: u16 = 0x8000;

/// AMO codes (`Request::sub & 0xff` of an `op::AMO`; signals use `SET`/`ADD` on 8 bytes). The same
/// numbers as the wire's `AmoOp` (the runtime asserts it), so a request is forwarded without mapping.
pub mod amo {
    pub const FETCH: u16 = 1;
    pub const SET: u16 = 2;
    pub const SWAP: u16 = 3;
    pub const COMPARE_SWAP: u16 = 4;
    pub const FETCH_ADD: u16 = 5;
    pub const ADD: u16 = 6;
    pub const FETCH_AND: u16 = 7;
    pub const AND: u16 = 8;
    pub const FETCH_OR: u16 = 9;
    pub const OR: u16 = 10;
    pub const FETCH_XOR: u16 = 11;
    pub const XOR: u16 = 12;
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
    pub value: u64,
    /// 0: free; otherwise the sequence number whose value is in `value`.
    pub seq: u64,
}
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

/// Byte offsets of the header's atomics, for code that addresses the ring through a base pointer.
pub const MAGIC_OFF: usize = core::mem::offset_of!(RingHeader, magic);
pub const SLOTS_OFF: usize = core::mem::offset_of!(RingHeader, slots);
pub const HEAD_OFF: usize = core::mem::offset_of!(RingHeader, head);
pub const TAIL_OFF: usize = core::mem::offset_of!(RingHeader, tail);
pub const COMPLETED_OFF: usize = core::mem::offset_of!(RingHeader, completed);
/// Offset of the valid word inside a slot.
pub const SEQ_OFF: usize = core::mem::offset_of!(Request, seq);

/// What a poster was waiting for when its waiting policy gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stalled {
    /// The ring stayed full: the proxy drained nothing (ticket `seq - 1` reserved, not published).
    RingFull { seq: u64, tail: u64 },
    /// The proxy did not complete request `seq` (completed stayed at `completed`).
    NotCompleted { seq: u64, completed: u64 },
    /// The `RingRef` names no ring (null or misaligned header, bad slot count).
    NotARing,
}

/// Posts `req` (its `seq` is ignored) and returns its sequence number; waits while the ring is full,
/// calling `wait(spins)` in every spin: it returns false to give up (then `Stalled::RingFull`).
///
/// # Safety
/// `ring` must describe a ring set up by the host (`rshmem::transport::proxy::ring`): its header mapped and
/// writable here, followed by `ring.slots` slots, staying mapped while this runs; the ring's words are
/// only accessed through this module's protocol. (A `ring` that fails `is_valid` is refused with
/// `Stalled::NotARing` before any access.)
#[inline(always)]
pub unsafe fn post_with(ring: RingRef, req: &Request, mut wait: impl FnMut(u64) -> bool) -> Result<u64, Stalled> {
    if !ring.is_valid() {
        return Err(Stalled::NotARing);
    }
    let slots = ring.slots;
    let base = ring.header as usize as *mut u8;
    // Step 1: reserve a ticket. Relaxed is enough: only atomicity matters (unique tickets); ordering
    // with the proxy comes from the tail acquire below and the seq release.
    // SAFETY: head is an 8-aligned u64 of the header, accessed only atomically.
    let t = unsafe { arch::rmw_u64(Rmw::Add, base.add(HEAD_OFF) as *mut u64, 1) };
    // Step 2: wait for the slot's previous lap to be drained (acquire: the proxy's reads of it and its
    // clear of seq happen before our stores below).
    let tail_p = base.wrapping_add(TAIL_OFF) as *const u64;
    let mut spins = 0u64;
    loop {
        // SAFETY: tail is an 8-aligned u64 of the header, accessed only atomically.
        let tail = unsafe { arch::load_acquire_u64(tail_p) };
        if t.wrapping_sub(tail) < slots {
            break;
        }
        spins += 1;
        if !wait(spins) {
            return Err(Stalled::RingFull { seq: t + 1, tail });
        }
    }
    // Step 3: the body (words 0..7), plain stores.
    // SAFETY: slot t % slots lies inside the ring (the caller maps ring_bytes(slots) bytes); we
    // own it exclusively for this lap (see the module's ordering notes).
    unsafe {
        let slot = base.add(HEADER_BYTES + (t & (slots - 1)) as usize * SLOT_BYTES) as *mut u64;
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
    Ok(t + 1)
}

/// Waits until the proxy has completed request `seq` (and so every request posted before it),
/// calling `wait(spins)` in every spin: it returns false to give up (then `Stalled::NotCompleted`).
///
/// # Safety
/// As `post_with`.
#[inline(always)]
pub unsafe fn wait_completed_with(ring: RingRef, seq: u64, mut wait: impl FnMut(u64) -> bool) -> Result<(), Stalled> {
    if !ring.is_valid() {
        return Err(Stalled::NotARing);
    }
    let p = (ring.header as usize as *const u8).wrapping_add(COMPLETED_OFF) as *const u64;
    let mut spins = 0u64;
    loop {
        // Acquire at system scope: the effects the proxy completed before its release store of
        // `completed` are visible to this thread's later loads.
        // SAFETY: completed is an 8-aligned u64 of the header (caller's contract), accessed atomically.
        let c = unsafe { arch::load_acquire_u64(p) };
        if c >= seq {
            return Ok(());
        }
        spins += 1;
        if !wait(spins) {
            return Err(Stalled::NotCompleted { seq, completed: c });
        }
    }
}

/// The number of requests the proxy has completed so far (acquire).
///
/// # Safety
/// As `post_with`.
#[inline(always)]
pub unsafe fn completed(ring: RingRef) -> u64 {
    // SAFETY: forwarded contract: an 8-aligned u64 of the header, accessed only atomically.
    unsafe { arch::load_acquire_u64((ring.header as usize as *const u8).add(COMPLETED_OFF) as *const u64) }
}

#[cold]
#[inline]
fn fail_not_a_ring(call: &'static str, ring: RingRef) -> ! {
    fail(call, Problem::NotInitialized, -1, ring.header as usize, ring.slots as usize)
}

/// Posts `req` and returns its sequence number, waiting (through `arch::idle`, which enforces
/// RSHMEM_WAIT_TIMEOUT on the CPU backend) while the ring is full. A `ring` that names no ring stops
/// the PE naming the call.
///
/// # Safety
/// As `post_with`.
#[inline(always)]
pub unsafe fn post(ring: RingRef, req: &Request) -> u64 {
    const CALL: &str = "rshmem proxy post (waiting for a free slot in the request ring)\0";
    let mut s = 0u64;
    // SAFETY: forwarded contract.
    match unsafe {
        post_with(ring, req, |_| {
            arch::idle(&mut s, CALL);
            true
        })
    } {
        Ok(seq) => seq,
        Err(_) => fail_not_a_ring("rshmem proxy post (not a request ring: null or misaligned header, or bad slot count)\0", ring),
    }
}

/// Waits until the proxy has completed request `seq` and everything posted before it (a `quiet` over
/// the proxy path), through `arch::idle`.
///
/// # Safety
/// As `post_with`.
#[inline(always)]
pub unsafe fn wait_completed(ring: RingRef, seq: u64) {
    const CALL: &str = "rshmem proxy quiet (waiting for the proxy to complete requests)\0";
    let mut s = 0u64;
    // SAFETY: forwarded contract. The policy never gives up, so the only error is NotARing.
    let r = unsafe {
        wait_completed_with(ring, seq, |_| {
            arch::idle(&mut s, CALL);
            true
        })
    };
    if r.is_err() {
        fail_not_a_ring("rshmem proxy quiet (not a request ring: null or misaligned header, or bad slot count)\0", ring)
    }
}
