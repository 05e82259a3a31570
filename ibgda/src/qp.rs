//! Queue pairs as the posting code sees them: where one QP's queues and counters are ([`QpDesc`],
//! [`QpCounters`]), the atomics, fences and spin policy the code is generic over ([`Sys`]; [`HostSys`]
//! for host threads), the errors a reservation or a wait ends with, the collapsed CQ's completion
//! test ([`collapsed_state`]), and the set-up of a CQ and a doorbell record ([`init_cq`],
//! [`init_dbr`]). What a posting thread does with a QP (reserve, write, mark ready, ring the
//! doorbell, poll the CQ) is the `post` module: methods of [`QpDesc`] such as [`QpDesc::post`] and
//! [`QpDesc::poll`].
//!
//! Where the queues live is the caller's business: a [`QpDesc`] holds their addresses (device or host
//! memory, the mapped UAR). The atomics and fences come from a [`Sys`] implementation: the device
//! library plugs in its system-scope PTX primitives, the host uses [`HostSys`].
//!
//! `no_std`, no allocation.

use crate::mlx5::{self, cqe_opcode, CQE_SIZE, WQEBB};
use bytemuck::{Pod, Zeroable};
use core::mem::offset_of;

/// The atomics, fences and spin policy the posting code is generic over. Every pointer given to these
/// methods points into the memory a [`QpDesc`] describes, naturally aligned.
///
/// # Safety
/// Implementations must provide the stated atomicity and ordering for memory the NIC (or emulator) and
/// all posting threads share; the posting code's correctness relies on it. Callers of the `unsafe`
/// methods pass pointers that are non-null, naturally aligned and point to live memory that is
/// accessed only atomically while the QP is in use (the methods' common safety contract).
#[allow(clippy::missing_safety_doc)]
pub unsafe trait Sys {
    /// Atomic fetch-and-add (relaxed or stronger) visible to every thread posting to the QP.
    unsafe fn fetch_add_u64(&self, p: *mut u64, v: u64) -> u64;
    /// Atomic fetch-and-max (relaxed or stronger).
    unsafe fn fetch_max_u64(&self, p: *mut u64, v: u64) -> u64;
    /// Atomic compare-and-swap; returns the old value.
    unsafe fn cas_u64(&self, p: *mut u64, current: u64, new: u64) -> u64;
    /// Atomic compare-and-swap; returns the old value.
    unsafe fn cas_u32(&self, p: *mut u32, current: u32, new: u32) -> u32;
    /// Atomic load (relaxed).
    unsafe fn load_u64(&self, p: *const u64) -> u64;
    /// Atomic load with acquire ordering (CQE words written by the NIC).
    unsafe fn load_acquire_u32(&self, p: *const u32) -> u32;
    /// Atomic load (relaxed) of one 32-bit word: the NIC model's reads of WQE words, which the
    /// doorbell record's acquire load orders after the posters' stores (`nicmodel`).
    unsafe fn load_u32(&self, p: *const u32) -> u32;
    /// Atomic (relaxed) or volatile store of one WQE word.
    unsafe fn store_u32(&self, p: *mut u32, v: u32);
    /// Atomic (relaxed) 64-bit store: the NIC model's statistics words. By default a release store
    /// (stronger than needed; implementations may relax it).
    unsafe fn store_u64(&self, p: *mut u64, v: u64) {
        // SAFETY: the caller's contract is store_release_u64's.
        unsafe { self.store_release_u64(p, v) }
    }
    /// Store with release ordering: the doorbell record, the `rung` ticket word that passes the
    /// doorbell on to the next ringer ([`QpCounters::rung`]), the CQ doorbell record, the poll lock's
    /// release; the NIC model's CQE words and its header's `end` word (`nicmodel`).
    unsafe fn store_release_u32(&self, p: *mut u32, v: u32);
    /// 64-bit store with release ordering: the doorbell write to the UAR.
    unsafe fn store_release_u64(&self, p: *mut u64, v: u64);
    /// Orders this thread's earlier memory accesses before its later ones among posting threads
    /// (NVSHMEM's `IBGDA_MFENCE`).
    fn fence_acq_rel(&self);
    /// Makes this thread's earlier stores (its WQEs) visible to the NIC and to other threads that may
    /// ring for them before its later stores (NVSHMEM's `IBGDA_MEMBAR`: `__threadfence()` for queues
    /// in GPU memory, `__threadfence_system()` for host memory). The doorbell record and the doorbell
    /// are ordered after it by release stores.
    fn fence_nic(&self);
    /// Called on every spin of a wait, with a counter that starts at 0 for each wait. Returns false to
    /// give up (the wait returns [`PollError::Timeout`]).
    fn idle(&self, spins: &mut u64) -> bool;
}

