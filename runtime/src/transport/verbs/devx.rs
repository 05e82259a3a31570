//! IBGDA's queues on a real ConnectX NIC, created through DevX as NVSHMEM's IBGDA host setup creates
//! them (research note §5): per QP a send queue, its doorbell record, a collapsed CQ (cc = 1, oi = 1,
//! 64-byte CQEs) and the CQ's doorbell record, all in GPU memory registered as umems; a UAR of its own
//! mapped into the GPU for the doorbell; RC state transitions as DevX modify commands. The result is
//! a [`QpDesc`] for the posting code (`rshmem_ibgda::qp`), which then runs unchanged on the GPU.
//!
//! Every call here needs a current CUDA context on the calling thread (the GPU whose memory holds the
//! queues).

use super::device::{devx_error, ilog2_or0, LinkLayer, Nic};
use super::gpu::{self, GpuMem, IoMap};
use super::handle::{RcHandle, RemotePath, Traffic};
use super::mr::Via;
use super::prm::{self, CqParams, HcaCaps, Mailbox, PathParams, QpParams};
use super::sys::{self, errno_text, Mlx5dvDevxObj, Mlx5dvDevxUar, Mlx5dvDevxUmem, Zeroed};
use crate::error::{Error, Result};
use rdma_sys::{ibv_cq, ibv_srq};
use rshmem_ibgda::mlx5::{CQE_SIZE, WQEBB};
use rshmem_ibgda::qp::{QpDesc, QP_CQ_COLLAPSED, QP_GPU_MEMORY};
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// Alignment (and CQ page size) of the NIC's queues in GPU memory: 64 KiB (NVSHMEM's
/// `IBGDA_GPAGE_SIZE`).
pub const GPU_PAGE: usize = 1 << 16;
/// Size of a doorbell record (NVSHMEM's `IBGDA_DBRSIZE`).
pub const DBR_SIZE: usize = 8;
/// `IBV_ACCESS_LOCAL_WRITE`: the NIC writes CQEs and reads the rest.
const UMEM_ACCESS: u32 = 1;
/// log2 of the smallest send queue (128 WQEBBs). [`MIN_LOG_DEPTH`]..=[`MAX_LOG_DEPTH`] is the range
/// NVSHMEM's `NVSHMEM_QP_DEPTH` allows.
pub const MIN_LOG_DEPTH: u32 = 7;
/// log2 of the largest send queue (32768 WQEBBs): the posting code's 16-bit index comparisons
/// need at most 2^15.
pub const MAX_LOG_DEPTH: u32 = 15;

/// log2 of the send-queue size for `depth` WQEBBs: rounded up to a power of two, and refused
/// outside 128..=32768.
pub fn log_depth(depth: u32) -> Result<u32> {
    let log = depth.max(1).next_power_of_two().trailing_zeros();
    if !(MIN_LOG_DEPTH..=MAX_LOG_DEPTH).contains(&log) {
        return Err(Error::new(format!(
            "an IBGDA send queue of {depth} WQEBBs: the depth must be between {} and {}",
            1 << MIN_LOG_DEPTH,
            1 << MAX_LOG_DEPTH
        )));
    }
    Ok(log)
}

/// A DevX object (CQ, QP), destroyed on drop.
struct DevxObj {
    raw: *mut Mlx5dvDevxObj,
}

impl DevxObj {
    /// Runs a create command; returns the object and the command's output.
    fn create(nic: &Nic, what: &str, input: &Mailbox, out_bytes: usize) -> Result<(DevxObj, Mailbox)> {
        let m = sys::mlx5()?;
        let mut out = Mailbox::new(out_bytes);
        // SAFETY: a live DevX context; the mailboxes are valid for their lengths.
        let raw = unsafe {
            (m.mlx5dv_devx_obj_create)(nic.ctx(), input.bytes().as_ptr().cast(), input.bytes().len(), out.bytes_mut().as_mut_ptr().cast(), out_bytes)
        };
        if raw.is_null() {
            return Err(devx_error("mlx5dv_devx_obj_create", what, nic.name(), 0, &out));
        }
        Ok((DevxObj { raw }, out))
    }

