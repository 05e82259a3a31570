//! The target side of the remote engine that device threads run: the apply code that walks a lane's
//! receive ring in order and applies its frames to this PE's heap (`remote::frame` defines them).
//!
//! # Where it runs
//! - On a GPU, in the runtime's apply kernel (`rshmemi_apply`, a warp per lane at a time, lingering
//!   while frames come and ending after a quiet spell), launched by the host when frames arrive and
//!   none runs; and by device threads that wait for something remote (`help`, from their wait loop)
//!   whenever no apply kernel is active, so that a kernel that fills the GPU while it waits still
//!   sees its data arrive.
//! - On the CPU backend, on the lane's host thread right after it received frames (the same code,
//!   with a group of one thread).
//!
//! # Memory (one definition, the host's `transport::proxy` lays it out)
//! - Per lane, in host-shared memory (pinned and mapped on CUDA): the receive ring, the reply ring
//!   and a [`LaneCtl`] of four cache lines: `written` (the host received and checked the frames
//!   below it), `reply_sent` (the host sent the replies below it), `applied` and `reply_written`
//!   (the apply code's progress).
//! - In device memory, the [`TargetTable`]: a header (the apply kernel's activity words), one
//!   [`LaneDesc`] per lane, one [`LaneWords`] per lane (its lock), and per peer the fence marks of its
//!   lanes.
//!
//! # Protocol of one apply pass (the lock holder only)
//! 1. Take the lane's lock (compare-and-swap 0 -> 1); a pass that finds it taken leaves.
//! 2. Read `written` (acquire, system scope): the frames below it are complete and were checked by
//!    the host (heap ranges, kinds, sizes), which never writes them again until `applied` passes them.
//! 3. Apply frames in ring order: puts' bytes with the group's stores, AMOs and signals with one
//!    atomic after a system-scope fence when stores came before (the data of a put is visible before
//!    the signal that follows it), GETs and fetched values as reply frames written into the reply ring
//!    (room permitting: `reply_sent`, acquire), marks and waits of fences (`MARK`: a fence, then the
//!    lane's mark word with release; `WAIT`: the marks of the masked lanes with acquire, else the pass
//!    stops there).
//! 4. A system-scope fence, then `reply_written`, then `applied` (release): the host that reads
//!    `applied` (acquire) may acknowledge every request below it, and send every reply below
//!    `reply_written`.
//! 5. Release the lock.

use crate::arch;
use crate::remote::frame::{self, AmoBody, GetBody, Head, NicAckBody, NicBody, NicDataBody, NicOperands};
use crate::remote::proxy::apply_amo;
use crate::types::{AmoBits, Failure, Problem, Rmw, Scope};
use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};

/// The control words of one lane's rings (host-shared memory), a cache line each.
#[repr(C, align(64))]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq)]
pub struct LaneCtl {
    /// Bytes of the receive ring's stream the host has received and checked (host, release).
    pub written: u64,
    /// The rest of the line.
    pub _r0: [u64; 7],
    /// Bytes of the reply ring's stream the host has sent (host, release): room for the apply code.
    pub reply_sent: u64,
    /// The rest of the line.
    pub _r1: [u64; 7],
    /// Bytes of the receive ring's stream applied (apply code, release).
    pub applied: u64,
    /// The rest of the line.
    pub _r2: [u64; 7],
    /// Bytes of the reply ring's stream written (apply code, before `applied`).
    pub reply_written: u64,
    /// The rest of the line.
    pub _r3: [u64; 7],
}
/// Bytes of a [`LaneCtl`].
pub const CTL_BYTES: usize = 256;
const _: () = assert!(size_of::<LaneCtl>() == CTL_BYTES);
/// Byte offset of [`LaneCtl::written`].
pub const WRITTEN_OFF: usize = offset_of!(LaneCtl, written);
/// Byte offset of [`LaneCtl::reply_sent`].
pub const REPLY_SENT_OFF: usize = offset_of!(LaneCtl, reply_sent);
/// Byte offset of [`LaneCtl::applied`].
pub const APPLIED_OFF: usize = offset_of!(LaneCtl, applied);
/// Byte offset of [`LaneCtl::reply_written`].
pub const REPLY_WRITTEN_OFF: usize = offset_of!(LaneCtl, reply_written);

