//! The one waiting policy of rshmem's host threads: spin briefly, then yield the CPU, then sleep.
//!
//! PEs may outnumber cores (the CPU backend runs kernels on host threads; CI has two cores), so a
//! waiter must give its CPU away soon; but a wake-up from sleep costs several microseconds, so the
//! first rounds only spin. Every host wait loop of rshmem (the proxy, the request ring, the emulated
//! NIC, the CPU backend's device waits, the shared-memory host barrier, CUDA event polling) uses this
//! one schedule instead of its own thresholds.

use std::time::Duration;

/// Rounds that only spin (a pause instruction each).
pub const SPIN_ROUNDS: u64 = 64;
/// Rounds, counted from the start, after which a waiter sleeps instead of yielding.
pub const YIELD_ROUNDS: u64 = 2048;
/// How long one sleeping round sleeps.
pub const SLEEP: Duration = Duration::from_micros(20);

/// The state of one wait: how many rounds it has waited. Call [`Backoff::snooze`] once per failed poll
/// and [`Backoff::reset`] after progress.
#[derive(Clone, Copy, Debug, Default)]
pub struct Backoff {
    rounds: u64,
}

impl Backoff {
    pub const fn new() -> Backoff {
        Backoff { rounds: 0 }
    }
    /// Waits one round: a spin, a yield or a sleep, depending on how long this wait has lasted.
    pub fn snooze(&mut self) {
        self.rounds = self.rounds.saturating_add(1);
        snooze_at(self.rounds);
    }
    /// Rounds waited so far (for checks that run every N rounds, such as a deadline).
    pub const fn rounds(&self) -> u64 {
        self.rounds
    }
    /// Progress was made: the next wait starts with spinning again.
    pub fn reset(&mut self) {
        self.rounds = 0;
    }
    /// Whether this wait has reached the sleeping phase (the waiter is idle, not merely between
    /// events).
    pub const fn sleeping(&self) -> bool {
        self.rounds > YIELD_ROUNDS
    }
}

/// Waits round `round` (counted from 1) of a wait whose count its caller keeps (the CPU backend's
/// device waits count their own spins): the same schedule as [`Backoff::snooze`].
pub fn snooze_at(round: u64) {
    if round <= SPIN_ROUNDS {
        std::hint::spin_loop();
    } else if round <= YIELD_ROUNDS {
        std::thread::yield_now();
    } else {
        std::thread::sleep(SLEEP);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// This thread's voluntary context switches so far (Linux): each sleep is one; a spin never is, and
    /// a yield never is (a yielding thread stays runnable: when it is switched out, the switch counts
    /// as involuntary).
    fn voluntary_switches() -> u64 {
        let s = std::fs::read_to_string("/proc/thread-self/status").expect("/proc/thread-self/status");
        s.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:")).expect("voluntary_ctxt_switches").trim().parse().unwrap()
    }

    /// Counted in context switches, not in time: on a loaded 2-core machine a yield may give the CPU
    /// away for a whole time slice, so the spinning and yielding rounds can take as long as sleeps would.
    #[test]
    fn spins_then_yields_then_sleeps() {
        let mut b = Backoff::new();
        let v = voluntary_switches();
        for _ in 0..YIELD_ROUNDS {
            b.snooze();
        }
        assert!(!b.sleeping());
        // A page fault or the test harness may block once or twice; 2048 sleeps would be 2048.
        let blocked = voluntary_switches() - v;
        assert!(blocked < 16, "spinning and yielding rounds blocked {blocked} times");
        let (v, t) = (voluntary_switches(), Instant::now());
        for _ in 0..10 {
            b.snooze();
        }
        assert!(b.sleeping());
        assert!(voluntary_switches() - v >= 10, "sleeping rounds must block");
        assert!(t.elapsed() >= SLEEP * 10, "sleeping rounds must sleep: {:?}", t.elapsed());
        b.reset();
        assert_eq!(b.rounds(), 0);
    }
}
