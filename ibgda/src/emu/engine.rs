//! The emulated NIC's engine, one QP at a time: doorbell and doorbell-record handling, strict WQE
//! parsing, execution through the QP's remote peer, CQE writing. [`super::nic::Nic`] drives it.

use std::prelude::rust_2021::*;
use std::vec;
use super::fault::FaultConfig;
use super::mr::{Access, Denied, MrTable};
use super::reason::{Reason, RemoteError};
use super::remote::{Remote, RemoteDone, RemoteOp};
use super::setup::{ErrorInfo, QpSetup, QpStats};
use crate::mlx5::{self, cqe_opcode, fm_ce_se, opcode, opmod, syndrome, AtomicSeg, CtrlSeg, Cqe64, DataSeg, ErrCqe, InlineHdr, MaskedCs32Seg, MaskedCs64Seg, MaskedFa32Seg, MaskedFa64Seg, RaddrSeg};
use crate::nicmodel::{atomic_ds, check_framing, check_kind, store_cqe};
use crate::qp::HostSys;
use crate::wqe::Atomic;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

pub(super) struct EmuQp {
    pub(super) s: QpSetup,
    pub(super) remote: Box<dyn Remote>,
    /// Next WQEBB the NIC reads (WQEs before it are in flight or complete).
    pub(super) hw_ci: u64,
    pub(super) cq_pi: u64,
    pub(super) error: bool,
    pub(super) last_db: u64,
    /// A doorbell seen and not yet acted on: when, and its producer count.
    pub(super) pending: Option<(Instant, u16)>,
    pub(super) last_dbr: u16,
    pub(super) dbr_moved: Instant,
    pub(super) holding: bool,
    pub(super) last_scan: Instant,
    /// The producer count (low 16 bits) the NIC was told about and reads up to.
    pub(super) target: u16,
    /// WQEs read and started, not yet complete, in WQE order.
    pub(super) inflight: VecDeque<Inflight>,
    /// Bytes of WRITE data and READ buffers in flight (bounded by [`INFLIGHT_BYTES`]).
    pub(super) inflight_bytes: u64,
    pub(super) next_tag: u64,
    pub(super) stats: QpStats,
}

/// What a started WQE still has to do when its remote half is answered.
pub(super) enum Then {
    /// Nothing local (WRITE, NOP, DUMP, and WQEs that failed before starting).
    Nothing,
    /// Scatter the READ's bytes over these checked pieces (lkey, address, length).
    Scatter(Vec<(u32, u64, usize)>),
    /// Store the atomic's old value (as `Atomic::result_bytes`) at (lkey, address).
    Fetched { lkey: u32, addr: u64, atomic: Atomic },
}

/// A WQE between being read and its CQE.
pub(super) struct Inflight {
    pub(super) tag: u64,
    /// WQE index (ctrl segment) and opcode, for the CQE.
    pub(super) index: u16,
    pub(super) opcode: u8,
    pub(super) signalled: bool,
    /// WQEBBs it took in the send queue.
    pub(super) wqebbs: u32,
    /// READ or atomic: a later fenced WQE waits for it.
    pub(super) fetches: bool,
    pub(super) bytes: u32,
    /// Bytes counted in `inflight_bytes`.
    pub(super) held: u64,
    pub(super) then: Then,
    /// The outcome, once known (Ok: the CQE's byte count).
    pub(super) done: Option<Result<u32, Failure>>,
}

/// Most WQEs one QP keeps in flight.
pub(super) const INFLIGHT_WQES: usize = 1024;
/// Most bytes of WRITE and READ data one QP keeps in flight (a single larger WQE still goes alone).
pub(super) const INFLIGHT_BYTES: u64 = 64 << 20;

// SAFETY: the raw pointers in `s` name memory the caller of `add_qp` keeps valid for the NIC's life
// and that the NIC accesses only through atomics (or as DMA through registered regions); nothing in
// an EmuQp is tied to the thread that made it.
unsafe impl Send for EmuQp {}

pub(super) type Failure = (u8, Reason);