/// One lane as the apply code finds it (device memory, written once by the host at setup).
#[repr(C, align(64))]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct LaneDesc {
    /// The receive ring (as device code addresses it).
    pub ring: u64,
    /// The lane's [`LaneCtl`].
    pub ctl: u64,
    /// The reply ring.
    pub reply: u64,
    /// The fence marks of the peer's lanes (`MAX_LANES` u64s), device memory.
    pub marks: u64,
    /// The lane's [`LaneWords`], device memory.
    pub words: u64,
    /// Bytes of the receive ring (low 32 bits) and of the reply ring (high 32 bits), powers of two.
    pub sizes: u64,
    /// The peer PE (low 32 bits) and the lane's index among the peer's lanes (bits 32..40).
    pub who: u64,
    /// This PE's heap base.
    pub heap: u64,
}
/// Bytes of a [`LaneDesc`].
pub const DESC_BYTES: usize = 64;
const _: () = assert!(size_of::<LaneDesc>() == DESC_BYTES);

/// What the apply code keeps per lane in device memory: its lock.
#[repr(C, align(64))]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct LaneWords {
    /// 1 while a pass applies the lane.
    pub lock: u64,
    /// The rest of the line.
    pub _r: [u64; 7],
}

/// The header of the target table (device memory).
#[repr(C, align(64))]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct TargetTable {
    /// [`TABLE_MAGIC`] once the host has set the table up.
    pub magic: u64,
    /// Lanes in the table.
    pub lanes: u64,
    /// Address of the first [`LaneDesc`].
    pub descs: u64,
    /// The rest of line 0.
    pub _r0: [u64; 5],
    /// The device timer (ns) at which the running apply kernel last looked at its lanes; 0 when no
    /// apply kernel runs (or on the CPU backend, where the host applies).
    pub heartbeat: u64,
    /// The device timer at which a pass of the apply kernel last applied something.
    pub last_work: u64,
    /// Set by the apply kernel's first warp when it decides to end: every warp of it ends.
    pub quit: u64,
    /// 1 when the host applies every lane itself (CPU backend): waiters never help.
    pub host_applies: u64,
    /// The rest of line 1.
    pub _r1: [u64; 4],
}
/// `TargetTable::magic`.
pub const TABLE_MAGIC: u64 = 0x5253_484d_5441_5201;
/// Bytes of the table header.
pub const TABLE_BYTES: usize = 128;
const _: () = assert!(size_of::<TargetTable>() == TABLE_BYTES);

/// How long (device ns) without a heartbeat counts as "no apply kernel runs": waiters then help.
pub const HEARTBEAT_STALE_NS: u64 = 100_000;

/// How an apply pass ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// Frames applied (skipped ones included).
    pub frames: u32,
    /// The pass stopped before `written`: at a WAIT whose marks are not there yet, or for room in the
    /// reply ring.
    pub blocked: bool,
    /// Another pass held the lane.
    pub busy: bool,
}

#[inline(always)]
unsafe fn word(base: u64, off: usize) -> *mut u64 {
    (base as usize + off) as *mut u64
}

/// Reads the 16 bytes at `p` as a frame head (every thread of the group reads the same bytes: the
/// host does not change a frame below `written` until `applied` has passed it).
///
/// # Safety
/// `p` must be 16-aligned and readable for 16 bytes.
#[inline(always)]
unsafe fn head_at(p: usize) -> Head {
    // SAFETY: the caller's contract; the words are read atomically (relaxed), after the acquire of
    // `written` that published them.
    unsafe {
        let a = arch::load_relaxed_u64(p as *const u64);
        let b = arch::load_relaxed_u64((p + 8) as *const u64);
        Head { kind: a as u8, op: (a >> 8) as u8, width: (a >> 16) as u8, flags: (a >> 24) as u8, len: (a >> 32) as u32, offset: b }
    }
}

