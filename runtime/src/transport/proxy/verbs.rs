//! The proxy over verbs (feature `verbs`): the engine's sender carries requests as RDMA on an RC QP per
//! peer (`transport::verbs::rc`) instead of frames on the lanes, as NVSHMEM's IBRC does.
//! What each request becomes is [`rdma::plan`]'s (pure, unit-tested); this file sets the QPs up,
//! posts the plans and acts on their completions.
//!
//! - **Setup** ([`setup`], collective, at init): every PE opens its NIC (`RSHMEM_IB_HCA`, else the first
//!   active port), registers the backed heap (GPU memory: dma-buf, else peer memory; host memory on
//!   the CPU backend), the request ring's memory (ring, return area, staging chunks: staged puts are
//!   written from there) and a scratch-and-staging buffer, and makes a QP per peer on another node. Every PE says whether that worked ([`agree_step`]): a failure anywhere is the
//!   same error everywhere, and the proxy then runs over TCP on every PE (auto) or the job stops
//!   (`RSHMEM_PROXY_PROVIDER=verbs`). Then the PEs all-gather one [`PeerDesc`] per channel and peer
//!   (heap base, QP address, first packet number) and one [`HeapKey`] per registered heap segment,
//!   both checked by their decoders, and connect each QP to its twin (the QP from PE a to b ↔ the QP
//!   from b to a).
//! - **Heap growth** ([`Shared::register`], collective): the new range is registered and its keys
//!   all-gathered; if that fails on any PE under auto, no PE uses the new range through verbs (the
//!   planner sends requests on an unregistered range over TCP) and init's log says so.
//! - **Posting** ([`Lane`], used by the sender only): the plan's work requests are posted in order; a
//!   source outside registered memory is copied into one of two staging buffers first, a destination
//!   outside it is read into one and copied out on completion. The sender waits at the end of each
//!   batch for every completion (before the batch's checkpoint and the ring's tail), delivering a
//!   fetched value to the return slot or copying it to the poster's buffer.
//! - **Both paths, one order**: what the NIC cannot do goes to the lanes (`Route::Tcp`); the plan says
//!   when one path must wait for the other to the same peer (see `rdma`).
//!
//! Not run on a real NIC: no machine of this project has one (docs/transports.md).

use crate::error::{Error, Result};
use crate::log;
use crate::node::exchange::Collective;
use crate::platform::services::HostShared;
use crate::transport::interface::RemoteSetup;
use crate::transport::proxy::engine::Engine;
use crate::transport::proxy::engine::{Rdma, Route, TcpSide};
use crate::transport::proxy::provider::agree_step;
use crate::transport::proxy::rdma::{self, Finish, Limits, Local, Peer, PeerState, Region, Seg, Tcp};
use crate::transport::proxy::ring::Entry;
use crate::transport::verbs::device::Nic;
use crate::transport::verbs::handle::Traffic;
use crate::transport::verbs::mr::Mr;
use crate::transport::verbs::peer::{HeapKey, PeerDesc, PeerExpect, FLAG_ATOMICS, KEY_MAGIC, PEER_MAGIC, VERSION};
use crate::transport::verbs::rc::{HostQp, LocalBuf, RemoteBuf, Request as WorkRequest, PSN_MASK};
use rshmem_common::Backoff;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

/// The most bytes one work request moves (mlx5 takes up to 2 GiB; NVSHMEM splits at 1 GiB).
const MAX_MSG: u64 = 1 << 30;
/// Staging (and bounce) buffers per channel.
const STAGES: usize = 2;
/// Bytes of one.
const STAGE_BYTES: usize = 1 << 20;
/// Work requests a QP holds.
const QP_DEPTH: u32 = 512;

/// The heap's registrations and every PE's keys for them.
struct Heap {
    /// This PE's registrations, one per segment.
    mrs: Vec<Mr>,
    /// The segments as heap offsets: the same on every PE (registration is collective).
    ranges: Vec<Range<u64>>,
    /// `segs[pe]`: the segments with PE `pe`'s rkeys (empty for PEs not reached through verbs).
    segs: Vec<Vec<Seg>>,
    /// `mrs` as the planner's regions (kept with them: the drain reads them for every request).
    regions: Vec<Region>,
}