pub(super) fn qp_op(r: Reason) -> Failure {
    (syndrome::LOCAL_QP_OP, r)
}

pub(super) fn local_denied(d: Denied) -> Failure {
    (
        syndrome::LOCAL_PROT,
        match d {
            Denied::UnknownKey => Reason::UnknownLkey,
            Denied::OutOfRange => Reason::LocalRange,
            Denied::NoRight => Reason::LocalRights,
            Denied::Dma => Reason::DmaFailed,
        },
    )
}

pub(super) fn remote_failed(e: RemoteError) -> Failure {
    (e.syndrome, e.reason)
}

/// The 16-byte segment `i` of a WQE's bytes (callers check `i < ds` first).
pub(super) fn seg<T: bytemuck::Pod>(wqe: &[u8], i: usize) -> Option<T> {
    wqe.get(i * 16..i * 16 + core::mem::size_of::<T>()).map(bytemuck::pod_read_unaligned)
}

/// # Safety
/// `p`: 8 readable bytes, 8-byte aligned, accessed by others only atomically.
pub(super) unsafe fn load_u64(p: *const u8) -> u64 {
    // SAFETY: caller's contract.
    unsafe { AtomicU64::from_ptr(p as *mut u64) }.load(Ordering::Acquire)
}

/// The send counter of a QP doorbell record (low 16 bits of the producer count).
///
/// # Safety
/// `dbr`: 8 readable bytes, 4-byte aligned, accessed by others only atomically.
pub(super) unsafe fn dbr_counter(dbr: *const u8) -> u16 {
    // SAFETY: caller's contract; the send counter is the second word.
    let w = unsafe { AtomicU32::from_ptr(dbr.add(4 * mlx5::SND_DBR) as *mut u32) }.load(Ordering::Acquire);
    (u32::from_be_bytes(w.to_ne_bytes()) & 0xffff) as u16
}


/// One pass over one QP; returns (WQEs completed, WQEs read).
pub(super) fn poll_qp(q: &mut EmuQp, mrs: &MrTable, fault: &FaultConfig, ack_only: bool) -> (usize, usize) {
    let now = Instant::now();
    // SAFETY: add_qp's contract (aligned, live doorbell register).
    let db = unsafe { load_u64(q.s.db) };
    if db != q.last_db {
        q.last_db = db;
        let b = db.to_ne_bytes();
        let qpn = u32::from_be_bytes([0, b[4], b[5], b[6]]);
        let pi = u16::from_be_bytes([b[1], b[2]]);
        if qpn != q.s.qpn {
            q.stats.doorbells_foreign += 1;
        } else {
            q.stats.doorbells += 1;
            if fault.drop_doorbell_every > 0 && q.stats.doorbells.is_multiple_of(fault.drop_doorbell_every as u64) {
                q.stats.doorbells_dropped += 1;
            } else {
                let since = q.pending.map_or(now, |(t, _)| t);
                q.pending = Some((since, pi));
            }
        }
    }
    let scan_due = fault.scan_interval().is_some_and(|d| now.duration_since(q.last_scan) >= d);
    let fetch_due = q.pending.is_some_and(|(t, _)| now.duration_since(t) >= fault.fetch_delay);
    if fetch_due || scan_due {
        if scan_due {
            q.last_scan = now;
        }
        announce(q, fault, now, fetch_due);
        // A doorbell acted on (not held back by the full-queue fault) after the fetch delay.
        if fetch_due && !fault.fetch_delay.is_zero() && q.pending.is_none() {
            q.stats.delayed_fetches += 1;
        }
    }
    let mut done = complete(q, mrs, fault);
    let read = issue(q, mrs, ack_only);
    done += complete(q, mrs, fault);
    q.stats.hw_ci = q.hw_ci;
    (done, read)
}

