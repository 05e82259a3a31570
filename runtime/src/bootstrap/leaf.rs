//! The side of every PE but 0: connect to PE 0 (retrying until it listens), say hello, get the host
//! table; then one request and one blocking read of the result per collective. Without
//! RSHMEM_WAIT_TIMEOUT the read has no timeout (a PE may compute for hours between collectives) but
//! ends at once when PE 0 goes away. With it, a PE whose collective PE 0 does not answer within that
//! time (plus a grace period, so that PE 0's own, more precise, stall error arrives first when PE 0
//! is waiting for another PE) fails naming PE 0 and the collective, and tells PE 0.

use super::launch::secs;
use super::net::{is_self_connection, resolve};
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

fn connect(s: &Setup) -> Result<TcpStream> {
    let deadline = Instant::now() + s.timeout;
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
                "rshmem bootstrap: PE {} could not reach PE 0 at {} within {} s (last error: {last}; {})",
                s.pe,
                s.addr,
                secs(s.timeout),
                env::BOOTSTRAP_TIMEOUT
            )));
        }
        std::thread::sleep(backoff.min(left));
        backoff = (backoff * 2).min(Duration::from_millis(100));
    }
}

pub(super) fn init(s: &Setup) -> Result<(Leaf, Vec<HostId>)> {
    let mut stream = connect(s)?;
    tune(&stream);
    let deadline = Instant::now() + s.timeout + HANDSHAKE_GRACE;
    // If this fails PE 0 is gone; reading below says so (or shows the error PE 0 sent first).
    let _ = send_all(&stream, &encode_hello(&s.key, s.pe, s.npes, s.me, s.job), None);
    let limit = handshake_limit(s.npes);
    let mut reader = FrameReader::default();
    let hosts = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::new(format!(
                "rshmem bootstrap: PE {} connected to {} but PE 0 did not complete the bootstrap within {} s (is PE 0 running? {})",
                s.pe,
                s.addr,
                secs(s.timeout + HANDSHAKE_GRACE),
                env::BOOTSTRAP_TIMEOUT
            )));
        }
        stream.set_read_timeout(Some(left)).map_err(|e| Error::os("rshmem bootstrap: socket read timeout", e))?;
        match reader.pump(&mut stream, &limit) {
            Ok(Pumped::Frame(K_WELCOME, body)) => {
                break decode_welcome(&body, s.npes).map_err(|m| {
                    Error::new(format!("rshmem bootstrap: PE {}: bad welcome from PE 0 at {}: {m}", s.pe, s.addr))
                })?
            }
            Ok(Pumped::Frame(K_REFUSE, body)) => {
                return Err(Error::new(format!(
                    "rshmem bootstrap: PE {} of {}: PE 0 at {} refused the connection: {}",
                    s.pe,
                    show_job(s.job),
                    s.addr,
                    decode_text(&body),
                )))
            }
            Ok(Pumped::Frame(_, body)) => return Err(Error::new(decode_text(&body))),
            Ok(Pumped::Pending) => {}
            Ok(Pumped::Eof) | Err(ReadFail::Io(_)) => {
                return Err(Error::new(format!(
                    "rshmem bootstrap: PE {}: PE 0 at {} closed the connection during the bootstrap handshake (it has probably exited or crashed)",
                    s.pe, s.addr
                )))
            }
            Err(ReadFail::Bad(m)) => {
                return Err(Error::new(format!(
                    "rshmem bootstrap: PE {}: unexpected data from {} during the handshake ({m}): is another program listening there?",
                    s.pe, s.addr
                )))
            }
        }
    };
    stream.set_read_timeout(None).map_err(|e| Error::os("rshmem bootstrap: socket read timeout", e))?;
    let root_host = hosts[0].hostname.clone();
    Ok((Leaf { stream, reader, pe: s.pe, npes: s.npes, root_host, wait: s.wait }, hosts))
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
