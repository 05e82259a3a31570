//! PE 0's side of the star: accepts the other PEs and runs the handshake with each (its hello, PE 0's
//! challenge, its proof of the job key: auth.rs), then serves every collective: one request from
//! every PE, checked against PE 0's own, answered with the result. All sockets are non-blocking and
//! watched together with poll(2), so that the end of any PE is noticed at once, even while another
//! PE is being waited for.
//!
//! Strangers never disturb the job: a connection that cannot prove the job key, or that proves it
//! but names another launcher job identity, is refused with a REFUSE frame that says why (so that a
//! PE of another job fails at once, with a clear message); garbage and silence are dropped (a silent
//! connection after HELLO_DEADLINE). Only a connection that proved the key can fail the job
//! (duplicate PE numbers, another PE count, another protocol version). Warnings about refused and
//! dropped connections are rate-limited.
//!
//! A flood of connections: at most MAX_PENDING connections may be in the handshake at once. When a
//! new one would pass that, PE 0 first reads every one of them (so that a PE whose hello has arrived
//! is moved on, not mistaken for a silent stranger), then drops the least advanced (silent ones
//! first, oldest first) with a BUSY frame that names the flood; a PE that gets one connects again.
//! A connection that proved the key has joined and is never dropped.
//!
//! With RSHMEM_WAIT_TIMEOUT set, a collective that not every PE has entered within that time fails,
//! naming the PEs PE 0 waits for and what each last entered; every PE gets that error.

use super::auth::{self, NONCE};
use super::launch::{pe_list, secs};
use super::net::{is_self_connection, random16};
use super::ratelimit::WarnLimiter;
use super::wire::*;
use super::setup::{check_local, describe, Setup};
use crate::config::env;
use crate::error::{Error, Result};
use crate::log;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// At most this many connections may be in the handshake at once (port scanners, stray clients, a
/// flood); see the module's description.
pub(super) const MAX_PENDING: usize = 512;
/// Under a flood, PE 0 drops connections down to this many, so that it reads them all once per
/// MAX_PENDING - FLOOD_LOW_WATER new connections, not once per connection.
const FLOOD_LOW_WATER: usize = MAX_PENDING * 3 / 4;
/// How long PE 0 tries to hand an error to a PE that does not read, before giving up on it.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(1);
/// A connection must complete its handshake within this time (a PE sends its hello right after
/// connecting, and its proof right after PE 0's challenge).
const HELLO_DEADLINE: Duration = Duration::from_secs(10);
/// At most this many of the PEs PE 0 waits for are described one by one in a stall error.
const STALL_DETAIL: usize = 8;

/// Where a connection stands in the handshake.
enum Stage {
    /// Waiting for its hello.
    Hello,
    /// Its hello arrived (body `body`) and PE 0 sent its challenge with nonce `nonce`: waiting for its
    /// proof of the key.
    Proof { hello: Hello, body: Vec<u8>, nonce: [u8; NONCE] },
}

/// An accepted connection that has not proved the job key yet.
struct Pending {
    stream: TcpStream,
    addr: SocketAddr,
    reader: FrameReader,
    since: Instant,
    stage: Stage,
}

impl Pending {
    /// Under a flood, lower ranks are dropped first: silent connections, then those that sent part
    /// of a hello, then those that are answering PE 0's challenge.
    fn rank(&self) -> u8 {
        match self.stage {
            Stage::Hello if !self.reader.started() => 0,
            Stage::Hello => 1,
            Stage::Proof { .. } => 2,
        }
    }
}

/// A PE that passed the handshake.
pub(super) struct Peer {
    pe: usize,
    stream: TcpStream,
    addr: SocketAddr,
    host: HostId,
    reader: FrameReader,
}

pub(super) struct Root {
    /// PEs 1..npes, in order.
    peers: Vec<Peer>,
    /// The last collective each of PEs 1..npes entered (its call, operation and number), for stall
    /// messages; None until its first request.
    last: Vec<Option<(String, Op, u64)>>,
    /// RSHMEM_WAIT_TIMEOUT.
    wait: Option<Duration>,
}

