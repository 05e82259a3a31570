//! The side of every PE but 0: connect to PE 0 (retrying until it listens), run the handshake (its
//! hello with a nonce, PE 0's challenge, whose proof of the job key this PE checks before it sends
//! its own: auth.rs), get the host table; then one request and one blocking read of the result per
//! collective. A PE that PE 0 dropped because of a flood of connections (a BUSY frame) connects
//! again until its timeout. Without RSHMEM_WAIT_TIMEOUT the read has no timeout (a PE may compute
//! for hours between collectives) but ends at once when PE 0 goes away. With it, a PE whose
//! collective PE 0 does not answer within that time (plus a grace period, so that PE 0's own, more
//! precise, stall error arrives first when PE 0 is waiting for another PE) fails naming PE 0 and the
//! collective, and tells PE 0.

use super::auth;
use super::launch::secs;
use super::net::{is_self_connection, random16, resolve};
use super::wire::*;
use super::setup::{check_local, describe, Setup};
use crate::config::env;
use crate::error::{Error, Result};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Extra time, beyond the init timeout, that a connected PE waits for PE 0's answer: PE 0 may have
/// started later than this PE, and always answers (welcome or error) by its own deadline.
const HANDSHAKE_GRACE: Duration = Duration::from_secs(5);

pub(super) struct Leaf {
    stream: TcpStream,
    reader: FrameReader,
    pe: usize,
    npes: usize,
    root_host: String,
    /// RSHMEM_WAIT_TIMEOUT.
    wait: Option<Duration>,
}

/// How much longer than RSHMEM_WAIT_TIMEOUT a PE waits for PE 0's answer: PE 0 starts its own clock
/// when it enters the collective, and its error (which names the PEs it waits for) is the better one.
fn leaf_grace(wait: Duration) -> Duration {
    Duration::from_secs(1) + wait / 10
}

/// Times PE 0 dropped this PE's connection because of a flood, and what it said the last time.
#[derive(Default)]
struct Floods {
    count: u32,
    last: String,
}

impl Floods {
    /// "; PE 0 dropped this PE's connection 3 times because of a flood ...", or "".
    fn note(&self) -> String {
        if self.count == 0 {
            return String::new();
        }
        format!(
            "; PE 0 dropped this PE's connection {} time{} because of a flood of connections to its port, and it connected again (last notice: {})",
            self.count,
            if self.count == 1 { "" } else { "s" },
            self.last
        )
    }
}

fn connect(s: &Setup, deadline: Instant, floods: &Floods) -> Result<TcpStream> {
    let mut backoff = Duration::from_millis(5);
    let mut last = String::from("no attempt made");
    loop {
        match resolve(s.addr) {
            Err(e) => last = format!("cannot resolve {}: {e}", s.addr),
            Ok(addrs) => {
                for a in addrs {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    match TcpStream::connect_timeout(&a, left.min(Duration::from_secs(10))) {
                        // Connecting to a local port nobody listens on can connect the socket to
                        // itself (TCP simultaneous open); that is "not listening yet".
                        Ok(st) if is_self_connection(&st) => last = "nothing listens there yet".into(),
                        Ok(st) => return Ok(st),
                        Err(e) => last = e.to_string(),
                    }
                }
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::new(format!(
                "rshmem bootstrap: PE {} could not reach PE 0 at {} within {} s (last error: {last}; {}){}",
                s.pe,
                s.addr,
                secs(s.timeout),
                env::BOOTSTRAP_TIMEOUT,
                floods.note()
            )));
        }
        std::thread::sleep(backoff.min(left));
        backoff = (backoff * 2).min(Duration::from_millis(100));
    }
}

/// How one handshake ended, short of success.
enum Shake {
    /// PE 0 dropped the connection because of a flood (its text): connect again.
    Busy(String),
    Fail(Error),
}

impl From<Error> for Shake {
    fn from(e: Error) -> Shake {
        Shake::Fail(e)
    }
}

pub(super) fn init(s: &Setup) -> Result<(Leaf, Vec<HostId>)> {
    let deadline = Instant::now() + s.timeout;
    let mut floods = Floods::default();
    loop {
        if floods.count > 0 && Instant::now() >= deadline {
            return Err(Error::new(format!(
                "rshmem bootstrap: PE {} could not join PE 0 at {} within {} s ({}): PE 0 dropped this PE's connection {} time{} because of a flood of connections to its port (last notice: {})",
                s.pe,
                s.addr,
                secs(s.timeout),
                env::BOOTSTRAP_TIMEOUT,
                floods.count,
                if floods.count == 1 { "" } else { "s" },
                floods.last
            )));
        }
        let stream = connect(s, deadline, &floods)?;
        tune(&stream);
        match handshake(s, stream) {
            Ok(done) => return Ok(done),
            Err(Shake::Fail(e)) => return Err(e),
            Err(Shake::Busy(text)) => {
                crate::log::debug(format!("rshmem bootstrap: PE {}: {text}", s.pe));
                floods.count += 1;
                floods.last = text;
                let pause = Duration::from_millis(10 * u64::from(floods.count.min(20)));
                std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
            }
        }
    }
}

