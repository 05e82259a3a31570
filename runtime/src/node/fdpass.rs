//! Hands file descriptors (heap segments: memfds on the CPU backend, cuMem POSIX handles on CUDA) to
//! same-node PEs over Unix-domain sockets with SCM_RIGHTS. Every PE runs a small server thread on an
//! abstract socket; a peer connects, presents the job key and a segment id, and receives the
//! descriptor. Abstract sockets leave nothing in the file system, even after a crash.
//!
//! Abstract socket names are visible to every local user (/proc/net/unix), and any user may bind a
//! name first. So no name can be guessed from another: PE `p`'s name is `rshmem-` and 32 hex digits of
//! HMAC-SHA-256 keyed with the job key over the job id (random, chosen by PE 0 and sent over the
//! authenticated bootstrap) and `p` ([`socket_name`]). A stranger who sees one PE's name in
//! /proc/net/unix learns nothing about the others'; a name found taken anyway is reported with the
//! user id and pid of the process that holds it. Both ends also check who is on the other side: the
//! server serves only processes of its own user (SO_PEERCRED) that present the job key (compared in
//! constant time), and the client sends the key only to a server of its own user. The server watches all its clients at once with poll(2) and gives each a short deadline for
//! its request, so a client that connects and says nothing delays no other fetch and is dropped.
//! Warnings about refused clients are rate-limited.

use crate::bootstrap::{poll, WarnLimiter};
use crate::error::{Error, Result};
use crate::log;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Descriptors this PE offers, by segment id.
type Table = Arc<Mutex<HashMap<u32, (OwnedFd, u64)>>>;

/// A request: the job key and a segment id (u32 little-endian).
const REQUEST: usize = 20;
/// A client must send its whole request within this time after connecting.
const CLIENT_DEADLINE: Duration = Duration::from_secs(2);
/// At most this many clients are served at once; beyond it the oldest is dropped.
const MAX_CLIENTS: usize = 256;
/// The size word of a refusal (wrong key); "no such segment" is size 0 without a descriptor.
const REFUSED: u64 = u64::MAX;
/// How long a client waits for the server's reply to one request.
const REPLY_DEADLINE: Duration = Duration::from_secs(20);

