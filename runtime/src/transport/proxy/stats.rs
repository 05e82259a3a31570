//! What the proxy spent its time on, for finding what limits a remote figure (`RSHMEM_PROXY_STATS=1`):
//! counts and times of each stage of the path a request takes, printed by every PE at finalize as one
//! line (`rshmem proxy stats [PE n]: ...`). Off by default; when off, each counting point costs one
//! load of a cached flag and no clock read.
//!
//! The stages, in the order a remote put meets them:
//! - **drain** (origin): requests taken off the rings, batches (one gathered send per peer each), and
//!   the time spent queueing and sending them (`send_ns`);
//! - **receive** (target): frames applied, and *settles* (the end of a burst: its copies and inbound
//!   operations completed before anything ordered after them) with their time;
//! - **copies** (target): `copy_batch` calls, the copies and bytes they carried, and their time (on a
//!   GPU: the copy engine and one stream synchronization per batch);
//! - **inbound** (target): operations queued for the device threads (words, signals, AMOs), waits for
//!   them and their time, and the service-kernel launches asked for (`kicks`).
//!
//! Per operation, `send_ns / requests`, `settle_ns / frames` and `inbound_wait_ns / inbound_ops` then
//! say which stage holds a figure back.

use crate::config::env;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// The counters (one set per process: a process is one PE).
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) requests: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) send_ns: AtomicU64,
    pub(crate) frames: AtomicU64,
    pub(crate) settles: AtomicU64,
    pub(crate) settle_ns: AtomicU64,
    pub(crate) copy_batches: AtomicU64,
    pub(crate) copies: AtomicU64,
    pub(crate) copy_bytes: AtomicU64,
    pub(crate) copy_ns: AtomicU64,
    pub(crate) inbound_ops: AtomicU64,
    pub(crate) inbound_waits: AtomicU64,
    pub(crate) inbound_wait_ns: AtomicU64,
    pub(crate) kicks: AtomicU64,
}

static STATS: OnceLock<Option<Stats>> = OnceLock::new();

/// The counters when `RSHMEM_PROXY_STATS` is on, else None.
pub(crate) fn get() -> Option<&'static Stats> {
    STATS.get_or_init(|| env::get(env::PROXY_STATS).is_some_and(|v| env::parse_switch(&v) == Some(true)).then(Stats::default)).as_ref()
}

/// Adds `v` to the counter `f` picks, when counting is on.
#[inline]
pub(crate) fn add(f: impl FnOnce(&Stats) -> &AtomicU64, v: u64) {
    if let Some(s) = get() {
        f(s).fetch_add(v, Ordering::Relaxed);
    }
}

/// A stage's clock: started only when counting is on.
pub(crate) struct Timer(Option<Instant>);

impl Timer {
    #[inline]
    pub(crate) fn start() -> Timer {
        Timer(get().map(|_| Instant::now()))
    }
    /// Adds the nanoseconds since `start` to the counter `f` picks.
    #[inline]
    pub(crate) fn stop(self, f: impl FnOnce(&Stats) -> &AtomicU64) {
        if let (Some(t), Some(s)) = (self.0, get()) {
            f(s).fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

/// The line a PE prints at finalize, or None when counting is off.
pub(crate) fn report() -> Option<String> {
    let s = get()?;
    let v = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let per = |ns: u64, n: u64| if n == 0 { 0.0 } else { ns as f64 / n as f64 / 1000.0 };
    Some(format!(
        "requests={} batches={} send_us={:.1} ({:.2} us/request) | frames={} settles={} settle_us={:.1} ({:.2} us/settle, {:.1} frames/settle) | \
         copy_batches={} copies={} copy_bytes={} copy_us={:.1} ({:.2} us/batch) | inbound_ops={} inbound_waits={} inbound_wait_us={:.1} ({:.2} us/wait) kicks={}",
        v(&s.requests),
        v(&s.batches),
        v(&s.send_ns) as f64 / 1000.0,
        per(v(&s.send_ns), v(&s.requests)),
        v(&s.frames),
        v(&s.settles),
        v(&s.settle_ns) as f64 / 1000.0,
        per(v(&s.settle_ns), v(&s.settles)),
        if v(&s.settles) == 0 { 0.0 } else { v(&s.frames) as f64 / v(&s.settles) as f64 },
        v(&s.copy_batches),
        v(&s.copies),
        v(&s.copy_bytes),
        v(&s.copy_ns) as f64 / 1000.0,
        per(v(&s.copy_ns), v(&s.copy_batches)),
        v(&s.inbound_ops),
        v(&s.inbound_waits),
        v(&s.inbound_wait_ns) as f64 / 1000.0,
        per(v(&s.inbound_wait_ns), v(&s.inbound_waits)),
        v(&s.kicks),
    ))
}
