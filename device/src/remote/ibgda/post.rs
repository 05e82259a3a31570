//! Posting to one QP of the IBGDA table: a group, a warp's group, a fetch through a return slot, and
//! the wait for completions (see the module docs of `ibgda`); and the body of the device-resident NIC
//! model's kernel, on the same atomics.

use crate::arch;
use crate::remote::ibgda::table::{Qp, QpEntry, RetSlot, Tbl, RET_SLOT_BYTES};
use crate::remote::wait::{idle, idle_every};
use crate::route::fail;
use crate::types::{Problem, Rmw};
use core::mem::offset_of;
use rshmem_ibgda::mlx5::fm_ce_se;
use rshmem_ibgda::nicmodel::{serve, ModelHeader, ModelQp, Served};
use rshmem_ibgda::qp::{QpDesc, Sys, QP_GPU_MEMORY};
use rshmem_ibgda::wqe::{Local, Wqe};
use rshmem_ibgda::PollError;

/// Stops the PE on a failed reservation or completion (`PollError`), naming the call and the PE.
#[cold]
#[inline(never)]
pub(super) fn fail_poll(call: &'static str, pe: i32, e: PollError) -> ! {
    match e {
        PollError::Cqe(c) => fail(call, Problem::Nic { syndrome: c.syndrome, vendor: c.vendor_syndrome, opcode: c.wqe_opcode }, pe, c.wqe_counter as usize, 0),
        PollError::Timeout { idx, .. } => fail(call, Problem::WaitTimeout, pe, idx as usize, 0),
        PollError::TooLarge { wqebbs, sq_size } => fail(call, Problem::NotInitialized, pe, wqebbs as usize, sq_size as usize),
    }
}

/// The atomics and fences the posting code runs on, for device threads, at the scope the QP's memory
/// needs (`QP_GPU_MEMORY`): system scope for queues in host memory (the host-side emulated NIC), GPU
/// scope for queues in this GPU's memory (a real NIC's, the device-resident model's), the doorbell
/// record and doorbell included, as NVSHMEM orders them there.
/// Waits go through `wait::idle` (which applies inbound operations and, on the CPU backend, enforces
/// the wait limit). The device-resident NIC model runs on the same atomics with its own waiting policy.
pub(super) struct Dev {
    pub(super) call: &'static str,
    /// The NIC model's waits: back off (up to a microsecond a spin) and give up after
    /// [`MODEL_LINGER_SPINS`] spins without work, applying no inbound operations.
    model: bool,
    /// The QP's queues and counters are in this GPU's memory (`QP_GPU_MEMORY`): GPU scope.
    gpu: bool,
}

/// Spins of the NIC model without work before its kernel ends (about 5 ms at the back-off's
/// microsecond; the runtime starts it again when a doorbell record moves).
pub(super) const MODEL_LINGER_SPINS: u64 = 5000;

impl Dev {
    /// The posting code's `Sys` for a device call named `call` posting to (or waiting on) `qp`.
    #[inline(always)]
    pub(super) const fn new(call: &'static str, qp: &QpDesc) -> Dev {
        Dev { call, model: false, gpu: qp.flags & QP_GPU_MEMORY != 0 }
    }
    /// The NIC model's `Sys`: its queues are in GPU memory, shared with the posting threads of this GPU.
    #[inline(always)]
    pub(super) const fn model() -> Dev {
        Dev { call: "the device-resident NIC model\0", model: true, gpu: true }
    }
}

/// Picks the GPU-scope or the system-scope form of an arch operation by `$self.gpu`.
macro_rules! scoped {
    ($self:ident, $gpu:ident, $sys:ident ( $($arg:expr),* )) => {
        if $self.gpu { arch::$gpu($($arg),*) } else { arch::$sys($($arg),*) }
    };
}

