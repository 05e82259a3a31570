//! Signals rshmrun catches (SIGINT, SIGTERM, SIGHUP, and SIGCHLD to notice exited PEs at once) and the
//! names of signals for messages.
//!
//! The handler only records the signal in an atomic bit mask and writes one byte to a wake-up pipe (the
//! self-pipe trick). The main thread polls the mask with [`take_pending`] between starting PEs and in
//! its wait loop, and sleeps in [`wait`], which returns as soon as a signal arrives; the real work
//! (forwarding to the PEs, reaping) happens outside signal context.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

/// The signals rshmrun forwards to the PEs.
pub const CAUGHT: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Bit `n` is set when signal `n` (one of [`CAUGHT`]) arrived and has not been taken yet.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// The two ends of the wake-up pipe (-1 until [`install`] made it).
static WAKE_READ: AtomicI32 = AtomicI32::new(-1);
static WAKE_WRITE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn record_signal(sig: libc::c_int) {
    // Only a lock-free atomic operation and write(2): async-signal-safe. errno is saved and restored so
    // that the interrupted code does not see write's errno.
    // SAFETY: __errno_location returns this thread's errno slot, valid for the thread's lifetime.
    let errno = unsafe { *libc::__errno_location() };
    if sig != libc::SIGCHLD && (0..64).contains(&sig) {
        PENDING.fetch_or(1u64 << sig, Ordering::SeqCst);
    }
    let fd = WAKE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: writes one byte from a live local to the non-blocking wake-up pipe; a full pipe (EAGAIN)
        // is fine, as it already holds a wake-up.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Creates the wake-up pipe and installs the recording handler for SIGINT, SIGTERM, SIGHUP and SIGCHLD.
/// A signal of [`CAUGHT`] that was ignored when rshmrun started (`nohup rshmrun ...`, or SIGINT for a
/// background job of a non-interactive shell) stays ignored, so the PEs inherit the ignore as the user
/// intended. SIGCHLD is always caught (an inherited SIG_IGN would make the kernel reap the PEs before
/// rshmrun sees their status); exec resets it to the default in the PEs.
pub fn install() -> io::Result<()> {
    if WAKE_WRITE.load(Ordering::SeqCst) < 0 {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // The descriptors stay open for the life of the process: the handler may run at any time.
        WAKE_READ.store(fds[0], Ordering::SeqCst);
        WAKE_WRITE.store(fds[1], Ordering::SeqCst);
    }
    for sig in CAUGHT.into_iter().chain([libc::SIGCHLD]) {
        // SAFETY: `sigaction` is plain old data; all-zero is a valid value (empty mask, no flags), which
        // we then fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = record_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SA_RESTART: system calls interrupted by the handler resume instead of failing with EINTR.
        action.sa_flags = libc::SA_RESTART | if sig == libc::SIGCHLD { libc::SA_NOCLDSTOP } else { 0 };
        // SAFETY: `action.sa_mask` is a valid, owned sigset_t.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: as for `action`, all-zero is a valid sigaction; sigaction() overwrites it.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `sig` is a valid catchable signal, both pointers point to live sigaction values, and the
        // handler is async-signal-safe (see `record_signal`).
        if unsafe { libc::sigaction(sig, &action, &mut old) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if old.sa_sigaction == libc::SIG_IGN && sig != libc::SIGCHLD {
            // SAFETY: restores the previous disposition (SIG_IGN) that the kernel just handed us.
            if unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Wakes the wait loop (`wait`) as a signal would: for threads of rshmrun with news for it (a PE's
/// PMI abort).
pub fn wake() {
    let fd = WAKE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: writes one byte from a live local to the non-blocking wake-up pipe; a full pipe
        // (EAGAIN) already holds a wake-up.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Returns the signals of [`CAUGHT`] that arrived since the last call (lowest number first) and clears
/// them.
pub fn take_pending() -> Vec<libc::c_int> {
    let bits = PENDING.swap(0, Ordering::SeqCst);
    (1..64).filter(|s| bits & (1u64 << s) != 0).collect()
}

/// Sleeps until a caught signal (SIGCHLD included) arrives or `limit` passes, whichever is first. A signal
/// that arrived since the last call makes it return at once (its byte is still in the pipe), so checking
/// the state and then calling `wait` loses no wake-up.
pub fn wait(limit: Duration) {
    let fd: RawFd = WAKE_READ.load(Ordering::SeqCst);
    if fd < 0 {
        std::thread::sleep(limit);
        return;
    }
    let ms = limit.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: `pfd` is one valid pollfd; poll only writes its `revents`.
    unsafe { libc::poll(&mut pfd, 1, ms) };
    let mut buf = [0u8; 64];
    // SAFETY: reads into a live local buffer from the non-blocking wake-up pipe until it is empty.
    while unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
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
