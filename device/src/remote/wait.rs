//! How a device thread waits for what another node's PE or this PE's proxy (or NIC) must do: one spin
//! of such a wait, shared by the proxy and IBGDA paths and by the API's waits (`wait_until`,
//! barriers). A leaf of `remote`: it uses only `arch` and the inbound queue.

use super::inbound;
use crate::arch;

/// One spin of a wait for something another node's PE (through the proxies) or this PE's proxy must
/// do: the usual back-off, and every 8 spins the inbound operations waiting here (`inbound`): a
/// thread that waits for the proxy also does the proxy's GPU-side work, so that work never depends on
/// the CUDA driver getting a launch or a copy through while this thread spins.
#[inline(always)]
pub(crate) fn idle(spins: &mut u64, call: &'static str) {
    idle_every(spins, call, 7)
}

/// `idle` that looks at the inbound queue only when `spins & mask == 0`, and backs off (on the GPU)
/// when the wait grows: for waits on other threads of this PE (the IBGDA posting chain and locks),
/// where thousands of threads may wait at once and each look at the queue is a read of host memory.
#[inline(always)]
pub(crate) fn idle_every(spins: &mut u64, call: &'static str, mask: u64) {
    arch::idle(spins, call);
    if *spins & mask == 0 {
        // SAFETY: called only from device calls, which require an initialized rshmem (checked by
        // the calls that lead here).
        unsafe { inbound::progress(8) };
    }
    if mask > 7 {
        arch::backoff(*spins);
    }
}