// SAFETY: every method is the arch layer's atomic (or fence) on the given word, which the posting
// code's callers guarantee is aligned, live and accessed only atomically, at system scope, or at GPU
// scope when the QP's memory is this GPU's (`QP_GPU_MEMORY`: every thread that shares it runs on this
// GPU, and the NIC reads it through the GPU's L2, after a doorbell whose release store's GPU-scope
// barrier put everything before it there).
unsafe impl Sys for Dev {
    #[inline(always)]
    unsafe fn fetch_add_u64(&self, p: *mut u64, v: u64) -> u64 {
        // SAFETY: the trait's contract.
        unsafe { scoped!(self, rmw_u64_gpu, rmw_u64(Rmw::Add, p, v)) }
    }
    #[inline(always)]
    unsafe fn fetch_max_u64(&self, p: *mut u64, v: u64) -> u64 {
        // SAFETY: the trait's contract.
        unsafe { scoped!(self, rmw_u64_gpu, rmw_u64(Rmw::Max, p, v)) }
    }
    #[inline(always)]
    unsafe fn cas_u64(&self, p: *mut u64, current: u64, new: u64) -> u64 {
        // SAFETY: the trait's contract.
        unsafe { scoped!(self, cas_u64_gpu, cas_u64(p, current, new)) }
    }
    #[inline(always)]
    unsafe fn cas_u32(&self, p: *mut u32, current: u32, new: u32) -> u32 {
        // SAFETY: the trait's contract.
        unsafe { scoped!(self, cas_u32_gpu, cas_u32(p, current, new)) }
    }
    #[inline(always)]
    unsafe fn load_u64(&self, p: *const u64) -> u64 {
        // SAFETY: the trait's contract.
        unsafe { scoped!(self, load_relaxed_u64_gpu, load_relaxed_u64(p)) }
    }
    #[inline(always)]
    unsafe fn load_acquire_u32(&self, p: *const u32) -> u32 {
        // SAFETY: the trait's contract.
        unsafe { scoped!(self, load_acquire_u32_gpu, load_acquire_u32(p)) }
    }
    #[inline(always)]
    unsafe fn load_u32(&self, p: *const u32) -> u32 {
        // SAFETY: the trait's contract.
        unsafe { scoped!(self, load_relaxed_u32_gpu, load_relaxed_u32(p)) }
    }
    #[inline(always)]
    unsafe fn store_u32(&self, p: *mut u32, v: u32) {
        // SAFETY: the trait's contract.
        unsafe { scoped!(self, store_relaxed_u32_gpu, store_relaxed_u32(p, v)) }
    }
    #[inline(always)]
    unsafe fn store_u64(&self, p: *mut u64, v: u64) {
        // SAFETY: the trait's contract.
        unsafe { scoped!(self, store_relaxed_u64_gpu, store_relaxed_u64(p, v)) }
    }
    #[inline(always)]
    unsafe fn store_release_u32(&self, p: *mut u32, v: u32) {
        // SAFETY: the trait's contract.
        unsafe { scoped!(self, store_release_u32_gpu, store_release_u32(p, v)) }
    }
    #[inline(always)]
    unsafe fn store_release_u64(&self, p: *mut u64, v: u64) {
        // SAFETY: the trait's contract.
        unsafe { scoped!(self, store_release_u64_gpu, store_release_u64(p, v)) }
    }
    #[inline(always)]
    fn fence_acq_rel(&self) {
        scoped!(self, fence_acq_rel_gpu, fence_acq_rel())
    }
    #[inline(always)]
    fn fence_nic(&self) {
        scoped!(self, fence_sc_gpu, fence_sc())
    }
    #[inline(always)]
    fn idle(&self, spins: &mut u64) -> bool {
        if self.model {
            *spins += 1;
            arch::backoff(*spins);
            return *spins < MODEL_LINGER_SPINS;
        }
        // Posting waits are on other threads of this PE (the ready chain, the doorbell ticket `rung`) or on
        // the NIC: look at the inbound queue rarely and back off, so that thousands of waiting
        // threads do not flood the host memory the queue lives in.
        idle_every(spins, self.call, 255);
        true
    }
}