/// A doorbell (or a doorbell-record scan) is acted on: the doorbell record's producer count becomes
/// what the NIC reads up to (unless the full-queue fault holds it back).
pub(super) fn announce(q: &mut EmuQp, fault: &FaultConfig, now: Instant, from_doorbell: bool) {
    // SAFETY: add_qp's contract (aligned, live doorbell record).
    let dbr_pi = unsafe { dbr_counter(q.s.dbr) };
    if dbr_pi != q.last_dbr {
        q.last_dbr = dbr_pi;
        q.dbr_moved = now;
    }
    let known = q.target.wrapping_sub(q.hw_ci as u16);
    let posted = dbr_pi.wrapping_sub(q.hw_ci as u16);
    // Counted when the doorbell is consumed (below), once per doorbell.
    let ahead = matches!((from_doorbell, q.pending), (true, Some((_, db_pi))) if db_pi.wrapping_sub(q.hw_ci as u16) > posted);
    if posted == known {
        if from_doorbell {
            q.pending = None;
            q.stats.doorbell_ahead_of_dbr += ahead as u64;
        }
        return;
    }
    if let Some(hold) = fault.hold_until_full {
        let unread = posted as u32 + q.inflight.len() as u32;
        if unread < (1u32 << q.s.log_sq) && now.duration_since(q.dbr_moved) < hold {
            if !q.holding {
                q.holding = true;
                q.stats.holds += 1;
            }
            return;
        }
    }
    q.holding = false;
    if from_doorbell {
        q.stats.doorbell_ahead_of_dbr += ahead as u64;
    } else {
        q.stats.scans_with_work += 1;
    }
    q.pending = None;
    q.target = dbr_pi;
}

/// Reads and starts the announced WQEs, in order, while the in-flight limits allow. A fenced WQE
/// (any fence mode) waits until the READs and atomics before it have completed; strong ordering waits
/// for everything before it. Returns the number of WQEs read.
pub(super) fn issue(q: &mut EmuQp, mrs: &MrTable, ack_only: bool) -> usize {
    let mut n = 0;
    while q.hw_ci as u16 != q.target && q.inflight.len() < INFLIGHT_WQES {
        if q.inflight_bytes >= INFLIGHT_BYTES {
            break;
        }
        let posted = q.target.wrapping_sub(q.hw_ci as u16) as u32;
        let mut buf = [0u8; mlx5::WQEBB * mlx5::MAX_WQEBBS_PER_WQE as usize];
        read_wqebbs(q, q.hw_ci, 1, &mut buf);
        let ctrl: CtrlSeg = bytemuck::pod_read_unaligned(&buf[..16]);
        let fm = ctrl.fm_ce_se & fm_ce_se::FM_MASK;
        if !q.error && fm != 0 && fm <= fm_ce_se::FM_FENCE_AND_SMALL {
            let blocked = |q: &EmuQp| q.inflight.iter().any(|f| f.done.is_none() && (f.fetches || fm == fm_ce_se::FM_STRONG_ORDERING));
            if blocked(q) {
                absorb(q, mrs);
                if blocked(q) {
                    break;
                }
            }
        }
        let hw16 = q.hw_ci as u16;
        let ds = ctrl.ds() as usize;
        let nbb = (ds as u32).div_ceil(4).max(1);
        let advance = nbb.min(posted).max(1);
        let tag = q.next_tag;
        q.next_tag += 1;
        let mut f = Inflight {
            tag,
            index: hw16,
            opcode: ctrl.opcode(),
            signalled: ctrl.signalled(),
            wqebbs: advance,
            fetches: matches!(ctrl.opcode(), opcode::RDMA_READ | opcode::ATOMIC_CS | opcode::ATOMIC_FA | opcode::ATOMIC_MASKED_CS | opcode::ATOMIC_MASKED_FA),
            bytes: 0,
            held: 0,
            then: Then::Nothing,
            done: None,
        };
        let framing: Result<(), Failure> =
            if q.error { Err((syndrome::WR_FLUSH, Reason::Flushed)) } else { check_framing(&ctrl, hw16, q.s.qpn, posted).map(|_| ()).map_err(qp_op) };
        let started = framing.and_then(|()| {
            if nbb > 1 {
                read_wqebbs(q, q.hw_ci + 1, nbb as usize - 1, &mut buf[mlx5::WQEBB..]);
            }
            start(&ctrl, &buf[..ds * 16], mrs, &mut f, if ack_only { None } else { Some(q.remote.as_mut()) })
        });
        match started {
            Ok(Some(bytes)) => f.done = Some(Ok(bytes)),
            Ok(None) => {}
            Err(e) => f.done = Some(Err(e)),
        }
        q.inflight_bytes += f.held;
        q.inflight.push_back(f);
        let before = q.hw_ci;
        q.hw_ci += advance as u64;
        q.stats.index_wraps += (q.hw_ci >> 16).wrapping_sub(before >> 16);
        n += 1;
    }
    n
}

