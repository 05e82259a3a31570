//! What the remote engine spent its time on, for finding what limits a remote figure
//! (`RSHMEM_PROXY_STATS=1`, the engine's `Config`): counts and times of each stage of the path a request takes, printed by
//! every PE at finalize as one line (`rshmem proxy stats [PE n]: ...`). Off by default; when off, each
//! counting point costs one load of a cached flag and no clock read.
//!
//! The stages, in the order a remote put meets them:
//! - **send** (origin): requests taken off the ring, batches, the time spent turning them into
//!   frames (`send_us`), puts that joined the previous frame (`merged`), fences that needed marks,
//!   waits for the peer's reply room (`credit_waits`), and the `sendmsg` calls with their bytes;
//! - **receive** (target): `recv` calls with their bytes, frames checked, frames moved behind a WRAP;
//! - **apply** (target): apply-kernel launches (GPUs; the CPU backend's lane threads apply);
//! - **answer** (target): ACKs and reply runs (GET data, fetched values) queued.
//!
//! Per request, `send_us / requests`, `recv_bytes / recvs` and `frames / acks` then say which stage
//! holds a figure back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The counters of one engine (one per PE), when counting is on.
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) requests: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) send_ns: AtomicU64,
    pub(crate) merged: AtomicU64,
    pub(crate) fences: AtomicU64,
    pub(crate) credit_waits: AtomicU64,
    pub(crate) sends: AtomicU64,
    pub(crate) sent_bytes: AtomicU64,
    pub(crate) recvs: AtomicU64,
    pub(crate) recv_bytes: AtomicU64,
    pub(crate) frames: AtomicU64,
    pub(crate) wraps: AtomicU64,
    pub(crate) apply_launches: AtomicU64,
    pub(crate) acks: AtomicU64,
    pub(crate) replies: AtomicU64,
}

impl Stats {
    /// Adds `v` to the counter `f` picks.
    #[inline]
    pub(crate) fn add(&self, f: impl FnOnce(&Stats) -> &AtomicU64, v: u64) {
        f(self).fetch_add(v, Ordering::Relaxed);
    }
}

/// A stage's clock: started only when counting is on.
pub(crate) struct Timer(Option<Instant>);

impl Timer {
    /// Starts when `on` (the engine counts).
    #[inline]
    pub(crate) fn start(on: bool) -> Timer {
        Timer(on.then(Instant::now))
    }
    /// Adds the nanoseconds since `start` to the counter `f` picks of `s`.
    #[inline]
    pub(crate) fn stop(self, s: Option<&Stats>, f: impl FnOnce(&Stats) -> &AtomicU64) {
        if let (Some(t), Some(s)) = (self.0, s) {
            f(s).fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

/// The line a PE prints at finalize.
pub(crate) fn report(s: &Stats) -> String {
    let v = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let per = |a: u64, n: u64| if n == 0 { 0.0 } else { a as f64 / n as f64 };
    format!(
        "requests={} batches={} send_us={:.1} ({:.3} us/request) merged={} fences={} credit_waits={} | sends={} sent_bytes={} ({:.0} B/send) | \
         recvs={} recv_bytes={} ({:.0} B/recv) frames={} wraps={} | apply_launches={} | acks={} replies={}",
        v(&s.requests),
        v(&s.batches),
        v(&s.send_ns) as f64 / 1000.0,
        per(v(&s.send_ns), v(&s.requests)) / 1000.0,
        v(&s.merged),
        v(&s.fences),
        v(&s.credit_waits),
        v(&s.sends),
        v(&s.sent_bytes),
        per(v(&s.sent_bytes), v(&s.sends)),
        v(&s.recvs),
        v(&s.recv_bytes),
        per(v(&s.recv_bytes), v(&s.recvs)),
        v(&s.frames),
        v(&s.wraps),
        v(&s.apply_launches),
        v(&s.acks),
        v(&s.replies),
    )
}