impl Heap {
    /// Adds registrations (of segments already in `ranges`), keeping `regions` in step.
    fn add(&mut self, mrs: impl IntoIterator<Item = Mr>, host: bool) {
        for m in mrs {
            self.regions.push(Region { addr: m.addr, len: m.len, lkey: m.lkey, host });
            self.mrs.push(m);
        }
    }
}

/// What the verbs path shares with heap growth: the NIC, the heap's keys, every peer's heap base.
pub(crate) struct Shared {
    nic: Arc<Nic>,
    me: u32,
    heap_base: u64,
    heap_size: u64,
    /// The heap is host memory (the CPU backend): registered as such, and inline-readable.
    host_heap: bool,
    heap: RwLock<Heap>,
    /// `bases[pe]`: PE `pe`'s heap base (0 for PEs not reached through verbs).
    bases: Vec<u64>,
    /// `atomics[pe]`: both NICs do 64-bit atomics.
    atomics: Vec<bool>,
    /// `remote[pe]`: PE `pe` is reached through verbs.
    remote: Vec<bool>,
    /// `RSHMEM_PROXY_PROVIDER=verbs`: a failed heap registration stops instead of falling back.
    explicit: bool,
}

/// The engine's verbs: a QP per peer, its registered scratch and staging memory, and the request
/// ring's registration.
/// Fields drop in order: the QPs, then the registrations, then the memory they cover.
pub(crate) struct Lane {
    qps: Vec<Option<HostQp>>,
    mem_mr: Mr,
    /// The channel memory's registration, kept for as long as the QPs may use it (`fixed` has its key).
    _chan_mr: Mr,
    /// `slots` scratch slots of 8 bytes (64-aligned), then `STAGES` staging buffers.
    mem: HostShared,
    shared: Arc<Shared>,
    slots: usize,
    max_inline: u32,
    /// `chan_mr` and `mem_mr` as the planner's regions.
    fixed: [Region; 2],
    st: Mutex<LaneState>,
}

/// The sender's bookkeeping (behind a lock only because the engine is shared).
struct LaneState {
    peers: Vec<PeerState>,
    /// Signaled work requests in flight, by `wr_id`.
    actions: HashMap<u64, Action>,
    next_wr: u64,
    busy: [bool; STAGES],
}

/// What the completion of a signaled work request does.
struct Action {
    pe: usize,
    /// A staging buffer freed.
    release: Option<usize>,
    /// A bounce buffer's bytes copied to their destination: (buffer, destination, bytes).
    copy_out: Option<(usize, u64, usize)>,
    /// The request it finishes: (sequence number, how).
    finish: Option<(u64, Finish)>,
}

fn scratch_bytes(slots: usize) -> usize {
    (slots * 8).next_multiple_of(64)
}

/// Registers heap offsets `r` of the heap at `base`.
fn register_heap(nic: &Arc<Nic>, host: bool, base: u64, r: &Range<u64>) -> Result<Mr> {
    let len = r.end - r.start;
    if host {
        // SAFETY: the CPU backend's heap is mapped for the process's lifetime (the transport is shut
        // down before it is unmapped).
        unsafe { nic.register_host((base + r.start) as *mut u8, len as usize) }
    } else {
        nic.register_gpu(base + r.start, len)
    }
    .map_err(|e| e.context(format!("proxy over verbs: registering heap offsets [{:#x}, {:#x})", r.start, r.end)))
}

/// The parts of `range` that none of `have` covers (both as heap offsets; `have` disjoint).
fn uncovered(have: &[Range<u64>], range: Range<u64>) -> Vec<Range<u64>> {
    let mut sorted: Vec<&Range<u64>> = have.iter().filter(|h| h.start < range.end && h.end > range.start).collect();
    sorted.sort_by_key(|h| h.start);
    let mut out = Vec::new();
    let mut at = range.start;
    for h in sorted {
        if h.start > at {
            out.push(at..h.start);
        }
        at = at.max(h.end);
    }
    if at < range.end {
        out.push(at..range.end);
    }
    out
}