/// Sends `err` to every stream (bounded wait), then closes them without resetting unread data.
fn notify_and_close(streams: impl IntoIterator<Item = TcpStream>, err: &Error) {
    let frame = encode_text(K_ERROR, err.message());
    for mut s in streams {
        let _ = send_all(&s, &frame, Some(NOTIFY_TIMEOUT));
        drain(&mut s);
    }
}

enum Outcome {
    Keep(Pending),
    Gone,
    Joined(Peer),
    /// The job cannot start; the offending connection (if any) is told too.
    Fatal(Error, Option<TcpStream>),
}

/// Refuses a connection: tells it why in a REFUSE frame (so that it fails at once, instead of
/// retrying until its timeout), warns (rate-limited) and closes it. The job goes on.
fn refuse(mut p: Pending, claimed: Option<usize>, why: &str, missing: &str, warns: &mut WarnLimiter) {
    warn_refused(&p, claimed, why, missing, warns);
    let _ = send_all(&p.stream, &encode_text(K_REFUSE, why), Some(NOTIFY_TIMEOUT));
    drain(&mut p.stream);
}

fn warn_refused(p: &Pending, claimed: Option<usize>, why: &str, missing: &str, warns: &mut WarnLimiter) {
    let claim = claimed.map(|pe| format!(" (claiming to be PE {pe})")).unwrap_or_default();
    warns.warn(format!("rshmem bootstrap: refused a connection from {}{claim}: {why}; still waiting for {missing}", p.addr));
}

fn wrong_key() -> String {
    format!(
        "wrong job key (PE 0 there belongs to another job, or {} differs between the PEs of this job)",
        env::JOB_KEY
    )
}

fn show_job(job: &str) -> &str {
    if job.is_empty() {
        "a job without a launcher job id"
    } else {
        job
    }
}

/// Reads what `p` has sent and moves it on in the handshake.
fn handle_pending(s: &Setup, mut p: Pending, joined: &[Option<Peer>], warns: &mut WarnLimiter) -> Outcome {
    let missing = || pe_list(&(1..s.npes).filter(|&pe| joined[pe].is_none()).collect::<Vec<_>>());
    let limit: &dyn Fn(u8) -> Option<usize> = match p.stage {
        Stage::Hello => &hello_limit,
        Stage::Proof { .. } => &proof_limit,
    };
    let (kind, body) = match p.reader.pump(&mut p.stream, limit) {
        Ok(Pumped::Pending) => return Outcome::Keep(p),
        Ok(Pumped::Eof) | Err(ReadFail::Io(_)) => {
            let when = match p.stage {
                Stage::Hello => "before its hello",
                Stage::Proof { .. } => "after PE 0's challenge, without a proof of the job key",
            };
            log::debug(format!("rshmem bootstrap: {} closed the connection {when}", p.addr));
            return Outcome::Gone;
        }
        Err(ReadFail::Bad(m)) => {
            warns.warn(format!(
                "rshmem bootstrap: ignoring a connection from {} that is not an rshmem bootstrap client ({m})",
                p.addr
            ));
            return Outcome::Gone;
        }
        Ok(Pumped::Frame(kind, body)) => (kind, body),
    };
    if let Stage::Hello = p.stage {
        return on_hello(s, p, body, &missing, warns);
    }
    let Stage::Proof { hello: h, body: hello_body, nonce } = std::mem::replace(&mut p.stage, Stage::Hello) else {
        unreachable!("handled above")
    };
    if kind == K_REFUSE {
        // The PE could not check PE 0's proof: its key differs. It has closed; say why here.
        warn_refused(&p, Some(h.pe), &wrong_key(), &missing(), warns);
        return Outcome::Gone;
    }
    let proven = decode_proof(&body).is_ok_and(|proof| auth::check_leaf(&s.key, &hello_body, &nonce, &proof));
    if !proven {
        refuse(p, Some(h.pe), &wrong_key(), &missing(), warns);
        return Outcome::Gone;
    }
    if h.job != s.job {
        // The right key, but another launcher job: a key reused by two jobs that share a port.
        let why = format!(
            "another job: PE 0 there belongs to {}, this PE to {} (two jobs use the same {} port: give each job its own port and its own {})",
            show_job(s.job),
            show_job(&h.job),
            env::BOOTSTRAP,
            env::JOB_KEY
        );
        refuse(p, Some(h.pe), &why, &missing(), warns);
        return Outcome::Gone;
    }
    let who = format!("{} (host {})", p.addr, h.host.hostname);
    if h.npes != s.npes {
        let err = Error::new(format!(
            "rshmem bootstrap: PE {} at {who} was started with {} PEs, but PE 0 with {}: all PEs of a job must agree on the number of PEs",
            h.pe, h.npes, s.npes
        ));
        return Outcome::Fatal(err, Some(p.stream));
    }
    if h.pe == 0 {
        let err = Error::new(format!(
            "rshmem bootstrap: two processes claim to be PE 0: the bootstrap root at {} (host {}) and one at {who}",
            s.addr, s.me.hostname
        ));
        return Outcome::Fatal(err, Some(p.stream));
    }
    if h.pe >= s.npes {
        let err = Error::new(format!(
            "rshmem bootstrap: a process at {who} claims to be PE {}, but the job has {} PEs (0 to {})",
            h.pe,
            s.npes,
            s.npes - 1
        ));
        return Outcome::Fatal(err, Some(p.stream));
    }
    if let Some(first) = &joined[h.pe] {
        let err = Error::new(format!(
            "rshmem bootstrap: two processes claim to be PE {}: one at {} (host {}) and one at {who}",
            h.pe, first.addr, first.host.hostname
        ));
        return Outcome::Fatal(err, Some(p.stream));
    }
    log::debug(format!("rshmem bootstrap: PE {} joined from {who}", h.pe));
    Outcome::Joined(Peer { pe: h.pe, stream: p.stream, addr: p.addr, host: h.host, reader: FrameReader::default() })
}