    /// Runs a modify command on the object.
    fn modify(&self, nic: &Nic, what: &str, input: &Mailbox) -> Result<()> {
        let m = sys::mlx5()?;
        let mut out = Mailbox::new(prm::mbox_out::BYTES);
        // SAFETY: a live object; the mailboxes are valid for their lengths.
        let rc = unsafe {
            (m.mlx5dv_devx_obj_modify)(self.raw, input.bytes().as_ptr().cast(), input.bytes().len(), out.bytes_mut().as_mut_ptr().cast(), out.bytes().len())
        };
        if rc != 0 {
            return Err(devx_error("mlx5dv_devx_obj_modify", what, nic.name(), rc, &out));
        }
        Ok(())
    }
}

impl Drop for DevxObj {
    fn drop(&mut self) {
        if let Ok(m) = sys::mlx5() {
            // SAFETY: the object created in `create`, destroyed once (QPs before the CQs they use: the
            // owner declares them in that order).
            unsafe { (m.mlx5dv_devx_obj_destroy)(self.raw) };
        }
    }
}

/// GPU memory the NIC reads and writes (a queue, a doorbell record): a 64 KiB-aligned allocation
/// registered as a DevX umem, from a dma-buf where possible (`mlx5dv_devx_umem_reg_ex`), else by
/// address (needs nvidia-peermem). The registration is dropped before the memory (field order).
pub struct NicMem {
    umem: *mut Mlx5dvDevxUmem,
    umem_id: u32,
    via: Via,
    mem: GpuMem,
}

// SAFETY: the umem handle is only passed to thread-safe libmlx5 calls (and dropped once).
unsafe impl Send for NicMem {}
// SAFETY: see Send; no interior mutability.
unsafe impl Sync for NicMem {}

impl NicMem {
    /// `len` bytes of GPU memory, every byte `fill`, registered with `nic`.
    pub fn new(nic: &Nic, len: usize, fill: u8) -> Result<NicMem> {
        let m = sys::mlx5()?;
        // Whole 64 KiB pages, so that the page-rounded dma-buf range below stays inside the allocation.
        let mem = GpuMem::alloc(len.next_multiple_of(GPU_PAGE), GPU_PAGE, fill)?;
        let page = gpu::host_page_size();
        let dmabuf_err = match (m.mlx5dv_devx_umem_reg_ex, gpu::dmabuf_fd(mem.ptr(), (len as u64).next_multiple_of(page))) {
            (Some(reg_ex), Ok(fd)) => {
                let mut input = sys::Mlx5dvDevxUmemIn::zeroed();
                input.addr = std::ptr::null_mut(); // the offset into the dma-buf
                input.size = len;
                input.access = UMEM_ACCESS;
                input.pgsz_bitmap = !(page - 1);
                input.comp_mask = sys::MLX5DV_UMEM_MASK_DMABUF;
                input.dmabuf_fd = fd.as_raw_fd();
                // SAFETY: a live DevX context and a filled-in request; the fd stays open during the call
                // (the kernel keeps its own reference to the dma-buf).
                let umem = unsafe { reg_ex(nic.ctx(), &mut input) };
                if !umem.is_null() {
                    // SAFETY: non-null result of the registration.
                    let umem_id = unsafe { (*umem).umem_id };
                    return Ok(NicMem { umem, umem_id, via: Via::DmaBuf, mem });
                }
                format!("mlx5dv_devx_umem_reg_ex (dma-buf): {}", errno_text())
            }
            (None, _) => format!("{} has no mlx5dv_devx_umem_reg_ex (rdma-core older than v42)", sys::LIBMLX5),
            (_, Err(e)) => e.to_string(),
        };
        // SAFETY: the GPU range just allocated; the peer-memory module resolves it (or the call fails).
        let umem = unsafe { (m.mlx5dv_devx_umem_reg)(nic.ctx(), mem.ptr() as *mut std::ffi::c_void, len, UMEM_ACCESS) };
        if umem.is_null() {
            return Err(Error::new(format!(
                "registering {} of GPU memory for the NIC's queues on {} failed both ways: {dmabuf_err}; mlx5dv_devx_umem_reg: {}; \
                 this needs dma-buf (CUDA driver 515+ with the open kernel modules, Linux 5.12+) or the nvidia-peermem module",
                crate::log::size_text(len as u64),
                nic.name(),
                errno_text()
            )));
        }
        // SAFETY: non-null result of the registration.
        let umem_id = unsafe { (*umem).umem_id };
        Ok(NicMem { umem, umem_id, via: Via::PeerMem, mem })
    }