/// A 24-bit first packet number, different per QP and per run.
fn first_psn(me: u32, c: usize, q: usize) -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let x = t ^ (u64::from(me) << 40) ^ ((c as u64) << 32) ^ ((q as u64) << 16) ^ u64::from(std::process::id());
    (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as u32 & PSN_MASK
}

/// Collective: all-gathers this PE's keys for the segments `ranges` (its registrations `mine`) and
/// returns every PE's rkeys per segment (`[pe][segment]`; zeros for PEs not reached).
fn exchange_keys(c: &crate::bootstrap::Bootstrap, call: &str, heap_size: u64, ranges: &[Range<u64>], mine: &[u32], remote: &[bool]) -> Result<Vec<Vec<u32>>> {
    let me = c.pe() as u32;
    let keys: Vec<HeapKey> =
        ranges.iter().zip(mine).map(|(r, &rkey)| HeapKey { magic: KEY_MAGIC, from_pe: me, start: r.start, len: r.end - r.start, rkey, reserved: 0 }).collect();
    let all = c.allgather(call, bytemuck::cast_slice(&keys))?;
    let mut out = vec![vec![0; ranges.len()]; all.len()];
    for (pe, b) in all.iter().enumerate() {
        if !remote[pe] {
            continue;
        }
        let k = HeapKey::decode_all(b, pe as u32, ranges, heap_size).map_err(|e| c.abort(Error::new(e)))?;
        out[pe] = k.iter().map(|k| k.rkey).collect();
    }
    Ok(out)
}

/// This PE's part of the setup, which may fail here and not elsewhere.
struct Mine {
    nic: Arc<Nic>,
    heap_mr: Option<Mr>,
    /// The QPs by peer, the scratch-and-staging memory, its registration and the request ring's.
    lane: (Vec<Option<HostQp>>, HostShared, Mr, Mr),
}

fn local_part(s: &RemoteSetup, eng: &Engine, remote: &[bool], host_heap: bool) -> Result<Mine> {
    let me = s.boot.pe() as u32;
    let nic = Nic::open_with(&s.config.ib_hca).map_err(|e| e.context("opening the NIC"))?;
    let backed = s.platform.backed() as u64;
    let heap_mr = if backed > 0 { Some(register_heap(&nic, host_heap, s.platform.heap_base() as u64, &(0..backed))?) } else { None };
    // SAFETY: the ring's memory lives in the engine, which outlives the verbs lane (its field).
    let chan_mr = unsafe { nic.register_host(eng.chan.host_ptr(), eng.chan.len()) }.map_err(|e| e.context("registering the request ring"))?;
    let mem = s.services.host_shared(scratch_bytes(eng.set.slots) + STAGES * STAGE_BYTES)?;
    // SAFETY: `mem` moves into the lane with its registration, which its field order drops first.
    let mem_mr = unsafe { nic.register_host(mem.host_ptr(), mem.len()) }.map_err(|e| e.context("registering the staging buffers"))?;
    let mut qps = Vec::with_capacity(remote.len());
    for (q, &r) in remote.iter().enumerate() {
        qps.push(if r { Some(HostQp::create(&nic, QP_DEPTH, Traffic::default(), first_psn(me, 0, q)).map_err(|e| e.context(format!("the QP to PE {q}")))?) } else { None });
    }
    Ok(Mine { nic, heap_mr, lane: (qps, mem, mem_mr, chan_mr) })
}