/// Takes the peer's answers and completes WQEs from the front, in order: local effects (READ data,
/// fetched values), then the CQE (signalled WQEs and every error). After an error the QP is in the
/// error state and every later WQE completes flushed. Returns the number of WQEs completed.
pub(super) fn complete(q: &mut EmuQp, mrs: &MrTable, fault: &FaultConfig) -> usize {
    absorb(q, mrs);
    let mut n = 0;
    while q.inflight.front().is_some_and(|f| f.done.is_some()) {
        let f = q.inflight.pop_front().expect("front checked");
        q.inflight_bytes -= f.held;
        let mut result = f.done.expect("done checked");
        if q.error && result.is_ok() {
            result = Err((syndrome::WR_FLUSH, Reason::Flushed));
        }
        q.stats.wqes += 1;
        q.stats.wqebbs += f.wqebbs as u64;
        match result {
            Ok(bytes) => {
                if f.signalled {
                    let c = Cqe64::req(f.opcode, q.s.qpn, f.index, bytes, false);
                    write_cqe(q, fault, bytemuck::cast(c));
                }
            }
            Err((syn, reason)) => {
                if q.stats.first_error.is_none() {
                    q.stats.first_error = Some(ErrorInfo { wqe_counter: f.index, wqe_opcode: f.opcode, syndrome: syn, reason });
                }
                q.error = true;
                q.stats.in_error = true;
                let c = ErrCqe::req_err(f.opcode, q.s.qpn, f.index, syn, reason as u8, false);
                write_cqe(q, fault, bytemuck::cast(c));
            }
        }
        n += 1;
    }
    n
}

/// Takes the peer's answers: each finishes its WQE's local half (READ data, fetched value). The
/// in-flight WQEs carry consecutive tags from the front's on (tags are handed out in order and WQEs
/// leave from the front), so an answer finds its WQE by index.
pub(super) fn absorb(q: &mut EmuQp, mrs: &MrTable) {
    while let Some((tag, r)) = q.remote.poll() {
        let at = q.inflight.front().map(|f| tag.wrapping_sub(f.tag) as usize);
        if let Some(f) = at.and_then(|i| q.inflight.get_mut(i)).filter(|f| f.tag == tag && f.done.is_none()) {
            f.done = Some(match r {
                Ok(done) => finish(&f.then, f.bytes, done, mrs),
                Err(e) => Err(remote_failed(e)),
            });
        }
    }
}

/// The local half of a WQE whose remote half was answered with `done`: scatter a READ's bytes,
/// store an atomic's old value. The pieces were checked when the WQE started and are checked again
/// (a region may have been deregistered meanwhile).
pub(super) fn finish(then: &Then, bytes: u32, done: RemoteDone, mrs: &MrTable) -> Result<u32, Failure> {
    match (then, done) {
        (Then::Nothing, _) => Ok(bytes),
        (Then::Scatter(pieces), RemoteDone::Read(data)) => {
            if data.len() != bytes as usize {
                return Err((syndrome::BAD_RESP, Reason::BadLength));
            }
            let mut off = 0;
            for &(lkey, addr, n) in pieces {
                mrs.write(lkey, addr, &data[off..off + n], Access::LOCAL_WRITE).map_err(local_denied)?;
                off += n;
            }
            Ok(bytes)
        }
        (Then::Fetched { lkey, addr, atomic }, RemoteDone::Fetched(old)) => {
            let b = atomic.result_bytes(old);
            mrs.write(*lkey, *addr, &b[..atomic.bytes() as usize], Access::LOCAL_WRITE).map_err(local_denied)?;
            Ok(bytes)
        }
        _ => Err((syndrome::BAD_RESP, Reason::BadLength)),
    }
}

