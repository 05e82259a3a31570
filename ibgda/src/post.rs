//! The send-queue side of IBGDA as a GPU thread runs it (and a host thread on the CPU backend):
//! reserving WQEBB slots with an atomic producer counter, writing WQEs into the ring, marking them
//! ready in reservation order, updating the doorbell record and ringing the doorbell, and polling the
//! CQ for completion, the collapsed CQ of NVSHMEM (§4.3 of the research note) or a normal one with
//! owner bits (§4.2).
//!
//! # Order of the stores the NIC sees
//! WQEs, then the doorbell record, then the doorbell (research note §3.2). The code makes it so with
//! fences and release stores, as NVSHMEM does when its stores are `st.release` (§6.2, step 5):
//! 1. the poster writes its WQEs, then [`Sys::fence_nic`] before it marks them ready (`ready_head`),
//!    so they are visible before any thread can announce them;
//! 2. the thread that rings (after an acquire fence over what it saw marked ready) stores the doorbell
//!    record with a release store ([`Sys::store_release_u32`]);
//! 3. then the doorbell with a release store ([`Sys::store_release_u64`]): released after the
//!    doorbell record, so the NIC never reads a doorbell before its record and WQEs.
//!
//! There is no separate fence between the doorbell record and the doorbell: the release stores stand
//! for it. On GPUs their scope is the queues' ([`QP_GPU_MEMORY`](crate::qp::QP_GPU_MEMORY)):
//! `st.release.sys` for queues in host memory, `st.release.gpu` for queues in GPU memory (NVSHMEM's
//! order there); `scripts/check-sass.sh` checks that the SASS keeps a barrier of at least the store's
//! scope before each.
//!
//! # What many threads per QP cost (and why nothing here waits on a lock)
//! Thousands of GPU threads may post to one QP. Every word they share is one QP's [`QpCounters`], so
//! the code keeps each of them to the fewest operations that can serialise:
//! - reservation: one `fetch_add` per group (a warp's lanes reserve together, device `post_one`);
//! - the ready chain: a group waits for `ready_head` to reach its base with plain loads (not a CAS per
//!   spin, which is an atomic operation on the counters' line for every waiter and slows the one
//!   store the chain waits for), then publishes its end with one release store: only the owner of the
//!   range starting at `ready_head` can move it, so no CAS is needed;
//! - the doorbell: no lock. A ringer raises `prod_idx` with `fetch_max`; one that did not raise it
//!   returns at once (a later ringer announces its WQEs), and those that raised it store the doorbell
//!   record and doorbell in the order they raised it, each after [`QpCounters::rung`] reached the
//!   count it raised from (a ticket chain whose links are three stores, never a wait on another
//!   thread's progress through the posting code). A spin lock around the doorbell (as before) made
//!   every ringer wait for every other one: with one group per warp and a doorbell per group, the lock
//!   is what thousands of threads queued on.
//!
//! The queues and counters are those a [`QpDesc`] describes (`qp`); the atomics and fences come from a
//! [`Sys`] implementation. `no_std`, no allocation; waits end with [`PollError::Timeout`] when
//! [`Sys::idle`] says so, never with a panic.

use crate::mlx5::{self, cqe_opcode, fm_ce_se, CQE_SIZE};
use crate::qp::{collapsed_state, unwrap16, CqState, CqeError, PollError, QpCounters, QpDesc, Sys};
use crate::wqe::Wqe;
use core::mem::offset_of;

impl QpDesc {
    /// Reserves `n` consecutive WQEBBs and returns the count of the first. Waits until the ring has
    /// room for them: until every WQE that used those slots before has completed (NVSHMEM's
    /// `ibgda_wait_for_slot_availability`).
    ///
    /// # Safety
    /// `self` must describe live queues and counters (the same for every thread posting to the QP).
    #[inline]
    pub unsafe fn reserve<S: Sys>(&self, s: &S, n: u32) -> Result<u64, PollError> {
        let size = self.sq_size();
        if n > size {
            return Err(PollError::TooLarge { wqebbs: n, sq_size: size });
        }
        // SAFETY: the counters are the QP's (caller's contract).
        let base = unsafe { s.fetch_add_u64(self.resv_head(), n as u64) };
        let end = base + n as u64;
        let start_of_ring = end.saturating_sub(size as u64);
        if start_of_ring > 0 {
            // SAFETY: as above.
            unsafe { self.poll(s, start_of_ring)? };
            // Acquire: the NIC read the slots' previous WQEs before it completed them; our writes come
            // after what the poll observed.
            s.fence_acq_rel();
        }
        Ok(base)
    }

