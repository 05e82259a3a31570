//! A NIC model for measuring the posting side: the consumer half of a ConnectX send queue, reduced to
//! what posting threads can observe, over queues laid out as on hardware. It watches each QP's doorbell
//! record, reads every new WQE's control segment from the send queue, checks it as the NIC would (the
//! framing: ds, WQE index, QPN, fence mode; and the opcode's shape), and completes it without moving
//! data: a CQE in slot 0 of the QP's collapsed CQ (research note §4.3) for the newest signalled WQE,
//! or an error CQE with the PRM syndrome and a [`Reason`] for the first bad one, after which the QP
//! stays in the error state (as the emulator's `ack` mode does, see `emu`).
//!
//! The model is the same code on both backends ([`serve`], generic over [`Sys`]): the runtime's
//! device-resident NIC (`RSHMEM_IBGDA_EMULATOR=device`) runs it in a persistent GPU kernel over queues
//! in GPU memory, and on the CPU backend on a host thread over the PE's memory.
//!
//! # What it reads and writes, in which order
//! 1. An acquire load of the doorbell record's send counter (the posting code stores it with a release
//!    store after the WQEs it announces, `post`): every WQE below it is visible after this load.
//! 2. Relaxed loads of the first 12 bytes of each WQE's control segment, several WQEBBs at once (their
//!    addresses do not depend on one another, so a GPU thread has them all in flight together).
//! 3. The CQE: its first 60 bytes with relaxed stores, then the last word (`wqe_counter`, `op_own`)
//!    with a release store, after everything above: a poller that acquires that word sees the rest,
//!    and the NIC read the WQEs' slots before the poster may reuse them.
//!
//! Writing one CQE for the newest signalled WQE of a pass instead of one per signalled WQE is what a
//! collapsed CQ shows anyway: every CQE lands in slot 0, and a poller only ever sees the newest.
//!
//! `no_std`, no allocation.

use crate::mlx5::{self, fm_ce_se, opcode, opmod, syndrome, CtrlSeg, Cqe64, ErrCqe, CQE_SIZE, WQEBB};
use crate::qp::{CqeError, Sys};
use bytemuck::{Pod, Zeroable};
use core::mem::offset_of;

codes! {
    /// Why an emulated NIC (the host emulator, `emu`, or this model) failed a WQE: written to the error
    /// CQE's `vendor_err_synd` byte (real NICs put their own vendor codes there; these are the
    /// emulator's, for diagnostics). The PRM syndrome is in `syndrome`. `from_u8` reads the byte back;
    /// `describe` says what it means.
    #[derive(PartialOrd, Ord, Hash, Debug)]
    pub enum Reason: u8 [from_u8, describe] {
        UnknownOpcode = 0xe0 => "unknown or unsupported WQE opcode",
        BadOpmod = 0xe1 => "opmod not valid for the opcode",
        BadDs = 0xe2 => "ds does not match the opcode's segments",
        WqeIndexMismatch = 0xe3 => "control segment's WQE index is not the NIC's consumer index (stale or overwritten WQE)",
        QpnMismatch = 0xe4 => "control segment's QPN is not this QP's",
        BeyondProducer = 0xe5 => "WQE extends past the doorbell record's producer count",
        BadInline = 0xe6 => "malformed inline segment",
        BadFence = 0xe7 => "reserved fence mode",
        UnknownLkey = 0xe8 => "unknown lkey",
        LocalRange = 0xe9 => "local buffer outside its memory region",
        LocalRights = 0xea => "local memory region not writable",
        BadLength = 0xeb => "bad byte count",
        UnknownRkey = 0xf0 => "unknown rkey",
        RemoteRange = 0xf1 => "remote range outside its memory region",
        RemoteRights = 0xf2 => "remote memory region lacks the access right",
        Misaligned = 0xf3 => "misaligned atomic target",
        NoReceiveQueue = 0xf4 => "send-type opcode: the emulated responder has no receive queue",
        Unreachable = 0xf5 => "remote side unreachable",
        Flushed = 0xf6 => "flushed: QP in error state",
        DmaFailed = 0xf7 => "the memory copy (DMA) of the region failed",
    }
}

