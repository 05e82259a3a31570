//! The emulated NIC with a peer that answers late and out of order (as the runtime's TCP peer does):
//! WQEs stay in flight, CQEs still come in WQE order and only once the answer is there, a fenced WQE is
//! not started before the READs and atomics ahead of it are answered, regions behind a DMA accessor
//! are reached only through it, and the acknowledge-only mode completes without moving data.

mod common;

use common::{Mem, TimedSys};
use rshmem_ibgda::emu::{respond, Access, Dma, FaultConfig, HostQueues, HostQueuesConfig, Loopback, MrTable, Nic, Reason, Remote, RemoteDone, RemoteError, RemoteOp};
use rshmem_ibgda::mlx5::{fm_ce_se, syndrome};
use rshmem_ibgda::{Atomic, Local, PollError, Wqe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LKEY: u32 = 0x11;
const RKEY: u32 = 0x22;

/// Answers waiting to be released or polled: (tag, outcome).
type Answers = Arc<Mutex<Vec<(u64, Result<RemoteDone, RemoteError>)>>>;

/// A peer that executes at once but answers only when the test releases answers, in the order the
/// test picks; it logs every start (tag, kind).
struct Late {
    mrs: Arc<MrTable>,
    held: Answers,
    released: Answers,
    started: Arc<Mutex<Vec<(u64, &'static str)>>>,
}

impl Remote for Late {
    fn start(&mut self, tag: u64, op: RemoteOp) -> Result<(), RemoteError> {
        let kind = match op {
            RemoteOp::Write { .. } => "write",
            RemoteOp::Read { .. } => "read",
            RemoteOp::Atomic { .. } => "atomic",
        };
        self.started.lock().unwrap().push((tag, kind));
        let r = respond(&self.mrs, op);
        self.held.lock().unwrap().push((tag, r));
        Ok(())
    }
    fn poll(&mut self) -> Option<(u64, Result<RemoteDone, RemoteError>)> {
        self.released.lock().unwrap().pop()
    }
}

struct LateRig {
    nic: Nic,
    qp: HostQueues,
    mrs: Arc<MrTable>,
    held: Answers,
    released: Answers,
    started: Arc<Mutex<Vec<(u64, &'static str)>>>,
}

impl LateRig {
    fn new() -> LateRig {
        let mrs = Arc::new(MrTable::new());
        let qp = HostQueues::new(HostQueuesConfig { log_sq: 6, log_cq: 6, collapsed: false, batch: 1, ..Default::default() });
        let mut nic = Nic::new(mrs.clone(), FaultConfig::default());
        let (held, released, started) = (Arc::default(), Arc::default(), Arc::default());
        let late = Late { mrs: mrs.clone(), held: Arc::clone(&held), released: Arc::clone(&released), started: Arc::clone(&started) };
        // SAFETY: the HostQueues lives in the rig as long as the NIC (polled by the test only).
        unsafe { nic.add_qp(qp.setup(), Box::new(late)).unwrap() };
        LateRig { nic, qp, mrs, held, released, started }
    }
    /// Releases the held answers, `reverse`d or not (the Late peer pops from the end).
    fn release(&self, reverse: bool) {
        let mut h = std::mem::take(&mut *self.held.lock().unwrap());
        if !reverse {
            h.reverse();
        }
        self.released.lock().unwrap().extend(h);
    }
    fn post(&self, wqes: &[Wqe]) -> u64 {
        // SAFETY: the rig's QP; the buffers are registered and live.
        unsafe { self.qp.desc().post(&TimedSys::default(), wqes) }.unwrap()
    }
    /// CQEs written so far (normal CQ: the valid ones, in order), as (wqe_counter, opcode).
    fn cqes(&self) -> Vec<(u16, u8)> {
        let mut v = Vec::new();
        for i in 0..64usize {
            // SAFETY: slot i of the rig's CQ, read while the NIC does not run (it runs only in poll).
            let c: rshmem_ibgda::mlx5::Cqe64 = unsafe { std::ptr::read(self.qp.cq().add(64 * i) as *const _) };
            if c.opcode() == 15 {
                break;
            }
            v.push((c.wqe_counter.get(), c.opcode()));
        }
        v
    }
}

#[test]
fn late_and_reordered_answers_complete_in_wqe_order() {
    let mut rig = LateRig::new();
    let local = Mem::new(&rig.mrs, LKEY, 512, Access::ALL);
    let remote = Mem::new(&rig.mrs, RKEY, 512, Access::ALL);
    let r = |off: usize| rshmem_ibgda::Remote { addr: remote.addr(off), rkey: RKEY };
    let l = |off: usize| Local { addr: local.addr(off), lkey: LKEY };
    // Three separately signalled WQEs: a WRITE, a READ, an atomic.
    for w in [Wqe::rdma_write(0, r(0), l(0), 64), Wqe::rdma_read(0, r(0), l(1024), 64), Wqe::atomic(0, r(2048), l(3000), Atomic::Fa64 { add: 5 })] {
        rig.post(&[w]);
    }
    assert_eq!(rig.nic.poll(), 0, "nothing completes before the peer answers");
    assert_eq!(rig.started.lock().unwrap().len(), 3, "all three are in flight at once");
    assert!(rig.cqes().is_empty());
    assert!(!rig.nic.is_idle());
    // Answers arrive in reverse: the CQEs still come in WQE order, all three now.
    rig.release(true);
    assert_eq!(rig.nic.poll(), 3);
    assert_eq!(rig.cqes().iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1, 2], "CQEs in WQE order");
    assert!(rig.cqes().iter().all(|x| x.1 == 0), "successful completions");
    // Word 375 of the local buffer (byte 3000), written by the NIC (which runs only in poll).
    assert_eq!(local.word(375), 0, "the atomic's old value");
    assert_eq!(remote.word(256), 5, "the atomic applied");
    assert!(rig.nic.is_idle());
}

#[test]
fn a_fenced_wqe_waits_for_earlier_reads_and_atomics() {
    let mut rig = LateRig::new();
    let local = Mem::new(&rig.mrs, LKEY, 512, Access::ALL);
    let remote = Mem::new(&rig.mrs, RKEY, 512, Access::ALL);
    let r = |off: usize| rshmem_ibgda::Remote { addr: remote.addr(off), rkey: RKEY };
    let l = |off: usize| Local { addr: local.addr(off), lkey: LKEY };
    rig.post(&[Wqe::rdma_read(0, r(0), l(0), 8)]);
    rig.post(&[Wqe::rdma_write(0, r(64), l(64), 8)]); // not fenced: may start
    rig.post(&[Wqe::rdma_write(fm_ce_se::FM_FENCE, r(128), l(128), 8)]); // fenced: waits for the READ
    rig.nic.poll();
    assert_eq!(rig.started.lock().unwrap().iter().map(|s| s.1).collect::<Vec<_>>(), vec!["read", "write"], "the fenced WRITE must not start before the READ is answered");
    rig.release(false);
    rig.nic.poll();
    rig.nic.poll();
    assert_eq!(rig.started.lock().unwrap().len(), 3, "the fenced WRITE starts once the READ is answered");
    rig.release(false);
    rig.nic.poll();
    assert!(rig.nic.is_idle());
}

#[test]
fn an_error_answer_fails_its_wqe_and_flushes_the_rest() {
    let mut rig = LateRig::new();
    let local = Mem::new(&rig.mrs, LKEY, 512, Access::ALL);
    let remote = Mem::new(&rig.mrs, RKEY, 512, Access::ALL);
    let l = |off: usize| Local { addr: local.addr(off), lkey: LKEY };
    rig.post(&[Wqe::rdma_write(0, rshmem_ibgda::Remote { addr: remote.addr(0), rkey: 0x999 }, l(0), 8)]);
    rig.post(&[Wqe::rdma_write(0, rshmem_ibgda::Remote { addr: remote.addr(8), rkey: RKEY }, l(0), 8)]);
    rig.nic.poll();
    rig.release(false);
    rig.nic.poll();
    let st = rig.nic.stats(0);
    assert_eq!(st.first_error.map(|e| (e.syndrome, e.reason)), Some((syndrome::REMOTE_ACCESS, Reason::UnknownRkey)), "{st:?}");
    assert_eq!(rig.cqes().iter().map(|c| c.1).collect::<Vec<_>>(), vec![13, 13], "an error CQE, then the flushed one");
    assert_eq!(st.error_cqes, 2);
}

/// Copies through the accessor and counts the calls (a GPU heap behind the platform's copies).
struct CountingDma(AtomicUsize);

impl Dma for CountingDma {
    unsafe fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), String> {
        self.0.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract (inside the region registered with this accessor).
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), out.len()) };
        Ok(())
    }
    unsafe fn write(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        self.0.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
        Ok(())
    }
}