/// This PE's fd server: the descriptors it offers and the thread that hands them to same-node peers
/// (stopped on drop).
pub struct FdServer {
    name: Vec<u8>,
    key: [u8; 16],
    table: Table,
    /// Dropping our end of this pair wakes the server thread and ends it.
    stop: Option<UnixStream>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The abstract socket name (without the leading NUL) of PE `pe`'s fd server in job `job` with key
/// `key`: `rshmem-` and the first 16 bytes, in hex, of HMAC-SHA-256(`key`, "rshmem fd-passing socket" |
/// `job` | `pe` as 8 bytes little-endian). Without the key, one PE's name says nothing about another's.
pub fn socket_name(key: &[u8; 16], job: &[u8; 16], pe: usize) -> Vec<u8> {
    use hmac::{KeyInit, Mac};
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(b"rshmem fd-passing socket");
    mac.update(job);
    mac.update(&(pe as u64).to_le_bytes());
    let tag = mac.finalize().into_bytes();
    let hex: String = tag[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("rshmem-{hex}").into_bytes()
}

/// Who holds the abstract name `name` (bind failed with EADDRINUSE): the user id and pid of the process
/// that listens on it (SO_PEERCRED of a connection to it), or why that is unknown.
fn holder(name: &[u8]) -> String {
    let Ok(addr) = abstract_addr(name) else { return "a process".into() };
    match UnixStream::connect_addr(&addr) {
        Ok(s) => match peer_cred(&s) {
            Ok(c) => format!("a process of uid {} (pid {}; this PE runs as uid {})", c.uid, c.pid, my_uid()),
            Err(e) => format!("a process whose credentials are unknown ({e})"),
        },
        Err(e) => format!("a socket that accepts no connection, so its owner is unknown ({e}; see /proc/net/unix)"),
    }
}

fn abstract_addr(name: &[u8]) -> Result<std::os::unix::net::SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    std::os::unix::net::SocketAddr::from_abstract_name(name).map_err(|e| Error::os("fd server address", e))
}

/// The user id of this process.
fn my_uid() -> libc::uid_t {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The credentials (pid, uid, gid) of the process at the other end of `s`, as of connect(2).
fn peer_cred(s: &UnixStream) -> io::Result<libc::ucred> {
    let mut c = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `c`, a ucred of that size, and updates `len`;
    // the descriptor is the open socket of `s`, borrowed for the call.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(c)
}

/// Constant-time comparison of job keys (no early exit on the first differing byte).
fn key_eq(a: &[u8], b: &[u8; 16]) -> bool {
    a.len() == 16 && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl FdServer {
    /// Starts the server of PE `pe` for job `job` (a per-job random id) with access key `key`, on the
    /// abstract name [`socket_name`] gives.
    pub fn start(job: [u8; 16], key: [u8; 16], pe: usize) -> Result<FdServer> {
        let name = socket_name(&key, &job, pe);
        let listener = UnixListener::bind_addr(&abstract_addr(&name)?).map_err(|e| {
            if e.kind() == io::ErrorKind::AddrInUse {
                // The name comes from the job key: nobody without the key can know it in advance.
                return Error::new(format!(
                    "PE {pe}: cannot open the fd-passing socket @{}: {} holds its name, which is derived from the job key: \
                     has {} leaked, or does another job use the same key?",
                    String::from_utf8_lossy(&name),
                    holder(&name),
                    crate::config::env::JOB_KEY
                ));
            }
            Error::os(format!("PE {pe}: cannot open the fd-passing socket"), e)
        })?;
        listener.set_nonblocking(true).map_err(|e| Error::os(format!("PE {pe}: fd-passing socket"), e))?;
        let (stop, stopped) = UnixStream::pair().map_err(|e| Error::os("fd server: socketpair", e))?;
        let table: Table = Arc::new(Mutex::new(HashMap::new()));
        let t2 = table.clone();
        let thread = std::thread::Builder::new()
            .name("rshmem-fdserver".into())
            .spawn(move || serve(listener, stopped, key, t2))
            .map_err(|e| Error::os("cannot start the fd server thread", e))?;
        Ok(FdServer { name, key, table, stop: Some(stop), thread: Some(thread) })
    }

    /// Offers `fd` (with its size in bytes) under `id`; replaces an older offer with the same id.
    pub fn offer(&self, id: u32, fd: OwnedFd, size: u64) {
        self.table.lock().unwrap_or_else(PoisonError::into_inner).insert(id, (fd, size));
    }

    /// Withdraws an offer (closes our copy of the descriptor).
    pub fn withdraw(&self, id: u32) {
        self.table.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
    }

    /// Fetches segment `id` from PE `pe`'s server. Retries while the server is not up yet.
    pub fn fetch(&self, job: [u8; 16], pe: usize, id: u32) -> Result<(OwnedFd, u64)> {
        let name = socket_name(&self.key, &job, pe);
        let addr = abstract_addr(&name)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut s = loop {
            match UnixStream::connect_addr(&addr) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(Error::os(format!("cannot reach PE {pe}'s fd-passing socket"), e)),
            }
        };
        // The key goes only to a server of our own user: anyone can bind an abstract name first.
        let cred = peer_cred(&s).map_err(|e| Error::os(format!("PE {pe}'s fd-passing socket: SO_PEERCRED"), e))?;
        if cred.uid != my_uid() {
            return Err(Error::new(format!(
                "PE {pe}'s fd-passing socket is held by a process of another user (pid {}, uid {}; this PE runs as uid {}): not sending it the job key",
                cred.pid,
                cred.uid,
                my_uid()
            )));
        }
        let deadline = Instant::now() + REPLY_DEADLINE;
        s.set_write_timeout(Some(REPLY_DEADLINE)).ok();
        let mut req = [0u8; REQUEST];
        req[..16].copy_from_slice(&self.key);
        req[16..].copy_from_slice(&id.to_le_bytes());
        s.write_all(&req).map_err(|e| Error::os(format!("fd request to PE {pe}"), e))?;
        let (size, fd) = recv_fd(&s, deadline).map_err(|e| e.context(format!("segment {id} from PE {pe}")))?;
        match fd {
            Some(fd) => Ok((fd, size)),
            None if size == REFUSED => Err(Error::new(format!(
                "PE {pe}'s fd server refused the request for segment {id}: wrong job key (do all PEs of the job have the same {}?)",
                crate::config::env::JOB_KEY
            ))),
            None => Err(Error::new(format!("PE {pe} has no heap segment {id} to share (withdrawn, or never offered)"))),
        }
    }

    /// The server's abstract socket name (see [`socket_name`]), without the leading NUL.
    pub fn name(&self) -> &[u8] {
        &self.name
    }
}

impl Drop for FdServer {
    fn drop(&mut self) {
        // Closing our end makes the server's end readable (end of file): the thread returns.
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A connected client whose request has not fully arrived.
struct Client {
    stream: UnixStream,
    pid: libc::pid_t,
    req: [u8; REQUEST],
    got: usize,
    since: Instant,
}

/// The server thread: serves every client at once until `stopped` becomes readable.
fn serve(listener: UnixListener, stopped: UnixStream, key: [u8; 16], table: Table) {
    let me = my_uid();
    let mut warns = WarnLimiter::new("connections to the fd-passing socket");
    let mut clients: Vec<Client> = Vec::new();
    loop {
        let now = Instant::now();
        clients.retain(|c| {
            let keep = now.duration_since(c.since) < CLIENT_DEADLINE;
            if !keep {
                warns.warn(format!(
                    "rshmem fd server: dropped a client (pid {}) that sent no complete request within {} s",
                    c.pid,
                    CLIENT_DEADLINE.as_secs()
                ));
            }
            keep
        });
        let wake = clients.iter().map(|c| c.since + CLIENT_DEADLINE).min();
        let mut fds = vec![pollin(&stopped), pollin(&listener)];
        fds.extend(clients.iter().map(|c| pollin(&c.stream)));
        if let Err(e) = poll(&mut fds, wake.map(|w| w.saturating_duration_since(now))) {
            log::warn(format!("rshmem fd server: poll: {e}; the fd server stops"));
            return;
        }
        if fds[0].revents != 0 {
            return;
        }
        let ready: Vec<bool> = fds[2..].iter().map(|f| f.revents != 0).collect();
        for (mut c, ready) in std::mem::take(&mut clients).into_iter().zip(ready) {
            if !ready {
                clients.push(c);
                continue;
            }
            match c.stream.read(&mut c.req[c.got..]) {
                Ok(0) => {}
                Ok(n) => {
                    c.got += n;
                    if c.got < REQUEST {
                        clients.push(c);
                    } else {
                        answer(&c, &key, &table, &mut warns);
                    }
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => clients.push(c),
                Err(_) => {}
            }
        }
        if fds[1].revents != 0 {
            accept_all(&listener, me, &mut clients, &mut warns);
        }
    }
}

fn pollin(s: &impl AsRawFd) -> libc::pollfd {
    libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 }
}

/// Accepts every waiting connection; keeps those of our own user.
fn accept_all(listener: &UnixListener, me: libc::uid_t, clients: &mut Vec<Client>, warns: &mut WarnLimiter) {
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => continue,
            Err(e) => {
                // Out of descriptors or similar: say so, and do not spin on the listener.
                warns.warn(format!("rshmem fd server: accept: {e}"));
                std::thread::sleep(Duration::from_millis(20));
                return;
            }
        };
        let cred = match peer_cred(&stream) {
            Ok(c) => c,
            Err(e) => {
                warns.warn(format!("rshmem fd server: dropped a client whose credentials are unknown ({e})"));
                continue;
            }
        };
        if cred.uid != me {
            warns.warn(format!(
                "rshmem fd server: refused a client of another user (pid {}, uid {}; this PE runs as uid {me})",
                cred.pid, cred.uid
            ));
            continue;
        }
        if let Err(e) = stream.set_nonblocking(true) {
            warns.warn(format!("rshmem fd server: client (pid {}): {e}", cred.pid));
            continue;
        }
        if clients.len() >= MAX_CLIENTS {
            let old = clients.remove(0);
            warns.warn(format!("rshmem fd server: too many clients at once; dropped the oldest (pid {})", old.pid));
        }
        clients.push(Client { stream, pid: cred.pid, req: [0; REQUEST], got: 0, since: Instant::now() });
    }
}

/// Answers a complete request: the descriptor when the key is right and the segment is offered;
/// else a refusal (wrong key, warned about) or "no such segment".
fn answer(c: &Client, key: &[u8; 16], table: &Table, warns: &mut WarnLimiter) {
    let id = u32::from_le_bytes(c.req[16..REQUEST].try_into().expect("4 bytes"));
    if !key_eq(&c.req[..16], key) {
        warns.warn(format!("rshmem fd server: refused a request for segment {id} from pid {}: wrong job key", c.pid));
        let _ = send_fd(&c.stream, REFUSED, None);
        return;
    }
    let guard = table.lock().unwrap_or_else(PoisonError::into_inner);
    let _ = match guard.get(&id) {
        Some((fd, size)) => send_fd(&c.stream, *size, Some(fd.as_raw_fd())),
        None => send_fd(&c.stream, 0, None),
    };
}

/// Sends an 8-byte size and, if given, one descriptor as SCM_RIGHTS ancillary data.
fn send_fd(s: &UnixStream, size: u64, fd: Option<RawFd>) -> std::io::Result<()> {
    let mut data = size.to_le_bytes();
    let mut iov = libc::iovec { iov_base: data.as_mut_ptr() as *mut libc::c_void, iov_len: data.len() };
    // Room for one descriptor's control message, u64-aligned.
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is a plain C struct; all-zero is a valid empty header that we fill in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE/CMSG_FIRSTHDR/CMSG_DATA compute offsets inside `cbuf`, which is large enough
        // for one descriptor (CMSG_SPACE(4) <= 64 bytes) and aligned for cmsghdr.
        unsafe {
            msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = libc::CMSG_SPACE(4) as usize;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut i32, fd);
        }
    }
    loop {
        // SAFETY: msg points at live buffers for the duration of the call.
        let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        // A signal caught by a handler (the program's, or a library's such as torch's) without
        // SA_RESTART interrupts the call before anything was sent: send again.
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives the server's reply: an 8-byte size and at most one descriptor. Waits at most until
/// `deadline`; a call interrupted by a signal (a handler without SA_RESTART, which torch and Python
/// programs install; or the process stopped and resumed, which ends any timed socket wait with EINTR)
/// is made again with the time that is left, not reported as a failure.
fn recv_fd(s: &UnixStream, deadline: Instant) -> Result<(u64, Option<OwnedFd>)> {
    let mut data = [0u8; 8];
    let mut iov = libc::iovec { iov_base: data.as_mut_ptr() as *mut libc::c_void, iov_len: data.len() };
    let mut cbuf = [0u64; 8];
    // SAFETY: zeroed msghdr is valid; we point it at our buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    let late = || Error::new("the fd server sent no reply in time (is that PE stuck?)");
    let n = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        s.set_read_timeout(Some(left)).map_err(|e| Error::os("setting the fd reply's timeout", e))?;
        // SAFETY: buffers outlive the call; MSG_CMSG_CLOEXEC makes received fds close-on-exec.
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n;
        }
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => return Err(late()),
            _ => return Err(Error::os("receiving a descriptor", e)),
        }
    };
    if n as usize != data.len() {
        return Err(Error::new("short reply from the fd server (peer exited?)"));
    }
    let mut fd = None;
    // SAFETY: the kernel filled msg_control; CMSG_* walk it within msg_controllen.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if !c.is_null() && (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
            let raw = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const i32);
            fd = Some(OwnedFd::from_raw_fd(raw));
        }
    }
    Ok((u64::from_le_bytes(data), fd))
}

