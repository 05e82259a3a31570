//! The NIC model (`rshmem_ibgda::nicmodel`) on a host thread over queues in host memory, driven by the
//! posting code from several threads: every WQE completes through the collapsed CQ, with the WQE
//! count wrapping past 65536; a malformed WQE ends in an error CQE naming the syndrome and the reason,
//! and the QP stays in the error state. Several threads serving one array of QPs end together, when
//! the one serving QP 0 decides, and serve their QPs until then.

mod common;

use common::TimedSys;
use rshmem_ibgda::emu::{HostQueues, HostQueuesConfig};
use rshmem_ibgda::mlx5::{fm_ce_se, syndrome};
use rshmem_ibgda::nicmodel::{serve, ModelHeader, ModelQp, Reason, Served};
use rshmem_ibgda::wqe::{Remote, Wqe};
use rshmem_ibgda::{PollError, Sys};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// The model serving `qp` on a thread until `stop` is set.
struct Model {
    state: Box<ModelQp>,
    stop: Box<AtomicU32>,
    header: Box<ModelHeader>,
}

impl Model {
    fn new(qp: &HostQueues) -> Model {
        let c = qp.config();
        let s = qp.setup();
        Model { state: Box::new(ModelQp::new(s.sq as u64, s.dbr as u64, s.cq.base as u64, c.qpn, c.log_sq, c.start)), stop: Box::new(AtomicU32::new(0)), header: Box::default() }
    }
    /// Runs the model on a thread of `scope` until `stop`.
    fn run<'a>(&'a mut self, scope: &'a thread::Scope<'a, '_>) -> thread::ScopedJoinHandle<'a, Served> {
        let q = &mut *self.state as *mut ModelQp as usize;
        let stop = self.stop.as_ptr() as usize;
        let header = &mut *self.header as *mut ModelHeader as usize;
        // SAFETY: the ModelQp, stop word and header outlive the scope; only this thread serves the QP
        // (the launch's first); the queues (the caller's HostQueues) outlive it too.
        scope.spawn(move || unsafe { serve(&TimedSys::default(), q as *mut ModelQp, 1, 0, 1, stop as *const u32, header as *mut ModelHeader) })
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

/// Two threads serve four QPs (stride 2: thread 0 QPs 0 and 2, thread 1 QPs 1 and 3) with idle windows
/// that do not line up: thread 1's gives up after 20 ms, thread 0's (the deciding thread's) after
/// 800 ms. Thread 1 does not leave when its own window passes (work posted to its QPs after that is
/// served), and both end together once thread 0 finds the launch idle.
#[test]
fn the_threads_of_a_launch_serve_until_the_first_decides_and_end_together() {
    let qps: Vec<HostQueues> = (0..4).map(|q| HostQueues::new(HostQueuesConfig { qpn: 0x100 + q, log_sq: 4, ..HostQueuesConfig::default() })).collect();
    let mut models: Vec<ModelQp> = qps
        .iter()
        .map(|qp| {
            let (c, s) = (qp.config(), qp.setup());
            ModelQp::new(s.sq as u64, s.dbr as u64, s.cq.base as u64, c.qpn, c.log_sq, c.start)
        })
        .collect();
    let stop = AtomicU32::new(0);
    let mut header = ModelHeader::default();
    let windows = [Duration::from_millis(800), Duration::from_millis(20)];
    let (ms, st, hd) = (models.as_mut_ptr() as usize, stop.as_ptr() as usize, &mut header as *mut ModelHeader as usize);
    let t0 = Instant::now();
    thread::scope(|sc| {
        let threads: Vec<_> = (0..2u32)
            .map(|first| {
                let sys = TimedSys { timeout: windows[first as usize] };
                sc.spawn(move || {
                    // SAFETY: the models, stop word and header outlive the scope; each thread serves
                    // its own QPs (stride 2); the queues outlive the scope too.
                    let why = unsafe { serve(&sys, ms as *mut ModelQp, 4, first, 2, st as *const u32, hd as *mut ModelHeader) };
                    // SAFETY: the header's end word, written by the threads only atomically.
                    let end = unsafe { AtomicU32::from_ptr((hd + std::mem::offset_of!(ModelHeader, end)) as *mut u32) }.load(Ordering::Acquire);
                    (why, end, t0.elapsed())
                })
            })
            .collect();
        // Past thread 1's idle window (several times over): it serves on.
        thread::sleep(Duration::from_millis(150));
        assert!(!threads[1].is_finished(), "thread 1 left after its own idle window while thread 0 serves");
        let s = TimedSys { timeout: Duration::from_secs(5) };
        for q in [1, 3, 0, 2] {
            let d = qps[q].desc();
            // SAFETY: the HostQueues outlive the scope; the WQE moves no data.
            let r = unsafe { d.post(&s, &[Wqe::nop(fm_ce_se::CQ_UPDATE)]).and_then(|e| d.poll(&s, e)) };
            assert!(r.is_ok(), "QP {q} (thread {}) was not served after the first idle period: {r:?}", q % 2);
        }
        let posted = t0.elapsed();
        let ends: Vec<_> = threads.into_iter().map(|h| h.join().unwrap()).collect();
        for (t, &(why, end, at)) in ends.iter().enumerate() {
            assert_eq!((why, end), (Served::Idle, 1), "thread {t}");
            assert!(at >= posted + windows[0], "thread {t} ended {at:?} after the start, before thread 0's window since the last work ({posted:?}) passed");
        }
    });
    assert_eq!(stop.load(Ordering::Relaxed), 0);
    for (q, m) in models.iter().enumerate() {
        assert_eq!((m.error, m.wqes), (0, 1), "QP {q}: {m:?}");
    }
    assert_eq!(header.busy, 4, "{header:?}");
}