    /// Writes `wqe` at WQEBB `pos` (reserved by [`reserve`](Self::reserve)), stamping its WQE index
    /// (`pos & 0xffff`) and the QPN into its control segment. A WQE of several WQEBBs wraps to the
    /// start of the ring like any other.
    ///
    /// # Safety
    /// As [`reserve`](Self::reserve); `pos..pos + wqe.wqebbs()` must be reserved by the caller.
    #[inline]
    pub unsafe fn write<S: Sys>(&self, s: &S, pos: u64, wqe: &Wqe) {
        let mut w = *wqe;
        w.stamp(pos as u16, self.qpn);
        let words: [[u32; 4]; crate::wqe::MAX_DS] = bytemuck::must_cast(w.seg);
        let ds = w.ds as usize;
        // A loop of constant trip count with a predicate (not `take(ds)`): it unrolls, so the WQE stays
        // in registers on the GPU instead of going through local memory.
        for (i, seg) in words.iter().enumerate() {
            if i < ds {
                let addr = self.wqebb_addr(pos + (i / 4) as u64) + ((i % 4) * mlx5::DS) as u64;
                for (j, v) in seg.iter().enumerate() {
                    // SAFETY: inside the reserved WQEBBs of the ring (caller's contract); 4-byte aligned.
                    unsafe { s.store_u32((addr as usize + 4 * j) as *mut u32, *v) };
                }
            }
        }
    }

    /// Marks `base..base + n` written: waits for the groups reserved before it, then advances
    /// `ready_head` (NVSHMEM's `ready_head` chain). Orders the WQE stores before it for the NIC first,
    /// since another thread may ring the doorbell for these WQEs. The wait reads `ready_head` (no CAS
    /// per spin); the advance is a release store, as only the owner of the range at `ready_head`
    /// moves it.
    ///
    /// # Safety
    /// As [`write`](Self::write); called once per reservation, after its WQEs are written.
    #[inline]
    pub unsafe fn mark_ready<S: Sys>(&self, s: &S, base: u64, n: u32) -> Result<(), PollError> {
        s.fence_nic();
        let mut spins = 0;
        // SAFETY: the QP's counters (caller's contract).
        while unsafe { s.load_u64(self.ready_head()) } != base {
            if !s.idle(&mut spins) {
                // SAFETY: as above.
                let (prod, cons) = unsafe { (s.load_u64(self.prod_idx()), s.load_u64(self.cons_idx())) };
                return Err(PollError::Timeout { idx: base, prod, cons });
            }
        }
        // Acquire the earlier groups' WQEs (released with their `ready_head` stores), so that our
        // release below passes them on to whoever rings for everything below base + n.
        s.fence_acq_rel();
        // SAFETY: as above; this group owns ready_head while it equals base.
        unsafe { s.store_release_u64(self.ready_head(), base + n as u64) };
        Ok(())
    }

    /// Marks `base..base + n` ready and rings the doorbell when NVSHMEM would: when nobody reserved
    /// after this group, when the group crosses a multiple of `batch`, or when it is `batch` WQEBBs or
    /// more. Returns whether it rang.
    ///
    /// "Nobody reserved after this group" is read before the group is marked ready, so that the load
    /// overlaps the fence and the ready chain instead of adding a round trip after them. Liveness does
    /// not depend on when it is read: the group that is last in reservation order reads its own end,
    /// whenever it reads, and rings for everything before it.
    ///
    /// # Safety
    /// As [`mark_ready`](Self::mark_ready).
    #[inline]
    pub unsafe fn submit<S: Sys>(&self, s: &S, base: u64, n: u32) -> Result<bool, PollError> {
        let new = base + n as u64;
        // SAFETY: caller's contract.
        let last = new == unsafe { s.load_u64(self.resv_head()) };
        // SAFETY: caller's contract.
        unsafe { self.mark_ready(s, base, n)? };
        let batch = if self.batch <= 1 { 1 } else { self.batch as u64 };
        let mask = !(batch - 1);
        let ring = last || (base & mask) != (new & mask) || n as u64 >= batch;
        if ring {
            // SAFETY: caller's contract.
            unsafe { self.post_send(s, new)? };
        }
        Ok(ring)
    }

