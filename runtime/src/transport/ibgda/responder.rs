//! The emulated NIC's remote half, carried by the proxy engine's connections: the *responder* that
//! serves the NIC frames a peer's emulated NIC sends (the peer NIC's job on hardware: check the rkey and
//! the range against this PE's registered memory, apply the data, run the atomic), and the *port* that
//! sends this PE's own NIC frames and hands their answers back to this PE's NIC.
//!
//! The responder is an extension of the proxy engine (`proxy::engine::Extension`): the engine passes
//! it every NIC frame and knows nothing of them itself.

use crate::error::{Error, Result};
use crate::log;
use crate::transport::proxy::engine::{tracing, Engine, Extension};
use crate::transport::proxy::link::{Job, Link};
use crate::transport::wire::{Chunks, Message};
use rshmem_device::remote::inbound;
use rshmem_ibgda::emu::{Access, MrTable, Reason, RemoteDone, RemoteError, RemoteOp};
use rshmem_ibgda::mlx5::syndrome;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Where the answers to this PE's NIC frames go: (peer, seq, outcome).
pub(crate) type NicAnswer = dyn Fn(u32, u64, std::result::Result<RemoteDone, RemoteError>) + Send + Sync;

/// Per-peer state of NIC frames.
#[derive(Default)]
struct NicLink {
    /// The failure of the multi-chunk NIC WRITE being received (answered at its last chunk).
    write_failed: Option<RemoteError>,
    /// READs this PE asked for, whose bytes are arriving: seq -> bytes so far.
    reads: HashMap<u64, Vec<u8>>,
    /// NIC frames sent to the peer and not yet answered.
    outstanding: u64,
}

/// The responder of this PE's emulated NIC, and the bookkeeping of its own NIC frames.
pub(crate) struct NicResponder {
    /// The regions incoming NIC frames are checked against (this PE's registered heap and buffers).
    regions: Arc<MrTable>,
    /// Called with (peer, seq, outcome) for every answered NIC frame this PE sent.
    answer: Box<NicAnswer>,
    /// Per peer PE.
    links: Vec<Mutex<NicLink>>,
}

