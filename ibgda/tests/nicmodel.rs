//! The NIC model (`rshmem_ibgda::nicmodel`) on a host thread over queues in host memory, driven by the
//! posting code from several threads: every WQE completes through the collapsed CQ, with the WQE
//! count wrapping past 65536; a malformed WQE ends in an error CQE naming the syndrome and the reason,
//! and the QP stays in the error state.

mod common;

use common::TimedSys;
use rshmem_ibgda::emu::{HostQueues, HostQueuesConfig};
use rshmem_ibgda::mlx5::{fm_ce_se, syndrome};
use rshmem_ibgda::nicmodel::{serve, ModelQp, Reason, Served};
use rshmem_ibgda::wqe::{Remote, Wqe};
use rshmem_ibgda::{PollError, Sys};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;

/// The model serving `qp` on a thread until `stop` is set.
struct Model {
    state: Box<ModelQp>,
    stop: Box<AtomicU32>,
    busy: Box<u64>,
}

impl Model {
    fn new(qp: &HostQueues) -> Model {
        let c = qp.config();
        let s = qp.setup();
        Model { state: Box::new(ModelQp::new(s.sq as u64, s.dbr as u64, s.cq.base as u64, c.qpn, c.log_sq, c.start)), stop: Box::new(AtomicU32::new(0)), busy: Box::new(0) }
    }
    /// Runs the model on a thread of `scope` until `stop`.
    fn run<'a>(&'a mut self, scope: &'a thread::Scope<'a, '_>) -> thread::ScopedJoinHandle<'a, Served> {
        let q = &mut *self.state as *mut ModelQp as usize;
        let stop = self.stop.as_ptr() as usize;
        let busy = &mut *self.busy as *mut u64 as usize;
        // SAFETY: the ModelQp and stop word outlive the scope; only this thread serves the QP; the
        // queues (the caller's HostQueues) outlive it too.
        scope.spawn(move || unsafe { serve(&TimedSys::default(), q as *mut ModelQp, 1, 0, 1, stop as *const u32, busy as *mut u64) })
    }
}

#[test]
fn posts_from_several_threads_complete_across_the_index_wrap() {
    let qp = HostQueues::new(HostQueuesConfig { log_sq: 6, start: 65536 - 100, batch: 4, ..HostQueuesConfig::default() });
    let mut model = Model::new(&qp);
    let stop = &*model.stop as *const AtomicU32 as usize;
    let (threads, each) = (4, 500u64);
    thread::scope(|sc| {
        let st = &*model.state as *const ModelQp as usize;
        let h = model.run(sc);
        let posters: Vec<_> = (0..threads)
            .map(|t| {
                let d = qp.desc();
                sc.spawn(move || {
                    let s = TimedSys::default();
                    for i in 0..each {
                        let w = Wqe::rdma_write_inline_value(0, Remote { addr: 0x1000 + 8 * t, rkey: 7 }, i, 8);
                        // SAFETY: the HostQueues outlives the scope; the WQE moves no data.
                        let end = unsafe { d.post(&s, &[w]) }.expect("post");
                        if i % 97 == 0 {
                            // SAFETY: as above.
                            unsafe { d.poll(&s, end) }.expect("poll");
                        }
                    }
                    // SAFETY: as above.
                    unsafe { d.quiet(&s) }.expect("quiet");
                })
            })
            .collect();
        for p in posters {
            p.join().unwrap();
        }
        // SAFETY: the stop word lives in `model` for the scope.
        unsafe { &*(stop as *const AtomicU32) }.store(1, Ordering::Release);
        assert_eq!(h.join().unwrap(), Served::Stopped);
        // SAFETY: the model thread has ended.
        let m = unsafe { *(st as *const ModelQp) };
        assert_eq!(m.error, 0);
        assert_eq!(m.wqes, threads * each);
        assert!(m.cqes >= 1 && m.cqes <= threads * each, "{m:?}");
        let c = qp.counters();
        assert_eq!(m.hw_ci, c.prod_idx, "{m:?} {c:?}");
        assert_eq!(c.cons_idx, c.ready_head, "{c:?}");
        assert!(m.hw_ci > 65536, "the count did not wrap: {m:?}");
    });
}

#[test]
fn a_malformed_wqe_ends_in_an_error_completion_and_the_qp_stays_in_error() {
    let qp = HostQueues::new(HostQueuesConfig { log_sq: 4, ..HostQueuesConfig::default() });
    let mut model = Model::new(&qp);
    let stop = &*model.stop as *const AtomicU32 as usize;
    thread::scope(|sc| {
        let st = &*model.state as *const ModelQp as usize;
        let h = model.run(sc);
        let (d, s) = (qp.desc(), TimedSys::default());
        // SAFETY: the HostQueues outlives the scope; the WQEs move no data.
        unsafe {
            let end = d.post(&s, &[Wqe::nop(fm_ce_se::CQ_UPDATE)]).unwrap();
            d.poll(&s, end).unwrap();
            let mut bad = Wqe::nop(fm_ce_se::CQ_UPDATE);
            bad.seg[0][3] = 0x77; // an opcode no NIC runs
            let end = d.post(&s, &[bad]).unwrap();
            match d.poll(&s, end) {
                Err(PollError::Cqe(e)) => {
                    assert_eq!((e.syndrome, e.vendor_syndrome, e.wqe_opcode, e.wqe_counter), (syndrome::LOCAL_QP_OP, Reason::UnknownOpcode as u8, 0x77, 1), "{e:?}");
                }
                r => panic!("the malformed WQE completed with {r:?}"),
            }
            // Later WQEs are not run: the error stays.
            let end = d.post(&s, &[Wqe::nop(fm_ce_se::CQ_UPDATE)]);
            assert!(matches!(end.and_then(|e| d.poll(&s, e)), Err(PollError::Cqe(_))));
            s.fence_acq_rel();
        }
        // SAFETY: the stop word lives in `model` for the scope.
        unsafe { &*(stop as *const AtomicU32) }.store(1, Ordering::Release);
        h.join().unwrap();
        // SAFETY: the model thread has ended.
        let m = unsafe { *(st as *const ModelQp) };
        assert_ne!(m.error, 0);
        assert_eq!(m.wqes, 1);
    });
}
