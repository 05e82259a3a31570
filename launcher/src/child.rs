//! What runs in a PE between fork and exec (`job::start_pe` hands it to `Command::pre_exec`): only
//! async-signal-safe system calls on values copied in, nothing allocated, no locks.

use std::io;
use std::os::fd::RawFd;

use crate::netns;

/// What runs in a PE between fork and exec.
#[derive(Clone, Copy)]
pub struct ChildSetup {
    pub parent: libc::pid_t,
    /// Descriptors that must survive exec (the listener for PE 0, the status board, the PE's PMI end).
    pub keep_fds: [Option<RawFd>; 3],
    /// Limit of open files to set back.
    pub nofile: Option<libc::rlimit>,
    /// With `--netns`: the network namespace of the PE's node.
    pub netns: Option<RawFd>,
    /// With `--bind-to core`: the PE's CPUs.
    pub cpus: Option<libc::cpu_set_t>,
}

impl ChildSetup {
    /// Asks for SIGTERM when rshmrun dies, lets the inherited descriptors survive exec and sets back the
    /// limit of open files.
    pub fn run(&self) -> io::Result<()> {
        if let Some(ns) = self.netns {
            // The descriptor is rshmrun's (close-on-exec: the PE does not keep it); the PE's sockets, its
            // abstract Unix sockets included, now belong to its node.
            netns::enter_netns(ns)?;
        }
        #[cfg(target_os = "linux")]
        {
            // SAFETY: PR_SET_PDEATHSIG takes a signal number and no pointers.
            if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: getppid has no preconditions. If rshmrun already died before the prctl above, the
            // death signal will never come: do not start a PE nobody watches.
            if unsafe { libc::getppid() } != self.parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        for fd in self.keep_fds.into_iter().flatten() {
            // SAFETY: `fd` is a descriptor rshmrun holds open, inherited by this child. Clearing FD_CLOEXEC
            // changes only this child's descriptor table, not rshmrun's.
            if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } == -1 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(set) = &self.cpus {
            // SAFETY: `set` is a live cpu_set_t of the size passed, which the kernel only reads; pid 0
            // is this (single-threaded, forked) child, and exec keeps the mask.
            if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(lim) = self.nofile {
            // SAFETY: `lim` is a valid rlimit that setrlimit only reads; it is the limit this process had
            // before rshmrun raised the soft one, so lowering back to it is always allowed. setrlimit is a
            // plain system call (no allocation, no locks).
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}
