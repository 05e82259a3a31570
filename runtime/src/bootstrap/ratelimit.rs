//! Rate-limited warnings about bad connections (strangers on the bootstrap port, the fd-passing
//! socket or the proxy's port). A port scanner or a misconfigured job must not flood a PE's output: the first few
//! warnings of a window are printed, the rest counted, and one summary line with the count is
//! printed when the window ends (at the next warning after it, or when the limiter is dropped).

use crate::log;
use std::time::{Duration, Instant};

/// Warnings printed in full per window.
const BURST: u32 = 5;
/// Length of a window.
const WINDOW: Duration = Duration::from_secs(10);

pub(crate) struct WarnLimiter {
    /// What the warnings are about, for the summary line ("bootstrap connections").
    what: &'static str,
    window_start: Instant,
    printed: u32,
    suppressed: u64,
}

impl WarnLimiter {
    pub(crate) fn new(what: &'static str) -> WarnLimiter {
        WarnLimiter { what, window_start: Instant::now(), printed: 0, suppressed: 0 }
    }

    /// Prints `msg` at warning level, unless this window's quota is spent (then it is counted).
    pub(crate) fn warn(&mut self, msg: impl AsRef<str>) {
        if self.window_start.elapsed() >= WINDOW {
            self.flush();
            self.window_start = Instant::now();
            self.printed = 0;
        }
        if self.printed < BURST {
            self.printed += 1;
            log::warn(msg);
            if self.printed == BURST {
                log::warn(format!(
                    "rshmem: further warnings about {} are summarized every {} s",
                    self.what,
                    WINDOW.as_secs()
                ));
            }
        } else {
            self.suppressed += 1;
        }
    }

    /// Prints the summary of the warnings suppressed in the window, once it ended: for a caller that
    /// may not warn again for a long time (a listener's loop), so that the count does not wait for it.
    pub(crate) fn tick(&mut self) {
        if self.suppressed > 0 && self.window_start.elapsed() >= WINDOW {
            self.flush();
            self.window_start = Instant::now();
            self.printed = 0;
        }
    }

    /// Prints the summary of the warnings suppressed so far, if any.
    pub(crate) fn flush(&mut self) {
        if self.suppressed > 0 {
            log::warn(format!(
                "rshmem: {} more warnings about {} in the last {} s (not shown)",
                self.suppressed,
                self.what,
                self.window_start.elapsed().as_secs().max(1)
            ));
            self.suppressed = 0;
        }
    }
}

impl Drop for WarnLimiter {
    fn drop(&mut self) {
        self.flush();
    }
}