    /// Announces every WQEBB below `new` to the NIC, if not done yet, without a lock:
    /// `old = fetch_max(prod_idx, new)`; if that did not raise it, a ringer that did announces these
    /// WQEs, and this returns. Otherwise, after an acquire fence (over the WQEs the caller saw marked
    /// ready), this thread waits until [`QpCounters::rung`] says the ringer before it (the one that raised `prod_idx` to
    /// `old`) has rung, then stores the doorbell record (`new & 0xffff`, big-endian) and the 8-byte
    /// doorbell with release stores, and passes `rung` on with a release store. Doorbell records and
    /// doorbells of one QP thus reach the NIC in increasing order (research note §3.2, §6.2 step 5;
    /// the module docs say why no other fence is needed).
    ///
    /// Never inlined: the doorbell path is one function in the device library's machine code, whose
    /// instruction order `scripts/check-sass.sh` checks in CI (a barrier of the queues' scope, system
    /// or GPU, before the doorbell record's store, before the doorbell's and before `rung`'s); a call
    /// per doorbell costs nothing beside the MMIO write.
    ///
    /// # Safety
    /// As [`mark_ready`](Self::mark_ready); every WQEBB below `new` must be ready.
    #[inline(never)]
    pub unsafe fn post_send<S: Sys>(&self, s: &S, new: u64) -> Result<(), PollError> {
        // SAFETY: the QP's counters (caller's contract).
        let old = unsafe { s.fetch_max_u64(self.prod_idx(), new) };
        if new <= old {
            // Another ringer announces these WQEs; this thread stores nothing, so it needs no fence.
            return Ok(());
        }
        // Acquire: the WQEs below `new` that other threads marked ready (each before its release of
        // `ready_head`, which the caller observed, in program order before this fence) happen before
        // the doorbell record below. Only the ringer that raised `prod_idx` pays it.
        s.fence_acq_rel();
        let rung = self.field::<u32>(offset_of!(QpCounters, rung));
        let mut spins = 0;
        // SAFETY: as above. Acquire: the previous ringer's doorbell record and doorbell come before ours.
        while unsafe { s.load_acquire_u32(rung) } != old as u32 {
            if !s.idle(&mut spins) {
                // SAFETY: as above.
                let cons = unsafe { s.load_u64(self.cons_idx()) };
                return Err(PollError::Timeout { idx: new, prod: old, cons });
            }
        }
        // Release stores, in this order (NVSHMEM skips its membars for release stores too): every
        // WQE below `new` (this thread's, released by `mark_ready`'s fence; the others' through the
        // acquire above) before the doorbell record, the record before the doorbell, the doorbell
        // before `rung` (so the next ringer's record follows it).
        // SAFETY: the doorbell record and register are the QP's (caller's contract); aligned.
        unsafe {
            s.store_release_u32((self.dbr as usize + 4 * mlx5::SND_DBR) as *mut u32, mlx5::dbr_word(new));
            s.store_release_u64(self.db as *mut u64, mlx5::doorbell_word(new, self.qpn));
            s.store_release_u32(rung, new as u32);
        }
        Ok(())
    }

    /// The first error CQE this QP has seen, if any.
    ///
    /// # Safety
    /// As [`reserve`](Self::reserve).
    #[inline]
    pub unsafe fn error<S: Sys>(&self, s: &S) -> Option<CqeError> {
        // SAFETY: caller's contract.
        CqeError::decode(unsafe { s.load_u64(self.field(offset_of!(QpCounters, error))) })
    }

    #[inline]
    unsafe fn record_error<S: Sys>(&self, s: &S, e: CqeError) {
        // SAFETY: caller's contract; only the first error is kept.
        unsafe { s.cas_u64(self.field(offset_of!(QpCounters, error)), 0, e.encode()) };
    }