/// Collective: sets the proxy over verbs up for the engine (before its threads start) and installs a
/// [`Lane`] in it. An error is agreed (the same on every PE, starting with `provider::SETUP_FAILED`)
/// up to the key exchange: the caller may then fall back to TCP on every PE.
pub(crate) fn setup(s: &RemoteSetup, eng: &Arc<Engine>, remote: &[bool], explicit: bool) -> Result<Arc<Shared>> {
    let boot = s.boot;
    let (me, n) = (boot.pe(), boot.npes());
    let host_heap = s.platform.name() == "cpu";
    let heap_base = s.platform.heap_base() as u64;
    let heap_size = s.platform.heap_size() as u64;
    let mine = local_part(s, eng, remote, host_heap);
    agree_step(boot, "opening the NIC, registering the heap and the request ring, making the QPs", mine.as_ref().map(|_| ()).map_err(|e| e.to_string()))?;
    let Mine { nic, heap_mr, lane } = mine?;
    let (mut qps, mem, mem_mr, chan_mr) = lane;
    let my_atomics = nic.attr().atomic_cap != 0;

    // Every QP's descriptor, by peer.
    let mut descs = vec![PeerDesc::default(); n];
    for (q, qp) in qps.iter().enumerate() {
        if let Some(qp) = qp {
            descs[q] = PeerDesc {
                magic: PEER_MAGIC,
                version: VERSION,
                channel: 0,
                from_pe: me as u32,
                to_pe: q as u32,
                heap_base,
                heap_size,
                psn: qp.psn(),
                flags: if my_atomics { FLAG_ATOMICS } else { 0 },
                qp: qp.handle(),
            };
        }
    }
    let all = boot.allgather("rshmem_init (proxy over verbs: QP descriptors)", bytemuck::cast_slice(&descs))?;
    let mut bases = vec![0u64; n];
    let mut atomics = vec![false; n];
    let connected = (|| -> std::result::Result<(), String> {
        for (q, qp) in qps.iter_mut().enumerate() {
            let Some(qp) = qp else { continue };
            let at = me * size_of::<PeerDesc>();
            let bytes = all[q].get(at..at + size_of::<PeerDesc>()).unwrap_or_default();
            let d = PeerDesc::decode(bytes, &PeerExpect { from_pe: q as u32, to_pe: me as u32, channel: 0, heap_size })?;
            qp.connect(&d.qp, d.psn, q).map_err(|e| e.to_string())?;
            bases[q] = d.heap_base;
            atomics[q] = my_atomics && d.atomics();
        }
        Ok(())
    })();
    agree_step(boot, "connecting the QPs", connected)?;

    let ranges: Vec<Range<u64>> = heap_mr.iter().map(|_| 0..s.platform.backed() as u64).collect();
    let mine: Vec<u32> = heap_mr.iter().map(|m| m.rkey).collect();
    let keys = exchange_keys(boot, "rshmem_init (proxy over verbs: heap keys)", heap_size, &ranges, &mine, remote)?;
    let segs = keys.iter().map(|k| ranges.iter().zip(k).map(|(r, &rkey)| Seg { start: r.start, end: r.end, rkey }).collect()).collect();
    let mut heap = Heap { mrs: Vec::new(), ranges, segs, regions: Vec::new() };
    heap.add(heap_mr, host_heap);
    let max_inline = qps.iter().flatten().map(HostQp::max_inline).min().unwrap_or(0);
    let shared = Arc::new(Shared { nic, me: me as u32, heap_base, heap_size, host_heap, heap: RwLock::new(heap), bases, atomics, remote: remote.to_vec(), explicit });
    let st = LaneState { peers: vec![PeerState::default(); n], actions: HashMap::new(), next_wr: 1, busy: [false; STAGES] };
    let slots = eng.set.slots;
    let fixed = [&chan_mr, &mem_mr].map(|m| Region { addr: m.addr, len: m.len, lkey: m.lkey, host: true });
    eng.set_rdma(Box::new(Lane { qps, mem_mr, _chan_mr: chan_mr, mem, shared: shared.clone(), slots, max_inline, fixed, st: Mutex::new(st) }));
    log::info(format!(
        "proxy over verbs: PE {me}: {} port {}, inline up to {} bytes, NIC atomics {}",
        shared.nic.name(),
        shared.nic.port_name(),
        max_inline,
        if my_atomics { "on" } else { "off (atomics go over TCP)" }
    ));
    Ok(shared)
}