/// Copies `count` WQEBBs starting at count `pos` (wrapping around the ring) into `out`.
pub(super) fn read_wqebbs(q: &EmuQp, pos: u64, count: usize, out: &mut [u8]) {
    let mask = (1u64 << q.s.log_sq) - 1;
    for (k, bb) in out.chunks_exact_mut(mlx5::WQEBB).take(count).enumerate() {
        let slot = (pos + k as u64) & mask;
        for (w, word) in bb.chunks_exact_mut(4).enumerate() {
            // SAFETY: inside the send queue (slot < size, w < 16); add_qp's contract: live, 64-byte
            // aligned, written by the posting code with atomic stores.
            let p = unsafe { q.s.sq.add((slot as usize) * mlx5::WQEBB + 4 * w) };
            // SAFETY: as above; 4-byte aligned.
            let v = unsafe { AtomicU32::from_ptr(p as *mut u32) }.load(Ordering::Relaxed);
            word.copy_from_slice(&v.to_ne_bytes());
        }
    }
}

/// Writes a CQE: the body, then the last word (`wqe_counter`, `signature`, `op_own`) with a release
/// store, since pollers read that word alone.
pub(super) fn write_cqe(q: &mut EmuQp, fault: &FaultConfig, mut cqe: [u8; 64]) {
    if !fault.cqe_delay.is_zero() {
        std::thread::sleep(fault.cqe_delay);
        q.stats.slow_cqes += 1;
    }
    let cq = q.s.cq;
    let n = 1u64 << cq.log_n;
    if !cq.collapsed && !cq.overrun_ignore && !cq.dbr.is_null() {
        // SAFETY: add_qp's contract (aligned, live CQ doorbell record).
        let w = unsafe { AtomicU32::from_ptr(cq.dbr as *mut u32) }.load(Ordering::Acquire);
        let ci = u32::from_be_bytes(w.to_ne_bytes()) & 0x00ff_ffff;
        if ((q.cq_pi as u32).wrapping_sub(ci) & 0x00ff_ffff) as u64 >= n {
            q.stats.cq_overrun = true;
            q.error = true;
            q.stats.in_error = true;
            return;
        }
    }
    let (slot, owner) = if cq.collapsed { (0, 0) } else { (q.cq_pi & (n - 1), ((q.cq_pi >> cq.log_n) & 1) as u8) };
    cqe[63] = (cqe[63] & !1) | owner;
    // SAFETY: slot < n: inside the CQ (add_qp's contract: live, 64-byte aligned, `64 << log_n` bytes).
    let base = unsafe { cq.base.add(slot as usize * mlx5::CQE_SIZE) };
    // SAFETY: the slot above: live, 64-byte aligned, read by pollers only atomically.
    unsafe { store_cqe(&HostSys, base, bytemuck::must_cast(cqe)) };
    q.cq_pi += 1;
    q.stats.cqes += 1;
    if cqe[63] >> 4 == cqe_opcode::REQ_ERR {
        q.stats.error_cqes += 1;
    }
}

/// The gather list of a WRITE (the segments after raddr): one inline segment, or data segments.
pub(super) fn gather(rest: &[u8], mrs: &MrTable) -> Result<Vec<u8>, Failure> {
    let Some(hdr) = seg::<InlineHdr>(rest, 0) else {
        return Ok(Vec::new()); // ds 2: a zero-length WRITE
    };
    if hdr.is_inline() {
        let len = hdr.len() as usize;
        if mlx5::inline_ds(hdr.len()) as usize != rest.len() / 16 {
            return Err(qp_op(Reason::BadInline));
        }
        return rest.get(4..4 + len).map(<[u8]>::to_vec).ok_or(qp_op(Reason::BadInline));
    }
    let (parts, total) = segments(rest, mrs, Access::NONE)?;
    let mut data = vec![0u8; total];
    let mut off = 0;
    for (lkey, addr, n) in parts {
        mrs.read(lkey, addr, &mut data[off..off + n], Access::NONE).map_err(local_denied)?;
        off += n;
    }
    Ok(data)
}

