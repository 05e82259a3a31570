//! The accepting side of the proxy's TCP hello exchange: an [`Acceptor`] takes every connection a
//! listener gets, reads and checks its hello, and answers it, for the setup of a job's connections and
//! for the listener's service after setup (`super::setup`). The connecting side is `super::tcp`'s.
//!
//! - **All at once.** Accepted sockets are non-blocking and watched with the listener by one poll(2);
//!   a hello is read as its bytes come; a connection that sends no hello within [`HELLO_TIMEOUT`] is
//!   dropped; at most [`MAX_PENDING`] wait, and a new one beyond that drops the oldest. A local
//!   process that holds idle connections to a new listener cannot delay a PE's connection behind its
//!   own (it could, when connections were served one at a time, each given 5 s for its hello).
//! - **The key before anything else.** The magic, then the job key (in constant time), then the
//!   version and the rest ([`check_hello`]). A refusal carries its status alone ([`refusal`]): no PE
//!   number, PE count or heap size, for a wrong key and for every other refusal too.
//! - **Outcomes, not log lines.** Refused and dropped connections come back as errors naming them (the
//!   address and the PE claimed): the caller reports them, rate-limited, since strangers can make many.

use crate::error::{Error, Result};
use crate::transport::proxy::tcp::{key_eq, send_all, Connection, Endpoint, HELLO_TIMEOUT};
use crate::transport::wire::{Hello, HelloStatus, HELLO_LEN, MAGIC, MAX_CHUNK, MAX_LANES, MIN_CHUNK, VERSION};
use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// At most this many accepted connections wait for their hello at once; a new one beyond it drops
/// the oldest.
pub const MAX_PENDING: usize = 256;

/// Accepts one connection on `listener` (waiting until `deadline`) and answers its hello: the first
/// connection whose hello completes, or an error naming the first one refused or dropped (its address
/// and the PE it claims to be). For a caller expecting one connection (tests, tools); other
/// connections waiting at that moment are closed. Servers use an [`Acceptor`].
pub fn accept(listener: &TcpListener, me: &Endpoint, deadline: Instant) -> Result<Connection> {
    Acceptor::new(listener, me)?.next(deadline).unwrap_or_else(|| {
        Err(Error::new(format!(
            "transport: PE {}: no connection within the deadline on {}",
            me.pe,
            listener.local_addr().map(|a| a.to_string()).unwrap_or_default()
        )))
    })
}

/// An accepted connection whose hello has not fully arrived.
struct Pending {
    stream: TcpStream,
    addr: SocketAddr,
    hello: [u8; HELLO_LEN],
    got: usize,
    since: Instant,
}

/// Accepts connections on a listener, all at once: every accepted socket is non-blocking and watched
/// with the listener by one poll(2); a hello is read as its bytes come and answered when complete;
/// a connection that sends no hello within [`HELLO_TIMEOUT`] is dropped; at most [`MAX_PENDING`]
/// wait (a new one drops the oldest). So idle or slow strangers never delay a PE's connection. The
/// checks and the answer are [`check_hello`]'s and [`refusal`]'s.
pub struct Acceptor<'l> {
    listener: &'l TcpListener,
    me: Endpoint,
    /// Oldest first (so also by hello deadline).
    pending: VecDeque<Pending>,
    /// Outcomes not handed out yet (one poll can complete several).
    done: VecDeque<Result<Connection>>,
}