    /// Waits until every WQEBB below `idx` has completed ("complete through idx", research note
    /// §4.3). Rings the doorbell itself for WQEs that are ready but not yet announced, so a waiter
    /// never depends on a batched submission of another thread. An error CQE ends the wait with
    /// [`PollError::Cqe`], as does one seen before (the QP is in the error state).
    ///
    /// # Safety
    /// As [`reserve`](Self::reserve).
    pub unsafe fn poll<S: Sys>(&self, s: &S, idx: u64) -> Result<(), PollError> {
        // SAFETY: caller's contract throughout.
        unsafe {
            if let Some(e) = self.error(s) {
                return Err(PollError::Cqe(e));
            }
            if s.load_u64(self.cons_idx()) >= idx {
                return Ok(());
            }
            let mut spins = 0;
            // 1. Wait until idx has been announced to the NIC, announcing it ourselves if it is ready.
            loop {
                let prod = s.load_u64(self.prod_idx());
                if prod >= idx {
                    break;
                }
                let ready = s.load_u64(self.ready_head());
                if ready > prod {
                    self.post_send(s, ready)?;
                    continue;
                }
                if !s.idle(&mut spins) {
                    return Err(PollError::Timeout { idx, prod, cons: s.load_u64(self.cons_idx()) });
                }
            }
            s.fence_acq_rel();
            // 2. Wait for the CQE.
            if self.collapsed() {
                self.poll_collapsed(s, idx, &mut spins)
            } else {
                self.poll_normal(s, idx, &mut spins)
            }
        }
    }

    /// The collapsed CQ: every CQE lands in slot 0; [`collapsed_state`] reads it.
    unsafe fn poll_collapsed<S: Sys>(&self, s: &S, idx: u64, spins: &mut u64) -> Result<(), PollError> {
        let tail = (self.cq as usize + offset_of!(mlx5::Cqe64, wqe_counter)) as *const u32;
        let size = self.sq_size();
        loop {
            // SAFETY: slot 0 of the QP's CQ (caller's contract); wqe_counter..op_own is one aligned word.
            let w = unsafe { s.load_acquire_u32(tail) }.to_ne_bytes();
            let (opcode, counter) = (w[3] >> 4, u16::from_be_bytes([w[0], w[1]]));
            let state = collapsed_state(opcode, counter, idx, size);
            if state == CqState::Error {
                // SAFETY: as above.
                let e = unsafe { CqeError::read(s, self.cq as *const u8) };
                // SAFETY: caller's contract.
                unsafe { self.record_error(s, e) };
                return Err(PollError::Cqe(e));
            }
            // SAFETY: caller's contract.
            let cons = unsafe { s.load_u64(self.cons_idx()) };
            if cons >= idx {
                return Ok(());
            }
            if state == CqState::Done {
                // SAFETY: caller's contract. prod is read after the CQE: it covers the completion.
                unsafe {
                    let prod = s.load_u64(self.prod_idx());
                    s.fetch_max_u64(self.cons_idx(), unwrap16(prod, counter.wrapping_add(1)));
                }
                s.fence_acq_rel();
                return Ok(());
            }
            if !s.idle(spins) {
                // SAFETY: caller's contract.
                let prod = unsafe { s.load_u64(self.prod_idx()) };
                return Err(PollError::Timeout { idx, prod, cons });
            }
        }
    }

    /// A normal CQ: one thread at a time (the poll lock) consumes the valid CQEs (owner bit = wrap
    /// parity of the consumer count) in order, advances `cons_idx` from their `wqe_counter` and the
    /// CQ doorbell record; the others wait for `cons_idx`.
    unsafe fn poll_normal<S: Sys>(&self, s: &S, idx: u64, spins: &mut u64) -> Result<(), PollError> {
        let lock = self.field::<u32>(offset_of!(QpCounters, poll_lock));
        loop {
            // SAFETY: caller's contract throughout.
            unsafe {
                if let Some(e) = self.error(s) {
                    return Err(PollError::Cqe(e));
                }
                let cons = s.load_u64(self.cons_idx());
                if cons >= idx {
                    return Ok(());
                }
                if s.cas_u32(lock, 0, 1) == 0 {
                    s.fence_acq_rel();
                    let progressed = self.drain_cq(s);
                    s.fence_acq_rel();
                    s.store_release_u32(lock, 0);
                    if progressed {
                        continue;
                    }
                }
                if !s.idle(spins) {
                    return Err(PollError::Timeout { idx, prod: s.load_u64(self.prod_idx()), cons });
                }
            }
        }
    }