/// Checked (lkey, address, length) pieces of a scatter/gather list.
type Pieces = Vec<(u32, u64, usize)>;

/// The data segments of a WQE, each checked against a region with `access` (a WRITE's gather list:
/// none beyond local reads; a READ's scatter list: local writes); and their total length.
pub(super) fn segments(rest: &[u8], mrs: &MrTable, access: Access) -> Result<(Pieces, usize), Failure> {
    let mut parts = Vec::new();
    let mut total = 0u64;
    for i in 0..rest.len() / 16 {
        let d: DataSeg = seg(rest, i).ok_or(qp_op(Reason::BadDs))?;
        let (bc, lkey, addr) = (d.byte_count.get(), d.lkey.get(), d.addr.get());
        if bc & mlx5::INLINE_SEG != 0 {
            return Err(qp_op(Reason::BadInline));
        }
        if bc == 0 {
            if lkey == mlx5::INVALID_LKEY {
                break;
            }
            continue;
        }
        total += bc as u64;
        if total > mlx5::MAX_MSG as u64 {
            return Err((syndrome::LOCAL_LENGTH, Reason::BadLength));
        }
        mrs.check(lkey, addr, bc as u64, access).map_err(local_denied)?;
        parts.push((lkey, addr, bc as usize));
    }
    Ok((parts, total as usize))
}

/// Starts one well-framed WQE (`wqe` = its `ds * 16` bytes): checks it (its shape first, as the NIC
/// model does, [`check_kind`]; then its segments), does what is local and hands the remote half to
/// `remote` (None: acknowledge-only mode, which checks and completes). Returns Some(byte count) when
/// the WQE is complete already (local-only kinds, acknowledge-only), None when it waits for the
/// peer's answer; `f` gets what to do then.
pub(super) fn start(ctrl: &CtrlSeg, wqe: &[u8], mrs: &MrTable, f: &mut Inflight, remote: Option<&mut dyn Remote>) -> Result<Option<u32>, Failure> {
    let ds = wqe.len() / 16;
    let op = ctrl.opcode();
    let om = ctrl.opmod();
    check_kind(op, om, ds)?;
    let raddr = || seg::<RaddrSeg>(wqe, 1).ok_or(qp_op(Reason::BadDs));
    let tag = f.tag;
    let go = |remote: Option<&mut dyn Remote>, r: RemoteOp, bytes: u32| -> Result<Option<u32>, Failure> {
        match remote {
            None => Ok(Some(bytes)),
            Some(remote) => remote.start(tag, r).map(|()| None).map_err(remote_failed),
        }
    };
    match op {
        opcode::NOP => Ok(Some(0)),
        opcode::RDMA_WRITE => {
            let ra = raddr()?;
            let rest = wqe.get(32..).unwrap_or(&[]);
            if remote.is_none() {
                // Acknowledge-only: check the gather list without reading the data.
                let hdr = seg::<InlineHdr>(rest, 0);
                let bytes = match hdr {
                    Some(h) if h.is_inline() => gather(rest, mrs)?.len(),
                    None => 0,
                    Some(_) => segments(rest, mrs, Access::NONE)?.1,
                };
                return Ok(Some(bytes as u32));
            }
            let data = gather(rest, mrs)?;
            f.bytes = data.len() as u32;
            f.held = data.len() as u64;
            let n = f.bytes;
            go(remote, RemoteOp::Write { rkey: ra.rkey.get(), raddr: ra.raddr.get(), data }, n)
        }
        opcode::RDMA_READ => {
            let ra = raddr()?;
            let (parts, total) = segments(wqe.get(32..).unwrap_or(&[]), mrs, Access::LOCAL_WRITE)?;
            f.bytes = total as u32;
            f.held = total as u64;
            f.then = Then::Scatter(parts);
            go(remote, RemoteOp::Read { rkey: ra.rkey.get(), raddr: ra.raddr.get(), len: total as u32 }, total as u32)
        }
        opcode::ATOMIC_CS | opcode::ATOMIC_FA | opcode::ATOMIC_MASKED_CS | opcode::ATOMIC_MASKED_FA => {
            let atomic = decode_atomic(op, om, ds, wqe)?;
            let ra = raddr()?;
            let d: DataSeg = seg(wqe, ds - 1).ok_or(qp_op(Reason::BadDs))?;
            let n = atomic.bytes();
            if d.byte_count.get() != n {
                return Err(qp_op(Reason::BadLength));
            }
            mrs.check(d.lkey.get(), d.addr.get(), n as u64, Access::LOCAL_WRITE).map_err(local_denied)?;
            f.bytes = n;
            f.then = Then::Fetched { lkey: d.lkey.get(), addr: d.addr.get(), atomic };
            go(remote, RemoteOp::Atomic { rkey: ra.rkey.get(), raddr: ra.raddr.get(), op: atomic }, n)
        }
        opcode::DUMP => {
            let d: DataSeg = seg(wqe, 1).ok_or(qp_op(Reason::BadDs))?;
            let bc = d.byte_count.get();
            if bc & mlx5::INLINE_SEG != 0 {
                return Err(qp_op(Reason::BadInline));
            }
            if bc > 0 {
                mrs.check(d.lkey.get(), d.addr.get(), bc as u64, Access::NONE).map_err(local_denied)?;
            }
            Ok(Some(bc))
        }
        // check_kind failed every other opcode (send-type ones, with no receive queue; unknown ones).
        _ => Err(qp_op(Reason::UnknownOpcode)),
    }
}