impl Shared {
    /// Collective heap growth: registers what of `range` (heap offsets) is new and all-gathers its
    /// keys. A failure on any PE leaves the new range to TCP on every PE (stops the job when
    /// `RSHMEM_PROXY_PROVIDER=verbs`).
    pub(crate) fn register(&self, c: Collective, range: Range<usize>) -> Result<()> {
        let mut heap = self.heap.write().unwrap_or_else(|e| e.into_inner());
        let new = uncovered(&heap.ranges, range.start as u64..range.end as u64);
        if new.is_empty() {
            return Ok(());
        }
        let mrs: Result<Vec<Mr>> = new.iter().map(|r| register_heap(&self.nic, self.host_heap, self.heap_base, r)).collect();
        match agree_step(c.boot, "registering heap growth", mrs.as_ref().map(|_| ()).map_err(|e| e.to_string())) {
            Ok(()) => {}
            Err(e) if !self.explicit => {
                if self.me == 0 {
                    log::warn(format!("{e}; operations on that part of the heap go over TCP"));
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        let mrs = mrs?;
        let mine: Vec<u32> = mrs.iter().map(|m| m.rkey).collect();
        let keys = exchange_keys(c.boot, "rshmem_malloc (proxy over verbs: heap keys)", self.heap_size, &new, &mine, &self.remote)?;
        for (pe, k) in keys.iter().enumerate() {
            if self.remote[pe] {
                heap.segs[pe].extend(new.iter().zip(k).map(|(r, &rkey)| Seg { start: r.start, end: r.end, rkey }));
            }
        }
        heap.ranges.extend(new);
        heap.add(mrs, self.host_heap);
        Ok(())
    }
}

impl Lane {
    fn scratch(&self, seq: u64) -> *mut u8 {
        // SAFETY: pointer arithmetic inside `mem`, which holds `slots` 8-byte scratch slots first.
        unsafe { self.mem.host_ptr().add(((seq - 1) % self.slots as u64) as usize * 8) }
    }
    fn stage(&self, k: usize) -> *mut u8 {
        // SAFETY: pointer arithmetic inside `mem`: the staging buffers follow the scratch slots.
        unsafe { self.mem.host_ptr().add(scratch_bytes(self.slots) + k * STAGE_BYTES) }
    }
    /// Polls every QP with completions due once, acting on them; how many completed.
    fn poll(&self, eng: &Engine, st: &mut LaneState) -> Result<usize> {
        let mut done = Vec::new();
        for (pe, qp) in self.qps.iter().enumerate() {
            if let Some(qp) = qp.as_ref().filter(|_| !st.peers[pe].idle()) {
                qp.poll(&mut done, 16).map_err(|e| e.context("proxy over verbs"))?;
            }
        }
        for c in &done {
            let a = st.actions.remove(&c.wr_id).ok_or_else(|| Error::new(format!("proxy over verbs: a completion for work request {:#x}, which is not in flight", c.wr_id)))?;
            st.peers[a.pe].completed(1);
            self.act(eng, st, a)?;
        }
        Ok(done.len())
    }

    /// What a completion does: copy a bounce buffer out, free a staging buffer, finish a request.
    fn act(&self, eng: &Engine, st: &mut LaneState, a: Action) -> Result<()> {
        let services = &eng.services;
        if let Some((k, dst, n)) = a.copy_out {
            // SAFETY: the poster promised `dst` writable for the GET's bytes until completion; the
            // bounce buffer holds the `n` bytes the READ just completed.
            unsafe { services.copy(dst as *mut u8, self.stage(k), n)? };
        }
        if let Some(k) = a.release {
            st.busy[k] = false;
        }
        if let Some((seq, how)) = a.finish {
            let old = || {
                let mut b = [0u8; 8];
                // SAFETY: the scratch slot is 8 bytes of `mem`, written by the completed READ or atomic.
                unsafe { std::ptr::copy_nonoverlapping(self.scratch(seq), b.as_mut_ptr(), 8) };
                b
            };
            match how {
                Finish::Done => {}
                Finish::Return => eng.deliver(seq, u64::from_le_bytes(old())),
                Finish::CopyOld { dst, width } => {
                    let b = old();
                    // SAFETY: the poster promised `src` writable for the AMO's width.
                    unsafe { services.copy(dst as *mut u8, b.as_ptr(), width as usize)? };
                }
            }
        }
        Ok(())
    }

    /// Polls until `done` holds, within the wait limit; `what` names what is waited for (called only
    /// when the wait fails, so that waiting costs no message).
    fn wait(&self, eng: &Engine, st: &mut LaneState, what: impl FnOnce() -> String, done: impl Fn(&LaneState) -> bool) -> Result<()> {
        let limit = eng.set.wait_limit;
        let start = Instant::now();
        let mut backoff = Backoff::new();
        while !done(st) {
            if self.poll(eng, st)? > 0 {
                backoff.reset();
                continue;
            }
            if start.elapsed() > limit {
                let out: Vec<String> = st.peers.iter().enumerate().filter(|(_, p)| !p.idle()).map(|(pe, p)| format!("PE {pe}: {}", p.outstanding)).collect();
                return Err(Error::new(format!("proxy over verbs: {}: no completion within {limit:?} (outstanding: {})", what(), out.join(", "))));
            }
            backoff.snooze();
        }
        Ok(())
    }

    /// A free staging buffer (waiting for one).
    fn free_stage(&self, eng: &Engine, st: &mut LaneState) -> Result<usize> {
        self.wait(eng, st, || "waiting for a staging buffer".into(), |s| s.busy.contains(&false))?;
        Ok(st.busy.iter().position(|b| !b).expect("one is free"))
    }
}

impl Rdma for Lane {
    fn issue(&self, eng: &Engine, e: &Entry, tcp: &mut dyn TcpSide) -> Result<Route> {
        let r = &e.req;
        let pe = r.pe as usize;
        let Some(qp) = self.qps.get(pe).and_then(Option::as_ref) else { return Ok(Route::Tcp) };
        let mut st = self.st.lock().unwrap_or_else(|e| e.into_inner());
        let plan = {
            let heap = self.shared.heap.read().unwrap_or_else(|e| e.into_inner());
            // This PE's registered memory: the heap's segments, the channel memory, the lane's memory.
            let local: [&[Region]; 2] = [&heap.regions, &self.fixed];
            let peer = Peer { heap_base: self.shared.bases[pe], segs: &heap.segs[pe], atomics: self.shared.atomics[pe] };
            let lim = Limits { max_msg: MAX_MSG, max_inline: self.max_inline, stage: STAGE_BYTES as u64 };
            rdma::plan(r, e.staged.map(|(p, n)| (p as u64, n as u64)), &local, &peer, &lim, &mut st.peers[pe])
        };
        if eng.set.trace {
            log::debug(format!("proxy trace: verbs plan for {}: {} work requests, tcp {:?}", e.seq, plan.wrs.len(), plan.tcp));
        }
        if plan.wait_verbs {
            self.wait(eng, &mut st, || format!("before request {} to PE {pe} over TCP", e.seq), |s| s.peers[pe].idle())?;
        }
        if plan.wait_tcp {
            tcp.settle(pe as u32).map_err(|e| e.context(format!("proxy over verbs: before RDMA to PE {pe}")))?;
        }
        if let Tcp::All(_) = plan.tcp {
            return Ok(Route::Tcp);
        }
        if plan.wrs.is_empty() {
            return Ok(Route::Rdma);
        }
        let last = plan.wrs.len() - 1;
        for (i, w) in plan.wrs.iter().enumerate() {
            let finish = (i == last && plan.tcp == Tcp::No).then_some((e.seq, plan.finish));
            let mut a = Action { pe, release: None, copy_out: None, finish };
            let lkey = self.mem_mr.lkey;
            let local = match w.local {
                Local::Mem { addr, lkey } => LocalBuf { addr, len: w.len, lkey },
                Local::Value(v) => {
                    let p = self.scratch(e.seq);
                    // SAFETY: the request's scratch slot (8 bytes of `mem`), not in flight (one slot
                    // per ring slot; the previous user completed before its slot was released).
                    unsafe { std::ptr::copy_nonoverlapping(v.to_le_bytes().as_ptr(), p, 8) };
                    LocalBuf { addr: p as u64, len: w.len, lkey }
                }
                Local::Scratch => {
                    let p = self.scratch(e.seq);
                    // SAFETY: as above: zeroed so that a short READ delivers zero-extended bytes.
                    unsafe { std::ptr::write_bytes(p, 0, 8) };
                    LocalBuf { addr: p as u64, len: w.len, lkey }
                }
                Local::StageFrom(src) => {
                    let k = self.free_stage(eng, &mut st)?;
                    // SAFETY: the poster promised `src` readable for the put's bytes until completion;
                    // staging buffer k is free and holds STAGE_BYTES >= w.len bytes.
                    unsafe { eng.services.copy(self.stage(k), src as *const u8, w.len as usize)? };
                    if !w.inline {
                        st.busy[k] = true;
                        a.release = Some(k);
                    }
                    LocalBuf { addr: self.stage(k) as u64, len: w.len, lkey }
                }
                Local::BounceTo(dst) => {
                    let k = self.free_stage(eng, &mut st)?;
                    st.busy[k] = true;
                    a.release = Some(k);
                    a.copy_out = Some((k, dst, w.len as usize));
                    LocalBuf { addr: self.stage(k) as u64, len: w.len, lkey }
                }
            };
            // Room in the send queue; an unsignaled request that nearly fills it asks for a completion
            // (unsignaled ones are retired only by a later signaled one).
            let mut signaled = w.signaled;
            if !signaled && qp.in_flight() + 2 >= qp.depth() as usize {
                signaled = true;
                st.peers[pe].outstanding += 1;
            }
            self.wait(eng, &mut st, || format!("room in the send queue to PE {pe}"), |_| qp.in_flight() < qp.depth() as usize)?;
            let wr_id = st.next_wr;
            st.next_wr += 1;
            let req = WorkRequest { op: w.op, local, remote: RemoteBuf { addr: w.remote, rkey: w.rkey }, signaled, fence: w.fence, inline: w.inline };
            // SAFETY: every local buffer (registered memory the request names, the scratch slot, a
            // staging buffer) stays valid until the completion, which the drain waits for before it
            // ends the batch; the remote range lies in a segment the peer registered with w.rkey.
            unsafe { qp.post(&req, wr_id)? };
            if signaled {
                st.actions.insert(wr_id, a);
            }
        }
        if plan.tcp == Tcp::SignalAfter {
            // The signal goes over TCP: only once the data is at the target.
            self.wait(eng, &mut st, || format!("the data of put-with-signal {} to PE {pe}", e.seq), |s| s.peers[pe].idle())?;
            return Ok(Route::SignalOnly);
        }
        Ok(Route::Rdma)
    }

    fn batch_done(&self, eng: &Engine) -> Result<()> {
        let mut st = self.st.lock().unwrap_or_else(|e| e.into_inner());
        self.wait(eng, &mut st, || "the end of a batch".into(), |s| s.peers.iter().all(PeerState::idle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn growth_registers_only_what_is_new() {
        assert_eq!(uncovered(&[], 0..100), vec![0..100]);
        assert_eq!(uncovered(&[0..100], 0..100), Vec::<Range<u64>>::new());
        assert_eq!(uncovered(&[0..100], 0..300), vec![100..300]);
        assert_eq!(uncovered(&[100..200, 0..50], 0..300), vec![50..100, 200..300]);
        assert_eq!(uncovered(&[0..50, 250..400], 100..300), vec![100..250]);
    }

    #[test]
    fn packet_numbers_are_24_bits() {
        for q in 0..64 {
            assert!(first_psn(3, 1, q) <= PSN_MASK);
        }
    }
}
