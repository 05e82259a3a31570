//! The emulated NIC's remote half, carried by the remote engine's lanes: the *responder* that checks
//! the NIC frames a peer's emulated NIC sends (the peer NIC's job on hardware: the rkey and the range
//! against this PE's registered memory) before the engine's apply code applies them, and the *port*
//! that sends this PE's own NIC frames and hands their answers back to this PE's NIC.
//!
//! The responder is the engine's NIC hook (`proxy::target::Nic`): a lane's thread asks it about every
//! NIC frame it receives and rewrites the frame to the heap offset it names (or refuses it, answered
//! with the error status); the apply code then writes, reads and runs atomics as for any frame, in
//! the lane's order, and writes the NIC's answers into the reply ring.
//!
//! A QP's frames all take one lane (its QP index picks it), so that they are applied in the QP's
//! order at the target, as a NIC executes a QP's work requests in order.

use crate::error::{Error, Result};
use crate::log;
use crate::transport::proxy::engine::Engine;
use crate::transport::proxy::target::{Nic, Verdict};
use crate::transport::wire::{self, Frames, Head, NicAckBody, NicDataBody, HEAD_BYTES};
use rshmem_ibgda::emu::{Access, MrTable, Reason, RemoteDone, RemoteError, RemoteOp};
use rshmem_ibgda::mlx5::syndrome;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Where the answers to this PE's NIC frames go: (peer, seq, outcome).
pub(crate) type NicAnswer = dyn Fn(u32, u64, std::result::Result<RemoteDone, RemoteError>) + Send + Sync;

/// A READ this PE asked for: the pieces whose answers are still due, the bytes so far, its error.
#[derive(Default)]
struct Read {
    pieces_left: u32,
    bytes: Vec<u8>,
    error: Option<RemoteError>,
}

/// Per-peer state of NIC frames.
#[derive(Default)]
struct NicLink {
    /// The failures of multi-piece WRITEs being received (answered at their last piece), by tag.
    write_failed: HashMap<u64, RemoteError>,
    /// READs this PE asked for, by tag.
    reads: HashMap<u64, Read>,
    /// NIC operations sent to the peer and not yet answered.
    outstanding: u64,
}

/// The responder of this PE's emulated NIC, and the bookkeeping of its own NIC frames.
pub(crate) struct NicResponder {
    /// The regions incoming NIC frames are checked against (this PE's registered heap and buffers).
    regions: Arc<MrTable>,
    /// Called with (peer, seq, outcome) for every answered NIC operation this PE sent.
    answer: Box<NicAnswer>,
    /// Per peer PE.
    links: Vec<Mutex<NicLink>>,
    /// The heap (base and size in this process), and the engine (set once the engine is made; weak:
    /// the engine holds this responder, and a strong link back would keep both alive after finalize).
    heap: (u64, u64),
    engine: OnceLock<Weak<Engine>>,
}

impl NicResponder {
    pub(crate) fn new(npes: usize, regions: Arc<MrTable>, heap_base: u64, heap_size: u64, answer: Box<NicAnswer>) -> NicResponder {
        NicResponder { regions, answer, links: (0..npes).map(|_| Mutex::default()).collect(), heap: (heap_base, heap_size), engine: OnceLock::new() }
    }

    fn nic(&self, peer: u32) -> Result<std::sync::MutexGuard<'_, NicLink>> {
        self.links
            .get(peer as usize)
            .map(|l| l.lock().unwrap_or_else(|e| e.into_inner()))
            .ok_or_else(|| Error::new(format!("emulated NIC: PE {peer} is not in the job")))
    }

    /// What a responder NIC checks of a remote access: the rkey names a region of this PE with the
    /// right `need`, and `[raddr, raddr + len)` lies inside it and inside the backed heap. Returns the
    /// heap offset.
    fn check_access(&self, rkey: u32, raddr: u64, len: u64, need: Access) -> std::result::Result<u64, RemoteError> {
        self.regions.check_remote(rkey, raddr, len, need)?;
        let (base, size) = self.heap;
        let off = raddr.wrapping_sub(base);
        let backed = self.engine.get().and_then(Weak::upgrade).map_or(0, |e| e.target.backed());
        if off >= size || len > size - off || off + len > backed {
            return Err(RemoteError { syndrome: syndrome::REMOTE_ACCESS, reason: Reason::RemoteRange });
        }
        Ok(off)
    }
}