/// Reads two u64s at `p` (a body).
///
/// # Safety
/// As `head_at`.
#[inline(always)]
unsafe fn pair_at(p: usize) -> (u64, u64) {
    // SAFETY: the caller's contract.
    unsafe { (arch::load_relaxed_u64(p as *const u64), arch::load_relaxed_u64((p + 8) as *const u64)) }
}

/// Writes a head (and an optional 16-byte body) at `p` in the reply ring, by one thread.
///
/// # Safety
/// `p` 16-aligned and writable for 16 (32 with a body) bytes of the reply ring, owned by this pass.
#[inline(always)]
unsafe fn put_head(p: usize, h: Head, body: Option<(u64, u64)>) {
    let a = h.kind as u64 | (h.op as u64) << 8 | (h.width as u64) << 16 | (h.flags as u64) << 24 | (h.len as u64) << 32;
    // SAFETY: the caller's contract.
    unsafe {
        arch::store_relaxed_u64(p as *mut u64, a);
        arch::store_relaxed_u64((p + 8) as *mut u64, h.offset);
        if let Some((x, y)) = body {
            arch::store_relaxed_u64((p + 16) as *mut u64, x);
            arch::store_relaxed_u64((p + 24) as *mut u64, y);
        }
    }
}

#[cold]
#[inline(never)]
fn bad_frame(kind: u8, pos: u64) -> ! {
    arch::fail(Failure { call: "rshmem apply (a frame the host let through is unknown: the receive ring was overwritten)\0", problem: Problem::NotInitialized, pe: kind as i32, addr: pos, len: 0 })
}

/// The reply ring as a pass fills it.
struct Replies {
    base: usize,
    bytes: u64,
    /// The stream position of the next reply.
    pos: u64,
    /// `reply_sent` as last read.
    sent: u64,
    ctl: u64,
}

impl Replies {
    /// Reserves `n` contiguous bytes for one reply (wrapping with a WRAP frame when they would cross
    /// the ring's end), or None when the ring has no room (the host has not sent enough yet). Every
    /// thread of the group calls it; the first writes the WRAP.
    ///
    /// # Safety
    /// The pass holds the lane; the ring is `bytes` long at `base`.
    #[inline(always)]
    unsafe fn reserve(&mut self, scope: Scope, n: u64) -> Option<usize> {
        let at = self.pos % self.bytes;
        let skip = if at + n > self.bytes { self.bytes - at } else { 0 };
        if self.pos + skip + n - self.sent > self.bytes {
            // SAFETY: `reply_sent` is a u64 of the lane's control block, written by the host with
            // release; one thread reads it for the group.
            let s = if scope.rank() == 0 { unsafe { arch::load_acquire_u64(word(self.ctl, REPLY_SENT_OFF)) } } else { 0 };
            self.sent = scope.bcast(s);
            if self.pos + skip + n - self.sent > self.bytes {
                return None;
            }
        }
        if skip != 0 {
            if scope.rank() == 0 {
                // SAFETY: the bytes from `at` to the end are ours (room checked above); at is 16-aligned.
                unsafe { put_head(self.base + at as usize, Head { kind: frame::WRAP, ..Head::default() }, None) };
            }
            self.pos += skip;
        }
        let p = self.base + (self.pos % self.bytes) as usize;
        self.pos += n;
        Some(p)
    }
}