/// One handshake on a fresh connection: hello, PE 0's challenge (checked), this PE's proof, the
/// welcome.
fn handshake(s: &Setup, mut stream: TcpStream) -> std::result::Result<(Leaf, Vec<HostId>), Shake> {
    let deadline = Instant::now() + s.timeout + HANDSHAKE_GRACE;
    let hello = encode_hello(&random16()?, s.pe, s.npes, s.me, s.job);
    let hello_body = &hello[HEADER..];
    // If this fails PE 0 is gone; reading below says so (or shows the error PE 0 sent first).
    let _ = send_all(&stream, &hello, None);
    let limit = handshake_limit(s.npes);
    let mut reader = FrameReader::default();
    // Whether PE 0 proved that it knows the key (and this PE sent its own proof).
    let mut proven = false;
    let hosts = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Shake::Fail(Error::new(format!(
                "rshmem bootstrap: PE {} connected to {} but PE 0 did not complete the bootstrap within {} s (is PE 0 running? {})",
                s.pe,
                s.addr,
                secs(s.timeout + HANDSHAKE_GRACE),
                env::BOOTSTRAP_TIMEOUT
            ))));
        }
        stream.set_read_timeout(Some(left)).map_err(|e| Error::os("rshmem bootstrap: socket read timeout", e))?;
        match reader.pump(&mut stream, &limit) {
            Ok(Pumped::Frame(K_CHALLENGE, body)) if !proven => {
                let (nonce, proof) = decode_challenge(&body).map_err(|m| {
                    Error::new(format!("rshmem bootstrap: PE {}: bad challenge from {}: {m}", s.pe, s.addr))
                })?;
                if !auth::check_root(&s.key, hello_body, &nonce, &proof) {
                    // Tell it why (it may be PE 0 of a job with another key, which then says so),
                    // and nothing else.
                    let _ = send_all(
                        &stream,
                        &encode_text(K_REFUSE, "the proof of the job key does not check with this PE's key"),
                        Some(Duration::from_secs(1)),
                    );
                    drain(&mut stream);
                    return Err(Shake::Fail(Error::new(format!(
                        "rshmem bootstrap: PE {} of {}: the process at {} did not prove that it knows the job key, so this PE sent it nothing secret and gave up: {} or it is not an rshmem PE 0 at all",
                        s.pe,
                        show_job(s.job),
                        s.addr,
                        wrong_key()
                    ))));
                }
                let _ = send_all(&stream, &encode_proof(&auth::leaf_proof(&s.key, hello_body, &nonce)), None);
                proven = true;
            }
            Ok(Pumped::Frame(K_WELCOME, body)) if proven => {
                break decode_welcome(&body, s.npes).map_err(|m| {
                    Error::new(format!("rshmem bootstrap: PE {}: bad welcome from PE 0 at {}: {m}", s.pe, s.addr))
                })?
            }
            Ok(Pumped::Frame(K_WELCOME | K_CHALLENGE, _)) => {
                let what = if proven { "a second challenge" } else { "a welcome without a challenge" };
                return Err(Shake::Fail(Error::new(format!(
                    "rshmem bootstrap: PE {} of {}: the process at {} sent {what}: it did not prove that it knows the job key, so it is not PE 0 of this job (a stranger, or an older rshmem, holds that port); this PE sent it nothing secret",
                    s.pe,
                    show_job(s.job),
                    s.addr
                ))));
            }
            Ok(Pumped::Frame(K_REFUSE, body)) => {
                return Err(Shake::Fail(Error::new(format!(
                    "rshmem bootstrap: PE {} of {}: PE 0 at {} refused the connection: {}",
                    s.pe,
                    show_job(s.job),
                    s.addr,
                    decode_text(&body),
                ))))
            }
            Ok(Pumped::Frame(K_BUSY, body)) => {
                drain(&mut stream);
                return Err(Shake::Busy(decode_text(&body)));
            }
            Ok(Pumped::Frame(_, body)) => return Err(Shake::Fail(Error::new(decode_text(&body)))),
            Ok(Pumped::Pending) => {}
            Ok(Pumped::Eof) | Err(ReadFail::Io(_)) => {
                return Err(Shake::Fail(Error::new(format!(
                    "rshmem bootstrap: PE {}: PE 0 at {} closed the connection during the bootstrap handshake (it has probably exited or crashed)",
                    s.pe, s.addr
                ))))
            }
            Err(ReadFail::Bad(m)) => {
                return Err(Shake::Fail(Error::new(format!(
                    "rshmem bootstrap: PE {}: unexpected data from {} during the handshake ({m}): is another program listening there?",
                    s.pe, s.addr
                ))))
            }
        }
    };
    stream.set_read_timeout(None).map_err(|e| Error::os("rshmem bootstrap: socket read timeout", e))?;
    let root_host = hosts[0].hostname.clone();
    Ok((Leaf { stream, reader, pe: s.pe, npes: s.npes, root_host, wait: s.wait }, hosts))
}

