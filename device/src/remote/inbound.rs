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
//! 1. The host producer (one at a time: the proxy serializes its receivers) waits until the slot's
//!    previous lap is done (`done == t + 1 - SLOTS`, or 0 in the first lap), writes the body, then
//!    `seq = t + 1` with a release store.
//! 2. A consumer reads `c = Internal::inbound_claim` (device memory of this PE's heap), then the slot's
//!    `seq` with acquire. If it equals `c + 1`, it claims the ticket with a compare-and-swap of the
//!    claim word from `c` to `c + 1`: exactly one consumer wins. The winner applies the operation,
//!    writes `result`, then `done = c + 1` with a release store.
//! 3. The producer polls `done` (acquire) and reads `result`.
//!
//! Claims are GPU atomics on device memory (on the CPU backend, host atomics on shared memory): no CPU
//! atomic ever meets a GPU atomic on the same word. `seq`, the body and `result`/`done` each have one
//! writer.

use super::proxy::apply_amo;
use crate::arch;
use crate::state::{Field, Internal};
use crate::types::{AmoBits, Rmw};
use bytemuck::{Pod, Zeroable};
use core::mem::offset_of;

/// Slots of the queue.
pub const SLOTS: u64 = 64;
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

/// Applies every inbound operation published and not yet claimed (at most `max`); returns how many
/// this caller applied. Does nothing without a proxy (no queue) or before init.
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
    let claim = (heap + offset_of!(Internal, inbound_claim)) as *mut u64;
    // SAFETY: forwarded: the runtime's queue and heap, and the claim word of its internal area.
    unsafe { progress_at(q, heap, claim, max) }
}

/// `progress` on the queue at `q` for the heap at `heap`, with claims on `claim`.
///
/// # Safety
/// `q` must be an inbound queue of `SLOTS` slots, `heap` the heap its operations name, and `claim` the
/// queue's claim word (only ever accessed atomically), all alive and accessed as the protocol says;
/// every published operation's range lies in the heap (its producer checked).
#[inline]
pub unsafe fn progress_at(q: usize, heap: usize, claim: *mut u64, max: u32) -> u32 {
    let mut applied = 0;
    while applied < max {
        // SAFETY: claim is a u64 of this PE's heap's internal area, accessed only atomically; the slot
        // words are accessed atomically per the protocol above (seq and done), the body after the
        // acquire of seq.
        unsafe {
            let c = arch::load_acquire_u64(claim);
            let slot = (q + (c % SLOTS) as usize * SLOT_BYTES) as *mut u64;
            if arch::load_acquire_u64(slot) != c + 1 {
                return applied;
            }
            if arch::cas_u64(claim, c, c + 1) != c {
                continue; // another consumer took it; look again
            }
            let op = &*(slot as *const InboundOp);
            let (code, width, offset) = (core::ptr::read_volatile(&op.code), core::ptr::read_volatile(&op.width), core::ptr::read_volatile(&op.offset));
            let (value, compare) = (core::ptr::read_volatile(&op.value), core::ptr::read_volatile(&op.compare));
            let extra = core::ptr::read_volatile(&op.extra);
            let old = apply(code, width, (heap + offset as usize) as *mut u8, value, compare, extra);
            arch::store_relaxed_u64(slot.add(offset_of!(InboundOp, result) / 8), old);
            arch::store_release_u64(slot.add(offset_of!(InboundOp, done) / 8), c + 1);
        }
        applied += 1;
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
    /// once: the counter ends at 128,000 and the old values returned are exactly 0..128,000.
    #[test]
    fn every_operation_is_applied_once_by_racing_consumers() {
        const N: u64 = 64 * 2_000;
        let queue = vec![0u64; queue_bytes() / 8];
        let heap = vec![0u64; 4096];
        let claim = AtomicU64::new(0);
        let stop = AtomicU64::new(0);
        let (q, h) = (queue.as_ptr() as usize, heap.as_ptr() as usize);
        let mut olds = vec![false; N as usize];
        std::thread::scope(|sc| {
            for _ in 0..3 {
                sc.spawn(|| {
                    while stop.load(Ordering::Acquire) == 0 {
                        // SAFETY: the test's queue and heap, alive for the scope; claims on `claim`.
                        unsafe { progress_at(q, h, claim.as_ptr(), 4) };
                    }
                });
            }
            // Whole laps at a time (the protocol allows SLOTS outstanding; the proxy uses one), so
            // the consumers race over many ready operations at once.
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
                        assert!(old < N && !olds[old as usize], "old value {old} twice or out of range");
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