#[test]
fn regions_behind_an_accessor_are_reached_only_through_it() {
    let mrs = Arc::new(MrTable::new());
    let qp = HostQueues::new(HostQueuesConfig { log_sq: 6, ..Default::default() });
    let mut nic = Nic::new(mrs.clone(), FaultConfig::default());
    // SAFETY: the HostQueues outlives the NIC (polled here only).
    unsafe { nic.add_qp(qp.setup(), Box::new(Loopback::new(mrs.clone()))).unwrap() };
    let dma = Arc::new(CountingDma(AtomicUsize::new(0)));
    let mut local = vec![0u64; 64];
    let mut remote = vec![0u64; 64];
    // SAFETY: both buffers outlive the NIC's use of them (this function).
    unsafe {
        mrs.register_with(LKEY, local.as_mut_ptr() as *mut u8, 512, Access::ALL, Some(dma.clone())).unwrap();
        mrs.register_with(RKEY, remote.as_mut_ptr() as *mut u8, 512, Access::ALL, Some(dma.clone())).unwrap();
    }
    local[0] = 0x1234_5678;
    let d = qp.desc();
    let r = rshmem_ibgda::Remote { addr: remote.as_ptr() as u64, rkey: RKEY };
    let l = |i: usize| Local { addr: local.as_ptr() as u64 + 8 * i as u64, lkey: LKEY };
    let s = TimedSys::default();
    // SAFETY: the QP's queues; the NIC runs only in poll below.
    unsafe {
        d.post(&s, &[Wqe::rdma_write(0, r, l(0), 8)]).unwrap();
        nic.poll();
        d.post(&s, &[Wqe::rdma_read(0, r, l(1), 8)]).unwrap();
        nic.poll();
    }
    // SAFETY: the NIC is not running; plain reads of our buffers.
    let (rv, lv) = unsafe { (std::ptr::read_volatile(remote.as_ptr()), std::ptr::read_volatile(local.as_ptr().add(1))) };
    assert_eq!((rv, lv), (0x1234_5678, 0x1234_5678));
    assert_eq!(dma.0.load(Ordering::Relaxed), 4, "gather, remote write, remote read, scatter: all through the accessor");
    // An atomic on accessor memory cannot be done by this responder: a clear error, nothing written.
    // SAFETY: as above.
    let r2 = unsafe { d.post(&s, &[Wqe::atomic(0, r, l(2), Atomic::Fa64 { add: 1 })]).and_then(|e| { nic.poll(); d.poll(&s, e) }) };
    assert!(matches!(r2, Err(PollError::Cqe(c)) if c.syndrome == syndrome::REMOTE_OP), "{r2:?}");
    // SAFETY: as above.
    assert_eq!(unsafe { std::ptr::read_volatile(remote.as_ptr()) }, 0x1234_5678);
}