    /// Consumes the valid CQEs of a normal CQ (poll lock held). Returns whether it consumed any.
    unsafe fn drain_cq<S: Sys>(&self, s: &S) -> bool {
        let ci_p = self.field::<u64>(offset_of!(QpCounters, cq_ci));
        let log = self.log_cq & 31;
        let mut any = false;
        loop {
            // SAFETY: the QP's counters and CQ (caller's contract); the slot is inside the CQ.
            unsafe {
                let ci = s.load_u64(ci_p);
                let slot = self.cq as usize + (ci as usize & ((1usize << log) - 1)) * CQE_SIZE;
                let w = s.load_acquire_u32((slot + offset_of!(mlx5::Cqe64, wqe_counter)) as *const u32).to_ne_bytes();
                let opcode = w[3] >> 4;
                let owner = w[3] & 1;
                if opcode == cqe_opcode::INVALID || owner as u64 != (ci >> log) & 1 {
                    return any;
                }
                any = true;
                if opcode == cqe_opcode::REQ_ERR || opcode == cqe_opcode::RESP_ERR {
                    self.record_error(s, CqeError::read(s, slot as *const u8));
                }
                let counter = u16::from_be_bytes([w[0], w[1]]);
                let prod = s.load_u64(self.prod_idx());
                s.fetch_max_u64(self.cons_idx(), unwrap16(prod, counter.wrapping_add(1)));
                s.fetch_add_u64(ci_p, 1);
                if self.cq_dbr != 0 {
                    let set_ci = (((ci + 1) & 0x00ff_ffff) as u32).to_be_bytes();
                    s.store_release_u32(self.cq_dbr as *mut u32, u32::from_ne_bytes(set_ci));
                }
            }
        }
    }

    /// Waits until everything marked ready so far has completed (NVSHMEM's `ibgda_quiet`).
    ///
    /// # Safety
    /// As [`reserve`](Self::reserve).
    pub unsafe fn quiet<S: Sys>(&self, s: &S) -> Result<(), PollError> {
        // SAFETY: caller's contract.
        unsafe {
            let ready = s.load_u64(self.ready_head());
            self.poll(s, ready)
        }
    }

    /// Records that the group ending at `end` holds an RDMA READ its poster does not wait for
    /// (`QpCounters::read_head`), so that a later fence knows to order behind it.
    ///
    /// # Safety
    /// As [`QpDesc::post`]: the QP's counters are live and accessed only atomically.
    #[inline(always)]
    pub unsafe fn note_read<S: Sys>(&self, s: &S, end: u64) {
        // SAFETY: caller's contract.
        unsafe { s.fetch_max_u64(self.read_head(), end) };
    }

    /// Whether a READ recorded by [`note_read`](Self::note_read) may still be unanswered (its group
    /// is not complete yet): only then does a fence need a fenced WQE on this QP.
    ///
    /// # Safety
    /// As [`QpDesc::note_read`].
    #[inline(always)]
    pub unsafe fn reads_outstanding<S: Sys>(&self, s: &S) -> bool {
        // SAFETY: caller's contract.
        unsafe { s.load_u64(self.read_head()) > s.load_u64(self.cons_idx()) }
    }

    /// Posts `wqes` as one group from one thread: reserves their WQEBBs, writes them, asks for a CQE
    /// on the last one (appending a signalled NOP when the last WQE spans several WQEBBs, so the
    /// completion count reaches the end of the group, research note §4.2) and submits. Returns the
    /// count after the group: [`poll`](Self::poll) it to wait for these WQEs.
    ///
    /// # Safety
    /// As [`reserve`](Self::reserve); the WQEs' local and remote buffers must stay valid until they
    /// complete.
    pub unsafe fn post<S: Sys>(&self, s: &S, wqes: &[Wqe]) -> Result<u64, PollError> {
        let Some(last) = wqes.last() else {
            // SAFETY: caller's contract.
            return Ok(unsafe { s.load_u64(self.ready_head()) });
        };
        let bbs = |w: &Wqe| w.wqebbs().max(1);
        let tail_nop = last.wqebbs() > 1;
        let n: u32 = wqes.iter().map(bbs).sum::<u32>() + tail_nop as u32;
        // SAFETY: caller's contract throughout.
        unsafe {
            let base = self.reserve(s, n)?;
            let mut pos = base;
            let k = wqes.len() - 1;
            for (i, w) in wqes.iter().enumerate() {
                if i == k && !tail_nop {
                    let mut w = *w;
                    w.set_flags(w.flags() | fm_ce_se::CQ_UPDATE);
                    self.write(s, pos, &w);
                } else {
                    self.write(s, pos, w);
                }
                pos += bbs(w) as u64;
            }
            if tail_nop {
                self.write(s, pos, &Wqe::nop(fm_ce_se::CQ_UPDATE));
                pos += 1;
            }
            self.submit(s, base, n)?;
            Ok(pos)
        }
    }
}
