//! How a device thread waits for what another node's PE or this PE's proxy (or NIC) must do: one spin
//! of such a wait, shared by the proxy and IBGDA paths and by the API's waits (`wait_until`,
//! barriers). A leaf of `remote`: it uses only `arch` and the apply code (`lane`).

use super::lane;
use crate::arch;

/// One spin of a wait for something another node's PE (through the engines) or this PE's engine must
/// do: the usual back-off, and every 8 spins the frames that arrived here when no apply kernel runs
/// (`lane::help`): a thread that waits for something remote also applies what arrives, so that
/// arrival never depends on the GPU scheduling an apply kernel while this thread's kernel fills it.
#[inline(always)]
pub(crate) fn idle(spins: &mut u64, call: &'static str) {
    idle_every(spins, call, 7)
}

/// `idle` that helps apply only when `spins & mask == 0`, and backs off (on the GPU) when the wait
/// grows: for waits on other threads of this PE (the IBGDA posting chain and locks), where thousands
/// of threads may wait at once.
#[inline(always)]
pub(crate) fn idle_every(spins: &mut u64, call: &'static str, mask: u64) {
    arch::idle(spins, call);
    if *spins & mask == 0 {
        // SAFETY: called only from device calls, which require an initialized rshmem (checked by
        // the calls that lead here).
        unsafe { lane::help(64) };
    }
    if mask > 7 {
        arch::backoff(*spins);
    }
}