/// A hello arrived: answers it with PE 0's challenge (or refuses a peer of another version).
fn on_hello(s: &Setup, mut p: Pending, body: Vec<u8>, missing: &dyn Fn() -> String, warns: &mut WarnLimiter) -> Outcome {
    let h = match decode_hello(&body) {
        HelloParse::Ok(h) => h,
        HelloParse::NotRshmem => {
            warns.warn(format!(
                "rshmem bootstrap: ignoring a connection from {} that is not an rshmem bootstrap client",
                p.addr
            ));
            return Outcome::Gone;
        }
        HelloParse::Garbled(m) => {
            warns.warn(format!("rshmem bootstrap: ignoring a connection from {} with a garbled hello ({m})", p.addr));
            return Outcome::Gone;
        }
        HelloParse::OtherVersion { version, clear_key } => {
            let why = format!(
                "it speaks bootstrap protocol version {version}, but PE 0 speaks version {VERSION}: all PEs of a job must run the same rshmem build"
            );
            return match clear_key {
                // An older build sent the key in clear: it is a PE of this job.
                Some(key) if auth::key_eq(&key, &s.key) => {
                    let err = Error::new(format!("rshmem bootstrap: a PE at {}: {why}", p.addr));
                    Outcome::Fatal(err, Some(p.stream))
                }
                Some(_) => {
                    refuse(p, None, &wrong_key(), &missing(), warns);
                    Outcome::Gone
                }
                // A newer build: nothing here can tell whether it belongs to this job.
                None => {
                    refuse(p, None, &why, &missing(), warns);
                    Outcome::Gone
                }
            };
        }
    };
    let nonce = match random16() {
        Ok(n) => n,
        Err(e) => return Outcome::Fatal(e, None),
    };
    let proof = auth::root_proof(&s.key, &body, &nonce);
    if let Err(e) = send_all(&p.stream, &encode_challenge(&nonce, &proof), Some(NOTIFY_TIMEOUT)) {
        log::debug(format!("rshmem bootstrap: {}: cannot send the challenge: {e}", p.addr));
        return Outcome::Gone;
    }
    p.stage = Stage::Proof { hello: h, body, nonce };
    Outcome::Keep(p)
}

