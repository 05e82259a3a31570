//! The inbound queue: small operations that other nodes' PEs sent to this PE (AMOs, signals, inline
//! puts of at most 8 bytes), applied to this PE's heap by *device threads*, not by CUDA calls.
//!
//! # Why
//! The proxy's receiver could apply them itself with a CUDA launch (AMOs must run on the GPU to be
//! atomic with its own atomics) or a CUDA copy. On 2 x H200 those did not complete while a kernel on
//! the target GPU spun waiting for the proxy and the program's main thread waited inside the driver,
//! and the job hung (bench/results/2026-11-23-h200x2-remote-pes.md). Here the receiver queues the
//! operation in pinned memory, and whichever comes first applies it:
//! - a device thread of this PE that is waiting for the proxy (quiet, a fetched value, wait_until, a
//!   barrier), from its wait loop (`progress`);
//! - the proxy's fallback: on the CPU backend the proxy thread itself (the same function, on host
//!   threads); on GPUs a launch of `rshmemi_inbound_service` if nobody took the operation quickly.
//!
//! # Layout and protocol
//! `SLOTS` [`InboundOp`]s at `DeviceState::inbound`. Ticket `t` uses slot `t % SLOTS`.
//! 1. The host producers (the proxy's receivers, one ticket at a time under a lock) wait until the
//!    slot's previous lap is done (`done == t + 1 - SLOTS`, or 0 in the first lap), write the body,
//!    then `seq = t + 1` with a release store. They do not wait for the operation before queueing the
//!    next: a receiver waits only where the order of its frames needs it (before a GET reads the heap,
//!    before a copy engine write lands, before it acknowledges a QUIET) or for a fetched value.
//! 2. A consumer takes the queue's lock (`Internal::inbound_lock`, compare-and-swap 0 -> 1; a
//!    consumer that finds it taken leaves: the holder applies), then, while slot `c % SLOTS` (`c =
//!    Internal::inbound_claim`) has `seq == c + 1` (acquire), applies it, writes `result`, stores
//!    `done = c + 1` (release) and `inbound_claim = c + 1`; then releases the lock. So operations are
//!    applied one at a time, in ticket order: two stores to one word from one peer land in the order
//!    it sent them, as they would if applied synchronously.
//! 3. The producer that needs the result (or the completion) polls `done` (acquire).
//!
//! The lock and the cursor are GPU atomics on device memory (on the CPU backend, host atomics on shared
//! memory): no CPU atomic ever meets a GPU atomic on the same word. `seq`, the body and `result`/`done`
//! each have one writer at a time.

use super::proxy::apply_amo;
use crate::arch;
use crate::state::{Field, Internal};
use crate::types::{AmoBits, Rmw};
use bytemuck::{Pod, Zeroable};
use core::mem::offset_of;

/// Slots of the queue: how many operations the proxy's receivers may have queued and not yet applied.
pub const SLOTS: u64 = 1024;
/// `InboundOp::code` of a plain store of `width` (1, 2, 4 or 8) bytes of `value` (an inline put).
pub const STORE: u32 = 0x100;
/// `InboundOp::code` of an NIC atomic (the IBGDA transport's emulated NIC, as a ConnectX executes it):
/// `NIC_ATOMIC | kind`, with `kind` and the operands `[value, compare, extra[0], extra[1]]` of
/// `rshmem_ibgda::Atomic::encode`.
pub const NIC_ATOMIC: u32 = 0x200;
/// Bytes of one slot.
pub const SLOT_BYTES: usize = 128;

/// One queued operation: 128 bytes (two cache lines; the first holds everything but the extra NIC
/// atomic operands).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct InboundOp {
    /// `ticket + 1` once published (host, release).
    pub seq: u64,
    /// An AMO code (`proxy::amo`) or `STORE`.
    pub code: u32,
    /// Bytes: 4 or 8 for AMOs, 1, 2, 4 or 8 for a store.
    pub width: u32,
    /// Heap offset (naturally aligned to `width`; the proxy checked it against the heap).
    pub offset: u64,
    /// The store's value, the AMO's operand, or a NIC atomic's first operand.
    pub value: u64,
    /// A compare-and-swap's compare value, or a NIC atomic's second operand.
    pub compare: u64,
    /// The old value (AMOs), written before `done`.
    pub result: u64,
    /// `ticket + 1` once applied (consumer, release).
    pub done: u64,
    /// Reserved (0): the end of the first cache line.
    pub _r: u64,
    /// The third and fourth operands of a NIC atomic.
    pub extra: [u64; 2],
    /// Padding to `SLOT_BYTES` (0).
    pub _pad: [u64; 6],
}
const _: () = assert!(core::mem::size_of::<InboundOp>() == SLOT_BYTES);
const _: () = assert!(core::mem::offset_of!(InboundOp, result) == 40 && core::mem::offset_of!(InboundOp, done) == 48);
// `progress_at` reads `code` and `width` as one little-endian u64 (code in its low half).
const _: () = assert!(core::mem::offset_of!(InboundOp, code) == 8 && core::mem::offset_of!(InboundOp, width) == 12 && cfg!(target_endian = "little"));

