//! Lanes: the connections of the remote engine, `L` between every pair of PEs on different nodes.
//!
//! A `Lane` owns one socket and, in one host-shared allocation (pinned and mapped into the GPU on
//! CUDA), its receive ring, its reply ring and their control words (`rshmem_device::remote::lane`):
//! ```text
//! [ LaneCtl 256 B | receive ring: R bytes | reply ring: Q bytes ]
//! ```
//! Its thread (`Lane::run`) does everything the lane needs, without ever blocking on the GPU:
//! 1. **Receive**: reads the socket straight into the receive ring (no other copy), checks every whole
//!    frame in place (`wire::check`; a NIC frame's key through the NIC hooks, rewritten to the heap
//!    offset; a GET_DATA's tag rewritten to its destination; a value of at most 8 bytes delivered to
//!    its return slot at once), then publishes `written` with one release store. A frame that would
//!    cross the ring's end moves to its start behind a WRAP.
//! 2. **Apply**: on the CPU backend the lane's thread applies the new frames itself
//!    (`remote::lane::apply`, the GPU's code); on a GPU the apply kernel does (`target::Apply`).
//! 3. **Acknowledge**: when `applied` passes a request, the peer is sent a cumulative ACK(count), with
//!    the replies the apply code wrote before it (GET data, fetched values, NIC answers).
//! 4. **Send**: frames the sender queued (`Out`) leave with one gathered `sendmsg` per burst, from
//!    where they are (the request ring's staging chunks, the reply ring), without copies.
//!
//! # The requester's side of a lane
//! The sender counts the requests it queued (`issued`); the peer's ACKs set `acked`. The answers to
//! GETs and fetching AMOs come back in the order their requests went (the peer applies in order), so
//! the lane checks each against the oldest one it awaits (`Expect`). An ACK that covers a GET whose
//! data is still in the ring, not yet copied to its destination, takes effect once `applied` passes
//! the data: a quiet never returns before a GET's bytes are in place.

use crate::error::{Error, Result};
use crate::platform::services::HostShared;
use crate::transport::wire::{self, Frames};
use rshmem_device::remote::lane::{LaneCtl, CTL_BYTES, REPLY_SENT_OFF};
use std::collections::VecDeque;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

pub(crate) mod thread;

/// How long a lane's thread sleeps at most between looks at its state while nothing happens.
const IDLE_POLL: Duration = Duration::from_millis(20);
/// How long a lane whose GPU work is pending sleeps between looks at `applied`.
const GPU_POLL: Duration = Duration::from_micros(20);
/// Most bytes the sender sends on a lane itself (`Lane::kick`); a larger queue is the lane thread's,
/// so that the lanes send in parallel while the sender drains on (one thread's copies into the kernel
/// capped every transfer at about one TCP stream: 4.0-4.8 GB/s for 1-4 MiB puts on an H100 host whose
/// 8 loopback streams reach 30 GB/s).
pub(crate) const INLINE_SEND_BYTES: usize = 64 << 10;
/// Most iovecs one `sendmsg` gets (the kernel's limit is IOV_MAX, 1024).
const MAX_IOV: usize = 512;
/// How long a frame may stay half received (the peer sent its first bytes, then nothing more).
const PARTIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long finalize waits for a peer's CLOSE on a lane.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How long a PE keeps running after a peer's lane ended without CLOSE while nothing was in flight
/// (the peer most often reported an error and exited; this PE may be about to report its own).
const GONE_GRACE: Duration = Duration::from_secs(4);

/// One piece of what a lane sends, in order.
enum Part {
    /// Bytes of `Out::own` (absolute positions: see `Out::base`).
    Own { at: usize, len: usize },
    /// Bytes elsewhere: the request ring's staging chunks of ticket `ticket`, valid until the ring's
    /// tail passes it.
    Ext { ptr: *const u8, len: usize, ticket: u64 },
    /// Bytes of a source the engine must read first (a put that names its source): copied into the
    /// lane's bounce buffer when it comes to the front, then sent from there. `ticket`: the request's.
    Copy { src: u64, len: usize, ticket: u64 },
    /// Bytes of the reply ring; `end` is the reply stream position after them.
    Reply { ptr: *const u8, len: usize, end: u64 },
    /// Bytes of a named source in host memory, sent from where they are (the CPU backend: every
    /// source is host memory); `ticket`: the request's, whose `consumed` waits for them.
    Src { ptr: *const u8, len: usize, ticket: u64 },
}