/// One apply pass over lane `d` by every thread of `scope` (see the module's protocol), applying at
/// most `budget` frames.
///
/// # Safety
/// `d` must be a lane descriptor of the runtime's target table (its rings, control block, words and
/// marks alive while this runs), every frame below `written` checked by the host; every thread of
/// the group calls it with the same arguments.
#[inline(never)]
pub unsafe fn apply(d: &LaneDesc, scope: Scope, budget: u32) -> Pass {
    let (rank, size) = (scope.rank(), scope.size());
    let lock = d.words as usize as *mut u64;
    // SAFETY: the lock is a u64 of the lane's words (device memory), accessed only atomically.
    let got = if rank == 0 { unsafe { arch::cas_u64(lock, 0, 1) == 0 } } else { false };
    if scope.bcast(got as u64) == 0 {
        return Pass { frames: 0, blocked: false, busy: true };
    }
    let ring = d.ring as usize;
    let ring_bytes = d.sizes & 0xffff_ffff;
    let lane = ((d.who >> 32) & 0xff) as usize;
    let heap = d.heap as usize;
    // SAFETY: the control words are u64s of the lane's control block, accessed atomically; `applied`
    // and `reply_written` are written only by the lock holder (us).
    let (mut pos, rpos, written) = unsafe {
        let p = arch::load_relaxed_u64(word(d.ctl, APPLIED_OFF));
        let r = arch::load_relaxed_u64(word(d.ctl, REPLY_WRITTEN_OFF));
        let w = if rank == 0 { arch::load_acquire_u64(word(d.ctl, WRITTEN_OFF)) } else { 0 };
        (p, r, scope.bcast(w))
    };
    let mut rep = Replies { base: d.reply as usize, bytes: d.sizes >> 32, pos: rpos, sent: 0, ctl: d.ctl };
    // SAFETY: as above.
    rep.sent = scope.bcast(if rank == 0 { unsafe { arch::load_acquire_u64(word(d.ctl, REPLY_SENT_OFF)) } } else { 0 });
    let mut frames = 0u32;
    let mut blocked = false;
    // Stores of this pass to the heap not yet ordered before a following atomic.
    let mut stored = false;
    while pos < written && frames < budget {
        let at = (pos % ring_bytes) as usize;
        // SAFETY: `at` is 16-aligned inside the ring (frames are multiples of 16, the ring a multiple
        // too); the frame below `written` is complete and checked.
        let h = unsafe { head_at(ring + at) };
        if h.kind == frame::WRAP {
            pos += ring_bytes - at as u64;
            continue;
        }
        let Some(n) = frame::frame_bytes(&h) else { bad_frame(h.kind, pos) };
        let body = ring + at + frame::HEAD_BYTES;
        // Orders the pass's earlier stores before an atomic or mark of one thread.
        let order = |stored: &mut bool| {
            scope.sync();
            if *stored && rank == 0 {
                arch::fence_acq_rel();
            }
            *stored = false;
        };
        if h.flags & frame::FLAG_TAKEN != 0 {
            // The host dealt with it (a GET's value it delivered, a refused piece of a NIC WRITE).
            pos += n as u64;
            frames += 1;
            continue;
        }
        match h.kind {
            frame::PUT => {
                // SAFETY: the host checked [offset, offset + len) against the backed heap; the
                // payload follows the head in the ring.
                unsafe { arch::copy((heap + h.offset as usize) as *mut u8, body as *const u8, h.len as usize, rank, size) };
                stored = true;
            }
            frame::GET_DATA => {
                // SAFETY: the host rewrote `offset` to the destination it recorded for this GET (a
                // buffer the poster promised writable for the GET's bytes).
                unsafe { arch::copy(h.offset as usize as *mut u8, body as *const u8, h.len as usize, rank, size) };
                stored = true;
            }
            frame::NIC_WRITE => {
                let last = h.flags & frame::FLAG_LAST != 0;
                // The last piece answers with a NIC_ACK: its room first, so that nothing is applied
                // twice when there is none yet.
                let ack = if last {
                    // SAFETY: see `Replies::reserve`.
                    match unsafe { rep.reserve(scope, 32) } {
                        Some(p) => p,
                        None => {
                            blocked = true;
                            break;
                        }
                    }
                } else {
                    0
                };
                // SAFETY: the host rewrote `offset` to a checked heap offset; the payload follows
                // the NIC body.
                unsafe { arch::copy((heap + h.offset as usize) as *mut u8, (body + 16) as *const u8, h.len as usize, rank, size) };
                stored = true;
                if last {
                    order(&mut stored);
                    if rank == 0 {
                        // SAFETY: the NIC body follows the head; `ack` is 32 reserved reply bytes.
                        unsafe {
                            let (_, seq) = pair_at(body);
                            put_head(ack, Head { kind: frame::NIC_ACK, ..Head::default() }, Some((seq, 0)));
                        }
                    }
                }
            }
            frame::SIGNAL | frame::AMO | frame::NIC_ATOMIC | frame::NIC_REFUSED => {
                let fetch = h.kind != frame::SIGNAL && (h.kind != frame::AMO || h.flags & frame::FLAG_FETCH != 0);
                let p = if fetch {
                    // An AMO_REPLY is a head; a NIC_ACK a head and its body.
                    let n = if h.kind == frame::AMO { 16 } else { 32 };
                    // SAFETY: see `Replies::reserve`.
                    match unsafe { rep.reserve(scope, n) } {
                        Some(p) => p,
                        None => {
                            blocked = true;
                            break;
                        }
                    }
                } else {
                    0
                };
                order(&mut stored);
                if rank == 0 {
                    // SAFETY: the host checked the heap offset, its alignment, the width and the
                    // code; `p` is 32 reserved bytes of the reply ring when fetching.
                    unsafe { atomic(&h, body, heap, p) };
                }
            }
            frame::GET | frame::NIC_READ => {
                let nic = h.kind == frame::NIC_READ;
                // SAFETY: see `Replies::reserve`.
                let Some(p) = (unsafe { rep.reserve(scope, (if nic { 32 } else { 16 }) + frame::pad16(h.len as usize) as u64) }) else {
                    blocked = true;
                    break;
                };
                // The group's earlier stores to the heap are seen by its loads below.
                scope.sync();
                // SAFETY: the body follows the head.
                let (a, b) = unsafe { pair_at(body) };
                let data = p + if nic { 32 } else { 16 };
                if rank == 0 {
                    // SAFETY: reserved reply bytes.
                    unsafe {
                        if nic {
                            // `a` holds the key and the piece's place in the READ; `b` the tag.
                            let flags = h.flags & frame::FLAG_LAST;
                            put_head(p, Head { kind: frame::NIC_READ_DATA, flags, len: h.len, ..Head::default() }, Some((b, a >> 32)));
                        } else {
                            put_head(p, Head { kind: frame::GET_DATA, len: h.len, offset: a, ..Head::default() }, None);
                        }
                    }
                }
                // SAFETY: the host checked the heap range; the reply has room for the bytes.
                unsafe { arch::copy(data as *mut u8, (heap + h.offset as usize) as *const u8, h.len as usize, rank, size) };
                let pad = frame::pad16(h.len as usize) - h.len as usize;
                if pad != 0 && rank == 0 {
                    // SAFETY: the padding bytes are reserved reply bytes.
                    unsafe { core::ptr::write_bytes((data + h.len as usize) as *mut u8, 0, pad) };
                }
            }
            frame::MARK => {
                order(&mut stored);
                if rank == 0 {
                    // Everything before the mark (this pass's stores: the fence above; earlier
                    // passes': their release of `applied`, which this pass acquired with the lock
                    // and `written`) before the mark itself.
                    arch::fence_acq_rel();
                    // SAFETY: the marks are MAX_LANES u64s of the peer's (device memory); lane < MAX_LANES.
                    unsafe { arch::store_release_u64((d.marks as usize as *mut u64).add(lane), h.offset) };
                }
            }
            frame::WAIT => {
                let mut ok = 1u64;
                if rank == 0 {
                    for l in 0..frame::MAX_LANES {
                        // SAFETY: as for MARK.
                        if h.len & (1 << l) != 0 && unsafe { arch::load_acquire_u64((d.marks as usize as *const u64).add(l)) } < h.offset {
                            ok = 0;
                            break;
                        }
                    }
                }
                if scope.bcast(ok) == 0 {
                    blocked = true;
                    break;
                }
            }
            // Answers the host dealt with, and control frames: nothing to apply.
            _ => {}
        }
        pos += n as u64;
        frames += 1;
    }
    scope.sync();
    if rank == 0 {
        // SAFETY: the control words as above; the lock as above.
        unsafe {
            if frames != 0 {
                // Every effect and reply of the pass before `applied` (and `reply_written`) is seen.
                arch::fence_acq_rel();
                arch::store_relaxed_u64(word(d.ctl, REPLY_WRITTEN_OFF), rep.pos);
                arch::store_release_u64(word(d.ctl, APPLIED_OFF), pos);
            }
            arch::store_release_u64(lock, 0);
        }
    }
    scope.sync();
    Pass { frames, blocked, busy: false }
}