impl Nic for NicResponder {
    fn check(&self, peer: u32, kind: u8, key: u32, raddr: u64, len: u64, seq: u64, last: bool) -> Verdict {
        let r = match kind {
            wire::NIC_WRITE => self.check_access(key, raddr, len, Access::REMOTE_WRITE),
            wire::NIC_READ => self.check_access(key, raddr, len, Access::REMOTE_READ),
            _ => self.check_access(key, raddr, len, Access::REMOTE_ATOMIC).and_then(|off| {
                if raddr.is_multiple_of(len) {
                    Ok(off)
                } else {
                    Err(RemoteError { syndrome: syndrome::REMOTE_INVAL_REQ, reason: Reason::Misaligned })
                }
            }),
        };
        if kind != wire::NIC_WRITE {
            return match r {
                Ok(off) => Verdict::Apply(off),
                Err(e) => Verdict::Refuse(e.syndrome, e.reason as u8),
            };
        }
        // A WRITE of several pieces fails as a whole: answered once, at its last piece.
        let Ok(mut nic) = self.nic(peer) else { return Verdict::Refuse(syndrome::REMOTE_ACCESS, Reason::Unreachable as u8) };
        let failed = if last { nic.write_failed.remove(&seq) } else { nic.write_failed.get(&seq).copied() };
        match (r, failed, last) {
            (_, Some(e), true) => Verdict::Refuse(e.syndrome, e.reason as u8),
            (_, Some(_), false) => Verdict::Skip,
            (Ok(off), None, _) => Verdict::Apply(off),
            (Err(e), None, true) => Verdict::Refuse(e.syndrome, e.reason as u8),
            (Err(e), None, false) => {
                nic.write_failed.insert(seq, e);
                Verdict::Skip
            }
        }
    }

    fn answer(&self, peer: u32, frame: &[u8]) -> Result<()> {
        let h: Head = bytemuck::pod_read_unaligned(&frame[..HEAD_BYTES]);
        let mut nic = self.nic(peer)?;
        match h.kind {
            wire::NIC_ACK => {
                let b: NicAckBody = bytemuck::pod_read_unaligned(&frame[HEAD_BYTES..HEAD_BYTES + 16]);
                let err = (h.op != 0).then(|| RemoteError { syndrome: h.op, reason: Reason::from_u8(h.width).unwrap_or(Reason::Unreachable) });
                if let Some(rd) = nic.reads.get_mut(&b.seq) {
                    // An error answer to a piece of a READ.
                    rd.pieces_left = rd.pieces_left.saturating_sub(1);
                    rd.error = rd.error.or(err).or(Some(RemoteError { syndrome: syndrome::REMOTE_OP, reason: Reason::DmaFailed }));
                    if rd.pieces_left == 0 {
                        let rd = nic.reads.remove(&b.seq).expect("present");
                        nic.outstanding = nic.outstanding.saturating_sub(1);
                        drop(nic);
                        (self.answer)(peer, b.seq, Err(rd.error.expect("set")));
                    }
                    return Ok(());
                }
                nic.outstanding = nic.outstanding.saturating_sub(1);
                drop(nic);
                // WRITEs are answered with 0; atomics with the old value (the NIC thread knows which).
                (self.answer)(peer, b.seq, err.map_or(Ok(RemoteDone::Fetched(b.value)), Err));
            }
            wire::NIC_READ_DATA => {
                let b: NicDataBody = bytemuck::pod_read_unaligned(&frame[HEAD_BYTES..HEAD_BYTES + 16]);
                let data = &frame[HEAD_BYTES + 16..HEAD_BYTES + 16 + h.len as usize];
                let Some(rd) = nic.reads.get_mut(&b.seq) else {
                    return Err(Error::new(format!("PE {peer} answered NIC READ {:#x}, which this PE did not send", b.seq)));
                };
                if rd.error.is_none() {
                    if b.at != rd.bytes.len() as u64 {
                        return Err(Error::new(format!("PE {peer} answered NIC READ {:#x} with bytes at {:#x} after {:#x} bytes", b.seq, b.at, rd.bytes.len())));
                    }
                    rd.bytes.extend_from_slice(data);
                }
                rd.pieces_left = rd.pieces_left.saturating_sub(1);
                if rd.pieces_left == 0 {
                    let rd = nic.reads.remove(&b.seq).expect("present");
                    nic.outstanding = nic.outstanding.saturating_sub(1);
                    drop(nic);
                    (self.answer)(peer, b.seq, rd.error.map_or(Ok(RemoteDone::Read(rd.bytes)), Err));
                }
            }
            k => return Err(Error::new(format!("PE {peer}: a {} frame is not an emulated-NIC answer", wire::kind_name(k)))),
        }
        Ok(())
    }