impl Part {
    /// Its bytes.
    fn len(&self) -> usize {
        match *self {
            Part::Own { len, .. } | Part::Ext { len, .. } | Part::Copy { len, .. } | Part::Reply { len, .. } | Part::Src { len, .. } => len,
        }
    }
}

/// A PUT whose head is queued and whose payload may still grow (the next put to the bytes after it,
/// from any thread, joins it): patched in place until something else is queued or the queue is sent.
struct OpenPut {
    /// Where its head is in `own` (absolute).
    head: usize,
    /// Its heap range so far.
    offset: u64,
    len: u32,
}

/// What a lane has to send: built by the sender (and the lane's thread, for ACKs and replies), sent
/// by whoever holds it (`Lane::flush`).
pub(crate) struct Out {
    own: Vec<u8>,
    /// Absolute position of `own[0]`: bytes before it were sent and dropped.
    base: usize,
    parts: VecDeque<Part>,
    /// Bytes of `parts[0]` already sent.
    first_sent: usize,
    open: Option<OpenPut>,
    /// The bounce buffer holds the copy of the front `Copy` part.
    copied: bool,
}

// SAFETY: the external parts are addresses of memory the engine keeps valid until they are sent (the
// request ring's chunks until its tail passes their ticket, the reply ring until `reply_sent` passes
// them, named sources until `consumed` passes their ticket); only the holder of the lane's lock reads
// them.
unsafe impl Send for Out {}

impl Out {
    pub(crate) fn new() -> Out {
        Out { own: Vec::with_capacity(64 << 10), base: 0, parts: VecDeque::new(), first_sent: 0, open: None, copied: false }
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.parts.is_empty() && self.open.is_none()
    }

    /// Whether more than `limit` bytes are queued (counting stops there).
    pub(crate) fn holds_more_than(&self, limit: usize) -> bool {
        let mut n = self.open.as_ref().map_or(0, |o| o.len as usize);
        for p in &self.parts {
            n += p.len();
            if n > limit {
                return true;
            }
        }
        n > limit
    }

    fn push_own(&mut self, bytes: &[u8]) {
        let at = self.base + self.own.len();
        self.own.extend_from_slice(bytes);
        match self.parts.back_mut() {
            Some(Part::Own { at: a, len }) if *a + *len == at => *len += bytes.len(),
            _ => self.parts.push_back(Part::Own { at, len: bytes.len() }),
        }
    }

    /// Ends the open PUT: its padding.
    fn close_put(&mut self) {
        if let Some(o) = self.open.take() {
            self.push_own(wire::pad(o.len as usize));
        }
    }

    /// Moves everything `other` holds to the end of this queue (the sender's frames of a batch).
    pub(crate) fn append(&mut self, other: &mut Out) {
        self.close_put();
        other.close_put();
        let shift = self.base + self.own.len();
        let from = other.base;
        self.own.extend_from_slice(&other.own);
        for p in other.parts.drain(..) {
            self.parts.push_back(match p {
                Part::Own { at, len } => Part::Own { at: at - from + shift, len },
                p => p,
            });
        }
        other.own.clear();
        other.base = 0;
        other.first_sent = 0;
    }

    /// Queues whole frames of our own (copied).
    pub(crate) fn frames(&mut self, bytes: &[u8]) {
        self.close_put();
        self.push_own(bytes);
    }

    /// Queues a PUT of `len` bytes at heap offset `offset` whose payload is `payload` (a piece of the
    /// request ring's staging chunks of `ticket`, or a named source to copy when `copy`): merged into
    /// the open PUT when it continues it. Returns whether it opened a new frame.
    pub(crate) fn put(&mut self, offset: u64, payload: Payload, len: u32) -> bool {
        if let Some(o) = &mut self.open {
            if o.offset + o.len as u64 == offset && o.len + len <= wire::MAX_PAYLOAD && !payload.is_copy() {
                o.len += len;
                let h = o.head - self.base;
                self.own[h + 4..h + 8].copy_from_slice(&o.len.to_le_bytes());
                self.push_payload(payload, len);
                return false;
            }
        }
        self.close_put();
        let head = self.base + self.own.len();
        let mut h = Vec::with_capacity(16);
        Frames::put_head(&mut h, offset, len);
        self.push_own(&h);
        self.push_payload(payload, len);
        if payload.is_copy() {
            // A copied payload is sent whole from the bounce buffer: nothing joins it.
            self.push_own(wire::pad(len as usize));
        } else {
            self.open = Some(OpenPut { head, offset, len });
        }
        true
    }