fn wrong_key() -> String {
    format!(
        "wrong job key (PE 0 there belongs to another job, or {} differs between the PEs of this job),",
        env::JOB_KEY
    )
}

fn show_job(job: &str) -> String {
    if job.is_empty() {
        "this job".into()
    } else {
        job.into()
    }
}

impl Leaf {
    pub(super) fn collective(&mut self, seq: u64, call: &str, op: Op, payload: &[u8]) -> Result<Vec<Vec<u8>>> {
        if let Err(m) = check_local(self.npes, call, op, payload) {
            // Tell PE 0 (which tells everyone), so that the other PEs do not wait for this one.
            let text = format!("rshmem bootstrap: PE {} failed in {call} (collective #{seq}): {m}", self.pe);
            let _ = send_all(&self.stream, &encode_text(K_ABORT, &text), Some(Duration::from_secs(1)));
            return Err(Error::new(format!("rshmem bootstrap: PE {}: {m}", self.pe)));
        }
        // Only the root of a broadcast contributes data.
        let mine: &[u8] = match op {
            Op::Broadcast(r) if r != self.pe => &[],
            _ => payload,
        };
        // A failed send means PE 0 closed the connection; the read below then returns the error it
        // sent before closing, or end of file.
        let _ = send_all(&self.stream, &encode_request(seq, op, call, mine), None);
        let limit = result_limit(self.npes);
        let deadline = self.wait.map(|w| Instant::now() + w + leaf_grace(w));
        loop {
            if let Some(d) = deadline {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(self.stalled(call, op, seq));
                }
                self.stream
                    .set_read_timeout(Some(left))
                    .map_err(|e| Error::os("rshmem bootstrap: socket read timeout", e))?;
            }
            match self.reader.pump(&mut self.stream, &limit) {
                Ok(Pumped::Frame(K_RESULT, body)) => {
                    let (rseq, parts) = decode_result(&body).map_err(|m| self.protocol(call, seq, &m))?;
                    if rseq != seq {
                        return Err(self.protocol(call, seq, &format!("result of collective #{rseq}")));
                    }
                    let want = match op {
                        Op::Allgather => self.npes,
                        Op::Broadcast(_) => 1,
                        Op::Barrier => 0,
                    };
                    if parts.len() != want {
                        return Err(self.protocol(
                            call,
                            seq,
                            &format!("{} parts in the result, expected {want}", parts.len()),
                        ));
                    }
                    return Ok(parts);
                }
                Ok(Pumped::Frame(_, body)) => return Err(Error::new(decode_text(&body))),
                Ok(Pumped::Pending) => {}
                Ok(Pumped::Eof) => return Err(self.lost(call, seq, None)),
                Err(ReadFail::Io(e)) => return Err(self.lost(call, seq, Some(&e))),
                Err(ReadFail::Bad(m)) => return Err(self.protocol(call, seq, &m)),
            }
        }
    }

    /// Best effort: tells PE 0 that this PE cannot go on (PE 0 passes it on at its next collective).
    pub(super) fn abort(&mut self, text: &str) {
        let _ = send_all(&self.stream, &encode_text(K_ABORT, text), Some(Duration::from_secs(1)));
    }

    /// PE 0 did not answer within RSHMEM_WAIT_TIMEOUT (and the grace period): tells PE 0 (which
    /// passes it on to every PE when it next looks) and returns the error.
    fn stalled(&mut self, call: &str, op: Op, seq: u64) -> Error {
        let wait = self.wait.unwrap_or_default();
        let text = format!(
            "rshmem bootstrap: PE {}: PE 0 (host {}) did not answer {} within {}={} s (+{} s grace): PE 0 has not entered this collective, or waits there for a PE that has not",
            self.pe,
            self.root_host,
            describe(call, op, seq),
            env::WAIT_TIMEOUT,
            secs(wait),
            secs(leaf_grace(wait))
        );
        self.abort(&text);
        Error::new(text)
    }

    fn lost(&self, call: &str, seq: u64, err: Option<&std::io::Error>) -> Error {
        let why = err.map(|e| format!(" ({e})")).unwrap_or_default();
        Error::new(format!(
            "rshmem bootstrap: PE {}: lost connection to the bootstrap root PE 0 (host {}) during {call} (collective #{seq}){why}: it has probably exited or crashed",
            self.pe, self.root_host
        ))
    }

    fn protocol(&self, call: &str, seq: u64, detail: &str) -> Error {
        Error::new(format!(
            "rshmem bootstrap: PE {}: protocol error from PE 0 during {call} (collective #{seq}): {detail}",
            self.pe
        ))
    }
}
