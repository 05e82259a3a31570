//! This PE as the target of remote operations: what the proxy engine (and the emulated NIC's
//! responder) does to this PE's heap for a peer — writes, reads, signals and atomics, each checked
//! against what the platform backs.
//!
//! AMOs, signals and small aligned puts (1, 2, 4 or 8 bytes: `p`, barrier epochs) go through the
//! inbound queue (`rshmem_device::remote::inbound`): device threads of this PE that wait for the proxy
//! apply them, so they are atomic with the GPU's own atomics and need no CUDA call. Larger data is
//! written with the platform's copy (complete when it returns).

use crate::error::{Error, Result};
use crate::platform::backend::Backend;
use crate::platform::services::Services;
use crate::transport::wire::{Signal, SignalOp};
use rshmem_common::Backoff;
use rshmem_device::remote::inbound::{self, InboundOp};
use rshmem_device::remote::proxy::amo;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an inbound operation waits for a device thread of this PE (one waiting for the proxy polls
/// the queue every few microseconds) before the service kernel is launched for it. A launch costs a
/// few microseconds and runs beside any waiting thread (the claim decides who applies it), so a short
/// wait only saves launches when threads are waiting, and a long one is added to every remote `p` or
/// AMO on a GPU whose kernels are not waiting for the proxy.
const KICK_AFTER: Duration = Duration::from_micros(3);
/// How often the kick is repeated while the operation waits (see `inbound`).
const KICK_AGAIN: Duration = Duration::from_micros(100);
/// How long, once finalize has begun, an inbound operation may still wait for a device thread.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// This PE's heap as remote operations reach it.
pub(crate) struct Target {
    pub(crate) me: u32,
    platform: Arc<dyn Backend>,
    services: Arc<dyn Services>,
    pub(crate) heap_base: u64,
    pub(crate) heap_size: u64,
    /// The inbound queue (its host address), `inbound::queue_bytes()` bytes kept alive by the engine's
    /// channel memory.
    queue: usize,
    /// Tickets handed out in the inbound queue (held for a whole inbound operation: one at a time).
    inbound_next: Mutex<u64>,
    /// How long an operation may wait for the device threads.
    pub(crate) wait_limit: Duration,
    /// Finalize has begun: a peer's end of stream is no longer an error, and waits end soon.
    pub(crate) closing: AtomicBool,
}

impl Target {
    /// `queue` must be the host address of a zeroed inbound queue that outlives this target.
    pub(crate) fn new(me: u32, platform: Arc<dyn Backend>, services: Arc<dyn Services>, queue: usize, wait_limit: Duration) -> Target {
        Target {
            me,
            heap_base: platform.heap_base() as u64,
            heap_size: platform.heap_size() as u64,
            platform,
            services,
            queue,
            inbound_next: Mutex::new(0),
            wait_limit,
            closing: AtomicBool::new(false),
        }
    }

    /// The platform's services (copies, host-shared memory).
    pub(crate) fn services(&self) -> &dyn Services {
        &*self.services
    }

    /// How many bytes from the heap's start are backed now.
    pub(crate) fn backed(&self) -> u64 {
        self.platform.backed() as u64
    }

    /// Has operation `code` (an AMO code or `inbound::STORE`) of `width` bytes applied at heap offset
    /// `offset` of this PE through the inbound queue (`rshmem_device::remote::inbound`), and returns the
    /// old value. Device threads of this PE that wait for the proxy apply it; if none does quickly, the
    /// platform is asked to (`Services::kick_inbound`: the CPU backend runs it on this thread, a GPU
    /// launches a service kernel without waiting for it). The heap range was checked by the caller.
    pub(crate) fn inbound(&self, code: u32, width: u32, offset: u64, value: u64, compare: u64) -> Result<u64> {
        self.inbound_with(code, width, offset, value, compare, [0; 2])
    }

    /// `inbound` with the extra operands of a NIC atomic (`inbound::NIC_ATOMIC`).
    pub(crate) fn inbound_with(&self, code: u32, width: u32, offset: u64, value: u64, compare: u64, extra: [u64; 2]) -> Result<u64> {
        let mut next = self.inbound_next.lock().unwrap_or_else(|e| e.into_inner());
        let t = *next;
        *next += 1;
        let slot = (self.queue + (t % inbound::SLOTS) as usize * inbound::SLOT_BYTES) as *mut u64;
        let word = |f: usize| slot.wrapping_add(f / 8);
        // SAFETY: the slot lies in the queue (alive with the engine that owns this target); seq and
        // done are accessed only atomically, the body only by us before the release of seq (its
        // previous lap is done: we waited for it, holding `next`, before this ticket was handed out).
        unsafe {
            let op = slot as *mut InboundOp;
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).code), code);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).width), width);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).offset), offset);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).value), value);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).compare), compare);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).extra), extra);
            AtomicU64::from_ptr(word(std::mem::offset_of!(InboundOp, seq))).store(t + 1, Ordering::Release);
        }
        // SAFETY: as above.
        let done = unsafe { AtomicU64::from_ptr(word(std::mem::offset_of!(InboundOp, done))) };
        let start = Instant::now();
        let on_host = self.services.inbound_on_host();
        let mut next_kick = KICK_AFTER;
        let mut backoff = Backoff::new();
        while done.load(Ordering::Acquire) != t + 1 {
            // The CPU backend applies it here at once; a GPU gets KICK_AFTER for a waiting thread to
            // take it, then a request for a launch of the service (made by another thread: this one
            // keeps polling, and whichever of them claims the operation first applies it), and again
            // every KICK_AGAIN (a service kernel that was ending as the operation came skips it).
            if on_host || start.elapsed() > next_kick {
                self.services.kick_inbound()?;
                next_kick = start.elapsed() + KICK_AGAIN;
            }
            if self.closing.load(Ordering::Acquire) && start.elapsed() > CLOSE_WAIT {
                return Err(Error::new("inbound operation not applied before finalize"));
            }
            if start.elapsed() > self.wait_limit {
                return Err(Error::new(format!("inbound operation {t} (code {code:#x}) not applied within {:?}", self.wait_limit)));
            }
            backoff.snooze();
        }
        // SAFETY: done was published (release) after result; our acquire above orders this read.
        Ok(unsafe { std::ptr::read_volatile(word(std::mem::offset_of!(InboundOp, result))) })
    }

    /// Heap address of `[offset, offset + len)`, checked against what the platform backs (the wire
    /// checked the heap size already).
    pub(crate) fn heap_addr(&self, peer: u32, offset: u64, len: u64) -> Result<*mut u8> {
        let backed = self.backed();
        if offset.checked_add(len).is_none_or(|e| e > backed) {
            return Err(Error::new(format!(
                "PE {peer} names heap bytes [{offset:#x}, +{len:#x}) beyond the {backed:#x} bytes backed on PE {}",
                self.me
            )));
        }
        Ok((self.heap_base + offset) as *mut u8)
    }

    /// Writes `data` at heap offset `offset` of this PE (a PUT's or NIC WRITE's bytes, checked here
    /// against what is backed).
    pub(crate) fn store(&self, peer: u32, offset: u64, data: &[u8]) -> Result<()> {
        if matches!(data.len(), 1 | 2 | 4 | 8) && offset.is_multiple_of(data.len() as u64) {
            // A small aligned put (`p`, a barrier's epoch): one store by a device thread
            // (inbound queue), never torn, and no CUDA call.
            self.heap_addr(peer, offset, data.len() as u64)?;
            let mut b = [0u8; 8];
            b[..data.len()].copy_from_slice(data);
            self.inbound(inbound::STORE, data.len() as u32, offset, u64::from_le_bytes(b), 0)?;
            return Ok(());
        }
        let dst = self.heap_addr(peer, offset, data.len() as u64)?;
        // SAFETY: dst..dst+len lies in this PE's backed heap (checked); data is the frame's payload
        // in the reader's buffer, not overlapping the heap.
        unsafe { self.services.copy(dst, data.as_ptr(), data.len()) }
    }

    /// Writes `data` at heap offset `offset`, then applies `signal`: the data is complete (the copy
    /// returned) before the signal, so the signal is never visible before it.
    pub(crate) fn store_signal(&self, peer: u32, offset: u64, data: &[u8], signal: Signal) -> Result<()> {
        let dst = self.heap_addr(peer, offset, data.len() as u64)?;
        // SAFETY: as in `store`.
        unsafe { self.services.copy(dst, data.as_ptr(), data.len())? };
        std::sync::atomic::fence(Ordering::SeqCst);
        self.signal(peer, signal)
    }

    /// Reads `len` bytes at heap offset `offset` of this PE (checked against what is backed).
    pub(crate) fn load(&self, peer: u32, offset: u64, len: u64) -> Result<Vec<u8>> {
        let src = self.heap_addr(peer, offset, len)?;
        let mut data = vec![0u8; len as usize];
        // SAFETY: src..src+len lies in the backed heap (checked); data holds len bytes.
        unsafe { self.services.copy(data.as_mut_ptr(), src, len as usize)? };
        Ok(data)
    }

    /// Applies a signal update (an aligned u64: the wire checked the alignment; the range is checked
    /// here).
    pub(crate) fn signal(&self, peer: u32, s: Signal) -> Result<()> {
        self.heap_addr(peer, s.offset, 8)?;
        let code = match s.op {
            SignalOp::Set => amo::SET,
            SignalOp::Add => amo::ADD,
        };
        self.inbound(code as u32, 8, s.offset, s.value, 0)?;
        Ok(())
    }
}