    fn push_payload(&mut self, p: Payload, len: u32) {
        let len = len as usize;
        match p {
            Payload::Inline(b) => self.push_own(&b[..len]),
            Payload::Staged { ptr, ticket } => match self.parts.back_mut() {
                // The bytes continue the last part's: one part, named by its older ticket (the ring's
                // tail must not pass it until all of it is sent).
                Some(Part::Ext { ptr: q, len: l, ticket: t }) if q.wrapping_add(*l) == ptr && *t <= ticket => *l += len,
                _ => self.parts.push_back(Part::Ext { ptr, len, ticket }),
            },
            Payload::Copy { src, ticket } => self.parts.push_back(Part::Copy { src, len, ticket }),
            Payload::Src { ptr, ticket } => match self.parts.back_mut() {
                Some(Part::Src { ptr: q, len: l, ticket: t }) if q.wrapping_add(*l) == ptr && *t <= ticket => *l += len,
                _ => self.parts.push_back(Part::Src { ptr, len, ticket }),
            },
        }
    }

    /// Queues reply bytes `[ptr, ptr + len)` ending at reply stream position `end`.
    fn reply(&mut self, ptr: *const u8, len: usize, end: u64) {
        self.close_put();
        self.parts.push_back(Part::Reply { ptr, len, end });
    }

    /// The oldest request-ring ticket whose staged bytes are still queued (u64::MAX: none: the ring's
    /// tail may pass every ticket), and the oldest one whose named source was not read yet (`consumed`
    /// waits for it). Tickets are queued in order, so each is the first part of its kind.
    fn oldest(&self) -> (u64, u64) {
        let mut ext = u64::MAX;
        let mut copy = u64::MAX;
        for (i, p) in self.parts.iter().enumerate() {
            match *p {
                Part::Ext { ticket, .. } if ext == u64::MAX => ext = ticket,
                Part::Src { ticket, .. } if copy == u64::MAX => copy = ticket,
                Part::Copy { ticket, .. } if copy == u64::MAX && !(i == 0 && self.copied) => copy = ticket,
                _ => {}
            }
            if ext != u64::MAX && copy != u64::MAX {
                break;
            }
        }
        (ext, copy)
    }
}

/// The payload of a queued PUT.
#[derive(Clone, Copy)]
pub(crate) enum Payload {
    /// At most 16 bytes, copied.
    Inline([u8; 16]),
    /// In the request ring's staging chunks of `ticket`.
    Staged {
        /// Where.
        ptr: *const u8,
        /// The ticket whose chunks hold it.
        ticket: u64,
    },
    /// At a source the engine reads when it sends (a DMA on GPUs).
    Copy {
        /// The address.
        src: u64,
        /// The request's ticket.
        ticket: u64,
    },
    /// At a source in host memory, sent from there (the CPU backend).
    Src {
        /// Where.
        ptr: *const u8,
        /// The request's ticket.
        ticket: u64,
    },
}

impl Payload {
    fn is_copy(&self) -> bool {
        matches!(self, Payload::Copy { .. })
    }
}

/// An answer this lane awaits from its peer, oldest first.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Expect {
    /// GET data: `len` bytes, to `dst`, or (`ret`) to the return slot of request `seq`.
    Get {
        /// The tag the GET carried.
        tag: u64,
        /// Bytes asked for.
        len: u32,
        /// The local destination (0 with `ret`).
        dst: u64,
        /// Deliver to the return slot of request `seq`.
        ret: bool,
        /// The request's sequence number.
        seq: u64,
    },
    /// A fetched value, to the return slot of request `seq` (`ret`) or to `dst` (`width` bytes).
    Fetch {
        /// The tag the AMO carried.
        tag: u32,
        /// To the return slot.
        ret: bool,
        /// Else to this address.
        dst: u64,
        /// The AMO's width.
        width: u32,
        /// The request's sequence number.
        seq: u64,
    },
}