    fn outstanding(&self, peer: u32) -> u64 {
        self.nic(peer).map_or(0, |n| n.outstanding)
    }
}

/// The engine's sending side for the emulated NIC: sends the remote halves of its WQEs to their peer.
#[derive(Clone)]
pub(crate) struct NicPort {
    engine: Arc<Engine>,
    responder: Arc<NicResponder>,
}

/// Bits of a NIC frame's tag below its QP index (`emulated::TAG_BITS`).
const QP_SHIFT: u32 = 40;

impl NicPort {
    /// The port over `engine`, whose NIC hooks become `responder`'s.
    pub(crate) fn new(engine: Arc<Engine>, responder: Arc<NicResponder>) -> NicPort {
        let _ = responder.engine.set(Arc::downgrade(&engine));
        engine.set_nic(responder.clone());
        NicPort { engine, responder }
    }

    /// Sends `op` (tagged `seq`, echoed by the answer) to PE `pe`. An error when the peer cannot be
    /// reached (not reached by the engine, its lane ended or failed): what a NIC reports as retries
    /// exceeded.
    pub(crate) fn start(&self, pe: u32, seq: u64, op: RemoteOp) -> std::result::Result<(), RemoteError> {
        let unreachable = RemoteError { syndrome: syndrome::TRANSPORT_RETRY_EXC, reason: Reason::Unreachable };
        let eng = &self.engine;
        if !eng.reaches(pe) || eng.abort.load(Ordering::Acquire) {
            return Err(unreachable);
        }
        let r = &eng.peer_lanes[pe as usize];
        let i = r.start + ((seq >> QP_SHIFT) as usize % r.len());
        let lane = &eng.lanes[i];
        if lane.ended.load(Ordering::Acquire) || lane.peer_closed.load(Ordering::Acquire) {
            return Err(unreachable);
        }
        let max = wire::MAX_PAYLOAD as u64;
        let mut b = Vec::new();
        let frames = match &op {
            RemoteOp::Write { rkey, raddr, data } => {
                let n = data.len() as u64;
                let mut at = 0u64;
                let mut k = 0;
                loop {
                    let m = (n - at).min(max);
                    let last = at + m >= n;
                    Frames::nic_write_head(&mut b, *rkey, raddr.wrapping_add(at), m as u32, seq, last);
                    b.extend_from_slice(&data[at as usize..(at + m) as usize]);
                    b.extend_from_slice(wire::pad(m as usize));
                    k += 1;
                    at += m;
                    if last {
                        break;
                    }
                }
                k
            }
            RemoteOp::Read { rkey, raddr, len } => {
                let n = *len as u64;
                let mut at = 0u64;
                let mut k = 0u32;
                loop {
                    let m = (n - at).min(max);
                    let last = at + m >= n;
                    Frames::nic_read(&mut b, *rkey, raddr.wrapping_add(at), m as u32, seq, at as u32, last);
                    k += 1;
                    at += m;
                    if last {
                        break;
                    }
                }
                if let Ok(mut nic) = self.responder.nic(pe) {
                    nic.reads.insert(seq, Read { pieces_left: k, bytes: Vec::with_capacity(n as usize), error: None });
                }
                k as u64
            }
            RemoteOp::Atomic { rkey, raddr, op } => {
                let (kind, ops) = op.encode();
                Frames::nic_atomic(&mut b, *rkey, *raddr, kind, op.bytes() as u8, seq, ops);
                1
            }
        };
        self.responder.nic(pe).map_err(|_| unreachable)?.outstanding += 1;
        if eng.set.trace {
            log::debug(format!("proxy trace: NIC {seq:#x} to PE {pe} on lane {}: {op:?}", lane.index));
        }
        lane.issued.fetch_add(frames, Ordering::AcqRel);
        lane.send_frames(eng, &b).map_err(|e| {
            log::debug(format!("proxy: NIC frame {seq:#x} to PE {pe}: {e}"));
            unreachable
        })
    }
}
