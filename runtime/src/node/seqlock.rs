//! The seqlock used for records that one process writes and others read in shared memory (the host
//! barrier's announcements in hostsync.rs, the job status board in jobstatus.rs). One writer per record;
//! readers never block it and retry while it rewrites.
//!
//! The version is odd while the record is being rewritten. The order that makes a torn read impossible
//! on weakly ordered CPUs (aarch64/Grace) as well as x86:
//! - writer: version odd (relaxed), release fence, data stores (relaxed), version even (release);
//! - reader: version (acquire), data loads (relaxed), acquire fence, version again (relaxed): accept only
//!   if both versions are equal and even.
//!
//! The writer's release *fence* is what orders the data stores after the odd version. A release *store*
//! of the version alone orders only what comes before it, so a reader could see new data with the old
//! even version and accept a mix of two updates.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Rewrites a record: `store` performs the data stores (relaxed atomics). Only one thread or process may
/// write a given record (callers serialize their writers), so the relaxed load of the version is exact.
pub(crate) fn write(ver: &AtomicU64, store: impl FnOnce()) {
    let v = ver.load(Ordering::Relaxed);
    ver.store(v | 1, Ordering::Relaxed);
    // Pairs with the reader's acquire fence: a reader whose data loads see any store below also sees the
    // odd version (or later) when it reloads the version, and retries.
    fence(Ordering::Release);
    store();
    // A reader that acquires this even version sees every data store above.
    ver.store((v | 1) + 1, Ordering::Release);
}

/// A consistent copy of a record: `load` performs the data loads (relaxed atomics) and builds the copy.
/// None if the record stayed inconsistent for `tries` attempts (its writer died in the middle of an
/// update, or keeps rewriting it).
pub(crate) fn read<T>(ver: &AtomicU64, tries: u32, load: impl Fn() -> T) -> Option<T> {
    for attempt in 0..tries {
        let v1 = ver.load(Ordering::Acquire);
        if v1 & 1 == 0 {
            let copy = load();
            // Pairs with the writer's release fence: if a load above saw a newer update's data, the
            // reload below sees that update's odd version (or later).
            fence(Ordering::Acquire);
            if ver.load(Ordering::Relaxed) == v1 {
                return Some(copy);
            }
        }
        rshmem_common::backoff::snooze_at(attempt as u64 + 1);
    }
    None
}