/// Management counters of one QP, free-running WQEBB counts (NVSHMEM's `mvars`, research note §6.1),
/// in memory every posting thread reaches.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct QpCounters {
    /// Next WQEBB to reserve.
    pub resv_head: u64,
    /// Every WQEBB below is written (groups become ready in reservation order).
    pub ready_head: u64,
    /// Every WQEBB below has been announced to the NIC (doorbell record and doorbell).
    pub prod_idx: u64,
    /// Every WQEBB below has completed.
    pub cons_idx: u64,
    /// Normal CQ: CQEs consumed.
    pub cq_ci: u64,
    /// The first error CQE seen ([`CqeError::encode`]); 0 while none. Sticky.
    pub error: u64,
    /// The low 32 bits of the producer count the last doorbell announced: the ringers that raised
    /// `prod_idx` store the doorbell record and the doorbell in the order they raised it, each after
    /// this word reached the count it raised `prod_idx` from (`post`'s `post_send`).
    pub rung: u32,
    /// Spin lock of the normal-CQ consumer.
    pub poll_lock: u32,
    /// The end of the last group holding an RDMA READ that its poster did not wait for (NVSHMEM's
    /// `get_head`): while `cons_idx` is below it, a READ may still be answered, and a fence must
    /// keep later WQEs from overtaking it (`Wqe` fence bits).
    pub read_head: u64,
}

impl QpCounters {
    /// Counters of a fresh QP whose first WQE has index `start` (0 normally; near a multiple of 65536
    /// to exercise the wrap of the 16-bit index).
    pub const fn new(start: u64) -> Self {
        QpCounters { resv_head: start, ready_head: start, prod_idx: start, cons_idx: start, cq_ci: 0, error: 0, rung: start as u32, poll_lock: 0, read_head: start }
    }
}

/// `QpDesc::flags`: the CQ is NVSHMEM's collapsed CQ (every CQE in slot 0, owner bit ignored).
pub const QP_CQ_COLLAPSED: u32 = 1;
/// `QpDesc::flags`: the send queue, doorbell record, CQ and counters are in the posting GPU's own
/// memory (a real NIC's queues, NVSHMEM's `nic_buf_on_gpumem`; the device-resident NIC model's), so
/// posting threads order them at GPU scope, as NVSHMEM's `IBGDA_MEMBAR` does there (`__threadfence`):
/// what reaches the GPU's L2 is what a NIC reading GPU memory over PCIe (or a model kernel on the
/// same GPU) sees. That holds for the doorbell record and the doorbell too: NVSHMEM stores both with
/// `st.release.gpu` (`ibgda_store_release`), the release's GPU-scope barrier putting the WQEs and the
/// record in L2, where the NIC's PCIe reads find them, before the doorbell's write leaves for the NIC.
/// Without the flag (queues in host memory, the host-side emulated NIC) every access is system-scope.
pub const QP_GPU_MEMORY: u32 = 2;

/// Where one RC QP's queues are, as the posting threads see them. Plain data (addresses as `u64`) so
/// the host can fill it in and the device read it from constant or global memory.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct QpDesc {
    /// WQEBB 0 of the send queue (64-byte aligned; `1 << log_sq` WQEBBs).
    pub sq: u64,
    /// The QP doorbell record ([`mlx5::DbRec`], 8 bytes, 4-byte aligned).
    pub dbr: u64,
    /// The doorbell register (8 bytes, 8-byte aligned: the UAR's BlueFlame/NC register).
    pub db: u64,
    /// CQE 0 of the send CQ (64-byte entries).
    pub cq: u64,
    /// The CQ doorbell record ([`mlx5::CqDbRec`]), normal CQ only (0 for a collapsed CQ).
    pub cq_dbr: u64,
    /// The [`QpCounters`].
    pub counters: u64,
    pub qpn: u32,
    /// log2 of the send queue's WQEBB count (at most 15: the 16-bit index comparisons need it).
    pub log_sq: u32,
    /// log2 of the CQ's entry count (normal CQ).
    pub log_cq: u32,
    /// [`QP_CQ_COLLAPSED`].
    pub flags: u32,
    /// Ring the doorbell at least every `batch` WQEBBs (a power of two; NVSHMEM's
    /// `NUM_REQUESTS_IN_BATCH`, 32 by default). 0 or 1: ring on every submission.
    pub batch: u32,
    pub reserved: u32,
}