/// Posts `wqes` to `qp` as one group (one doorbell at most); returns the count to poll for.
///
/// # Safety
/// The WQEs' local buffers (and remote ranges) must stay valid until the WQEs complete.
#[inline(always)]
pub(super) unsafe fn post(call: &'static str, pe: i32, qp: Qp, wqes: &[Wqe]) -> u64 {
    // SAFETY: the runtime's queues (a `Qp`: live by the table invariant); the WQEs' buffers are valid
    // until completion (the caller's contract).
    match unsafe { qp.desc.post(&Dev::new(call, &qp.desc), wqes) } {
        Ok(end) => end,
        Err(e) => fail_poll(call, pe, e),
    }
}

/// Posts `w`, a WQE nobody waits for (`p`, a non-fetching AMO or signal), together with the lanes of
/// this warp that post to the same QP at this moment, as NVSHMEM does: one reservation by the group's
/// leader for all of them, each lane writes its WQE into its slot, the warp synchronizes (ordering the
/// lanes' WQE stores before the leader's release fence in `mark_ready`), and the leader marks the
/// group ready and rings at most once; only the group's last WQE asks for a CQE. A warp whose lanes
/// all `p` to one PE thus costs one pass through the ready chain instead of 32 (on the GPU; the CPU
/// backend's threads post alone). WQEs of two WQEBBs go alone.
///
/// # Safety
/// As [`post`], for `w`.
#[inline(always)]
pub(super) unsafe fn post_one(call: &'static str, pe: i32, qp: Qp, w: Wqe) {
    if w.wqebbs() != 1 {
        // SAFETY: the caller's contract.
        unsafe { post(call, pe, qp, &[w]) };
        return;
    }
    let (peers, lane) = arch::warp_peers(&*qp as *const QpEntry as u64);
    if peers == 1 << lane {
        // SAFETY: the caller's contract.
        unsafe { post(call, pe, qp, &[w]) };
        return;
    }
    let leader = peers.trailing_zeros();
    let n = peers.count_ones();
    let rank = (peers & ((1u32 << lane) - 1)).count_ones();
    let d = &qp.desc;
    let s = Dev::new(call, d);
    let mut base = 0;
    if lane == leader {
        // SAFETY: the QP's queues and counters (a `Qp`: live).
        base = match unsafe { d.reserve(&s, n) } {
            Ok(b) => b,
            Err(e) => fail_poll(call, pe, e),
        };
    }
    let base = arch::warp_bcast_u64(peers, leader, base);
    let mut w = w;
    if rank == n - 1 {
        w.set_flags(w.flags() | fm_ce_se::CQ_UPDATE);
    }
    // SAFETY: WQEBB base + rank is this lane's, reserved by the leader for the group; `w`'s buffers
    // stay valid until it completes (the caller's contract).
    unsafe { d.write(&s, base + rank as u64, &w) };
    arch::warp_sync_mask(peers);
    if lane == leader {
        // SAFETY: the group's WQEBBs are all written (the warp barrier above).
        if let Err(e) = unsafe { d.submit(&s, base, n) } {
            fail_poll(call, pe, e);
        }
    }
}

/// Waits until `qp` has completed everything below `end`.
#[inline(always)]
pub(super) fn wait(call: &'static str, pe: i32, qp: Qp, end: u64) {
    // SAFETY: the QP's queues, counters and CQ (a `Qp`: live).
    if let Err(e) = unsafe { qp.desc.poll(&Dev::new(call, &qp.desc), end) } {
        fail_poll(call, pe, e);
    }
    arch::fence_acq_rel();
}

/// The slot for results nobody reads (non-fetching atomics).
#[inline(always)]
pub(super) fn discard(t: Tbl, qp: Qp) -> Local {
    let last = qp.desc.sq_size() as usize;
    Local { addr: (qp.ret as usize + last * RET_SLOT_BYTES) as u64, lkey: t.ret_lkey }
}