/// What a NIC checks of a WQE's control segment before it reads the rest: `ds` not 0, the WQE within
/// the `posted` WQEBBs the doorbell record announced from here, its index the NIC's consumer index
/// `hw16`, its QPN the QP's, its fence mode not reserved. Returns the WQEBBs the WQE takes.
#[inline(always)]
pub fn check_framing(ctrl: &CtrlSeg, hw16: u16, qpn: u32, posted: u32) -> Result<u32, Reason> {
    let ds = ctrl.ds() as u32;
    let nbb = ds.div_ceil(4).max(1);
    if ds == 0 {
        Err(Reason::BadDs)
    } else if nbb > posted {
        Err(Reason::BeyondProducer)
    } else if ctrl.wqe_index() != hw16 {
        Err(Reason::WqeIndexMismatch)
    } else if ctrl.qpn() != qpn {
        Err(Reason::QpnMismatch)
    } else if ctrl.fm_ce_se & fm_ce_se::FM_MASK > fm_ce_se::FM_FENCE_AND_SMALL {
        Err(Reason::BadFence)
    } else {
        Ok(nbb)
    }
}

/// The exact `ds` of an atomic WQE of opcode `op` and opmod `om` (standard 8-byte atomics: control,
/// raddr, atomic and data segments; the masked 8-byte compare-swap has one more), or None when the pair
/// is no atomic the NIC runs.
#[inline(always)]
pub const fn atomic_ds(op: u8, om: u8) -> Option<usize> {
    match (op, om) {
        (opcode::ATOMIC_FA, 0) | (opcode::ATOMIC_CS, 0) => Some(4),
        (opcode::ATOMIC_MASKED_FA, opmod::EXT_AMO_4) | (opcode::ATOMIC_MASKED_FA, opmod::EXT_AMO_8) | (opcode::ATOMIC_MASKED_CS, opmod::EXT_AMO_4) => Some(4),
        (opcode::ATOMIC_MASKED_CS, opmod::EXT_AMO_8) => Some(5),
        _ => None,
    }
}

/// The shape of a well-framed WQE as the model checks it (it reads no further segments), and as the
/// emulator checks it before reading the rest: an opcode the NIC runs, its opmod, and enough segments
/// (exactly the atomic's, for atomics). Returns the (syndrome, reason) of its error CQE.
#[inline(always)]
pub fn check_kind(op: u8, om: u8, ds: usize) -> Result<(), (u8, Reason)> {
    let qp_op = |r| Err((syndrome::LOCAL_QP_OP, r));
    let plain = |min: usize| if om != 0 { qp_op(Reason::BadOpmod) } else if ds < min { qp_op(Reason::BadDs) } else { Ok(()) };
    match op {
        opcode::NOP => plain(1),
        opcode::RDMA_WRITE | opcode::DUMP => plain(2),
        opcode::RDMA_READ => plain(3),
        opcode::ATOMIC_CS | opcode::ATOMIC_FA | opcode::ATOMIC_MASKED_CS | opcode::ATOMIC_MASKED_FA => match atomic_ds(op, om) {
            None => qp_op(Reason::BadOpmod),
            Some(want) if want != ds => qp_op(Reason::BadDs),
            Some(_) => Ok(()),
        },
        opcode::RDMA_WRITE_IMM | opcode::SEND | opcode::SEND_IMM | opcode::SEND_INVAL => Err((syndrome::RNR_RETRY_EXC, Reason::NoReceiveQueue)),
        _ => qp_op(Reason::UnknownOpcode),
    }
}