const _: () = assert!(core::mem::size_of::<QpDesc>() == 72);
const _: () = assert!(core::mem::size_of::<QpCounters>() == 64);

/// A completion with error, from the error CQE.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CqeError {
    /// The CQE opcode (13 requester error, 14 responder error).
    pub cqe_opcode: u8,
    /// The PRM syndrome ([`mlx5::syndrome`]).
    pub syndrome: u8,
    pub vendor_syndrome: u8,
    /// The opcode of the failed WQE.
    pub wqe_opcode: u8,
    /// The WQE index of the failed WQE.
    pub wqe_counter: u16,
}

impl CqeError {
    /// Reads the error fields of a CQE at `cqe` (after the acquire load of its last word).
    ///
    /// # Safety
    /// `cqe` must point to a readable 64-byte CQE.
    pub(crate) unsafe fn read<S: Sys>(s: &S, cqe: *const u8) -> CqeError {
        // SAFETY: the caller's CQE; offsets 52 and 56 are 4-byte aligned inside it.
        let (w52, w56, w60) = unsafe {
            (
                s.load_acquire_u32(cqe.add(offset_of!(mlx5::ErrCqe, hw_err_synd)) as *const u32),
                s.load_acquire_u32(cqe.add(offset_of!(mlx5::ErrCqe, s_wqe_opcode_qpn)) as *const u32),
                s.load_acquire_u32(cqe.add(offset_of!(mlx5::ErrCqe, wqe_counter)) as *const u32),
            )
        };
        let (a, b, c) = (w52.to_ne_bytes(), w56.to_ne_bytes(), w60.to_ne_bytes());
        CqeError { cqe_opcode: c[3] >> 4, syndrome: a[3], vendor_syndrome: a[2], wqe_opcode: b[0], wqe_counter: u16::from_be_bytes([c[0], c[1]]) }
    }
    /// Packs the error into the sticky [`QpCounters::error`] word (never 0).
    pub const fn encode(&self) -> u64 {
        (1 << 63)
            | ((self.cqe_opcode as u64) << 56)
            | ((self.vendor_syndrome as u64) << 48)
            | ((self.syndrome as u64) << 40)
            | ((self.wqe_opcode as u64) << 32)
            | ((self.wqe_counter as u64) << 16)
    }
    pub const fn decode(w: u64) -> Option<CqeError> {
        if w >> 63 == 0 {
            return None;
        }
        Some(CqeError {
            cqe_opcode: ((w >> 56) & 0x7f) as u8,
            vendor_syndrome: (w >> 48) as u8,
            syndrome: (w >> 40) as u8,
            wqe_opcode: (w >> 32) as u8,
            wqe_counter: (w >> 16) as u16,
        })
    }
    /// The syndrome's name, NUL-terminated.
    pub const fn syndrome_name(&self) -> &'static str {
        mlx5::syndrome::name(self.syndrome)
    }
}

/// Why a reservation or a completion wait failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PollError {
    /// An error CQE (this QP is in the error state from then on).
    Cqe(CqeError),
    /// [`Sys::idle`] gave up while waiting for `idx` (`prod` and `cons` as last seen).
    Timeout { idx: u64, prod: u64, cons: u64 },
    /// More WQEBBs asked for at once than the send queue holds.
    TooLarge { wqebbs: u32, sq_size: u32 },
}