impl<'l> Acceptor<'l> {
    /// Serves `listener` (made non-blocking) as PE `me`.
    pub fn new(listener: &'l TcpListener, me: &Endpoint) -> Result<Acceptor<'l>> {
        me.check()?;
        listener.set_nonblocking(true).map_err(|e| Error::os(format!("transport: PE {}: making the listener non-blocking", me.pe), e))?;
        Ok(Acceptor { listener, me: *me, pending: VecDeque::new(), done: VecDeque::new() })
    }

    /// Connections accepted whose hello is still awaited.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Waits until `deadline` for the next outcome: `Some(Ok(c))`, a connection whose hello passed the
    /// checks (answered, blocking again, ready for frames); `Some(Err(e))`, a connection refused or
    /// dropped (closed already; `e` names it, for the caller to report, rate-limited: strangers can
    /// make many); `None`, the deadline passed.
    pub fn next(&mut self, deadline: Instant) -> Option<Result<Connection>> {
        loop {
            if let Some(r) = self.done.pop_front() {
                return Some(r);
            }
            let now = Instant::now();
            while self.pending.front().is_some_and(|p| now >= p.since + HELLO_TIMEOUT) {
                let p = self.pending.pop_front().expect("checked");
                self.done.push_back(Err(Error::new(format!(
                    "transport: PE {}: dropped the connection from {}: no hello within {HELLO_TIMEOUT:?} ({} of {HELLO_LEN} bytes)",
                    self.me.pe, p.addr, p.got
                ))));
            }
            if !self.done.is_empty() {
                continue;
            }
            if now >= deadline {
                return None;
            }
            let wake = self.pending.front().map_or(deadline, |p| deadline.min(p.since + HELLO_TIMEOUT));
            let mut fds: Vec<libc::pollfd> = std::iter::once(self.listener.as_raw_fd())
                .chain(self.pending.iter().map(|p| p.stream.as_raw_fd()))
                .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
                .collect();
            if let Err(e) = crate::bootstrap::poll(&mut fds, Some(wake.saturating_duration_since(now))) {
                self.done.push_back(Err(Error::os(format!("transport: PE {}: poll on the listener", self.me.pe), e)));
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            let waiting = std::mem::take(&mut self.pending);
            for (p, f) in waiting.into_iter().zip(&fds[1..]) {
                match f.revents {
                    0 => self.pending.push_back(p),
                    _ => {
                        if let Some(p) = self.read_hello(p) {
                            self.pending.push_back(p);
                        }
                    }
                }
            }
            if fds[0].revents != 0 {
                self.accept_waiting();
            }
        }
    }

    /// Accepts every connection the listener holds.
    fn accept_waiting(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, addr)) => {
                    if let Err(e) = stream.set_nonblocking(true) {
                        self.done.push_back(Err(Error::os(format!("transport: PE {}: connection from {addr}", self.me.pe), e)));
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    if self.pending.len() >= MAX_PENDING {
                        let old = self.pending.pop_front().expect("full");
                        self.done.push_back(Err(Error::new(format!(
                            "transport: PE {}: {MAX_PENDING} connections wait for their hello: dropped the oldest, from {}",
                            self.me.pe, old.addr
                        ))));
                    }
                    self.pending.push_back(Pending { stream, addr, hello: [0; HELLO_LEN], got: 0, since: Instant::now() });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => {}
                Err(e) => {
                    // Out of descriptors or the like: say so, and do not spin on the listener.
                    self.done.push_back(Err(Error::os(format!("transport: PE {}: accept", self.me.pe), e)));
                    std::thread::sleep(Duration::from_millis(20));
                    return;
                }
            }
        }
    }