/// PE 0 waiting for the other PEs: who has joined, who is in the handshake.
struct Gate<'a> {
    s: &'a Setup<'a>,
    joined: Vec<Option<Peer>>,
    n_joined: usize,
    pending: Vec<Pending>,
    warns: WarnLimiter,
}

/// The job cannot start: the error, and the connection that caused it (told too), if any.
type Stop = (Error, Option<TcpStream>);

impl Gate<'_> {
    /// Reads what `p` has sent and moves it on.
    fn advance(&mut self, p: Pending) -> std::result::Result<(), Stop> {
        match handle_pending(self.s, p, &self.joined, &mut self.warns) {
            Outcome::Keep(p) => self.pending.push(p),
            Outcome::Gone => {}
            Outcome::Joined(peer) => {
                let pe = peer.pe;
                self.joined[pe] = Some(peer);
                self.n_joined += 1;
            }
            Outcome::Fatal(err, offender) => return Err((err, offender)),
        }
        Ok(())
    }

    /// More than MAX_PENDING connections in the handshake: reads them all, then drops the least
    /// advanced down to FLOOD_LOW_WATER, telling each that it was a flood.
    fn shed(&mut self) -> std::result::Result<(), Stop> {
        for p in std::mem::take(&mut self.pending) {
            self.advance(p)?;
        }
        if self.pending.len() <= MAX_PENDING {
            return Ok(());
        }
        let excess = self.pending.len() - FLOOD_LOW_WATER;
        self.pending.sort_by_key(|p| (p.rank(), p.since));
        let text = format!(
            "rshmem bootstrap: PE 0 at {} dropped this connection before its handshake completed: a flood of connections to that port ({} or more at once that had not proved the job key); a PE connects again",
            self.s.addr, MAX_PENDING
        );
        let frame = encode_text(K_BUSY, &text);
        let mut silent = 0;
        for mut p in self.pending.drain(..excess) {
            silent += usize::from(p.rank() == 0);
            // A small frame on a socket with an empty send buffer: it goes out at once, or not at all.
            let _ = send_all(&p.stream, &frame, Some(Duration::ZERO));
            drain(&mut p.stream);
        }
        self.warns.warn(format!(
            "rshmem bootstrap: a flood of connections to {}: more than {MAX_PENDING} at once that had not proved the job key; dropped {excess} of them ({silent} silent), telling each it was a flood (a PE among them connects again)",
            self.s.addr
        ));
        Ok(())
    }

    /// Tells every joined PE (and the offender) `err`, closes everything, returns `err`.
    fn abort(self, (err, offender): Stop) -> Error {
        notify_and_close(self.joined.into_iter().flatten().map(|p| p.stream).chain(offender), &err);
        err
    }
}

/// Accepts and checks the other PEs until all are in or the deadline passes, then sends everyone the
/// table of host identities. Returns the root's side and that table.
pub(super) fn init(s: &Setup, listener: TcpListener) -> Result<(Root, Vec<HostId>)> {
    let deadline = Instant::now() + s.timeout;
    listener.set_nonblocking(true).map_err(|e| Error::os(format!("rshmem bootstrap: listener on {}", s.addr), e))?;
    let mut g = Gate {
        s,
        joined: (0..s.npes).map(|_| None).collect(),
        n_joined: 1,
        pending: Vec::new(),
        warns: WarnLimiter::new("connections to the bootstrap port"),
    };
    while g.n_joined < s.npes {
        if let Err(stop) = gate_step(&mut g, &listener, deadline) {
            return Err(g.abort(stop));
        }
    }
    drop(listener);
    let Gate { joined, pending, .. } = g;
    drop(pending);

    let mut hosts = vec![s.me.clone()];
    hosts.extend(joined.iter().skip(1).map(|p| p.as_ref().unwrap().host.clone()));
    let peers: Vec<Peer> = joined.into_iter().skip(1).map(|p| p.unwrap()).collect();
    let last = peers.iter().map(|_| None).collect();
    let mut root = Root { peers, last, wait: s.wait };
    let welcome = encode_welcome(&hosts);
    for i in 0..root.peers.len() {
        if let Err(e) = send_all(&root.peers[i].stream, &welcome, None) {
            let p = &root.peers[i];
            let err = Error::new(format!(
                "rshmem bootstrap: PE {} (host {}, {}) disconnected from the bootstrap during init ({e}): it has probably exited or crashed",
                p.pe, p.host.hostname, p.addr
            ));
            return Err(root.fail(err));
        }
    }
    log::debug(format!("rshmem bootstrap: all {} PEs connected to {}", s.npes, s.addr));
    Ok((root, hosts))
}

