//! Running a probe that may block (a hung driver, a name service) with a time limit.

use std::time::Duration;

/// Runs `f` on a helper thread and waits at most `limit` for its answer. None: no answer in time (the
/// thread is left behind, blocked where it is), or it could not start, or it panicked.
pub fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("rshmem-bounded".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .ok()?;
    rx.recv_timeout(limit).ok()
}