    /// Reads what arrived of `p`'s hello; returns it while incomplete, else records the outcome.
    fn read_hello(&mut self, mut p: Pending) -> Option<Pending> {
        let me = self.me.pe;
        loop {
            match p.stream.read(&mut p.hello[p.got..]) {
                Ok(0) => {
                    self.done.push_back(Err(Error::new(format!(
                        "transport: PE {me}: connection from {} closed after {} of {HELLO_LEN} hello bytes",
                        p.addr, p.got
                    ))));
                    return None;
                }
                Ok(n) => {
                    p.got += n;
                    // Not ours at all: no answer, and no waiting for the rest.
                    if p.got >= MAGIC.len() && p.hello[..MAGIC.len()] != MAGIC {
                        let _ = p.stream.shutdown(Shutdown::Both);
                        self.done.push_back(Err(Error::new(format!("transport: PE {me}: connection from {} is not an rshmem proxy (bad hello magic)", p.addr))));
                        return None;
                    }
                    if p.got == HELLO_LEN {
                        let r = self.answer(p);
                        self.done.push_back(r);
                        return None;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(p),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.done.push_back(Err(Error::os(format!("transport: PE {me}: connection from {}: reading its hello", p.addr), e)));
                    return None;
                }
            }
        }
    }

    /// Checks a complete hello and answers it: a refusal (then the connection is closed) or this PE's
    /// own hello (then the connection blocks again and becomes a [`Connection`]).
    fn answer(&self, p: Pending) -> Result<Connection> {
        let me = &self.me;
        let Pending { mut stream, addr, hello, .. } = p;
        let hello: Hello = bytemuck::pod_read_unaligned(&hello);
        let who = format!("connection from {addr} (claims PE {} of {})", hello.src_pe, hello.npes);
        if let Err((status, detail)) = check_hello(me, &hello) {
            let _ = send_all(&stream, &[bytemuck::bytes_of(&refusal(status))], Duration::from_secs(1));
            let _ = stream.shutdown(Shutdown::Write);
            // Unread bytes at close would reset the connection, destroying the refusal on its way.
            drain_now(&mut stream);
            return Err(Error::new(format!("transport: PE {} refused the {who}: {}{detail}", me.pe, status.describe())));
        }
        let answer = Hello {
            magic: MAGIC,
            version: VERSION,
            status: HelloStatus::Accepted as u32,
            key: me.key,
            src_pe: me.pe,
            dst_pe: hello.src_pe,
            npes: me.npes,
            lane: hello.lane,
            lanes: hello.lanes,
            heap_size: me.heap_size,
            max_chunk: me.max_chunk,
            _reserved: 0,
        };
        send_all(&stream, &[bytemuck::bytes_of(&answer)], HELLO_TIMEOUT)
            .map_err(|e| Error::new(format!("transport: PE {}: answering the hello of PE {} at {addr}: {e}", me.pe, hello.src_pe)))?;
        stream.set_nonblocking(false).map_err(|e| Error::os(format!("transport: PE {}: connection from PE {} at {addr}", me.pe, hello.src_pe), e))?;
        Ok(Connection::new(stream, me, hello.src_pe, hello.max_chunk, hello.lane, addr))
    }
}

/// Checks a hello whose magic is right, as PE `me`: the key first (in constant time), so that nothing
/// else of a stranger's hello is looked at or answered; then the version and the rest. The first 32
/// bytes of a hello (magic, version, status, key) are the same in every wire version, so a hello of
/// another version is refused for its key, if wrong, like any other. Err: the refusal's status and
/// what differed, for this PE's message (never sent).
pub fn check_hello(me: &Endpoint, hello: &Hello) -> std::result::Result<(), (HelloStatus, String)> {
    if !key_eq(&hello.key, &me.key) {
        return Err((HelloStatus::WrongKey, String::new()));
    }
    if hello.version != VERSION {
        return Err((HelloStatus::WrongVersion, format!(" (version {}, this PE {VERSION})", hello.version)));
    }
    if hello.dst_pe != me.pe {
        return Err((HelloStatus::WrongTargetPe, format!(" (it wants PE {})", hello.dst_pe)));
    }
    if hello.npes != me.npes {
        return Err((HelloStatus::WrongPeCount, format!(" ({} PEs, this job {})", hello.npes, me.npes)));
    }
    if hello.heap_size != me.heap_size {
        return Err((HelloStatus::WrongHeapSize, format!(" ({} bytes, this PE {})", hello.heap_size, me.heap_size)));
    }
    if hello.lanes == 0 || hello.lanes as u32 > MAX_LANES || hello.lane >= hello.lanes {
        return Err((HelloStatus::BadLane, format!(" (connection {} of {})", hello.lane, hello.lanes)));
    }
    if hello.src_pe >= me.npes || hello.src_pe == me.pe || hello.status != 0 || hello._reserved != 0 || !(MIN_CHUNK..=MAX_CHUNK).contains(&hello.max_chunk) {
        return Err((HelloStatus::Malformed, format!(" (source PE {}, chunk size {})", hello.src_pe, hello.max_chunk)));
    }
    Ok(())
}

/// The answer that refuses a hello: the magic and the status, nothing else: no key, PE, PE count,
/// heap size or chunk size. Only a refusal for another wire version (sent once the key matched) says
/// this PE's version, so that the other side can name both.
pub fn refusal(status: HelloStatus) -> Hello {
    let version = if status == HelloStatus::WrongVersion { VERSION } else { 0 };
    Hello { magic: MAGIC, version, status: status as u32, ..bytemuck::Zeroable::zeroed() }
}

/// Reads and discards, without waiting, what a non-blocking socket holds (at most 1 MiB), so that
/// closing it does not reset the connection and destroy what was just sent (a refusal).
fn drain_now(s: &mut TcpStream) {
    let mut scratch = [0u8; 4096];
    let mut total = 0usize;
    while total < (1 << 20) {
        match s.read(&mut scratch) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}