#[test]
fn acknowledge_only_completes_without_moving_data() {
    let mrs = Arc::new(MrTable::new());
    let qp = HostQueues::new(HostQueuesConfig { log_sq: 6, ..Default::default() });
    let mut nic = Nic::new(mrs.clone(), FaultConfig::default());
    nic.set_ack_only(true);
    // SAFETY: as above.
    unsafe { nic.add_qp(qp.setup(), Box::new(Loopback::new(mrs.clone()))).unwrap() };
    let mut local = Mem::new(&mrs, LKEY, 64, Access::ALL);
    let remote = Mem::new(&mrs, RKEY, 64, Access::ALL);
    local.bytes_mut()[..8].copy_from_slice(&[7; 8]);
    let d = qp.desc();
    let s = TimedSys::default();
    let r = rshmem_ibgda::Remote { addr: remote.addr(0), rkey: RKEY };
    let l = Local { addr: local.addr(0), lkey: LKEY };
    // SAFETY: as above.
    unsafe {
        let e = d.post(&s, &[Wqe::rdma_write(0, r, l, 8), Wqe::atomic(0, r, l, Atomic::Fa64 { add: 1 })]).unwrap();
        nic.poll();
        d.poll(&s, e).unwrap();
        // A malformed one still fails: a bad lkey.
        let e = d.post(&s, &[Wqe::rdma_write(0, r, Local { addr: l.addr, lkey: 0x4242 }, 8)]).unwrap();
        nic.poll();
        assert!(matches!(d.poll(&s, e), Err(PollError::Cqe(c)) if c.syndrome == syndrome::LOCAL_PROT));
    }
    assert_eq!(remote.word(0), 0, "nothing moved");
}

#[test]
fn fault_lists_parse_or_name_the_bad_item() {
    let f = FaultConfig::parse("delay=300us, drop=2,wrap,full=1ms,slow=5us,scan=1ms").unwrap();
    assert_eq!(f.fetch_delay, Duration::from_micros(300));
    assert_eq!(f.drop_doorbell_every, 2);
    assert_eq!(f.start_index, 0x1_0000 - 48);
    assert_eq!(f.hold_until_full, Some(Duration::from_millis(1)));
    assert_eq!(f.cqe_delay, Duration::from_micros(5));
    assert_eq!(f.dbr_scan, Some(Duration::from_millis(1)));
    assert!(FaultConfig::parse("all").unwrap().any());
    assert!(!FaultConfig::parse("none").unwrap().any());
    assert_eq!(FaultConfig::parse("").unwrap(), FaultConfig::default());
    assert_eq!(FaultConfig::parse("delay").unwrap().fetch_delay, Duration::from_micros(200));
    for (bad, says) in [("delay=3parsecs", "not a duration"), ("drop=0", "at least 1"), ("wrap=x", "not a number"), ("jitter", "not a fault mode")] {
        let e = FaultConfig::parse(bad).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
}
