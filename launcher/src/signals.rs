//! Signals rshmrun catches (SIGINT, SIGTERM, SIGHUP) and the names of signals for messages.
//!
//! The handler only records the signal in an atomic bit mask; the wait loop in `job.rs` polls it with
//! [`take_pending`] and does the real work (forwarding to the PEs) outside signal context.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// The signals rshmrun forwards to the PEs.
pub const CAUGHT: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Bit `n` is set when signal `n` arrived and has not been taken yet.
static PENDING: AtomicU64 = AtomicU64::new(0);

extern "C" fn record_signal(sig: libc::c_int) {
    // Only a lock-free atomic operation: async-signal-safe.
    if (0..64).contains(&sig) {
        PENDING.fetch_or(1u64 << sig, Ordering::SeqCst);
    }
}

/// Installs the recording handler for SIGINT, SIGTERM and SIGHUP. A signal that was ignored when rshmrun
/// started (`nohup rshmrun ...`, or SIGINT for a background job of a non-interactive shell) stays ignored,
/// so the PEs inherit the ignore as the user intended.
pub fn install() -> io::Result<()> {
    for sig in CAUGHT {
        // SAFETY: `sigaction` is plain old data; all-zero is a valid value (empty mask, no flags), which
        // we then fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = record_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SA_RESTART: reads of the PEs' pipes and writes to our stdout resume instead of failing with EINTR.
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `action.sa_mask` is a valid, owned sigset_t.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: as for `action`, all-zero is a valid sigaction; sigaction() overwrites it.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `sig` is a valid catchable signal, both pointers point to live sigaction values, and the
        // handler only touches an atomic, so it is async-signal-safe.
        if unsafe { libc::sigaction(sig, &action, &mut old) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if old.sa_sigaction == libc::SIG_IGN {
            // SAFETY: restores the previous disposition (SIG_IGN) that the kernel just handed us.
            if unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Returns the signals that arrived since the last call (lowest number first) and clears them.
pub fn take_pending() -> Vec<libc::c_int> {
    let bits = PENDING.swap(0, Ordering::SeqCst);
    (1..64).filter(|s| bits & (1u64 << s) != 0).collect()
}

/// Signal names for messages; numbers are the platform's (Linux) so we take them from libc.
const NAMES: &[(libc::c_int, &str)] = &[
    (libc::SIGHUP, "SIGHUP"),
    (libc::SIGINT, "SIGINT"),
    (libc::SIGQUIT, "SIGQUIT"),
    (libc::SIGILL, "SIGILL"),
    (libc::SIGTRAP, "SIGTRAP"),
    (libc::SIGABRT, "SIGABRT"),
    (libc::SIGBUS, "SIGBUS"),
    (libc::SIGFPE, "SIGFPE"),
    (libc::SIGKILL, "SIGKILL"),
    (libc::SIGUSR1, "SIGUSR1"),
    (libc::SIGSEGV, "SIGSEGV"),
    (libc::SIGUSR2, "SIGUSR2"),
    (libc::SIGPIPE, "SIGPIPE"),
    (libc::SIGALRM, "SIGALRM"),
    (libc::SIGTERM, "SIGTERM"),
    #[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
    (libc::SIGSTKFLT, "SIGSTKFLT"),
    (libc::SIGCHLD, "SIGCHLD"),
    (libc::SIGCONT, "SIGCONT"),
    (libc::SIGSTOP, "SIGSTOP"),
    (libc::SIGTSTP, "SIGTSTP"),
    (libc::SIGTTIN, "SIGTTIN"),
    (libc::SIGTTOU, "SIGTTOU"),
    (libc::SIGURG, "SIGURG"),
    (libc::SIGXCPU, "SIGXCPU"),
    (libc::SIGXFSZ, "SIGXFSZ"),
    (libc::SIGVTALRM, "SIGVTALRM"),
    (libc::SIGPROF, "SIGPROF"),
    (libc::SIGWINCH, "SIGWINCH"),
    (libc::SIGIO, "SIGIO"),
    #[cfg(target_os = "linux")]
    (libc::SIGPWR, "SIGPWR"),
    (libc::SIGSYS, "SIGSYS"),
];

/// "SIGKILL" for 9; "signal 34" for numbers outside the table (real-time signals).
pub fn name(sig: libc::c_int) -> String {
    NAMES.iter().find(|(n, _)| *n == sig).map(|(_, s)| s.to_string()).unwrap_or_else(|| format!("signal {sig}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(name(libc::SIGKILL), "SIGKILL");
        assert_eq!(name(libc::SIGTERM), "SIGTERM");
        assert_eq!(name(libc::SIGSYS), "SIGSYS");
        assert_eq!(name(64), "signal 64");
    }
}