    /// The GPU address.
    pub fn ptr(&self) -> u64 {
        self.mem.ptr()
    }

    /// The DevX umem id the CQ and QP commands name (`cq_umem_id`, `wq_umem_id`, `dbr_umem_id`).
    pub fn umem_id(&self) -> u32 {
        self.umem_id
    }

    /// How the NIC reaches it (dma-buf or peer memory).
    pub fn via(&self) -> Via {
        self.via
    }
}

impl Drop for NicMem {
    fn drop(&mut self) {
        if let Ok(m) = sys::mlx5() {
            // SAFETY: the umem registered in `new`, deregistered once, before `mem` is freed (field
            // order: this runs first).
            unsafe { (m.mlx5dv_devx_umem_dereg)(self.umem) };
        }
    }
}

/// Which kind of UAR was allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UarKind {
    /// A non-cached UAR of its own: an 8-byte doorbell register (what NVSHMEM prefers).
    NcDedicated,
    /// A non-cached UAR (possibly shared).
    Nc,
    /// A BlueFlame UAR: two halves of `2^log_bf_reg_size / 2` bytes; the GPU writes 8-byte doorbells
    /// at offset 0 only.
    Bf,
}

/// A DevX UAR (`mlx5dv_devx_alloc_uar`), freed on drop.
pub struct Uar {
    raw: *mut Mlx5dvDevxUar,
    /// Which kind of UAR it is.
    pub kind: UarKind,
    /// Bytes of register at `reg_addr` (8 for NC; both BlueFlame halves for BF).
    pub reg_size: u64,
}

// SAFETY: the UAR handle is only read and passed to thread-safe libmlx5 calls.
unsafe impl Send for Uar {}
// SAFETY: see Send.
unsafe impl Sync for Uar {}

impl Uar {
    fn alloc(nic: &Nic, flags: u32, kind: UarKind, reg_size: u64) -> std::result::Result<Uar, String> {
        let m = sys::mlx5().map_err(|e| e.to_string())?;
        // SAFETY: a live DevX context.
        let raw = unsafe { (m.mlx5dv_devx_alloc_uar)(nic.ctx(), flags) };
        if raw.is_null() {
            return Err(format!("mlx5dv_devx_alloc_uar({kind:?}) on {}: {}", nic.name(), errno_text()));
        }
        Ok(Uar { raw, kind, reg_size })
    }

    /// The doorbell UAR of an IBGDA QP: a dedicated non-cached one, else a BlueFlame one (as NVSHMEM
    /// does for GPU-rung doorbells).
    pub fn for_doorbell(nic: &Nic, caps: &HcaCaps) -> Result<Uar> {
        Uar::alloc(nic, sys::uar_alloc::NC_DEDICATED, UarKind::NcDedicated, 8).or_else(|nc| {
            Uar::alloc(nic, sys::uar_alloc::BF, UarKind::Bf, 1u64 << caps.log_bf_reg_size).map_err(|bf| Error::new(format!("{nc}; {bf}")))
        })
    }

    /// The UAR a CQ context must name (IBGDA never arms the CQ, so it is not mapped anywhere).
    pub fn for_cq(nic: &Nic) -> Result<Uar> {
        Uar::alloc(nic, sys::uar_alloc::NC, UarKind::Nc, 8).map_err(Error::new)
    }

    /// The page number the QP and CQ contexts name.
    pub fn page_id(&self) -> u32 {
        // SAFETY: a live UAR from the library.
        unsafe { (*self.raw).page_id }
    }

    /// The host address of the doorbell register.
    pub fn reg_addr(&self) -> u64 {
        // SAFETY: a live UAR from the library.
        unsafe { (*self.raw).reg_addr as u64 }
    }
}