/// Writes a 64-byte CQE (`words`, its bytes in memory order) at `slot`: words 0..15 with relaxed stores, then word 15 (`wqe_counter`,
/// `signature`, `op_own`, which pollers read alone) with a release store.
///
/// # Safety
/// `slot` must point to a live, 64-byte aligned CQE slot that others access only atomically.
#[inline(always)]
pub unsafe fn store_cqe<S: Sys>(s: &S, slot: *mut u8, words: [u32; CQE_SIZE / 4]) {
    for (i, w) in words.iter().enumerate() {
        // SAFETY: word i of the caller's slot, 4-byte aligned.
        let p = unsafe { slot.add(4 * i) } as *mut u32;
        if i == CQE_SIZE / 4 - 1 {
            // SAFETY: as above.
            unsafe { s.store_release_u32(p, *w) };
        } else {
            // SAFETY: as above.
            unsafe { s.store_u32(p, *w) };
        }
    }
}

/// One QP as the model sees it: where its send queue, doorbell record and collapsed CQ are (written by
/// the host before the model starts), and the model's own state (written only by the model, with
/// release stores, read by the host for its quiet and statistics).
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct ModelQp {
    /// WQEBB 0 of the send queue (64-byte aligned, `1 << log_sq` WQEBBs).
    pub sq: u64,
    /// The QP doorbell record ([`mlx5::DbRec`]).
    pub dbr: u64,
    /// Slot 0 of the collapsed CQ.
    pub cq: u64,
    /// The QP number the WQEs must carry.
    pub qpn: u32,
    /// log2 of the send queue's WQEBBs (at most 15).
    pub log_sq: u32,
    /// The next WQEBB the model reads (free-running; the QP's first WQE count before it starts).
    pub hw_ci: u64,
    /// WQEs completed so far.
    pub wqes: u64,
    /// CQEs written so far.
    pub cqes: u64,
    /// 0, or the first error ([`CqeError::encode`]): the QP is in the error state and the model reads
    /// nothing more from it.
    pub error: u64,
}

const _: () = assert!(core::mem::size_of::<ModelQp>() == 64);

impl ModelQp {
    /// The model's state of a QP whose first WQE has count `start`.
    pub const fn new(sq: u64, dbr: u64, cq: u64, qpn: u32, log_sq: u32, start: u64) -> ModelQp {
        ModelQp { sq, dbr, cq, qpn, log_sq: log_sq & 15, hw_ci: start, wqes: 0, cqes: 0, error: 0 }
    }
    /// Whether the model has read everything the doorbell record with send counter `dbr16` announced
    /// (or the QP is in the error state): what a host-side quiet waits for.
    pub const fn settled(&self, dbr16: u16) -> bool {
        self.error != 0 || self.hw_ci as u16 == dbr16
    }
}

/// WQEBBs whose control segments a pass reads at once (the slots of `chunk!` in [`step`]).
const CHUNK: u64 = 8;

/// Words 0..3 of the control segment in WQEBB `pos` (a free-running count) of `m`'s send queue (the
/// fourth, `imm`, left 0).
///
/// # Safety
/// `m.sq` must be a live send queue of `1 << m.log_sq` WQEBBs, written by posters only atomically.
#[inline(always)]
unsafe fn load_ctrl<S: Sys>(s: &S, m: &ModelQp, pos: u64) -> [u32; 4] {
    let a = m.sq as usize + ((pos & ((1u64 << m.log_sq) - 1)) as usize) * WQEBB;
    // SAFETY: words 0..2 of that WQEBB (4-aligned), the caller's contract.
    unsafe { [s.load_u32(a as *const u32), s.load_u32((a + 4) as *const u32), s.load_u32((a + 8) as *const u32), 0] }
}

/// What the error CQE of a failed WQE says: its WQE index, its opcode, the syndrome, the reason.
type Failed = (u16, u8, u8, Reason);