/// Creates an anonymous shared-memory file of `size` bytes (memfd; pages allocated on first touch).
pub fn memfd(name: &str, size: u64) -> Result<OwnedFd> {
    let cname = std::ffi::CString::new(name).unwrap();
    // SAFETY: plain syscall with a valid C string.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(Error::os("memfd_create", std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our own descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
        return Err(Error::os(format!("cannot size shared memory to {size} bytes"), std::io::Error::last_os_error()));
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each PE's name is its own, and none follows from another without the key: another key, job or PE
    /// gives an unrelated name of the same form.
    #[test]
    fn names_come_from_the_key() {
        let (key, job) = ([7u8; 16], [9u8; 16]);
        let name = |k: &[u8; 16], j: &[u8; 16], pe| String::from_utf8(socket_name(k, j, pe)).unwrap();
        let n0 = name(&key, &job, 0);
        assert_eq!(n0.len(), "rshmem-".len() + 32, "{n0}");
        assert!(n0.starts_with("rshmem-") && n0[7..].bytes().all(|b| b.is_ascii_hexdigit()), "{n0}");
        assert_eq!(n0, name(&key, &job, 0));
        let others = [name(&key, &job, 1), name(&key, &job, 2), name(&[8u8; 16], &job, 0), name(&key, &[10u8; 16], 0)];
        for o in &others {
            assert_ne!(&n0, o);
            // No shared prefix beyond chance: the job id is not in the name.
            assert_ne!(n0[7..15], o[7..15], "{n0} {o}");
        }
        assert!(!n0.contains(&"09".repeat(4)), "the job id shows in {n0}");
    }

    /// A taken name is reported with the holder's uid and pid.
    #[test]
    fn a_taken_name_names_its_holder() {
        let (key, job) = ([3u8; 16], std::array::from_fn(|i| i as u8 ^ std::process::id() as u8));
        let first = FdServer::start(job, key, 4).unwrap();
        let e = FdServer::start(job, key, 4).err().unwrap().to_string();
        assert!(e.contains(&format!("uid {} (pid {}", my_uid(), std::process::id())), "{e}");
        assert!(e.contains(&String::from_utf8_lossy(first.name()).into_owned()) && e.contains("derived from the job key"), "{e}");
    }

    extern "C" fn ignore(_: libc::c_int) {}

    /// A signal whose handler was installed without SA_RESTART (Python's and torch's are) interrupts
    /// the wait for the server's reply: the descriptor must still arrive, and a silent server must
    /// still end the wait at its deadline. Before the retry, the first signal failed rshmem_init with
    /// "receiving a descriptor: Interrupted system call".
    #[test]
    fn a_signal_during_the_wait_for_a_descriptor_is_not_a_failure() {
        // SAFETY: installs a handler that does nothing for SIGUSR2 (no test relies on its default
        // action); sa_flags 0 leaves SA_RESTART off on purpose; the zeroed sigaction is filled in
        // before use, a valid value.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore as usize;
            sa.sa_flags = 0;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
        }
        let (ours, theirs) = UnixStream::pair().unwrap();
        let memfd = memfd("rshmem-test-eintr", 4096).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tx.send(unsafe { libc::pthread_self() } as usize).unwrap();
            let got = recv_fd(&ours, Instant::now() + Duration::from_secs(10));
            let silent = recv_fd(&ours, Instant::now() + Duration::from_millis(300));
            (got.map(|(size, fd)| (size, fd.is_some())), silent.map(|_| ()))
        });
        let thread = rx.recv().unwrap() as libc::pthread_t;
        let poke = || {
            // SAFETY: the waiter thread is alive: it is joined only after the last signal.
            unsafe { libc::pthread_kill(thread, libc::SIGUSR2) };
        };
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(10));
            poke();
        }
        send_fd(&theirs, 4096, Some(memfd.as_raw_fd())).unwrap();
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(20));
            if waiter.is_finished() {
                break;
            }
            poke();
        }
        let (got, silent) = waiter.join().unwrap();
        assert_eq!(got.map_err(|e| e.to_string()), Ok((4096, true)));
        let e = silent.err().expect("a server that never answers must end the wait").to_string();
        assert!(e.contains("no reply in time"), "{e}");
    }
}