#[cfg(feature = "std")]
impl core::fmt::Display for PollError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PollError::Cqe(e) => write!(
                f,
                "error completion: {} (syndrome {:#x}, vendor syndrome {:#x}) for the {} (opcode {:#x}) at WQE index {:#x}",
                e.syndrome_name().trim_end_matches('\0'),
                e.syndrome,
                e.vendor_syndrome,
                mlx5::opcode::name(e.wqe_opcode).trim_end_matches('\0'),
                e.wqe_opcode,
                e.wqe_counter
            ),
            PollError::Timeout { idx, prod, cons } => write!(f, "timed out waiting for completion of WQEBB {idx:#x} (announced {prod:#x}, completed {cons:#x})"),
            PollError::TooLarge { wqebbs, sq_size } => write!(f, "{wqebbs} WQEBBs asked for at once, more than the send queue's {sq_size}"),
        }
    }
}
#[cfg(feature = "std")]
impl std::error::Error for PollError {}

/// The 64-bit count `v` with `v & 0xffff == low`, `v <= reference` and `v > reference - 65536`.
#[inline(always)]
pub const fn unwrap16(reference: u64, low: u16) -> u64 {
    let v = (reference & !0xffff) | low as u64;
    if v > reference {
        v.wrapping_sub(0x1_0000)
    } else {
        v
    }
}

/// What slot 0 of a collapsed CQ says about the WQEBBs below a count ([`collapsed_state`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CqState {
    /// An error CQE (requester or responder error): the QP is in the error state.
    Error,
    /// Every WQEBB below the count has completed.
    Done,
    /// Not yet (or no CQE at all since the CQ was set up).
    Pending,
}

/// The one completion test of a collapsed CQ (NVSHMEM's): slot 0's CQE, with CQE opcode `opcode`
/// (the top nibble of `op_own`) and `wqe_counter` `counter` (the index of the newest completed
/// WQE), says whether everything below WQEBB count `idx` of a send queue of `sq_size` WQEBBs has
/// completed. An error CQE (`REQ_ERR` or `RESP_ERR`) is an error whatever its counter; `INVALID` is
/// no completion yet; otherwise done when `(u16)(idx - counter - 2) >= sq_size`: the counter is at
/// or past `idx - 1` (modulo 2^16; at most `sq_size` WQEBBs are ever outstanding, so a counter
/// behind `idx` lies less than `sq_size + 1` behind it).
///
/// The device's waits ([`QpDesc::poll`]) and the host's quiet over a real NIC both use it.
#[inline(always)]
pub const fn collapsed_state(opcode: u8, counter: u16, idx: u64, sq_size: u32) -> CqState {
    if opcode == cqe_opcode::REQ_ERR || opcode == cqe_opcode::RESP_ERR {
        CqState::Error
    } else if opcode != cqe_opcode::INVALID && ((idx as u16).wrapping_sub(counter).wrapping_sub(2) as u32) >= sq_size {
        CqState::Done
    } else {
        CqState::Pending
    }
}

impl QpDesc {
    /// WQEBBs in the send queue.
    #[inline(always)]
    pub const fn sq_size(&self) -> u32 {
        1 << (self.log_sq & 15)
    }
    #[inline(always)]
    pub(crate) const fn collapsed(&self) -> bool {
        self.flags & QP_CQ_COLLAPSED != 0
    }
    #[inline(always)]
    pub(crate) fn field<T>(&self, off: usize) -> *mut T {
        (self.counters as usize + off) as *mut T
    }
    #[inline(always)]
    pub(crate) fn resv_head(&self) -> *mut u64 {
        self.field(offset_of!(QpCounters, resv_head))
    }
    #[inline(always)]
    pub(crate) fn ready_head(&self) -> *mut u64 {
        self.field(offset_of!(QpCounters, ready_head))
    }
    #[inline(always)]
    pub(crate) fn prod_idx(&self) -> *mut u64 {
        self.field(offset_of!(QpCounters, prod_idx))
    }
    #[inline(always)]
    pub(crate) fn cons_idx(&self) -> *mut u64 {
        self.field(offset_of!(QpCounters, cons_idx))
    }
    #[inline(always)]
    pub(crate) fn read_head(&self) -> *mut u64 {
        self.field(offset_of!(QpCounters, read_head))
    }

    /// The address of WQEBB `pos` (a free-running count) in the ring.
    #[inline(always)]
    pub const fn wqebb_addr(&self, pos: u64) -> u64 {
        self.sq + ((pos & (self.sq_size() as u64 - 1)) << mlx5::WQEBB_SHIFT)
    }
}

