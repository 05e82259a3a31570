//! The TCP provider of the remote engine: a lane is one TCP connection between two PEs.
//!
//! - `super::connect` opens a connection and sends a `wire::Hello`; the accepting side (`super::accept`)
//!   answers with its own hello or a refusal. Both sides check the job key (in constant time), the PE
//!   count, the heap size and that the connection is meant for them; a mismatch drops the connection
//!   with an error naming the peer on both sides. A refusal carries its status alone: nothing of the
//!   acceptor's identity. The checked connection is a [`Connection`].
//! - After the hellos the lane owns the socket, non-blocking: it writes gathered frames with
//!   `send_some` (one `sendmsg`, MSG_NOSIGNAL) and reads straight into its receive ring with
//!   `recv_some`. TCP_NODELAY is on: small frames leave at once.
//! - A network link that fails (the kernel ends the connection with ETIMEDOUT, EHOSTUNREACH, ...) is
//!   named as one, with the errno (`io_failure`, `link_failed`); a peer whose process ended is told
//!   apart from it.

use crate::error::{Error, Result};
use crate::transport::wire::{MAX_CHUNK, MIN_CHUNK};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// A connecting client must send its hello within this time.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// This PE as the wire sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The job key both ends of a connection must share.
    pub key: [u8; 16],
    /// This PE.
    pub pe: u32,
    /// PEs in the job.
    pub npes: u32,
    /// This PE's symmetric heap size (the same on every PE of a job).
    pub heap_size: u64,
    /// The largest payload this PE accepts in one frame (MIN_CHUNK..=MAX_CHUNK).
    pub max_chunk: u32,
}

impl Endpoint {
    pub(crate) fn check(&self) -> Result<()> {
        if self.pe >= self.npes {
            return Err(Error::new(format!("transport: PE {} is not below the PE count {}", self.pe, self.npes)));
        }
        if !(MIN_CHUNK..=MAX_CHUNK).contains(&self.max_chunk) {
            return Err(Error::new(format!(
                "transport: chunk size {} is outside {MIN_CHUNK}..={MAX_CHUNK} bytes",
                self.max_chunk
            )));
        }
        Ok(())
    }
}

/// Constant-time comparison of job keys (no early exit on the first differing byte).
pub(crate) fn key_eq(a: &[u8; 16], b: &[u8; 16]) -> bool {
    std::hint::black_box(a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y))) == 0
}

/// A connection to a peer PE whose hellos were exchanged and checked.
pub struct Connection {
    stream: TcpStream,
    peer: u32,
    lane: u16,
    peer_addr: SocketAddr,
}

impl Connection {
    /// A connection over `stream` whose hellos were exchanged and checked.
    pub(crate) fn new(stream: TcpStream, _me: &Endpoint, peer: u32, _peer_max_chunk: u32, lane: u16, peer_addr: SocketAddr) -> Connection {
        Connection { stream, peer, lane, peer_addr }
    }
    /// The PE on the other end.
    pub fn peer(&self) -> u32 {
        self.peer
    }
    /// This connection's index among the pair's lanes.
    pub fn lane(&self) -> u16 {
        self.lane
    }
    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }
    /// Detects a peer host that vanished without closing (power loss, cable, a frozen node): TCP
    /// keepalive probes after `idle` of silence, every `idle`, 3 unanswered ones end the connection
    /// (about `4 * idle` while the connection is quiet); data that stays unacknowledged (or unsent
    /// for a zero window) for `user_timeout` ends it too (TCP_USER_TIMEOUT). A dead *process* is seen
    /// at once (its kernel closes the socket); this bounds the rest.
    pub fn set_liveness(&self, idle: Duration, user_timeout: Duration) -> Result<()> {
        let fd = self.stream.as_raw_fd();
        let secs = idle.as_secs().max(1) as libc::c_int;
        let user_ms = user_timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        for (level, name, v, what) in [
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1, "SO_KEEPALIVE"),
            (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs, "TCP_KEEPIDLE"),
            (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, secs, "TCP_KEEPINTVL"),
            (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3, "TCP_KEEPCNT"),
            (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, user_ms, "TCP_USER_TIMEOUT"),
        ] {
            // SAFETY: fd is our open socket; the option value is a live c_int of the size passed.
            let r = unsafe {
                libc::setsockopt(fd, level, name, &v as *const libc::c_int as *const libc::c_void, std::mem::size_of::<libc::c_int>() as libc::socklen_t)
            };
            if r != 0 {
                return Err(Error::os(format!("transport: {what} on the connection to PE {} at {}", self.peer, self.peer_addr), io::Error::last_os_error()));
            }
        }
        Ok(())
    }
    /// The socket, non-blocking from now on, for the lane that owns it.
    pub fn into_stream(self) -> Result<TcpStream> {
        self.stream.set_nonblocking(true).map_err(|e| Error::os(format!("transport: the connection to PE {}", self.peer), e))?;
        let _ = self.stream.set_nodelay(true);
        Ok(self.stream)
    }
}

