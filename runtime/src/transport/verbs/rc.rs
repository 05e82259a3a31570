//! RDMA operations posted from a host thread on an ordinary verbs RC QP with a host CQ: what the
//! proxy over verbs posts (`transport::proxy::verbs`, as NVSHMEM's IBRC does). RDMA WRITE (inline
//! when small), READ and the two 64-bit atomics (fetch-add, compare-swap); completions polled from
//! the CQ, and failed ones turned into errors naming the operation, the peer and the status.

use super::device::Nic;
use super::handle::{RcHandle, RemotePath, Traffic};
use crate::log::size_text;
use super::sys::{self, errno_text, Zeroed};
use crate::error::{Error, Result};
use rdma_sys::{ibv_cq, ibv_qp, ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_state, ibv_qp_type, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wc, ibv_wc_status, ibv_wr_opcode};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// What an RDMA work request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdmaOp {
    /// Local buffer → remote memory.
    Write,
    /// Remote memory → local buffer.
    Read,
    /// 64-bit fetch-and-add at the remote address; the old value lands in the 8-byte local buffer.
    FetchAdd {
        /// The value added to the remote 64-bit word.
        add: u64,
    },
    /// 64-bit compare-and-swap; the old value lands in the 8-byte local buffer.
    CompareSwap {
        /// The value the remote 64-bit word is compared with.
        compare: u64,
        /// The value stored there when it was equal.
        swap: u64,
    },
}

impl RdmaOp {
    /// Its name in messages.
    pub fn name(&self) -> &'static str {
        match self {
            RdmaOp::Write => "RDMA WRITE",
            RdmaOp::Read => "RDMA READ",
            RdmaOp::FetchAdd { .. } => "atomic fetch-add",
            RdmaOp::CompareSwap { .. } => "atomic compare-swap",
        }
    }
    /// A fetch-add or a compare-swap.
    pub(crate) fn is_atomic(&self) -> bool {
        matches!(self, RdmaOp::FetchAdd { .. } | RdmaOp::CompareSwap { .. })
    }
}

/// Registered local memory: address, length, and the lkey of its [`Mr`](super::Mr).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalBuf {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// The lkey of a region covering `[addr, addr + len)`.
    pub lkey: u32,
}

/// Remote memory: address and the rkey the peer registered it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteBuf {
    /// Address in the peer's registered memory.
    pub addr: u64,
    /// The rkey of the peer's region covering it.
    pub rkey: u32,
}

/// One work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// What to do.
    pub op: RdmaOp,
    /// The local buffer: a WRITE's source, a READ's destination, where an atomic's old value lands.
    pub local: LocalBuf,
    /// The remote memory.
    pub remote: RemoteBuf,
    /// Ask for a completion (unsignaled requests complete with the next signaled one).
    pub signaled: bool,
    /// Start only after earlier READs and atomics completed (`IBV_SEND_FENCE`).
    pub fence: bool,
    /// A WRITE whose bytes the library copies into the work request at posting (`IBV_SEND_INLINE`):
    /// the local buffer need not be registered (its lkey is ignored) and may be reused at once; at
    /// most [`HostQp::max_inline`] bytes.
    pub inline: bool,
}

/// A completed request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The `wr_id` the request was posted with.
    pub wr_id: u64,
    /// The request's operation.
    pub op: RdmaOp,
    /// Its local buffer's length in bytes.
    pub bytes: u32,
}