/// The atomic an atomic WQE asks for, with its shape checked (opmod, exact ds).
pub(super) fn decode_atomic(op: u8, om: u8, ds: usize, wqe: &[u8]) -> Result<Atomic, Failure> {
    if atomic_ds(op, om).ok_or(qp_op(Reason::BadOpmod))? != ds {
        return Err(qp_op(Reason::BadDs));
    }
    let bad = || qp_op(Reason::BadDs);
    match (op, om) {
        (opcode::ATOMIC_FA, 0) => {
            let a: AtomicSeg = seg(wqe, 2).ok_or_else(bad)?;
            Ok(Atomic::Fa64 { add: a.swap_add.get() })
        }
        (opcode::ATOMIC_CS, 0) => {
            let a: AtomicSeg = seg(wqe, 2).ok_or_else(bad)?;
            Ok(Atomic::Cs64 { compare: a.compare.get(), swap: a.swap_add.get() })
        }
        (opcode::ATOMIC_MASKED_FA, opmod::EXT_AMO_4) => {
            let a: MaskedFa32Seg = seg(wqe, 2).ok_or_else(bad)?;
            Ok(Atomic::MaskedFa32 { add: a.add.get(), boundary: a.field_boundary.get() })
        }
        (opcode::ATOMIC_MASKED_FA, opmod::EXT_AMO_8) => {
            let a: MaskedFa64Seg = seg(wqe, 2).ok_or_else(bad)?;
            Ok(Atomic::MaskedFa64 { add: a.add.get(), boundary: a.field_boundary.get() })
        }
        (opcode::ATOMIC_MASKED_CS, opmod::EXT_AMO_4) => {
            let a: MaskedCs32Seg = seg(wqe, 2).ok_or_else(bad)?;
            Ok(Atomic::MaskedCs32 { swap: a.swap.get(), compare: a.compare.get(), swap_mask: a.swap_mask.get(), compare_mask: a.compare_mask.get() })
        }
        (opcode::ATOMIC_MASKED_CS, opmod::EXT_AMO_8) => {
            let a: MaskedCs64Seg = seg(wqe, 2).ok_or_else(bad)?;
            Ok(Atomic::MaskedCs64 { swap: a.swap.get(), compare: a.compare.get(), swap_mask: a.swap_mask.get(), compare_mask: a.compare_mask.get() })
        }
        _ => Err(qp_op(Reason::BadOpmod)),
    }
}