impl Drop for Uar {
    fn drop(&mut self) {
        if let Ok(m) = sys::mlx5() {
            // SAFETY: the UAR allocated in `alloc`, freed once, after the QPs/CQs naming it were
            // destroyed and its GPU mapping removed (owners' field order).
            unsafe { (m.mlx5dv_devx_free_uar)(self.raw) };
        }
    }
}

/// A NIC prepared for IBGDA: DevX checked, the HCA capabilities IBGDA needs present, and the objects
/// every IBGDA QP of the NIC shares (NVSHMEM's `qp_shared_object`): the PD's number, a host SRQ and
/// a host CQ for the receive side (never used: IBGDA only sends), the completion EQ.
pub struct IbgdaNic {
    srq: *mut ibv_srq,
    rcq: *mut ibv_cq,
    pdn: u32,
    srqn: u32,
    rcqn: u32,
    eqn: u32,
    caps: HcaCaps,
    nic: Arc<Nic>,
}

// SAFETY: the SRQ and CQ handles are only passed to thread-safe verbs calls (and destroyed once).
unsafe impl Send for IbgdaNic {}
// SAFETY: see Send.
unsafe impl Sync for IbgdaNic {}

impl IbgdaNic {
    /// Checks DevX and the HCA's capabilities and creates the shared objects. The error says what
    /// the NIC lacks.
    pub fn new(nic: Arc<Nic>) -> Result<Arc<IbgdaNic>> {
        nic.devx().map_err(|e| e.context(format!("IBGDA on {}", nic.name())))?;
        let caps = nic.hca_caps()?;
        let gaps = caps.ibgda_gaps(MIN_LOG_DEPTH);
        if !gaps.is_empty() {
            return Err(Error::new(format!("IBGDA on {}: the NIC lacks what it needs: {}", nic.name(), gaps.join("; "))));
        }
        let (v, m) = (sys::verbs()?, sys::mlx5()?);
        let mut obj = sys::Mlx5dvObj::zeroed();
        let mut dvpd = sys::Mlx5dvPd::default();
        obj.pd.input = nic.pd();
        obj.pd.out = &mut dvpd;
        // SAFETY: a live PD and an out-struct of the header's layout.
        let rc = unsafe { (m.mlx5dv_init_obj)(&mut obj, sys::obj::PD) };
        if rc != 0 {
            return Err(Error::new(format!("mlx5dv_init_obj(PD) on {}: errno {rc}", nic.name())));
        }
        let mut shared = IbgdaNic { srq: std::ptr::null_mut(), rcq: std::ptr::null_mut(), pdn: dvpd.pdn, srqn: 0, rcqn: 0, eqn: 0, caps, nic };
        let nic = shared.nic.clone();
        let mut srq_attr = rdma_sys::ibv_srq_init_attr::zeroed();
        srq_attr.attr.max_wr = 1;
        srq_attr.attr.max_sge = 1;
        // SAFETY: a live PD and a filled-in request.
        shared.srq = unsafe { (v.ibv_create_srq)(nic.pd(), &mut srq_attr) };
        if shared.srq.is_null() {
            return Err(Error::new(format!("ibv_create_srq on {}: {}", nic.name(), errno_text())));
        }
        let mut dvsrq = sys::Mlx5dvSrq::zeroed();
        dvsrq.comp_mask = sys::MLX5DV_SRQ_MASK_SRQN;
        let mut obj = sys::Mlx5dvObj::zeroed();
        obj.srq.input = shared.srq;
        obj.srq.out = &mut dvsrq;
        // SAFETY: a live SRQ and an out-struct asking for the SRQ number.
        let rc = unsafe { (m.mlx5dv_init_obj)(&mut obj, sys::obj::SRQ) };
        if rc != 0 || dvsrq.srqn == 0 {
            return Err(Error::new(format!("mlx5dv_init_obj(SRQ) on {}: errno {rc}, SRQ number {} (rdma-core too old?)", nic.name(), dvsrq.srqn)));
        }
        shared.srqn = dvsrq.srqn;
        // SAFETY: a live context; no completion channel.
        shared.rcq = unsafe { (v.ibv_create_cq)(nic.ctx(), 1, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        if shared.rcq.is_null() {
            return Err(Error::new(format!("ibv_create_cq (IBGDA receive CQ) on {}: {}", nic.name(), errno_text())));
        }
        let mut dvcq = sys::Mlx5dvCq::zeroed();
        let mut obj = sys::Mlx5dvObj::zeroed();
        obj.cq.input = shared.rcq;
        obj.cq.out = &mut dvcq;
        // SAFETY: a live CQ and an out-struct of the header's layout.
        let rc = unsafe { (m.mlx5dv_init_obj)(&mut obj, sys::obj::CQ) };
        if rc != 0 {
            return Err(Error::new(format!("mlx5dv_init_obj(CQ) on {}: errno {rc}", nic.name())));
        }
        shared.rcqn = dvcq.cqn;
        let mut eqn = 0u32;
        // SAFETY: a live DevX context and an out-pointer to a local.
        let rc = unsafe { (m.mlx5dv_devx_query_eqn)(nic.ctx(), 0, &mut eqn) };
        if rc != 0 {
            return Err(Error::new(format!("mlx5dv_devx_query_eqn on {}: errno {rc}", nic.name())));
        }
        shared.eqn = eqn;
        Ok(Arc::new(shared))
    }

    /// The opened NIC.
    pub fn nic(&self) -> &Arc<Nic> {
        &self.nic
    }

    /// The HCA capabilities read when it was prepared.
    pub fn caps(&self) -> &HcaCaps {
        &self.caps
    }
}

impl Drop for IbgdaNic {
    fn drop(&mut self) {
        let Ok(v) = sys::verbs() else { return };
        // SAFETY: objects created in `new` (null when creation stopped before them), destroyed once,
        // after every QP using them (each QP holds an Arc of this).
        unsafe {
            if !self.srq.is_null() {
                (v.ibv_destroy_srq)(self.srq);
            }
            if !self.rcq.is_null() {
                (v.ibv_destroy_cq)(self.rcq);
            }
        }
    }
}

/// How to create an IBGDA QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IbgdaQpConfig {
    /// log2 of the send queue's WQEBBs ([`log_depth`]); the CQ has as many entries.
    pub log_depth: u32,
    /// The QP's user index (reported in its CQEs).
    pub user_index: u32,
    /// Service level and traffic class of the QP's traffic.
    pub traffic: Traffic,
}

impl Default for IbgdaQpConfig {
    fn default() -> Self {
        // NVSHMEM_QP_DEPTH's default: 1024.
        IbgdaQpConfig { log_depth: 10, user_index: 0, traffic: Traffic::default() }
    }
}

/// The GPU addresses of one QP's queues, and what the posting code needs to know about them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueAddrs {
    /// WQEBB 0 of the send queue.
    pub sq: u64,
    /// The QP's doorbell record (send counter at +4).
    pub dbr: u64,
    /// The doorbell register as the GPU addresses it (the mapped UAR).
    pub db: u64,
    /// CQE 0 of the collapsed CQ.
    pub cq: u64,
    /// The QP's number.
    pub qpn: u32,
    /// log2 of the send queue's size in WQEBBs (the CQ has as many entries).
    pub log_sq: u32,
}