/// One atomic frame (SIGNAL, AMO, NIC_ATOMIC, NIC_REFUSED) by one thread: applied, and its reply
/// written at `reply` when it has one.
///
/// # Safety
/// The host checked the frame; `reply` is reserved reply ring bytes when the frame answers (16 for
/// an AMO_REPLY, 32 for a NIC_ACK).
#[inline(never)]
unsafe fn atomic(h: &Head, body: usize, heap: usize, reply: usize) {
    let p = (heap + h.offset as usize) as *mut u8;
    // SAFETY: the caller's contract: an aligned word of the backed heap, accessed only atomically by
    // the API; the frame's body follows its head.
    unsafe {
        match h.kind {
            frame::SIGNAL => {
                let (value, _) = pair_at(body);
                if h.op == frame::SIGNAL_OP_SET {
                    arch::store_relaxed_u64(p as *mut u64, value);
                } else {
                    arch::rmw_u64(Rmw::Add, p as *mut u64, value);
                }
            }
            frame::AMO => {
                let (value, compare) = pair_at(body);
                let old = apply_amo(h.op as u16, h.width as u32, p, value, compare).unwrap_or(0);
                if h.flags & frame::FLAG_FETCH != 0 {
                    let mask = if h.width == 4 { u32::MAX as u64 } else { u64::MAX };
                    put_head(reply, Head { kind: frame::AMO_REPLY, len: h.len, offset: old & mask, ..Head::default() }, None);
                }
            }
            frame::NIC_ATOMIC => {
                let (_, seq) = pair_at(body);
                let (o0, o1) = pair_at(body + 16);
                let (o2, o3) = pair_at(body + 32);
                let ops = [o0, o1, o2, o3];
                let old = match rshmem_ibgda::Atomic::decode(h.op, ops) {
                    Some(a) => apply_nic_atomic(a, p),
                    None => 0,
                };
                put_head(reply, Head { kind: frame::NIC_ACK, ..Head::default() }, Some((seq, old)));
            }
            _ => {
                // NIC_REFUSED: the status and reason the host chose, nothing applied.
                let (_, seq) = pair_at(body);
                put_head(reply, Head { kind: frame::NIC_ACK, op: h.op, width: h.width, ..Head::default() }, Some((seq, 0)));
            }
        }
    }
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

// The bodies' layouts, as the code above reads them.
const _: () = assert!(size_of::<AmoBody>() == 16 && size_of::<GetBody>() == 16 && size_of::<NicBody>() == 16);
const _: () = assert!(size_of::<NicAckBody>() == 16 && size_of::<NicDataBody>() == 16 && size_of::<NicOperands>() == 32);
const _: () = assert!(offset_of!(NicBody, seq) == 8 && offset_of!(GetBody, tag) == 0 && offset_of!(AmoBody, compare) == 8);

/// The target table of this PE (device state), or None without a remote engine.
#[inline(always)]
fn table() -> Option<*const TargetTable> {
    let t = arch::state_u64(crate::state::Field::TARGET) as usize;
    (t != 0).then_some(t as *const TargetTable)
}

/// What a device thread that waits for something remote does every few spins: when no apply kernel
/// is active (none launched, or one the GPU has not scheduled because the waiting kernels fill it),
/// it applies up to `budget` frames of each lane itself, as a group of one. Does nothing on the CPU
/// backend (the lane threads apply) or without a remote engine.
///
/// # Safety
/// rshmem initialized (the table and its lanes are the runtime's, alive until finalize).
#[cold]
#[inline(never)]
pub unsafe fn help(budget: u32) -> u32 {
    let Some(t) = table() else { return 0 };
    // SAFETY: the table header is the runtime's (device memory); its words are accessed atomically.
    unsafe {
        if arch::load_relaxed_u64(core::ptr::addr_of!((*t).host_applies)) != 0 {
            return 0;
        }
        let beat = arch::load_relaxed_u64(core::ptr::addr_of!((*t).heartbeat));
        let now = arch::globaltimer_ns();
        if beat != 0 && now.wrapping_sub(beat) < HEARTBEAT_STALE_NS {
            return 0;
        }
        let lanes = arch::load_relaxed_u64(core::ptr::addr_of!((*t).lanes)) as usize;
        let descs = arch::load_relaxed_u64(core::ptr::addr_of!((*t).descs)) as usize as *const LaneDesc;
        let mut done = 0;
        for i in 0..lanes {
            let d = core::ptr::read_volatile(descs.add(i));
            done += apply(&d, Scope::Thread, budget).frames;
        }
        done
    }
}

/// The apply kernel's body (`rshmemi_apply`): warp `w` of the grid's `warps` serves lanes `w`,
/// `w + warps`, ... in turn until the kernel has found no work for `linger_ns`; the first warp keeps
/// the heartbeat and decides the end. `gen` is the launch's number (the host's, one per launch): the
/// end of launch `gen` is `TargetTable::quit == gen`, so no launch ends on an earlier one's word.
///
/// # Safety
/// rshmem initialized, the table alive until the kernel ends (the host waits for it before freeing).
pub unsafe fn serve(gen: u64, linger_ns: u64) {
    let Some(t) = table() else { return };
    let warps = (arch::grid_size() * arch::block_size() / 32) as usize;
    let me = (arch::block_index() * arch::block_size() / 32 + arch::block_rank() / 32) as usize;
    let leader = me == 0;
    // SAFETY: the table is the runtime's, its header words accessed atomically; its descriptors are
    // written once at setup.
    unsafe {
        let hb = core::ptr::addr_of!((*t).heartbeat) as *mut u64;
        let last = core::ptr::addr_of!((*t).last_work) as *mut u64;
        let quit = core::ptr::addr_of!((*t).quit) as *mut u64;
        let lanes = arch::load_relaxed_u64(core::ptr::addr_of!((*t).lanes)) as usize;
        let descs = arch::load_relaxed_u64(core::ptr::addr_of!((*t).descs)) as usize as *const LaneDesc;
        let mut spins = 0u64;
        let mut last_seen = arch::globaltimer_ns();
        loop {
            let mut work = 0u32;
            let mut i = me;
            while i < lanes {
                let d = core::ptr::read_volatile(descs.add(i));
                work += apply(&d, Scope::Warp, 1 << 16).frames;
                i += warps;
            }
            let now = arch::globaltimer_ns();
            if arch::warp_rank() == 0 {
                if work != 0 {
                    arch::store_relaxed_u64(last, now);
                }
                if leader {
                    arch::store_relaxed_u64(hb, now);
                    // The quiet spell counts from this launch's start or the last work anyone did.
                    let l = arch::load_relaxed_u64(last);
                    if l > last_seen {
                        last_seen = l;
                    }
                    if now.wrapping_sub(last_seen) > linger_ns {
                        arch::store_relaxed_u64(hb, 0);
                        arch::store_release_u64(quit, gen);
                    }
                }
            }
            let q = arch::warp_group_bcast_u64(if arch::warp_rank() == 0 { arch::load_acquire_u64(quit) } else { 0 });
            if q == gen {
                return;
            }
            if work == 0 {
                spins += 1;
                arch::backoff(spins.min(64));
            } else {
                spins = 0;
            }
        }
    }
}