/// The model's check of the WQE whose control segment `c` is at WQEBB `at`, with the doorbell record
/// announcing up to `end` on QP `qpn`: its WQEBBs, whether it asks for a CQE and its opcode; or what
/// its error CQE says.
#[inline(always)]
fn check_wqe(c: [u32; 4], at: u64, end: u64, qpn: u32) -> Result<(u32, bool, u8), Failed> {
    let ctrl: CtrlSeg = bytemuck::must_cast(c);
    let (op, om, ds) = (ctrl.opcode(), ctrl.opmod(), ctrl.ds() as usize);
    let nbb = check_framing(&ctrl, at as u16, qpn, end.saturating_sub(at).min(u32::MAX as u64) as u32).map_err(|r| (at as u16, op, syndrome::LOCAL_QP_OP, r))?;
    check_kind(op, om, ds).map_err(|(syn, r)| (at as u16, op, syn, r))?;
    Ok((nbb, ctrl.signalled(), op))
}

/// The model's pass over one QP: completes every WQE its doorbell record announced since the last pass
/// (see the module docs). Returns the WQEs it completed.
///
/// # Safety
/// `q` must point to a live [`ModelQp`] that only this caller (one thread) passes here, whose queues
/// are live and written by the posting code as it does (`post`).
#[inline(always)]
pub unsafe fn step<S: Sys>(s: &S, q: *mut ModelQp) -> u32 {
    // SAFETY: the caller's ModelQp; only this thread writes it (atomically, read by the host).
    let m = unsafe { core::ptr::read_volatile(q) };
    if m.error != 0 {
        return 0;
    }
    // SAFETY: the QP's doorbell record (the caller's contract); its send counter is a 4-aligned word.
    let w = unsafe { s.load_acquire_u32((m.dbr as usize + 4 * mlx5::SND_DBR) as *const u32) };
    let prod16 = u32::from_be(w) as u16;
    let posted = prod16.wrapping_sub(m.hw_ci as u16) as u64;
    if posted == 0 {
        return 0;
    }
    let ring = 1u64 << m.log_sq;
    let end = m.hw_ci + posted;
    let mut pos = m.hw_ci;
    let mut n = 0u32;
    let mut last: Option<(u16, u8)> = None;
    let mut failed: Option<Failed> = None;
    if posted > ring {
        failed = Some((pos as u16, 0, syndrome::LOCAL_QP_OP, Reason::BeyondProducer));
    }
    while failed.is_none() && pos < end {
        // The control segments of the next CHUNK WQEBBs, loaded together (straight-line loads of
        // ring slots, those past `end` too, whose words the walk does not use), each checked as if a
        // WQE started there: its WQEBBs (0: it fails), whether it asks for a CQE, its opcode, packed
        // into registers so that the walk below indexes no array (which would put the chunk in local
        // memory and serialise the loads on the GPU).
        let k = (end - pos).min(CHUNK) as u32;
        // Written out slot by slot (no loop an optimizer may keep rolled, no array indexed at run time).
        macro_rules! chunk {
            ($($i:literal)*) => {{
                // SAFETY: WQEBBs of the send queue (the caller's contract).
                let c = [$(unsafe { load_ctrl(s, &m, pos + $i) }),*];
                let (mut nbbs, mut signalled, mut ops) = (0u64, 0u32, 0u64);
                $(
                    if let Ok((nbb, sig, op)) = check_wqe(c[$i], pos + $i, end, m.qpn) {
                        nbbs |= (nbb as u64) << (5 * $i);
                        signalled |= (sig as u32) << $i;
                        ops |= (op as u64) << (8 * $i);
                    }
                )*
                (nbbs, signalled, ops)
            }};
        }
        let (nbbs, signalled, ops) = chunk!(0 1 2 3 4 5 6 7);
        // The walk: WQEBB `next` of the chunk starts the next WQE.
        let mut next = 0u32;
        while next < k {
            let nbb = ((nbbs >> (5 * next)) & 31) as u32;
            let at = pos + next as u64;
            if nbb == 0 {
                // SAFETY: as above (read again: the rare error path keeps nothing from the chunk).
                if let Err(e) = check_wqe(unsafe { load_ctrl(s, &m, at) }, at, end, m.qpn) {
                    failed = Some(e);
                }
                break;
            }
            if (signalled >> next) & 1 != 0 {
                last = Some((at as u16, (ops >> (8 * next)) as u8));
            }
            n += 1;
            next += nbb;
        }
        // Past the chunk's last WQE (which may end beyond the chunk), or where the failed one starts.
        pos += next as u64;
    }
    let cq = m.cq as *mut u8;
    let mut cqes = 0;
    if let Some((index, op)) = last {
        let c = Cqe64::req(op, m.qpn, index, 0, false);
        // SAFETY: slot 0 of the QP's collapsed CQ (the caller's contract).
        unsafe { store_cqe(s, cq, bytemuck::must_cast(c)) };
        cqes += 1;
    }
    // SAFETY: the caller's ModelQp: 8-aligned words that this thread alone writes.
    unsafe {
        if let Some((index, op, syn, r)) = failed {
            let c = ErrCqe::req_err(op, m.qpn, index, syn, r as u8, false);
            store_cqe(s, cq, bytemuck::must_cast(c));
            cqes += 1;
            let e = CqeError { cqe_opcode: mlx5::cqe_opcode::REQ_ERR, syndrome: syn, vendor_syndrome: r as u8, wqe_opcode: op, wqe_counter: index };
            s.store_release_u64(field(q, offset_of!(ModelQp, error)), e.encode());
        }
        // The counts are statistics the host reads after the launch: relaxed (one release, not three,
        // per pass); the consumer index, which a host quiet compares with the doorbell record, last.
        s.store_u64(field(q, offset_of!(ModelQp, wqes)), m.wqes + n as u64);
        s.store_u64(field(q, offset_of!(ModelQp, cqes)), m.cqes + cqes);
        s.store_release_u64(field(q, offset_of!(ModelQp, hw_ci)), pos);
    }
    n
}