impl QueueAddrs {
    /// The posting code's descriptor: collapsed CQ (no CQ doorbell record), queues in GPU memory
    /// (`QP_GPU_MEMORY`: every queue is a `NicMem`, GPU memory the NIC reaches), counters at `counters`
    /// (a [`rshmem_ibgda::QpCounters`] the caller placed and initialised where the posting threads
    /// reach it), a doorbell at least every `batch` WQEBBs.
    pub fn desc(&self, counters: u64, batch: u32) -> QpDesc {
        QpDesc {
            sq: self.sq,
            dbr: self.dbr,
            db: self.db,
            cq: self.cq,
            cq_dbr: 0,
            counters,
            qpn: self.qpn,
            log_sq: self.log_sq,
            log_cq: self.log_sq,
            flags: QP_CQ_COLLAPSED | QP_GPU_MEMORY,
            batch,
            reserved: 0,
        }
    }
}

/// One IBGDA RC QP on a real NIC. Dropping it destroys the QP, then the CQ, unmaps and frees the
/// UARs, deregisters and frees the GPU memory (field order; the `_` fields are held only for that).
pub struct IbgdaQp {
    qp: DevxObj,
    _cq: DevxObj,
    _db_map: IoMap,
    db_uar: Uar,
    _cq_uar: Uar,
    sq: NicMem,
    dbr: NicMem,
    cqe: NicMem,
    _cq_dbr: NicMem,
    qpn: u32,
    cqn: u32,
    log_sq: u32,
    db_gpu: u64,
    traffic: Traffic,
    peer: Option<RcHandle>,
    ibgda: Arc<IbgdaNic>,
}