impl Expect {
    /// Reply bytes this answer takes in the peer's reply ring (its credit), with room for a wrap.
    pub(crate) fn credit(&self) -> u64 {
        match self {
            Expect::Get { len, .. } => 2 * (16 + wire::pad16(*len as usize) as u64),
            Expect::Fetch { .. } => 2 * 16,
        }
    }
}

/// One lane: a connection to a peer PE and its rings.
pub(crate) struct Lane {
    /// The peer PE.
    pub(crate) peer: u32,
    /// This lane's index among the peer's lanes, and their count.
    pub(crate) index: u32,
    pub(crate) count: u32,
    sock: TcpStream,
    /// The peer's address (read at the start: a failed socket no longer knows it).
    addr: Option<std::net::SocketAddr>,
    /// Control block, receive ring, reply ring.
    mem: HostShared,
    pub(crate) ring_bytes: u64,
    pub(crate) reply_bytes: u64,
    /// What to send.
    pub(crate) out: Mutex<Out>,
    /// Wakes the lane's thread: work was queued that the queuing thread could not send at once.
    wake: EventFd,
    /// Requests queued on this lane (the sender's count), and how many the peer acknowledged.
    pub(crate) issued: AtomicU64,
    pub(crate) acked: AtomicU64,
    /// Reply bytes of the peer's ring our awaited answers may take (see `Expect::credit`), and those
    /// whose answers arrived.
    pub(crate) credit_used: AtomicU64,
    pub(crate) credit_back: AtomicU64,
    /// Answers awaited, oldest first.
    pub(crate) expect: Mutex<VecDeque<Expect>>,
    /// The oldest request-ring ticket still queued here (u64::MAX: none), and the oldest one whose
    /// named source was not read yet.
    pub(crate) oldest_ticket: AtomicU64,
    pub(crate) oldest_copy: AtomicU64,
    /// The bounce buffer for named sources (one frame's payload).
    bounce: HostShared,
    /// A named source's bytes were sent (`consumed` may move).
    src_sent: AtomicBool,
    /// The peer sent CLOSE; the lane ended (its thread left).
    pub(crate) peer_closed: AtomicBool,
    pub(crate) ended: AtomicBool,
}

/// An eventfd: a counter the lane's thread polls beside its socket.
struct EventFd(std::os::fd::OwnedFd);