/// Prepares a CQ buffer of `1 << log_cq` entries: a collapsed CQ is filled with 0xff (opcode INVALID)
/// except that slot 0's `wqe_counter` says "completed through `start`"; a normal CQ gets `op_own =
/// 0xf0` in every entry (INVALID, owner 0), as rdma-core does.
///
/// # Safety
/// `cq` must point to `64 << log_cq` writable bytes not in use by the NIC or any poller.
pub unsafe fn init_cq(cq: *mut u8, log_cq: u32, collapsed: bool, start: u64) {
    let n = 1usize << (log_cq & 31);
    for i in 0..n {
        // SAFETY: inside the caller's buffer.
        unsafe {
            let e = cq.add(i * CQE_SIZE);
            core::ptr::write_bytes(e, if collapsed { 0xff } else { 0 }, CQE_SIZE);
            if !collapsed {
                *e.add(CQE_SIZE - 1) = 0xf0;
            }
        }
    }
    if collapsed {
        let c = (start as u16).wrapping_sub(1).to_be_bytes();
        // SAFETY: slot 0 of the caller's buffer.
        unsafe {
            *cq.add(offset_of!(mlx5::Cqe64, wqe_counter)) = c[0];
            *cq.add(offset_of!(mlx5::Cqe64, wqe_counter) + 1) = c[1];
        }
    }
}

/// Prepares a QP doorbell record for a QP whose first WQE has index `start`.
///
/// # Safety
/// `dbr` must point to 8 writable bytes not in use by the NIC.
pub unsafe fn init_dbr(dbr: *mut u8, start: u64) {
    let r = mlx5::DbRec { rcv_counter: mlx5::Be32::new(0), snd_counter: mlx5::Be32::new((start & 0xffff) as u32) };
    // SAFETY: the caller's 8 bytes (unaligned write: no alignment assumed).
    unsafe { core::ptr::write_unaligned(dbr as *mut mlx5::DbRec, r) };
}

const _: () = assert!(WQEBB == 64);