// SAFETY: the DevX handles are only passed to thread-safe libmlx5 calls; connecting needs `&mut`.
unsafe impl Send for IbgdaQp {}
// SAFETY: see Send.
unsafe impl Sync for IbgdaQp {}

impl IbgdaQp {
    /// Creates the QP in the RESET state with its CQ, queues and doorbell (NVSHMEM's
    /// `ibgda_create_cq` + `ibgda_create_qp` for RC). A CUDA context must be current.
    pub fn create(ibgda: &Arc<IbgdaNic>, cfg: &IbgdaQpConfig) -> Result<IbgdaQp> {
        let nic = ibgda.nic();
        let log_sq = cfg.log_depth;
        if !(MIN_LOG_DEPTH..=MAX_LOG_DEPTH).contains(&log_sq) {
            return Err(Error::new(format!("IBGDA QP: log2 depth {log_sq} is outside {MIN_LOG_DEPTH}..={MAX_LOG_DEPTH}")));
        }
        let gaps = ibgda.caps.ibgda_gaps(log_sq);
        if !gaps.is_empty() {
            return Err(Error::new(format!("IBGDA QP on {}: {}", nic.name(), gaps.join("; "))));
        }
        let entries = 1usize << log_sq;
        // The collapsed CQ: CQEs start invalid (0xff: opcode 15, wqe_counter 0xffff).
        let cqe = NicMem::new(nic, entries * CQE_SIZE, 0xff)?;
        let cq_dbr = NicMem::new(nic, DBR_SIZE, 0)?;
        let cq_uar = Uar::for_cq(nic)?;
        let cq_in = prm::create_cq_in(&CqParams {
            log_cq_size: log_sq,
            uar_page: cq_uar.page_id(),
            eqn: ibgda.eqn,
            cq_umem_id: cqe.umem_id(),
            cq_umem_offset: 0,
            dbr_umem_id: cq_dbr.umem_id(),
            dbr_offset: 0,
            log_page_size: GPU_PAGE.trailing_zeros() - prm::value::ADAPTER_PAGE_SHIFT,
        })?;
        let (cq, out) = DevxObj::create(nic, "CREATE_CQ", &cq_in, prm::create_cq_out::BYTES)?;
        let cqn = out.get(prm::create_cq_out::CQN) as u32;

        let db_uar = Uar::for_doorbell(nic, &ibgda.caps)?;
        let db_map = IoMap::map(db_uar.reg_addr(), db_uar.reg_size)?;
        let db_gpu = db_map.device_addr(db_uar.reg_addr());
        // The send queue and its doorbell record start zeroed (producer count 0).
        let sq = NicMem::new(nic, entries * WQEBB, 0)?;
        let dbr = NicMem::new(nic, DBR_SIZE, 0)?;
        let qp_in = prm::create_qp_in(&QpParams {
            pdn: ibgda.pdn,
            uar_page: db_uar.page_id(),
            log_sq_size: log_sq,
            cqn_snd: cqn,
            cqn_rcv: ibgda.rcqn,
            srqn: ibgda.srqn,
            wq_umem_id: sq.umem_id(),
            wq_umem_offset: 0,
            dbr_umem_id: dbr.umem_id(),
            dbr_offset: 0,
            user_index: cfg.user_index,
        })?;
        let (qp, out) = DevxObj::create(nic, "CREATE_QP", &qp_in, prm::create_qp_out::BYTES)?;
        let qpn = out.get(prm::create_qp_out::QPN) as u32;
        Ok(IbgdaQp {
            qp,
            _cq: cq,
            _db_map: db_map,
            db_uar,
            _cq_uar: cq_uar,
            sq,
            dbr,
            cqe,
            _cq_dbr: cq_dbr,
            qpn,
            cqn,
            log_sq,
            db_gpu,
            traffic: cfg.traffic,
            peer: None,
            ibgda: ibgda.clone(),
        })
    }