impl EventFd {
    fn new() -> Result<EventFd> {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::os("proxy: eventfd", std::io::Error::last_os_error()));
        }
        // SAFETY: a fresh fd we own.
        Ok(EventFd(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }))
    }
    fn signal(&self) {
        let one = 1u64;
        // SAFETY: our eventfd; 8 bytes from a live u64.
        unsafe { libc::write(self.0.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }
    fn clear(&self) {
        let mut v = 0u64;
        // SAFETY: our eventfd; 8 bytes into a live u64.
        unsafe { libc::read(self.0.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    }
}

impl Lane {
    /// A lane to `peer` (lane `index` of `count`) over `sock` (non-blocking), with `mem` as its
    /// control block and rings (`CTL_BYTES + ring + reply` bytes, zeroed) and `bounce` for named
    /// sources.
    #[allow(clippy::too_many_arguments)] // a lane's identity, socket and memory: all are needed, none has a default
    pub(crate) fn new(peer: u32, index: u32, count: u32, sock: TcpStream, mem: HostShared, ring_bytes: u64, reply_bytes: u64, bounce: HostShared) -> Result<Lane> {
        debug_assert!(mem.len() >= CTL_BYTES + (ring_bytes + reply_bytes) as usize);
        let least = Lane::least_ring();
        if ring_bytes < least || reply_bytes < least || !ring_bytes.is_power_of_two() || !reply_bytes.is_power_of_two() {
            return Err(Error::new(format!("proxy: lane rings of {ring_bytes} and {reply_bytes} bytes (powers of two of at least {least}: two frames of the most payload)")));
        }
        Ok(Lane {
            addr: sock.peer_addr().ok(),
            peer,
            index,
            count,
            sock,
            mem,
            ring_bytes,
            reply_bytes,
            out: Mutex::new(Out::new()),
            wake: EventFd::new()?,
            issued: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            credit_used: AtomicU64::new(0),
            credit_back: AtomicU64::new(0),
            expect: Mutex::new(VecDeque::new()),
            oldest_ticket: AtomicU64::new(u64::MAX),
            oldest_copy: AtomicU64::new(u64::MAX),
            bounce,
            src_sent: AtomicBool::new(false),
            peer_closed: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        })
    }

    /// The smallest ring a lane takes: two of the largest frames (one may wait to wrap while the other
    /// is applied).
    pub(crate) fn least_ring() -> u64 {
        (2 * (wire::MAX_PAYLOAD as u64 + 64)).next_power_of_two()
    }

    /// Bytes of lane memory for rings of these sizes.
    pub(crate) fn mem_bytes(ring_bytes: u64, reply_bytes: u64) -> usize {
        CTL_BYTES + (ring_bytes + reply_bytes) as usize
    }

    /// The control block, the receive ring and the reply ring as device code addresses them.
    pub(crate) fn device_addrs(&self) -> (u64, u64, u64) {
        let d = self.mem.device_addr();
        (d, d + CTL_BYTES as u64, d + CTL_BYTES as u64 + self.ring_bytes)
    }

    fn ring(&self) -> *mut u8 {
        // SAFETY: pointer arithmetic inside the lane's memory.
        unsafe { self.mem.host_ptr().add(CTL_BYTES) }
    }
    fn reply(&self) -> *mut u8 {
        // SAFETY: as above.
        unsafe { self.mem.host_ptr().add(CTL_BYTES + self.ring_bytes as usize) }
    }
    fn ctl(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off < std::mem::size_of::<LaneCtl>());
        // SAFETY: an 8-aligned word of the control block (alive with self), accessed only atomically
        // by us and by the apply code.
        unsafe { AtomicU64::from_ptr(self.mem.host_ptr().add(off) as *mut u64) }
    }

    /// Whether this lane awaits nothing from its peer.
    pub(crate) fn idle(&self) -> bool {
        self.acked.load(Ordering::Acquire) >= self.issued.load(Ordering::Acquire) && self.expect.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    /// What the lane awaits, for messages.
    pub(crate) fn in_flight(&self) -> String {
        let (i, a) = (self.issued.load(Ordering::Acquire), self.acked.load(Ordering::Acquire));
        let e = self.expect.lock().unwrap_or_else(|e| e.into_inner()).len();
        if i <= a && e == 0 {
            return "nothing was in flight on it".into();
        }
        format!("{} requests not yet acknowledged, {e} answers (GET data, fetched values) awaited", i.saturating_sub(a))
    }

    /// Wakes the lane's thread.
    pub(crate) fn wake(&self) {
        self.wake.signal();
    }

    /// Marks `n` more bytes of `out`'s front as sent (and empty parts at the front as gone: a part of
    /// no bytes never waits for a send that cannot carry it).
    fn advance(&self, out: &mut Out, mut n: usize) {
        while let Some(front) = out.parts.front() {
            let len = front.len();
            let left = len - out.first_sent;
            if n < left {
                if n == 0 {
                    return;
                }
                out.first_sent += n;
                if let Part::Reply { end, .. } = *front {
                    self.ctl(REPLY_SENT_OFF).store(end - (len - out.first_sent) as u64, Ordering::Release);
                }
                return;
            }
            n -= left;
            out.first_sent = 0;
            match out.parts.pop_front() {
                Some(Part::Reply { end, .. }) => self.ctl(REPLY_SENT_OFF).store(end, Ordering::Release),
                Some(Part::Copy { .. }) => out.copied = false,
                Some(Part::Src { .. }) => self.src_sent.store(true, Ordering::Release),
                _ => {}
            }
        }
    }

    pub(crate) fn publish_oldest(&self, out: &Out) {
        let (ext, copy) = out.oldest();
        self.oldest_ticket.store(ext, Ordering::Release);
        self.oldest_copy.store(copy, Ordering::Release);
    }


    /// The peer as errors name it: its PE, its address and the lane.
    fn who(&self) -> String {
        match self.addr {
            Some(a) => format!("PE {} ({a}, lane {})", self.peer, self.index),
            None => format!("PE {} (lane {})", self.peer, self.index),
        }
    }
}