/// Bytes of the queue.
pub const fn queue_bytes() -> usize {
    SLOTS as usize * SLOT_BYTES
}

/// Applies one operation at `p` (this PE's heap). `u64::MAX` for an unknown code or width.
///
/// # Safety
/// `p` must be naturally aligned to `width` inside this PE's heap.
// Not inlined: `progress_at` calls it from each of its unrolled batch positions, whose operands stay
// in registers; eight inlined copies of every AMO would only grow the service kernel.
#[inline(never)]
unsafe fn apply(code: u32, width: u32, p: *mut u8, value: u64, compare: u64, extra: [u64; 2]) -> u64 {
    if code & !0xff == NIC_ATOMIC {
        let Some(a) = rshmem_ibgda::Atomic::decode(code as u8, [value, compare, extra[0], extra[1]]) else {
            return u64::MAX;
        };
        // SAFETY: forwarded contract; the width is the atomic's own (checked by the producer).
        return unsafe { apply_nic_atomic(a, p) };
    }
    if code == STORE {
        // SAFETY: the caller's contract; each width is one naturally aligned store.
        unsafe {
            match width {
                1 => core::ptr::write_volatile(p, value as u8),
                2 => core::ptr::write_volatile(p as *mut u16, value as u16),
                4 => arch::store_relaxed_u32(p as *mut u32, value as u32),
                8 => arch::store_relaxed_u64(p as *mut u64, value),
                _ => return u64::MAX,
            }
        }
        return value;
    }
    // SAFETY: forwarded contract.
    unsafe { apply_amo(code as u16, width, p, value, compare) }.unwrap_or(u64::MAX)
}

/// Executes NIC atomic `a` on the word at `p` as the NIC does (`Atomic::apply`), atomically with this
/// PE's own device atomics on it: a 64-bit fetch-add is one atomic add, everything else a
/// compare-and-swap loop. Returns the old value.
///
/// # Safety
/// `p` must be aligned to `a.bytes()` inside this PE's heap, accessed only atomically meanwhile.
#[inline(always)]
unsafe fn apply_nic_atomic(a: rshmem_ibgda::Atomic, p: *mut u8) -> u64 {
    // SAFETY: the caller's contract (aligned, live, atomic accesses only).
    unsafe {
        match a {
            rshmem_ibgda::Atomic::Fa64 { add } => arch::rmw_u64(Rmw::Add, p as *mut u64, add),
            _ if a.bytes() == 4 => cas_apply(p as *mut u32, a),
            _ => cas_apply(p as *mut u64, a),
        }
    }
}

/// `a.apply` on the word at `p` in a compare-and-swap loop; the old value.
///
/// # Safety
/// As [`apply_nic_atomic`], `p` of `B`'s width.
#[inline(always)]
unsafe fn cas_apply<B: AmoBits>(p: *mut B, a: rshmem_ibgda::Atomic) -> u64 {
    // SAFETY: the caller's contract.
    unsafe {
        let mut old = B::load(p);
        loop {
            let seen = B::cas(p, old, B::from_u64(a.apply(old.to_u64())));
            if seen.to_u64() == old.to_u64() {
                return old.to_u64();
            }
            old = seen;
        }
    }
}

/// Applies every inbound operation published and not yet applied (at most `max`) if no other consumer
/// is applying them; returns how many this caller applied. Does nothing without a proxy (no queue) or
/// before init.
///
/// # Safety
/// rshmem must be initialized (the queue and the heap are the runtime's, alive until finalize).
#[cold]
#[inline]
pub unsafe fn progress(max: u32) -> u32 {
    let q = arch::state_u64(Field::INBOUND) as usize;
    let heap = arch::state_u64(Field::HEAP_BASE) as usize;
    if q == 0 || heap == 0 {
        return 0;
    }
    let cursor = (heap + offset_of!(Internal, inbound_claim)) as *mut u64;
    let lock = (heap + offset_of!(Internal, inbound_lock)) as *mut u64;
    // SAFETY: forwarded: the runtime's queue and heap, and the cursor and lock words of its internal
    // area.
    unsafe { progress_at(q, heap, cursor, lock, max) }
}

/// Operations one pass of a consumer takes at a time (`progress_at`): their valid words are read
/// together, then their bodies together, and one fence publishes all their `done` words. On a GPU each
/// of those steps is one round trip over PCIe to the pinned queue, so a batch costs about what one
/// operation cost when each was read, applied and published on its own (the 8-byte put rate of 2 x
/// H200 was 0.126 M/s that way: bench/results/2026-11-26-h200x2-remote-engine.md).
pub const BATCH: usize = 8;