    /// The QP's number (what the peer's QP names as `remote_qpn`).
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The number of the QP's collapsed send CQ.
    pub fn cqn(&self) -> u32 {
        self.cqn
    }

    /// What the peer needs to connect its QP to this one.
    pub fn handle(&self) -> RcHandle {
        RcHandle::new(self.qpn, self.ibgda.nic.port())
    }

    /// Connects this QP to the peer QP `remote` names: RST2INIT, INIT2RTR, RTR2RTS (NVSHMEM's
    /// `ibgda_qp_rst2init`, `ibgda_rc_init2rtr`, `ibgda_qp_rtr2rts`). `peer` (the PE) is for messages.
    pub fn connect(&mut self, remote: &RcHandle, peer: usize) -> Result<()> {
        let nic = self.ibgda.nic.clone();
        let ctx = |e: Error| e.context(format!("connecting IBGDA QP {:#x} on {} to PE {peer}'s QP {:#x}", self.qpn, nic.port_name(), remote.qpn));
        if let Some(p) = self.peer {
            return Err(ctx(Error::new(format!("the QP is already connected (to QP {:#x})", p.qpn))));
        }
        let path = RemotePath::resolve(nic.port(), remote, self.traffic).map_err(|e| ctx(Error::new(e)))?;
        let attr = nic.attr();
        let ib = path.link_layer == LinkLayer::InfiniBand;
        let params = match path.link_layer {
            LinkLayer::InfiniBand => PathParams::Ib { rlid: path.rlid, sl: path.traffic.sl, tclass: path.traffic.tclass },
            LinkLayer::Ethernet => {
                let (rmac, rgid) = roce_next_hop(&nic, &path).map_err(ctx)?;
                PathParams::Roce {
                    rmac,
                    rgid,
                    sgid_index: path.sgid_index,
                    udp_sport: path.udp_sport(),
                    eth_prio: path.traffic.sl,
                    tclass: path.traffic.tclass,
                }
            }
        };
        // log_rra_max: READs/atomics this QP serves (responder); log_sra_max: those it issues. Both
        // 3-bit fields.
        let rra = ilog2_or0(attr.max_qp_rd_atom).min(7);
        let sra = ilog2_or0(attr.max_qp_init_rd_atom).min(7);
        self.qp.modify(&nic, "RST2INIT_QP", &prm::rst2init_qp_in(self.qpn, path.port, ib)?).map_err(ctx)?;
        self.qp.modify(&nic, "INIT2RTR_QP", &prm::init2rtr_qp_in(self.qpn, path.mtu, path.remote_qpn, rra, &params)?).map_err(ctx)?;
        self.qp.modify(&nic, "RTR2RTS_QP", &prm::rtr2rts_qp_in(self.qpn, sra)?).map_err(ctx)?;
        self.peer = Some(*remote);
        Ok(())
    }

    /// The GPU addresses of the queues.
    pub fn addrs(&self) -> QueueAddrs {
        QueueAddrs { sq: self.sq.ptr(), dbr: self.dbr.ptr(), db: self.db_gpu, cq: self.cqe.ptr(), qpn: self.qpn, log_sq: self.log_sq }
    }

    /// The posting code's descriptor ([`QueueAddrs::desc`]).
    pub fn desc(&self, counters: u64, batch: u32) -> QpDesc {
        self.addrs().desc(counters, batch)
    }

    /// Which doorbell UAR the QP got, and how the NIC reaches its queues.
    pub fn describe(&self) -> String {
        format!(
            "QP {:#x} (CQ {:#x}) on {}: 2^{} WQEBBs, doorbell UAR {:?} at GPU {:#x}, queues registered via {:?}{}",
            self.qpn,
            self.cqn,
            self.ibgda.nic.port_name(),
            self.log_sq,
            self.db_uar.kind,
            self.db_gpu,
            self.sq.via(),
            self.peer.map(|p| format!(", connected to QP {:#x}", p.qpn)).unwrap_or_default()
        )
    }
}