impl NicResponder {
    pub(crate) fn new(npes: usize, regions: Arc<MrTable>, answer: Box<NicAnswer>) -> NicResponder {
        NicResponder { regions, answer, links: (0..npes).map(|_| Mutex::default()).collect() }
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
    fn check(&self, engine: &Engine, rkey: u32, raddr: u64, len: u64, need: Access) -> std::result::Result<u64, RemoteError> {
        self.regions.check_remote(rkey, raddr, len, need)?;
        let t = &engine.target;
        let off = raddr.wrapping_sub(t.heap_base);
        if off >= t.heap_size || len > t.heap_size - off || off + len > t.backed() {
            return Err(RemoteError { syndrome: syndrome::REMOTE_ACCESS, reason: Reason::RemoteRange });
        }
        Ok(off)
    }
}

/// The answer frame to a NIC frame: its status and fetched value.
fn ack(link: &Link, seq: u64, status: std::result::Result<u64, RemoteError>) {
    let (syndrome, reason, value) = match status {
        Ok(value) => (0, 0, value),
        Err(e) => (e.syndrome, e.reason as u8, 0),
    };
    link.push(Job::Send(Box::new(move |c| c.send_message(&Message::NicAck { seq, syndrome, reason, value }))));
}

/// A NIC READ's bytes, in frames of at most the chunk limit.
fn read_response(engine: &Engine, link: &Link, seq: u64, data: Vec<u8>) {
    let (me, max) = (engine.target.me, engine.max_chunk);
    link.push(Job::Send(Box::new(move |c| {
        let chunk = c.send_chunk().min(max);
        for ch in Chunks::nic_read_response(me, seq, data.len() as u64, chunk) {
            c.send(&ch.header, &data[ch.range.clone()])?;
        }
        Ok(())
    })));
}

impl Extension for NicResponder {
    fn frame(&self, engine: &Engine, link: &Link, m: Message<'_>) -> Result<()> {
        let peer = link.peer;
        let t = &engine.target;
        match m {
            Message::NicWrite { seq, rkey, raddr, data, last } => {
                let mut nic = self.nic(peer)?;
                if nic.write_failed.is_none() {
                    let r = self.check(engine, rkey, raddr, data.len() as u64, Access::REMOTE_WRITE).and_then(|offset| {
                        t.store(peer, offset, data).map_err(|e| {
                            log::warn(format!("proxy: NIC WRITE from PE {peer}: {e}"));
                            RemoteError { syndrome: syndrome::REMOTE_OP, reason: Reason::DmaFailed }
                        })
                    });
                    nic.write_failed = r.err();
                }
                if last {
                    let status = nic.write_failed.take().map_or(Ok(0), Err);
                    drop(nic);
                    ack(link, seq, status);
                }
            }
            Message::NicRead { seq, rkey, raddr, len } => {
                let r = self.check(engine, rkey, raddr, len, Access::REMOTE_READ).and_then(|offset| {
                    t.load(peer, offset, len).map_err(|e| {
                        log::warn(format!("proxy: NIC READ from PE {peer}: {e}"));
                        RemoteError { syndrome: syndrome::REMOTE_OP, reason: Reason::DmaFailed }
                    })
                });
                match r {
                    Ok(data) => read_response(engine, link, seq, data),
                    Err(e) => ack(link, seq, Err(e)),
                }
            }
            Message::NicAtomic { seq, rkey, raddr, op } => {
                let n = op.bytes() as u64;
                let r = self.check(engine, rkey, raddr, n, Access::REMOTE_ATOMIC).and_then(|offset| {
                    if !raddr.is_multiple_of(n) {
                        return Err(RemoteError { syndrome: syndrome::REMOTE_INVAL_REQ, reason: Reason::Misaligned });
                    }
                    let (kind, o) = op.encode();
                    t.inbound_with(inbound::NIC_ATOMIC | kind as u32, n as u32, offset, o[0], o[1], [o[2], o[3]]).map_err(|e| {
                        log::warn(format!("proxy: NIC atomic from PE {peer}: {e}"));
                        RemoteError { syndrome: syndrome::REMOTE_OP, reason: Reason::DmaFailed }
                    })
                });
                ack(link, seq, r.map(|old| if n == 4 { old & u32::MAX as u64 } else { old }));
            }
            Message::NicReadResponse { seq, offset, data, last } => {
                let mut nic = self.nic(peer)?;
                let buf = nic.reads.entry(seq).or_default();
                if offset != buf.len() as u64 {
                    return Err(Error::new(format!("PE {peer} answered NIC READ {seq:#x} with bytes at {offset:#x} after {:#x} bytes", buf.len())));
                }
                buf.extend_from_slice(data);
                if last {
                    let bytes = nic.reads.remove(&seq).unwrap_or_default();
                    nic.outstanding = nic.outstanding.saturating_sub(1);
                    drop(nic);
                    (self.answer)(peer, seq, Ok(RemoteDone::Read(bytes)));
                }
            }
            Message::NicAck { seq, syndrome: syn, reason, value } => {
                {
                    let mut nic = self.nic(peer)?;
                    nic.reads.remove(&seq);
                    nic.outstanding = nic.outstanding.saturating_sub(1);
                }
                let r = if syn == 0 {
                    // WRITEs are answered with 0; atomics with the old value (the NIC thread knows which).
                    Ok(RemoteDone::Fetched(value))
                } else {
                    Err(RemoteError { syndrome: syn, reason: Reason::from_u8(reason).unwrap_or(Reason::Unreachable) })
                };
                (self.answer)(peer, seq, r);
            }
            other => return Err(Error::new(format!("PE {peer}: a {} frame is not an emulated-NIC frame", other.kind().name()))),
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

impl NicPort {
    pub(crate) fn new(engine: Arc<Engine>, responder: Arc<NicResponder>) -> NicPort {
        NicPort { engine, responder }
    }

    /// Sends `op` (tagged `seq`, echoed by the answer) to PE `pe`. An error when the peer cannot be
    /// reached (not linked, gone, the connection failed): what a NIC reports as retries exceeded.
    pub(crate) fn start(&self, pe: u32, seq: u64, op: RemoteOp) -> std::result::Result<(), RemoteError> {
        let unreachable = RemoteError { syndrome: syndrome::TRANSPORT_RETRY_EXC, reason: Reason::Unreachable };
        let engine = &self.engine;
        let link = engine.link(pe).map_err(|_| unreachable)?;
        if link.gone.load(Ordering::Acquire) || link.closed.load(Ordering::Acquire) {
            return Err(unreachable);
        }
        self.responder.nic(pe).map_err(|_| unreachable)?.outstanding += 1;
        let me = engine.target.me;
        let sent = match &op {
            RemoteOp::Write { rkey, raddr, data } => link.send(|c| {
                let chunk = c.send_chunk().min(engine.max_chunk);
                for ch in Chunks::nic_write(me, seq, *rkey, *raddr, data.len() as u64, chunk) {
                    c.send(&ch.header, &data[ch.range])?;
                }
                Ok(())
            }),
            RemoteOp::Read { rkey, raddr, len } => link.send(|c| c.send_message(&Message::NicRead { seq, rkey: *rkey, raddr: *raddr, len: *len as u64 })),
            RemoteOp::Atomic { rkey, raddr, op } => link.send(|c| c.send_message(&Message::NicAtomic { seq, rkey: *rkey, raddr: *raddr, op: *op })),
        };
        if tracing() {
            log::debug(format!("proxy trace: NIC {seq:#x} to PE {pe}: {op:?}"));
        }
        sent.map_err(|e| {
            log::debug(format!("proxy: NIC frame {seq:#x} to PE {pe}: {e}"));
            unreachable
        })
    }
}