/// Runs `$body` once for each index listed, with `$i` bound to it as a constant (the indices must
/// be `0..BATCH`): the batch loops of `progress_at`, unrolled by hand so that their arrays stay in
/// registers on nvptx (a loop LLVM left rolled kept them in local memory, and every load's result was
/// stored there before the next load was issued).
macro_rules! unrolled {
    ($i:ident in [$($n:literal)*] $body:block) => {
        $( { const _: () = assert!($n < BATCH); let $i: usize = $n; $body } )*
    };
}

/// `progress` on the queue at `q` for the heap at `heap`, with the cursor word `cursor` and the lock
/// word `lock`.
///
/// One pass over a batch of up to [`BATCH`] operations, ticket `c` first:
/// 1. relaxed loads of the batch's `seq` words, all issued before any is tested; the batch is the
///    prefix of slots whose `seq` is their ticket + 1 (a producer publishes in ticket order, but a
///    later slot may be seen before an earlier one: only the prefix counts);
/// 2. an acquire fence (with the loads of step 1: the acquire pattern), then the bodies' loads, all
///    issued before the first operation is applied;
/// 3. the operations applied one after another in ticket order (two to one word land in the order
///    sent) and each `result` stored;
/// 4. a release fence (the effects and results before what follows), then every `done` word stored,
///    relaxed (with the fence: the release pattern; a producer reads `done` with acquire).
///
/// # Safety
/// `q` must be an inbound queue of `SLOTS` slots, `heap` the heap its operations name, and `cursor` and
/// `lock` the queue's words (only ever accessed atomically), all alive and accessed as the protocol
/// says; every published operation's range lies in the heap (its producer checked).
#[inline]
pub unsafe fn progress_at(q: usize, heap: usize, cursor: *mut u64, lock: *mut u64, max: u32) -> u32 {
    let slot_of = |t: u64| (q + (t % SLOTS) as usize * SLOT_BYTES) as *mut u64;
    let mut applied = 0u32;
    // SAFETY: the lock and cursor are u64 words accessed only atomically; the slot words are accessed
    // atomically per the protocol above (seq and done), the body after the acquire fence that follows
    // the load of its seq. Only the lock holder reads the cursor's value to apply and advances it, so
    // each ticket is applied once, in order.
    unsafe {
        if arch::cas_u64(lock, 0, 1) != 0 {
            return 0;
        }
        let mut c = arch::load_acquire_u64(cursor);
        while applied < max {
            let want = (max - applied).min(BATCH as u32) as usize;
            // Step 1. Unrolled (constant indices keep the arrays in registers): loads that do not
            // depend on each other, which a GPU thread has in flight all at once.
            let mut seq = [0u64; BATCH];
            unrolled!(i in [0 1 2 3 4 5 6 7] {
                if i < want {
                    seq[i] = arch::load_relaxed_u64(slot_of(c + i as u64));
                }
            });
            let mut k = 0usize;
            unrolled!(i in [0 1 2 3 4 5 6 7] {
                if k == i && i < want && seq[i] == c + i as u64 + 1 {
                    k += 1;
                }
            });
            if k == 0 {
                break;
            }
            arch::fence_acq_rel();
            // Step 2. The first line of each body (code and width as one word, offset, value,
            // compare), relaxed loads (atomic, so a stale slot beyond the batch is never read as a
            // data race on the CPU backend); a NIC atomic's extra operands are read when it is applied.
            let mut body = [[0u64; 4]; BATCH];
            unrolled!(i in [0 1 2 3 4 5 6 7] {
                if i < k {
                    let w = slot_of(c + i as u64);
                    body[i] = [
                        arch::load_relaxed_u64(w.add(offset_of!(InboundOp, code) / 8)),
                        arch::load_relaxed_u64(w.add(offset_of!(InboundOp, offset) / 8)),
                        arch::load_relaxed_u64(w.add(offset_of!(InboundOp, value) / 8)),
                        arch::load_relaxed_u64(w.add(offset_of!(InboundOp, compare) / 8)),
                    ];
                }
            });
            // Step 3.
            unrolled!(i in [0 1 2 3 4 5 6 7] {
                if i < k {
                    let (w, b) = (slot_of(c + i as u64), body[i]);
                    // `code` and `width` are adjacent u32s (asserted above): one little-endian word.
                    let (code, width) = (b[0] as u32, (b[0] >> 32) as u32);
                    let extra = if code & !0xff == NIC_ATOMIC {
                        let x = w.add(offset_of!(InboundOp, extra) / 8);
                        [arch::load_relaxed_u64(x), arch::load_relaxed_u64(x.add(1))]
                    } else {
                        [0; 2]
                    };
                    let old = apply(code, width, (heap + b[1] as usize) as *mut u8, b[2], b[3], extra);
                    arch::store_relaxed_u64(w.add(offset_of!(InboundOp, result) / 8), old);
                }
            });
            // Step 4. Release at system scope: every operation's effect on the heap (and its result)
            // is visible before its `done`, so the producer that reads `done` with acquire may
            // acknowledge it to the peer.
            arch::fence_acq_rel();
            unrolled!(i in [0 1 2 3 4 5 6 7] {
                if i < k {
                    arch::store_relaxed_u64(slot_of(c + i as u64).add(offset_of!(InboundOp, done) / 8), c + i as u64 + 1);
                }
            });
            c += k as u64;
            applied += k as u32;
            if k < want {
                break;
            }
        }
        arch::store_release_u64(cursor, c);
        arch::store_release_u64(lock, 0);
    }
    applied
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicU64, Ordering};
    extern crate std;
    use std::vec;

    /// Three consumers (as device threads that wait, taking 1, up to 5 and all ready operations per pass) race for every published operation; a producer
    /// publishes 128,000 `fetch_add(1)`s, a whole lap of the queue at a time. Each is applied exactly
    /// once and in ticket order: the counter ends at 128,000 and operation `t` returns old value `t`.
    #[test]
    fn every_operation_is_applied_once_by_racing_consumers() {
        const N: u64 = SLOTS * 125;
        let queue = vec![0u64; queue_bytes() / 8];
        let heap = vec![0u64; 4096];
        let claim = AtomicU64::new(0);
        let lock = AtomicU64::new(0);
        let stop = AtomicU64::new(0);
        let (q, h) = (queue.as_ptr() as usize, heap.as_ptr() as usize);
        let mut olds = vec![false; N as usize];
        std::thread::scope(|sc| {
            // One consumer at a time (a waiting thread's `progress(8)`), a partial batch, and the
            // service kernel's "everything".
            for max in [1u32, 5, u32::MAX] {
                let (claim, lock, stop) = (&claim, &lock, &stop);
                sc.spawn(move || {
                    while stop.load(Ordering::Acquire) == 0 {
                        // SAFETY: the test's queue and heap, alive for the scope; its cursor and lock words.
                        unsafe { progress_at(q, h, claim.as_ptr(), lock.as_ptr(), max) };
                    }
                });
            }
            // Whole laps at a time (the protocol allows SLOTS outstanding), so the consumers race over
            // many ready operations at once.
            for lap in 0..N / SLOTS {
                for t in lap * SLOTS..(lap + 1) * SLOTS {
                    let slot = (q + (t % SLOTS) as usize * SLOT_BYTES) as *mut u64;
                    // SAFETY: the slot lies in the queue; the protocol's producer steps, with the
                    // previous lap done (waited for below).
                    unsafe {
                        let op = slot as *mut InboundOp;
                        core::ptr::write_volatile(core::ptr::addr_of_mut!((*op).code), crate::remote::proxy::amo::FETCH_ADD as u32);
                        core::ptr::write_volatile(core::ptr::addr_of_mut!((*op).width), 8);
                        core::ptr::write_volatile(core::ptr::addr_of_mut!((*op).offset), 1024);
                        core::ptr::write_volatile(core::ptr::addr_of_mut!((*op).value), 1);
                        AtomicU64::from_ptr(slot).store(t + 1, Ordering::Release);
                    }
                }
                for t in lap * SLOTS..(lap + 1) * SLOTS {
                    let slot = (q + (t % SLOTS) as usize * SLOT_BYTES) as *mut u64;
                    // SAFETY: as above; done and result are read after the consumer's release.
                    unsafe {
                        let done = AtomicU64::from_ptr(slot.add(6));
                        let start = std::time::Instant::now();
                        while done.load(Ordering::Acquire) != t + 1 {
                            if start.elapsed() > std::time::Duration::from_secs(10) {
                                stop.store(1, Ordering::Release);
                                panic!("operation {t} was never applied (a claim skipped it?)");
                            }
                            std::thread::yield_now();
                        }
                        let old = core::ptr::read_volatile(slot.add(5));
                        assert_eq!(old, t, "operation {t} applied out of order");
                        assert!(!olds[old as usize], "old value {old} twice");
                        olds[old as usize] = true;
                    }
                }
            }
            stop.store(1, Ordering::Release);
        });
        // SAFETY: heap word 128 (offset 1024) is a u64 of the vector; the consumers are joined.
        assert_eq!(unsafe { core::ptr::read_volatile(heap.as_ptr().add(128)) }, N);
        assert_eq!(claim.load(Ordering::Relaxed), N);
        assert!(olds.iter().all(|&b| b));
    }
}