/// The next hop's MAC and the destination GID of a RoCE path, as the provider resolves them for an
/// address handle (NVSHMEM creates a temporary AH and reads its mlx5 address vector).
fn roce_next_hop(nic: &Nic, path: &RemotePath) -> Result<([u8; 6], [u8; 16])> {
    let (v, m) = (sys::verbs()?, sys::mlx5()?);
    let mut attr = path.ah_attr();
    // SAFETY: a live PD and a filled-in attribute struct.
    let ah = unsafe { (v.ibv_create_ah)(nic.pd(), &mut attr) };
    if ah.is_null() {
        return Err(Error::new(format!(
            "ibv_create_ah to {} on {}: {}; is the peer's address reachable from this port (`ip route get`)?",
            std::net::Ipv6Addr::from(path.dgid),
            nic.port_name(),
            errno_text()
        )));
    }
    let mut dvah = sys::Mlx5dvAh::zeroed();
    let mut obj = sys::Mlx5dvObj::zeroed();
    obj.ah.input = ah;
    obj.ah.out = &mut dvah;
    // SAFETY: a live AH and an out-struct of the header's layout.
    let rc = unsafe { (m.mlx5dv_init_obj)(&mut obj, sys::obj::AH) };
    // SAFETY: on success `av` points into the live AH; copied before the AH is destroyed.
    let hop = (rc == 0 && !dvah.av.is_null()).then(|| unsafe { ((*dvah.av).rmac, (*dvah.av).rgid) });
    // SAFETY: the AH created above, destroyed once.
    unsafe { (v.ibv_destroy_ah)(ah) };
    hop.ok_or_else(|| Error::new(format!("mlx5dv_init_obj(AH) on {}: errno {rc}", nic.name())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_are_powers_of_two_within_nvshmems_limits() {
        assert_eq!(log_depth(1024).unwrap(), 10);
        assert_eq!(log_depth(1000).unwrap(), 10);
        assert_eq!(log_depth(128).unwrap(), 7);
        assert_eq!(log_depth(32768).unwrap(), 15);
        for bad in [0, 1, 64, 127 - 63, 32769, u32::MAX / 2] {
            let e = log_depth(bad).unwrap_err().to_string();
            assert!(e.contains("between 128 and 32768"), "{bad}: {e}");
        }
        assert_eq!(GPU_PAGE.trailing_zeros() - prm::value::ADAPTER_PAGE_SHIFT, 4, "NVSHMEM's CQ log_page_size");
    }

    #[test]
    fn the_descriptor_points_the_posting_code_at_the_nics_queues() {
        let a = QueueAddrs { sq: 0x7f00_0001_0000, dbr: 0x7f00_0002_0000, db: 0x7f10_0000_0800, cq: 0x7f00_0003_0000, qpn: 0x1_2345, log_sq: 10 };
        let d = a.desc(0x7f00_0004_0040, 32);
        assert_eq!((d.sq, d.dbr, d.db, d.cq, d.cq_dbr, d.counters), (a.sq, a.dbr, a.db, a.cq, 0, 0x7f00_0004_0040));
        assert_eq!((d.qpn, d.log_sq, d.log_cq, d.flags, d.batch, d.reserved), (0x1_2345, 10, 10, QP_CQ_COLLAPSED | QP_GPU_MEMORY, 32, 0));
        // The doorbell the GPU rings is the UAR register's place inside the mapped page.
        let (host_page, _) = gpu::page_span(0x7fff_1234_5800, 8, 4096);
        assert_eq!(host_page, 0x7fff_1234_5000);
        let dev_page = 0x7f10_0000_0000u64;
        assert_eq!(dev_page + (0x7fff_1234_5800 - host_page), a.db);
        // The sizes the posting code assumes.
        assert_eq!((1usize << 10) * WQEBB, 65536);
        assert_eq!((1usize << 10) * CQE_SIZE, 65536);
        assert!(DBR_SIZE >= size_of::<rshmem_ibgda::mlx5::DbRec>());
    }
}