/// One round of PE 0's wait for the other PEs: a poll of the listener and every connection, then
/// whatever became ready.
fn gate_step(g: &mut Gate, listener: &TcpListener, deadline: Instant) -> std::result::Result<(), Stop> {
    let s = g.s;
    let now = Instant::now();
    if now >= deadline {
        let missing: Vec<usize> = (1..s.npes).filter(|&pe| g.joined[pe].is_none()).collect();
        let err = Error::new(format!(
            "rshmem bootstrap: timed out after {} s waiting for {} of {} to connect to {} ({})",
            secs(s.timeout),
            pe_list(&missing),
            s.npes,
            s.addr,
            env::BOOTSTRAP_TIMEOUT
        ));
        return Err((err, None));
    }
    // Connections that did not complete their handshake in time are dropped.
    let warns = &mut g.warns;
    g.pending.retain(|p| {
        let keep = now.duration_since(p.since) < HELLO_DEADLINE;
        if !keep {
            warns.warn(format!(
                "rshmem bootstrap: dropping a connection from {} that did not complete its handshake within {} s",
                p.addr,
                HELLO_DEADLINE.as_secs()
            ));
        }
        keep
    });
    let wake = g.pending.iter().map(|p| p.since + HELLO_DEADLINE).fold(deadline, Instant::min);
    let joined_pes: Vec<usize> = (1..s.npes).filter(|&pe| g.joined[pe].is_some()).collect();
    let mut fds = vec![pollfd(listener)];
    fds.extend(g.pending.iter().map(|p| pollfd(&p.stream)));
    fds.extend(joined_pes.iter().map(|&pe| pollfd(&g.joined[pe].as_ref().unwrap().stream)));
    if let Err(e) = poll(&mut fds, Some(wake.saturating_duration_since(now))) {
        return Err((Error::os("rshmem bootstrap: poll", e), None));
    }

    // Joined PEs say nothing until the welcome: readable means gone (or garbage).
    let n_pending = g.pending.len();
    for (i, &pe) in joined_pes.iter().enumerate() {
        if fds[1 + n_pending + i].revents == 0 {
            continue;
        }
        let peer = g.joined[pe].as_mut().unwrap();
        let what = match peer.reader.pump(&mut peer.stream, &|_| None) {
            Ok(Pumped::Pending) => continue,
            Ok(Pumped::Eof) | Err(ReadFail::Io(_)) => {
                "disconnected from the bootstrap before all PEs had connected: it has probably exited or crashed"
            }
            Ok(Pumped::Frame(..)) | Err(ReadFail::Bad(_)) => {
                "sent an unexpected message before all PEs had connected (protocol error)"
            }
        };
        let err = Error::new(format!("rshmem bootstrap: PE {pe} (host {}, {}) {what}", peer.host.hostname, peer.addr));
        return Err((err, None));
    }

    let ready: Vec<bool> = fds[1..1 + n_pending].iter().map(|f| f.revents != 0).collect();
    for (p, ready) in std::mem::take(&mut g.pending).into_iter().zip(ready) {
        if ready {
            g.advance(p)?;
        } else {
            g.pending.push(p);
        }
    }

    if fds[0].revents != 0 {
        // A bounded batch, so that a flood that never lets the listener run dry does not keep PE 0
        // from its deadline and from the connections it already has.
        for _ in 0..MAX_PENDING / 4 {
            match listener.accept() {
                Ok((stream, addr)) => {
                    if is_self_connection(&stream) {
                        continue;
                    }
                    if let Err(e) = stream.set_nonblocking(true) {
                        log::warn(format!("rshmem bootstrap: connection from {addr}: {e}"));
                        continue;
                    }
                    tune(&stream);
                    // A PE sends its hello right after connecting, so it is usually here already:
                    // read it now, so that the PE never counts as a silent connection.
                    g.advance(Pending {
                        stream,
                        addr,
                        reader: FrameReader::default(),
                        since: Instant::now(),
                        stage: Stage::Hello,
                    })?;
                    if g.pending.len() > MAX_PENDING {
                        g.shed()?;
                    }
                    if g.n_joined == s.npes {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => {}
                Err(e) => {
                    // Out of descriptors or similar: say so, and do not spin on the listener.
                    g.warns.warn(format!("rshmem bootstrap: accept on {}: {e}", s.addr));
                    std::thread::sleep(Duration::from_millis(20));
                    break;
                }
            }
        }
    }
    Ok(())
}

impl Root {
    /// PE 0's part of a collective. On failure every PE is told, and the connections are closed.
    pub(super) fn collective(
        &mut self,
        npes: usize,
        seq: u64,
        call: &str,
        op: Op,
        payload: &[u8],
    ) -> Result<Vec<Vec<u8>>> {
        match self.gather(npes, seq, call, op, payload) {
            Ok(parts) => Ok(parts),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Tells every PE `err`, closes all connections, and returns `err`.
    pub(super) fn fail(&mut self, err: Error) -> Error {
        notify_and_close(self.peers.drain(..).map(|p| p.stream), &err);
        err
    }

    fn gather(&mut self, npes: usize, seq: u64, call: &str, op: Op, payload: &[u8]) -> Result<Vec<Vec<u8>>> {
        check_local(npes, call, op, payload).map_err(|m| Error::new(format!("rshmem bootstrap: PE 0: {m}")))?;
        let mut got: Vec<Option<Vec<u8>>> = (0..npes).map(|_| None).collect();
        let mut missing = npes - 1;
        let mut fds: Vec<libc::pollfd> = self.peers.iter().map(|p| pollfd(&p.stream)).collect();
        let deadline = self.wait.map(|w| Instant::now() + w);
        while missing > 0 {
            for f in fds.iter_mut() {
                f.revents = 0;
            }
            let left = match deadline {
                None => None,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(self.stalled(call, op, seq, &got));
                    }
                    Some(left)
                }
            };
            poll(&mut fds, left).map_err(|e| Error::os(format!("rshmem bootstrap: poll during {call}"), e))?;
            for (i, f) in fds.iter().enumerate() {
                if f.revents == 0 {
                    continue;
                }
                let peer = &mut self.peers[i];
                // A PE sends one request per collective, then waits for the result: anything else
                // readable on its socket (end of file, a second message) is an error.
                match peer.reader.pump(&mut peer.stream, &peer_limit) {
                    Ok(Pumped::Pending) => {}
                    Ok(Pumped::Frame(K_REQUEST, body)) => {
                        let req = decode_request(body).map_err(|m| protocol(peer, call, seq, &m))?;
                        if got[peer.pe].is_some() {
                            return Err(protocol(peer, call, seq, "a second request before the result of the first"));
                        }
                        self.last[i] = Some((req.call.clone(), req.op, req.seq));
                        if req.call != call || req.op != op || req.seq != seq {
                            return Err(Error::new(format!(
                                "rshmem bootstrap: collective mismatch: PE 0 called {} while PE {} called {}",
                                describe(call, op, seq),
                                peer.pe,
                                describe(&req.call, req.op, req.seq)
                            )));
                        }
                        got[peer.pe] = Some(req.payload);
                        missing -= 1;
                    }
                    // The PE failed locally and says why (its text names it).
                    Ok(Pumped::Frame(_, body)) => return Err(Error::new(decode_text(&body))),
                    Ok(Pumped::Eof) => return Err(dead(peer, call, seq, None)),
                    Err(ReadFail::Io(e)) => return Err(dead(peer, call, seq, Some(&e))),
                    Err(ReadFail::Bad(m)) => return Err(protocol(peer, call, seq, &m)),
                }
            }
        }
        // Every PE has sent its request; one may have given up since (its RSHMEM_WAIT_TIMEOUT ran
        // out while PE 0 itself was late): anything it sent after its request is an abort, or it is
        // gone. Look once, without waiting, so that the collective does not "complete" for PE 0
        // alone.
        for f in fds.iter_mut() {
            f.revents = 0;
        }
        poll(&mut fds, Some(Duration::ZERO)).map_err(|e| Error::os(format!("rshmem bootstrap: poll during {call}"), e))?;
        for (i, f) in fds.iter().enumerate() {
            if f.revents == 0 {
                continue;
            }
            let peer = &mut self.peers[i];
            match peer.reader.pump(&mut peer.stream, &peer_limit) {
                Ok(Pumped::Pending) => {}
                Ok(Pumped::Frame(K_ABORT, body)) => return Err(Error::new(decode_text(&body))),
                Ok(Pumped::Frame(..)) => {
                    return Err(protocol(peer, call, seq, "a second request before the result of the first"))
                }
                Ok(Pumped::Eof) => return Err(dead(peer, call, seq, None)),
                Err(ReadFail::Io(e)) => return Err(dead(peer, call, seq, Some(&e))),
                Err(ReadFail::Bad(m)) => return Err(protocol(peer, call, seq, &m)),
            }
        }
        let parts: Vec<&[u8]> = match op {
            Op::Allgather => (0..npes).map(|pe| if pe == 0 { payload } else { got[pe].as_deref().unwrap() }).collect(),
            Op::Broadcast(0) => vec![payload],
            Op::Broadcast(r) => vec![got[r].as_deref().unwrap()],
            Op::Barrier => Vec::new(),
        };
        let frame = encode_result(seq, &parts);
        for peer in &self.peers {
            if let Err(e) = send_all(&peer.stream, &frame, None) {
                return Err(dead(peer, call, seq, Some(&e)));
            }
        }
        Ok(parts.iter().map(|p| p.to_vec()).collect())
    }
}

impl Root {
    /// The error of a collective that not every PE entered within RSHMEM_WAIT_TIMEOUT: names the PEs
    /// PE 0 waits for and what each of them last entered.
    fn stalled(&self, call: &str, op: Op, seq: u64, got: &[Option<Vec<u8>>]) -> Error {
        let waiting: Vec<usize> = (1..got.len()).filter(|&pe| got[pe].is_none()).collect();
        let mut detail: Vec<String> = waiting
            .iter()
            .take(STALL_DETAIL)
            .map(|&pe| {
                let peer = &self.peers[pe - 1];
                let what = match &self.last[pe - 1] {
                    Some((c, o, n)) => format!("last entered {}", describe(c, *o, *n)),
                    None => "has not entered any collective since init".to_string(),
                };
                format!("PE {pe} (host {}) {what}", peer.host.hostname)
            })
            .collect();
        if waiting.len() > STALL_DETAIL {
            detail.push(format!("and {} more", waiting.len() - STALL_DETAIL));
        }
        Error::new(format!(
            "rshmem bootstrap: {} did not complete within {}={} s: PE 0 waits for {} of {} to enter it: {}",
            describe(call, op, seq),
            env::WAIT_TIMEOUT,
            secs(self.wait.unwrap_or_default()),
            pe_list(&waiting),
            got.len(),
            detail.join("; ")
        ))
    }
}

fn dead(peer: &Peer, call: &str, seq: u64, err: Option<&io::Error>) -> Error {
    let why = err.map(|e| format!(" ({e})")).unwrap_or_default();
    Error::new(format!(
        "rshmem bootstrap: PE {} (host {}) disconnected from the bootstrap during {call} (collective #{seq}){why}: it has probably exited or crashed",
        peer.pe, peer.host.hostname
    ))
}

fn protocol(peer: &Peer, call: &str, seq: u64, detail: &str) -> Error {
    Error::new(format!(
        "rshmem bootstrap: protocol error from PE {} (host {}) during {call} (collective #{seq}): {detail}",
        peer.pe, peer.host.hostname
    ))
}
