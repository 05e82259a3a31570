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
    pub value: u64,
    pub compare: u64,
    /// The old value (AMOs), written before `done`.
    pub result: u64,
    /// `ticket + 1` once applied (consumer, release).
    pub done: u64,
    pub _r: u64,
    /// The third and fourth operands of a NIC atomic.
    pub extra: [u64; 2],
    pub _pad: [u64; 6],
}
const _: () = assert!(core::mem::size_of::<InboundOp>() == SLOT_BYTES);
const _: () = assert!(core::mem::offset_of!(InboundOp, result) == 40 && core::mem::offset_of!(InboundOp, done) == 48);

/// Bytes of the queue.
pub const fn queue_bytes() -> usize {
    SLOTS as usize * SLOT_BYTES
}

/// Applies one operation at `p` (this PE's heap). `u64::MAX` for an unknown code or width.
///
/// # Safety
/// `p` must be naturally aligned to `width` inside this PE's heap.
#[inline(always)]
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

/// `progress` on the queue at `q` for the heap at `heap`, with the cursor word `cursor` and the lock
/// word `lock`.
///
/// # Safety
/// `q` must be an inbound queue of `SLOTS` slots, `heap` the heap its operations name, and `cursor` and
/// `lock` the queue's words (only ever accessed atomically), all alive and accessed as the protocol
/// says; every published operation's range lies in the heap (its producer checked).
#[inline]
pub unsafe fn progress_at(q: usize, heap: usize, cursor: *mut u64, lock: *mut u64, max: u32) -> u32 {
    let mut applied = 0;
    // SAFETY: the lock and cursor are u64 words accessed only atomically; the slot words are accessed
    // atomically per the protocol above (seq and done), the body after the acquire of seq. Only the
    // lock holder reads the cursor's value to apply and advances it, so each ticket is applied once,
    // in order.
    unsafe {
        if arch::cas_u64(lock, 0, 1) != 0 {
            return 0;
        }
        let mut c = arch::load_acquire_u64(cursor);
        while applied < max {
            let slot = (q + (c % SLOTS) as usize * SLOT_BYTES) as *mut u64;
            if arch::load_acquire_u64(slot) != c + 1 {
                break;
            }
            let op = &*(slot as *const InboundOp);
            let (code, width, offset) = (core::ptr::read_volatile(&op.code), core::ptr::read_volatile(&op.width), core::ptr::read_volatile(&op.offset));
            let (value, compare) = (core::ptr::read_volatile(&op.value), core::ptr::read_volatile(&op.compare));
            let extra = core::ptr::read_volatile(&op.extra);
            let old = apply(code, width, (heap + offset as usize) as *mut u8, value, compare, extra);
            arch::store_relaxed_u64(slot.add(offset_of!(InboundOp, result) / 8), old);
            // Release at system scope: the operation's effect on the heap is visible before `done`,
            // so the producer that reads `done` with acquire may acknowledge it to the peer.
            arch::store_release_u64(slot.add(offset_of!(InboundOp, done) / 8), c + 1);
            c += 1;
            applied += 1;
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

    /// Three consumers (as device threads that wait) race for every published operation; a producer
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
            for _ in 0..3 {
                sc.spawn(|| {
                    while stop.load(Ordering::Acquire) == 0 {
                        // SAFETY: the test's queue and heap, alive for the scope; its cursor and lock words.
                        unsafe { progress_at(q, h, claim.as_ptr(), lock.as_ptr(), 4) };
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