/// Posts one fetching WQE (`build` makes it from the local buffer it gets: its return slot) and returns
/// the 8 bytes the NIC wrote there.
///
/// # Safety
/// The WQE `build` makes must use the local buffer it is given as its only local buffer, and its
/// remote range must stay valid until it completes.
#[inline(always)]
pub(super) unsafe fn fetch(call: &'static str, pe: i32, t: Tbl, qp: Qp, build: impl Fn(Local) -> Wqe) -> [u8; 8] {
    let d = &qp.desc;
    let s = Dev::new(call, d);
    // SAFETY: the runtime's queues, counters and return slots (a `Qp`: live); the WQE writes only into
    // its return slot (the caller's contract); the slot protocol of the module docs: the busy word is written only by the holder of the reservation of its WQEBB
    // (set after the previous holder cleared it, cleared after the value is read); the value is read
    // after the completion, whose CQE the NIC wrote after the value.
    unsafe {
        let probe = build(Local { addr: 0, lkey: 0 });
        let tail = probe.wqebbs() > 1;
        let n = probe.wqebbs().max(1) + tail as u32;
        let base = match d.reserve(&s, n) {
            Ok(b) => b,
            Err(e) => fail_poll(call, pe, e),
        };
        let slot = qp.ret as usize + (base & (d.sq_size() as u64 - 1)) as usize * RET_SLOT_BYTES;
        let busy = (slot + offset_of!(RetSlot, busy)) as *mut u64;
        let mut spins = 0;
        while arch::load_acquire_u64(busy) != 0 {
            idle(&mut spins, call);
        }
        arch::store_relaxed_u64(busy, base + 1);
        let mut w = build(Local { addr: (slot + offset_of!(RetSlot, value)) as u64, lkey: t.ret_lkey });
        if tail {
            d.write(&s, base, &w);
            d.write(&s, base + n as u64 - 1, &Wqe::nop(fm_ce_se::CQ_UPDATE));
        } else {
            w.set_flags(w.flags() | fm_ce_se::CQ_UPDATE);
            d.write(&s, base, &w);
        }
        if let Err(e) = d.submit(&s, base, n) {
            fail_poll(call, pe, e);
        }
        wait(call, pe, qp, base + n as u64);
        let v = arch::load_relaxed_u64((slot + offset_of!(RetSlot, value)) as *const u64);
        arch::store_release_u64(busy, 0);
        v.to_le_bytes()
    }
}

/// The device-resident NIC model's kernel body (`rshmemi_nic_model`, `RSHMEM_IBGDA_EMULATOR=device`):
/// thread `i` of the launch serves QPs `i`, `i + T`, ... (T: the launch's threads) of the `nqp`
/// [`ModelQp`]s at `qps` (`rshmem_ibgda::nicmodel::serve`) until the 32-bit stop word at `stop` is
/// set, or until thread 0 found that none of the launch's threads had anything to do for
/// `MODEL_LINGER_SPINS` spins and set the `end` word of the [`ModelHeader`] at `header` (whose `busy`
/// word counts the threads' passes with work): every thread ends then.
///
/// # Safety
/// `qps` must point to `nqp` live [`ModelQp`]s whose queues are live, served by no other thread
/// meanwhile; `stop` to a live 4-aligned word (pinned host memory) the host sets once; `header` to a
/// live [`ModelHeader`] only the model's threads update while it runs, whose `end` word the host
/// zeroed before the launch.
pub unsafe fn serve_model(qps: u64, nqp: u32, stop: u64, header: u64) -> Served {
    let first = arch::block_index() * arch::block_size() + arch::block_rank();
    let stride = arch::grid_size() * arch::block_size();
    // SAFETY: the caller's contract; each thread serves its own QPs (first + k * stride); thread 0 of
    // the launch (first == 0) decides when it ends.
    unsafe { serve(&Dev::model(), qps as *mut ModelQp, nqp, first, stride, stop as *const u32, header as *mut ModelHeader) }
}