/// Sends what it can of `parts` with one `sendmsg` without waiting (MSG_DONTWAIT, MSG_NOSIGNAL: a
/// closed peer gives EPIPE, not a signal). Returns the bytes sent: 0 when the socket's buffer is full.
pub(crate) fn send_some(s: &TcpStream, parts: &[io::IoSlice<'_>]) -> io::Result<usize> {
    if parts.is_empty() {
        return Ok(0);
    }
    // SAFETY: zeroed msghdr is valid (no name, no control data); IoSlice is ABI-compatible with
    // iovec (std documents it), and the slices live until after the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = parts.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = parts.len() as _;
    loop {
        // SAFETY: the socket's fd, borrowed for the call; every iovec names a live, readable slice
        // (the kernel only reads through them).
        let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(0),
            _ => return Err(e),
        }
    }
}

/// Reads what is there (at most `out.len()` bytes) without waiting. Ok(None): nothing yet;
/// Ok(Some(0)): the peer closed its sending side.
pub(crate) fn recv_some(s: &TcpStream, out: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: the socket's fd; `out` is writable for its length.
        let n = unsafe { libc::recv(s.as_raw_fd(), out.as_mut_ptr() as *mut libc::c_void, out.len(), libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(None),
            _ => return Err(e),
        }
    }
}

/// Sends all of `parts` with `sendmsg` (gathering, MSG_NOSIGNAL: a closed peer gives EPIPE, not a
/// signal that would kill a C program). Waits at most `timeout` for the peer to make room.
pub(crate) fn send_all(s: &TcpStream, parts: &[&[u8]], timeout: Duration) -> io::Result<()> {
    let fd = s.as_raw_fd();
    let deadline = Instant::now() + timeout;
    let mut parts: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    let mut first = 0;
    while first < parts.len() {
        let mut iov: Vec<libc::iovec> = parts[first..]
            .iter()
            .map(|p| libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() })
            .collect();
        // SAFETY: zeroed msghdr is valid (no name, no control data); it points at `iov`, which lives
        // until after the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len() as _;
        // SAFETY: `fd` is the open socket of `s`, borrowed for the call; every iovec names a live,
        // readable slice of `parts` (the kernel only reads through them).
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                // EAGAIN: the send buffer is full (or SO_SNDTIMEO expired). ETIMEDOUT is the
                // kernel ending the connection: an error.
                io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, format!("the peer took no data for {timeout:?}")));
                    }
                    let mut fds = [libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }];
                    crate::bootstrap::poll(&mut fds, Some(left))?;
                    continue;
                }
                _ => return Err(e),
            }
        }
        let mut n = n as usize;
        while n > 0 && first < parts.len() {
            let p = parts[first];
            if n >= p.len() {
                n -= p.len();
                first += 1;
            } else {
                parts[first] = &p[n..];
                n = 0;
            }
        }
    }
    Ok(())
}

/// Whether `errno` says the network path to a peer failed rather than the peer's process: the
/// kernel gave up on the connection (retransmissions, keepalive probes or TCP_USER_TIMEOUT went
/// unanswered: ETIMEDOUT), or has no route to the peer's host any more. A reset (ECONNRESET) or a
/// closed pipe (EPIPE) came from the peer's kernel, which is alive: its process ended or closed.
fn link_errno(errno: i32) -> bool {
    matches!(errno, libc::ETIMEDOUT | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN | libc::ENETDOWN)
}

/// Whether `e`, an error of a [`Connection`], reports a failed network link (see `link_errno`)
/// rather than a peer that closed: its node stopped answering, or cannot be reached any more. The
/// proxy engine ends the PE at once then, where a peer that closed gets a grace period.
pub fn link_failed(e: &Error) -> bool {
    e.errno().is_some_and(link_errno)
}

/// The symbolic name of an errno a connection may end with.
fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EHOSTDOWN => "EHOSTDOWN",
        libc::ENETDOWN => "ENETDOWN",
        libc::ECONNRESET => "ECONNRESET",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::EPIPE => "EPIPE",
        _ => "errno",
    }
}

/// The error of a connection whose receive (`sending` None) or send of a frame (`sending`: what it
/// was) failed with `e`; `who` names the peer PE and its address. An errno is named (its text, symbol
/// and number); a failed link says so, and what it means.
pub(crate) fn io_failure(who: &str, sending: Option<String>, e: &io::Error) -> Error {
    let doing = match &sending {
        Some(frame) => format!("sending a {frame} to {who}"),
        None => format!("reading from {who}"),
    };
    let Some(n) = e.raw_os_error() else {
        return Error::new(format!("transport: {doing}: {e}"));
    };
    // "Connection timed out (os error 110)" -> "connection timed out".
    let text = io::Error::from_raw_os_error(n).to_string();
    let text = text.rsplit_once(" (os error").map_or(text.as_str(), |(t, _)| t);
    let mut chars = text.chars();
    let text: String = chars.next().map(|c| c.to_lowercase().chain(chars).collect()).unwrap_or_default();
    let errno = format!("{text} ({}, errno {n})", errno_name(n));
    if !link_errno(n) {
        return Error::with_errno(format!("transport: {doing}: {errno}"), Some(n));
    }
    let meaning = if n == libc::ETIMEDOUT {
        "its node stopped answering (a cut link, a host that froze or lost power, or a firewall that drops the traffic)"
    } else {
        "its node cannot be reached any more (a link or interface went down, its address stopped answering ARP, or a router reported it unreachable)"
    };
    let when = sending.map(|f| format!(" while sending a {f}")).unwrap_or_default();
    Error::with_errno(format!("transport: the network link to {who} failed{when}: {errno}: {meaning}"), Some(n))
}