/// The work request for `req` (its scatter entry in `sge`, which must outlive the post); checks
/// what the verbs would refuse later with a less clear error.
pub fn build_wr(req: &Request, wr_id: u64, sge: &mut ibv_sge) -> std::result::Result<ibv_send_wr, String> {
    if req.op.is_atomic() && (req.local.len != 8 || !req.remote.addr.is_multiple_of(8)) {
        return Err(format!(
            "{} needs an 8-byte local buffer and an 8-byte aligned remote address (got {} bytes, remote {:#x})",
            req.op.name(),
            req.local.len,
            req.remote.addr
        ));
    }
    if req.inline && req.op != RdmaOp::Write {
        return Err(format!("{} cannot be inline (only RDMA WRITE carries its bytes in the work request)", req.op.name()));
    }
    if req.local.len as u64 > rshmem_ibgda::mlx5::MAX_MSG as u64 {
        return Err(format!("{} of {} exceeds the 2 GiB one request may move", req.op.name(), size_text(req.local.len.into())));
    }
    *sge = ibv_sge { addr: req.local.addr, length: req.local.len, lkey: req.local.lkey };
    let mut wr = ibv_send_wr::zeroed();
    wr.wr_id = wr_id;
    wr.sg_list = sge;
    wr.num_sge = 1;
    let mut flags = ibv_send_flags(0);
    if req.signaled {
        flags |= ibv_send_flags::IBV_SEND_SIGNALED;
    }
    if req.fence {
        flags |= ibv_send_flags::IBV_SEND_FENCE;
    }
    if req.inline {
        flags |= ibv_send_flags::IBV_SEND_INLINE;
    }
    wr.send_flags = flags.0;
    match req.op {
        RdmaOp::Write | RdmaOp::Read => {
            wr.opcode = if req.op == RdmaOp::Write { ibv_wr_opcode::IBV_WR_RDMA_WRITE } else { ibv_wr_opcode::IBV_WR_RDMA_READ };
            wr.wr.rdma = rdma_sys::rdma_t { remote_addr: req.remote.addr, rkey: req.remote.rkey };
        }
        RdmaOp::FetchAdd { add } => {
            wr.opcode = ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD;
            wr.wr.atomic = rdma_sys::atomic_t { remote_addr: req.remote.addr, compare_add: add, swap: 0, rkey: req.remote.rkey };
        }
        RdmaOp::CompareSwap { compare, swap } => {
            wr.opcode = ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP;
            wr.wr.atomic = rdma_sys::atomic_t { remote_addr: req.remote.addr, compare_add: compare, swap, rkey: req.remote.rkey };
        }
    }
    Ok(wr)
}

/// A posted request, kept until its completion (or a later signaled one's) retires it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Posted {
    wr_id: u64,
    op: RdmaOp,
    bytes: u32,
    remote: RemoteBuf,
}

/// The requests in flight on one QP, in posting order (an RC send queue completes in order).
#[derive(Debug, Default)]
struct InFlight {
    q: VecDeque<Posted>,
}

impl InFlight {
    /// Retires every request up to and including `wr_id` (earlier unsignaled ones complete with it);
    /// None when `wr_id` is not in flight.
    fn complete(&mut self, wr_id: u64) -> Option<Posted> {
        let i = self.q.iter().position(|p| p.wr_id == wr_id)?;
        let p = self.q[i];
        self.q.drain(..=i);
        Some(p)
    }
}

/// The error for a failed completion: the operation, its size, the peer, the remote range, the status.
fn completion_error(p: &Posted, peer: usize, status: String, vendor_err: u32) -> Error {
    let dir = if p.op == RdmaOp::Write { "to" } else { "at" };
    Error::new(format!(
        "{} of {} {dir} PE {peer} (remote {:#x}, rkey {:#x}) failed: {status}, vendor error {vendor_err:#x}",
        p.op.name(),
        size_text(p.bytes.into()),
        p.remote.addr,
        p.remote.rkey
    ))
}

/// `(attributes, mask)` for RESET→INIT: the port, P_Key 0, remote write, read and atomic access.
pub fn init_attr(port: u8) -> (ibv_qp_attr, i32) {
    let mut a = ibv_qp_attr::zeroed();
    a.qp_state = ibv_qp_state::IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = port;
    a.qp_access_flags = 0x2 | 0x4 | 0x8; // IBV_ACCESS_REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC
    let m = ibv_qp_attr_mask::IBV_QP_STATE | ibv_qp_attr_mask::IBV_QP_PKEY_INDEX | ibv_qp_attr_mask::IBV_QP_PORT | ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS;
    (a, m.0 as i32)
}