/// [`Sys`] for host threads: `core::sync::atomic` at sequential-consistency fences (the CPU backend's
/// NIC model thread and the tests). Waits spin (and, with the `std` feature, yield then sleep as
/// `rshmem_common::backoff` says) and never give up.
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy, Default, Debug)]
pub struct HostSys;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use crate::qp::{HostSys, Sys};
    use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

    // SAFETY: every operation is a core atomic on the given (aligned, live: callers' contract) word;
    // the fences are sequentially consistent.
    unsafe impl Sys for HostSys {
        #[inline(always)]
        unsafe fn fetch_add_u64(&self, p: *mut u64, v: u64) -> u64 {
            // SAFETY: caller's contract (aligned, live, accessed atomically).
            unsafe { AtomicU64::from_ptr(p) }.fetch_add(v, Ordering::AcqRel)
        }
        #[inline(always)]
        unsafe fn fetch_max_u64(&self, p: *mut u64, v: u64) -> u64 {
            // SAFETY: as above.
            unsafe { AtomicU64::from_ptr(p) }.fetch_max(v, Ordering::AcqRel)
        }
        #[inline(always)]
        unsafe fn cas_u64(&self, p: *mut u64, current: u64, new: u64) -> u64 {
            // SAFETY: as above.
            match unsafe { AtomicU64::from_ptr(p) }.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(v) | Err(v) => v,
            }
        }
        #[inline(always)]
        unsafe fn cas_u32(&self, p: *mut u32, current: u32, new: u32) -> u32 {
            // SAFETY: as above.
            match unsafe { AtomicU32::from_ptr(p) }.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(v) | Err(v) => v,
            }
        }
        #[inline(always)]
        unsafe fn load_u64(&self, p: *const u64) -> u64 {
            // SAFETY: as above.
            unsafe { AtomicU64::from_ptr(p as *mut u64) }.load(Ordering::Acquire)
        }
        #[inline(always)]
        unsafe fn load_acquire_u32(&self, p: *const u32) -> u32 {
            // SAFETY: as above.
            unsafe { AtomicU32::from_ptr(p as *mut u32) }.load(Ordering::Acquire)
        }
        #[inline(always)]
        unsafe fn load_u32(&self, p: *const u32) -> u32 {
            // SAFETY: as above.
            unsafe { AtomicU32::from_ptr(p as *mut u32) }.load(Ordering::Relaxed)
        }
        #[inline(always)]
        unsafe fn store_u32(&self, p: *mut u32, v: u32) {
            // SAFETY: as above.
            unsafe { AtomicU32::from_ptr(p) }.store(v, Ordering::Relaxed)
        }
        #[inline(always)]
        unsafe fn store_u64(&self, p: *mut u64, v: u64) {
            // SAFETY: as above.
            unsafe { AtomicU64::from_ptr(p) }.store(v, Ordering::Relaxed)
        }
        #[inline(always)]
        unsafe fn store_release_u32(&self, p: *mut u32, v: u32) {
            // SAFETY: as above.
            unsafe { AtomicU32::from_ptr(p) }.store(v, Ordering::Release)
        }
        #[inline(always)]
        unsafe fn store_release_u64(&self, p: *mut u64, v: u64) {
            // SAFETY: as above.
            unsafe { AtomicU64::from_ptr(p) }.store(v, Ordering::Release)
        }
        #[inline(always)]
        fn fence_acq_rel(&self) {
            fence(Ordering::SeqCst)
        }
        #[inline(always)]
        fn fence_nic(&self) {
            fence(Ordering::SeqCst)
        }
        #[inline(always)]
        fn idle(&self, spins: &mut u64) -> bool {
            *spins += 1;
            // The workspace's one waiting policy (spin, yield, then sleep): host threads may
            // outnumber the cores (a NIC model thread beside the CPU backend's device threads).
            #[cfg(feature = "std")]
            rshmem_common::backoff::snooze_at(*spins);
            #[cfg(not(feature = "std"))]
            core::hint::spin_loop();
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrap16_picks_the_count_at_or_below_reference() {
        assert_eq!(unwrap16(0x1_0005, 0x0005), 0x1_0005);
        assert_eq!(unwrap16(0x1_0005, 0x0003), 0x1_0003);
        assert_eq!(unwrap16(0x1_0005, 0xfff0), 0x0_fff0);
        assert_eq!(unwrap16(5, 3), 3);
    }

    /// The collapsed-CQ test: requester and responder error CQEs are errors whatever their counter,
    /// an INVALID CQE is no completion, and a good CQE completes `idx` when its counter reached
    /// `idx - 1`, across the 16-bit wrap.
    #[test]
    fn collapsed_cq_state() {
        let size = 128;
        for counter in [0u16, 5, 0xffff] {
            for idx in [1u64, 6, 0x1_0000, 0x1_0005] {
                assert_eq!(collapsed_state(cqe_opcode::REQ_ERR, counter, idx, size), CqState::Error);
                assert_eq!(collapsed_state(cqe_opcode::RESP_ERR, counter, idx, size), CqState::Error);
                assert_eq!(collapsed_state(cqe_opcode::INVALID, counter, idx, size), CqState::Pending);
            }
        }
        assert_eq!(collapsed_state(cqe_opcode::REQ, 5, 6, size), CqState::Done);
        assert_eq!(collapsed_state(cqe_opcode::REQ, 6, 6, size), CqState::Done, "counter past idx");
        assert_eq!(collapsed_state(cqe_opcode::REQ, 4, 6, size), CqState::Pending);
        assert_eq!(collapsed_state(cqe_opcode::REQ, 6u16.wrapping_sub(size as u16 + 1), 6, size), CqState::Pending, "as far behind as the ring allows");
        assert_eq!(collapsed_state(cqe_opcode::REQ, 0xffff, 0x1_0000, size), CqState::Done, "across the wrap");
        assert_eq!(collapsed_state(cqe_opcode::REQ, 0xfffe, 0x1_0000, size), CqState::Pending, "across the wrap");
    }

    #[test]
    fn error_word_round_trip() {
        let e = CqeError { cqe_opcode: 13, syndrome: 0x13, vendor_syndrome: 0xe4, wqe_opcode: 0x08, wqe_counter: 0xfffe };
        assert_eq!(CqeError::decode(e.encode()), Some(e));
        assert_eq!(CqeError::decode(0), None);
    }
}