/// The address of the u64 field at `off` of `*q`.
#[inline(always)]
fn field(q: *mut ModelQp, off: usize) -> *mut u64 {
    (q as usize + off) as *mut u64
}

/// The words the threads of one launch of the model share (the runtime's device-resident NIC keeps it
/// in front of its [`ModelQp`]s).
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct ModelHeader {
    /// Passes that found work, counted by every serving thread ([`serve`]).
    pub busy: u64,
    /// 0 while the launch serves; set (to 1) by the deciding thread (the one serving from QP 0) once
    /// none of the launch's threads found work for as long as [`Sys::idle`] allows: every thread ends
    /// on seeing it. Whoever starts a launch zeroes it first.
    pub end: u32,
    /// Unused (0).
    pub pad: u32,
}

const _: () = assert!(core::mem::size_of::<ModelHeader>() == 16);

/// Why [`serve`] returned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Served {
    /// The stop word was set.
    Stopped,
    /// The launch's deciding thread found it idle: [`Sys::idle`] gave up there while no thread found
    /// work, and it set the header's `end` word (the GPU kernel ends then, so that a context
    /// synchronization elsewhere does not wait for it; the runtime starts it again when a doorbell
    /// record moves).
    Idle,
}

/// How often a busy [`serve`] looks at the stop and end words (in passes over its QPs).
const STOP_EVERY: u64 = 1024;
/// How often an idle [`serve`] looks at the stop word (in spins without work; the end word, in the
/// launch's own memory, after every such pass).
const STOP_IDLE_EVERY: u64 = 64;