/// `(attributes, mask)` for INIT→RTR towards `path`, expecting the peer's first packet number
/// `rq_psn` (what the peer's QP starts sending with).
pub fn rtr_attr(path: &RemotePath, max_dest_rd_atomic: u8, rq_psn: u32) -> (ibv_qp_attr, i32) {
    let mut a = ibv_qp_attr::zeroed();
    a.qp_state = ibv_qp_state::IBV_QPS_RTR;
    a.path_mtu = path.mtu.into();
    a.dest_qp_num = path.remote_qpn;
    a.rq_psn = rq_psn & PSN_MASK;
    a.max_dest_rd_atomic = max_dest_rd_atomic;
    a.min_rnr_timer = super::prm::value::MIN_RNR_NAK as u8;
    a.ah_attr = path.ah_attr();
    let m = ibv_qp_attr_mask::IBV_QP_STATE
        | ibv_qp_attr_mask::IBV_QP_AV
        | ibv_qp_attr_mask::IBV_QP_PATH_MTU
        | ibv_qp_attr_mask::IBV_QP_DEST_QPN
        | ibv_qp_attr_mask::IBV_QP_RQ_PSN
        | ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC
        | ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER;
    (a, m.0 as i32)
}

/// `(attributes, mask)` for RTR→RTS: first packet number `sq_psn`, ~4 s ACK timeout, the most
/// retries (as the DevX path).
pub fn rts_attr(max_rd_atomic: u8, sq_psn: u32) -> (ibv_qp_attr, i32) {
    use super::prm::value;
    let mut a = ibv_qp_attr::zeroed();
    a.qp_state = ibv_qp_state::IBV_QPS_RTS;
    a.sq_psn = sq_psn & PSN_MASK;
    a.timeout = value::ACK_TIMEOUT as u8;
    a.retry_cnt = value::RETRY_COUNT as u8;
    a.rnr_retry = value::RNR_RETRY as u8;
    a.max_rd_atomic = max_rd_atomic;
    let m = ibv_qp_attr_mask::IBV_QP_STATE
        | ibv_qp_attr_mask::IBV_QP_TIMEOUT
        | ibv_qp_attr_mask::IBV_QP_RETRY_CNT
        | ibv_qp_attr_mask::IBV_QP_RNR_RETRY
        | ibv_qp_attr_mask::IBV_QP_SQ_PSN
        | ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC;
    (a, m.0 as i32)
}

/// Packet sequence numbers are 24 bits.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// Inline bytes asked for at QP creation (the library may grant fewer: [`HostQp::max_inline`]).
pub const WANT_INLINE: u32 = 64;

/// An RC QP driven from the host, with its own CQ. Thread-safe: posts and polls take a short lock.
pub struct HostQp {
    qp: *mut ibv_qp,
    cq: *mut ibv_cq,
    depth: u32,
    /// Inline bytes the QP was granted.
    max_inline: u32,
    /// The first packet number this QP sends with (24 bits).
    psn: u32,
    traffic: Traffic,
    peer: Option<(usize, RcHandle)>,
    inflight: Mutex<InFlight>,
    nic: Arc<Nic>,
}

// SAFETY: the QP and CQ are used through thread-safe verbs (ibv_post_send and ibv_poll_cq take the
// provider's locks), and the in-flight table is behind a mutex.
unsafe impl Send for HostQp {}
// SAFETY: see Send.
unsafe impl Sync for HostQp {}

impl HostQp {
    /// An RC QP in the RESET state with a CQ of `depth` entries and room for `depth` requests, asking
    /// for [`WANT_INLINE`] inline bytes (a provider that refuses inline data gets a QP without), and
    /// sending from packet number `psn` (24 bits; the peer's `connect` needs it).
    pub fn create(nic: &Arc<Nic>, depth: u32, traffic: Traffic, psn: u32) -> Result<HostQp> {
        let v = sys::verbs()?;
        let depth = depth.clamp(1, nic.attr().max_qp_wr.max(1) as u32);
        // SAFETY: a live context; no completion channel.
        let cq = unsafe { (v.ibv_create_cq)(nic.ctx(), depth as i32, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(Error::new(format!("ibv_create_cq of {depth} entries on {}: {}", nic.name(), errno_text())));
        }
        let mut init = rdma_sys::ibv_qp_init_attr::zeroed();
        init.send_cq = cq;
        init.recv_cq = cq;
        init.qp_type = ibv_qp_type::IBV_QPT_RC;
        init.cap.max_send_wr = depth;
        init.cap.max_recv_wr = 1;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        init.cap.max_inline_data = WANT_INLINE;
        // SAFETY: a live PD and a filled-in request.
        let mut qp = unsafe { (v.ibv_create_qp)(nic.pd(), &mut init) };
        if qp.is_null() {
            // Some providers refuse inline data: a QP without it.
            init.cap.max_inline_data = 0;
            // SAFETY: as above.
            qp = unsafe { (v.ibv_create_qp)(nic.pd(), &mut init) };
        }
        if qp.is_null() {
            let e = errno_text();
            // SAFETY: the CQ created above, not used by anything.
            unsafe { (v.ibv_destroy_cq)(cq) };
            return Err(Error::new(format!("ibv_create_qp (RC, {depth} send requests) on {}: {e}", nic.name())));
        }
        // ibv_create_qp writes back what it granted.
        let max_inline = init.cap.max_inline_data;
        Ok(HostQp { qp, cq, depth, max_inline, psn: psn & PSN_MASK, traffic, peer: None, inflight: Mutex::new(InFlight::default()), nic: nic.clone() })
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: a live QP.
        unsafe { (*self.qp).qp_num }
    }

    /// What the peer needs to connect its QP to this one (with [`HostQp::psn`]).
    pub fn handle(&self) -> RcHandle {
        RcHandle::new(self.qpn(), self.nic.port())
    }

    /// The first packet number this QP sends with.
    pub fn psn(&self) -> u32 {
        self.psn
    }

    /// The most bytes an inline WRITE may carry on this QP (0: no inline data).
    pub fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// Connects to PE `peer`'s QP `remote`, which sends from packet number `remote_psn`:
    /// RESET → INIT → RTR → RTS with `ibv_modify_qp`.
    pub fn connect(&mut self, remote: &RcHandle, remote_psn: u32, peer: usize) -> Result<()> {
        let what = |step: &str| format!("ibv_modify_qp to {step}: QP {:#x} on {} to PE {peer}'s QP {:#x}", self.qpn(), self.nic.port_name(), remote.qpn);
        if self.peer.is_some() {
            return Err(Error::new(format!("{}: already connected", what("INIT"))));
        }
        let path = RemotePath::resolve(self.nic.port(), remote, self.traffic).map_err(|e| Error::new(format!("{}: {e}", what("RTR"))))?;
        let attr = self.nic.attr();
        let clamp = |n: i32| n.clamp(0, u8::MAX.into()) as u8;
        for (step, (mut a, mask)) in [
            ("INIT", init_attr(path.port)),
            ("RTR", rtr_attr(&path, clamp(attr.max_qp_rd_atom), remote_psn)),
            ("RTS", rts_attr(clamp(attr.max_qp_init_rd_atom), self.psn)),
        ] {
            let v = sys::verbs()?;
            // SAFETY: a live QP and attributes filled in for the transition.
            let rc = unsafe { (v.ibv_modify_qp)(self.qp, &mut a, mask) };
            if rc != 0 {
                return Err(Error::new(format!("{}: {}", what(step), sys::io_text(&std::io::Error::from_raw_os_error(rc)))));
            }
        }
        self.peer = Some((peer, *remote));
        Ok(())
    }

    fn peer_pe(&self) -> usize {
        self.peer.map_or(usize::MAX, |p| p.0)
    }

    /// Posts `req` as work request `wr_id`.
    ///
    /// # Safety
    /// The local buffer must stay valid (and, for READ and atomics, unused by others) until the
    /// request completes; the remote range must be one the peer registered with that rkey.
    pub unsafe fn post(&self, req: &Request, wr_id: u64) -> Result<()> {
        let peer = self.peer_pe();
        let fail = |why: String| Error::new(format!("posting {} of {} to PE {peer}: {why}", req.op.name(), size_text(req.local.len.into())));
        if self.peer.is_none() {
            return Err(fail("the QP is not connected".into()));
        }
        let mut sge = ibv_sge { addr: 0, length: 0, lkey: 0 };
        if req.inline && req.local.len > self.max_inline {
            return Err(fail(format!("{} bytes inline, but the QP takes at most {}", req.local.len, self.max_inline)));
        }
        let mut wr = build_wr(req, wr_id, &mut sge).map_err(fail)?;
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        if inflight.q.len() >= self.depth as usize {
            return Err(fail(format!("the send queue is full ({} requests in flight): poll completions first", self.depth)));
        }
        let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
        // SAFETY: a live, connected QP; `wr` and `sge` live across the call; the caller keeps the
        // buffers valid until completion. Posting under the lock keeps `inflight` in posting order.
        let rc = unsafe { rdma_sys::ibv_post_send(self.qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(fail(format!("ibv_post_send: {}", sys::io_text(&std::io::Error::from_raw_os_error(rc)))));
        }
        inflight.q.push_back(Posted { wr_id, op: req.op, bytes: req.local.len, remote: req.remote });
        Ok(())
    }

    /// Polls the CQ once, appending up to `max` completions to `out`; returns how many. A failed
    /// completion is an error naming the operation, the peer and the status (the QP is then in the
    /// error state: every later request fails too).
    pub fn poll(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize> {
        const BATCH: usize = 16;
        let mut wcs: [ibv_wc; BATCH] = std::array::from_fn(|_| ibv_wc::zeroed());
        let n = max.min(BATCH) as i32;
        // SAFETY: a live CQ and room for `n` completions.
        let got = unsafe { rdma_sys::ibv_poll_cq(self.cq, n, wcs.as_mut_ptr()) };
        if got < 0 {
            return Err(Error::new(format!("ibv_poll_cq on {} (PE {}): {}", self.nic.port_name(), self.peer_pe(), errno_text())));
        }
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        for wc in &wcs[..got as usize] {
            let Some(p) = inflight.complete(wc.wr_id) else {
                return Err(Error::new(format!(
                    "ibv_poll_cq on {}: a completion for unknown work request {:#x} ({})",
                    self.nic.port_name(),
                    wc.wr_id,
                    sys::wc_status_text(wc.status)
                )));
            };
            if wc.status != ibv_wc_status::IBV_WC_SUCCESS {
                return Err(completion_error(&p, self.peer_pe(), sys::wc_status_text(wc.status), wc.vendor_err));
            }
            out.push(Completion { wr_id: wc.wr_id, op: p.op, bytes: p.bytes });
        }
        Ok(got as usize)
    }

    /// The most requests the QP holds in flight.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Requests posted and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.inflight.lock().unwrap_or_else(|e| e.into_inner()).q.len()
    }
}

impl Drop for HostQp {
    fn drop(&mut self) {
        let Ok(v) = sys::verbs() else { return };
        // SAFETY: the QP and CQ created in `create`, destroyed once, the QP first.
        unsafe {
            (v.ibv_destroy_qp)(self.qp);
            (v.ibv_destroy_cq)(self.cq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::verbs::device::{LinkLayer, PortInfo};

    fn req(op: RdmaOp, len: u32, raddr: u64) -> Request {
        Request {
            op,
            local: LocalBuf { addr: 0x1000, len, lkey: 0x11 },
            remote: RemoteBuf { addr: raddr, rkey: 0x22 },
            signaled: true,
            fence: false,
            inline: false,
        }
    }

    #[test]
    fn work_requests_carry_the_operation() {
        let mut sge = ibv_sge { addr: 0, length: 0, lkey: 0 };
        let wr = build_wr(&req(RdmaOp::Write, 4096, 0x7000), 9, &mut sge).unwrap();
        assert_eq!((wr.wr_id, wr.opcode, wr.num_sge, wr.send_flags), (9, ibv_wr_opcode::IBV_WR_RDMA_WRITE, 1, 2));
        assert_eq!(wr.sg_list, &mut sge as *mut ibv_sge);
        assert_eq!((sge.addr, sge.length, sge.lkey), (0x1000, 4096, 0x11));
        // SAFETY: (test) the union member the opcode selects.
        let rdma = unsafe { wr.wr.rdma };
        assert_eq!((rdma.remote_addr, rdma.rkey), (0x7000, 0x22));

        let mut r = req(RdmaOp::Read, 64, 0x8000);
        r.signaled = false;
        r.fence = true;
        let wr = build_wr(&r, 10, &mut sge).unwrap();
        assert_eq!((wr.opcode, wr.send_flags), (ibv_wr_opcode::IBV_WR_RDMA_READ, 1));

        let wr = build_wr(&req(RdmaOp::FetchAdd { add: 5 }, 8, 0x9008), 11, &mut sge).unwrap();
        // SAFETY: (test) as above.
        let a = unsafe { wr.wr.atomic };
        assert_eq!((wr.opcode, a.remote_addr, a.compare_add, a.swap, a.rkey), (ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD, 0x9008, 5, 0, 0x22));
        let wr = build_wr(&req(RdmaOp::CompareSwap { compare: 1, swap: 2 }, 8, 0x9010), 12, &mut sge).unwrap();
        // SAFETY: (test) as above.
        let a = unsafe { wr.wr.atomic };
        assert_eq!((wr.opcode, a.compare_add, a.swap), (ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP, 1, 2));

        let e = build_wr(&req(RdmaOp::FetchAdd { add: 1 }, 4, 0x9000), 1, &mut sge).err().unwrap();
        assert!(e.contains("atomic fetch-add needs an 8-byte local buffer"), "{e}");
        assert!(build_wr(&req(RdmaOp::CompareSwap { compare: 0, swap: 0 }, 8, 0x9004), 1, &mut sge).is_err());

        // Inline WRITEs carry IBV_SEND_INLINE (8); nothing else may be inline.
        let mut w = req(RdmaOp::Write, 8, 0x7000);
        w.inline = true;
        assert_eq!(build_wr(&w, 13, &mut sge).unwrap().send_flags, 2 | 8);
        let mut r = req(RdmaOp::Read, 8, 0x7000);
        r.inline = true;
        assert!(build_wr(&r, 14, &mut sge).err().unwrap().contains("cannot be inline"));
    }

    #[test]
    fn completions_retire_in_order_and_errors_name_op_peer_and_status() {
        let mut f = InFlight::default();
        let remote = RemoteBuf { addr: 0x7f00, rkey: 0x1234 };
        for (id, op) in [(1, RdmaOp::Write), (2, RdmaOp::Write), (3, RdmaOp::Read)] {
            f.q.push_back(Posted { wr_id: id, op, bytes: 4096, remote });
        }
        // A signaled completion retires the unsignaled requests before it.
        assert_eq!(f.complete(2).map(|p| p.wr_id), Some(2));
        assert_eq!(f.q.len(), 1);
        assert_eq!(f.complete(7), None);
        let p = f.complete(3).unwrap();
        assert!(f.q.is_empty());
        let e = completion_error(&p, 3, "remote access error (status 10)".into(), 0x88).to_string();
        assert_eq!(e, "RDMA READ of 4 KiB at PE 3 (remote 0x7f00, rkey 0x1234) failed: remote access error (status 10), vendor error 0x88");
    }

    #[test]
    fn state_transitions_set_what_rc_needs() {
        let (a, m) = init_attr(1);
        assert_eq!((a.qp_state, a.port_num, a.qp_access_flags, m), (ibv_qp_state::IBV_QPS_INIT, 1, 0xe, 1 | 16 | 32 | 8));
        let port = PortInfo { num: 1, state: 4, link_layer: LinkLayer::InfiniBand, active_mtu: 5, lid: 3, gid: Some((0, [1; 16])) };
        let path = RemotePath::resolve(&port, &RcHandle { qpn: 0x99, lid: 4, link_layer: 1, mtu: 4, gid: [2; 16] }, Traffic::default()).unwrap();
        let (a, m) = rtr_attr(&path, 16, 0x0123_4567);
        assert_eq!((a.qp_state, a.path_mtu, a.dest_qp_num, a.max_dest_rd_atomic, a.min_rnr_timer), (ibv_qp_state::IBV_QPS_RTR, 4, 0x99, 16, 12));
        assert_eq!(a.rq_psn, 0x23_4567, "24-bit PSN");
        assert_eq!((a.ah_attr.dlid, a.ah_attr.is_global, a.ah_attr.port_num), (4, 0, 1));
        // verbs.h: STATE 1, AV 1<<7, PATH_MTU 1<<8, RQ_PSN 1<<12, MAX_DEST_RD_ATOMIC 1<<17,
        // MIN_RNR_TIMER 1<<15, DEST_QPN 1<<20 (checked as numbers, not restated from the code).
        assert_eq!(m, 1 | 1 << 7 | 1 << 8 | 1 << 12 | 1 << 15 | 1 << 17 | 1 << 20);
        let (a, _) = rts_attr(8, 0x77);
        assert_eq!((a.qp_state, a.timeout, a.retry_cnt, a.rnr_retry, a.max_rd_atomic, a.sq_psn), (ibv_qp_state::IBV_QPS_RTS, 20, 7, 7, 8, 0x77));
    }
}