/// Runs the model over QPs `first, first + stride, ...` below `nqp` of the array at `qps`: passes of
/// [`step`] over them until the 32-bit word at `stop` is not 0, or the header's `end` word is not 0
/// (the end word after every pass that found nothing to do and the stop word every
/// [`STOP_IDLE_EVERY`] such passes; both every [`STOP_EVERY`] passes otherwise). Every caller serving QPs of the same array (the threads of one launch) adds 1 to the
/// header's `busy` word after each pass that found work. Only the caller with `first == 0` decides
/// when the launch ends: when [`Sys::idle`] gives up there while `busy` stayed the same, it sets `end`;
/// the others never end on their own idleness (their `idle` giving up only starts another wait), so
/// the launch's callers end together, and none leaves its QPs unserved while another keeps the launch
/// alive. Returns why it ended.
///
/// # Safety
/// As [`step`] for each of those QPs (no other caller serves them meanwhile); `stop` must point to a
/// live, 4-aligned word, and `header` to a live [`ModelHeader`] (8-aligned), that others access only
/// atomically; one caller of the launch has `first == 0`, and `end` was 0 when the launch began.
pub unsafe fn serve<S: Sys>(s: &S, qps: *mut ModelQp, nqp: u32, first: u32, stride: u32, stop: *const u32, header: *mut ModelHeader) -> Served {
    let stride = stride.max(1);
    let busy = (header as usize + offset_of!(ModelHeader, busy)) as *mut u64;
    let end = (header as usize + offset_of!(ModelHeader, end)) as *mut u32;
    let decides = first == 0;
    let mut spins = 0u64;
    let mut passes = 0u64;
    // SAFETY: the caller's header.
    let mut seen = unsafe { s.load_u64(busy) };
    loop {
        let mut done = 0;
        let mut q = first;
        while q < nqp {
            // SAFETY: QP q of the caller's array, served only here (the caller's contract).
            done += unsafe { step(s, qps.add(q as usize)) };
            q += stride;
        }
        passes += 1;
        if done == 0 || passes.is_multiple_of(STOP_EVERY) {
            // The stop word is in host memory (a PCIe read from a GPU, about a microsecond): an idle
            // pass looks at it only every STOP_IDLE_EVERY spins, so that the model answers a doorbell
            // within a pass, not a read of host memory.
            // SAFETY: the caller's stop word.
            if (done != 0 || spins.is_multiple_of(STOP_IDLE_EVERY)) && unsafe { s.load_acquire_u32(stop) } != 0 {
                return Served::Stopped;
            }
            // SAFETY: the caller's header.
            if unsafe { s.load_acquire_u32(end) } != 0 {
                return Served::Idle;
            }
        }
        if done != 0 {
            spins = 0;
            // SAFETY: the caller's header.
            unsafe { s.fetch_add_u64(busy, 1) };
        } else if !s.idle(&mut spins) {
            spins = 0;
            if decides {
                // SAFETY: as above.
                let now = unsafe { s.load_u64(busy) };
                if now == seen {
                    // SAFETY: as above.
                    unsafe { s.store_release_u32(end, 1) };
                    return Served::Idle;
                }
                seen = now;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wqe::Wqe;

    #[test]
    fn atomic_shapes() {
        assert_eq!(atomic_ds(opcode::ATOMIC_FA, 0), Some(4));
        assert_eq!(atomic_ds(opcode::ATOMIC_MASKED_CS, opmod::EXT_AMO_8), Some(5));
        assert_eq!(atomic_ds(opcode::ATOMIC_FA, 1), None);
        assert_eq!(check_kind(opcode::RDMA_WRITE, 0, 3), Ok(()));
        assert_eq!(check_kind(opcode::RDMA_WRITE, 1, 3), Err((syndrome::LOCAL_QP_OP, Reason::BadOpmod)));
        assert_eq!(check_kind(0x77, 0, 3), Err((syndrome::LOCAL_QP_OP, Reason::UnknownOpcode)));
        assert_eq!(check_kind(opcode::SEND, 0, 3), Err((syndrome::RNR_RETRY_EXC, Reason::NoReceiveQueue)));
    }

    #[test]
    fn framing() {
        let mut w = Wqe::nop(0);
        w.stamp(7, 0x123);
        let ctrl: CtrlSeg = bytemuck::must_cast(w.seg[0]);
        assert_eq!(check_framing(&ctrl, 7, 0x123, 1), Ok(1));
        assert_eq!(check_framing(&ctrl, 8, 0x123, 1), Err(Reason::WqeIndexMismatch));
        assert_eq!(check_framing(&ctrl, 7, 0x124, 1), Err(Reason::QpnMismatch));
        assert_eq!(check_framing(&ctrl, 7, 0x123, 0), Err(Reason::BeyondProducer));
    }
}
