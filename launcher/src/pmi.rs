//! `rshmrun --pmi`: a PMI-1 server (the "simple PMI" wire that MPICH's process managers speak), so
//! that a program whose bootstrap is a PMI-1 client starts under rshmrun unchanged, with rshmrun's
//! output tagging, failure handling and timeouts. NVSHMEM's default bootstrap is such a client: an
//! NVSHMEM build of a program and an rshmem build then run under the same launcher.
//!
//! # The wire
//! Each PE gets one end of a Unix socket pair as descriptor `PMI_FD`, and `PMI_RANK` and `PMI_SIZE`.
//! It writes lines of `key=value` words separated by spaces, each ending in a newline and starting
//! with `cmd=`; the server answers each with one line (nothing for `abort`):
//!
//! | request | answer |
//! | --- | --- |
//! | `cmd=init pmi_version=1 pmi_subversion=1` | `cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0` (another version: `rc=-1`) |
//! | `cmd=get_maxes` | `cmd=maxes kvsname_max=.. keylen_max=.. vallen_max=.. rc=0` |
//! | `cmd=get_appnum` | `cmd=appnum appnum=0 rc=0` |
//! | `cmd=get_my_kvsname` | `cmd=my_kvsname kvsname=.. rc=0` |
//! | `cmd=get_universe_size` | `cmd=universe_size size=N rc=0` |
//! | `cmd=put kvsname=K key=k value=v` | `cmd=put_result rc=0` |
//! | `cmd=get kvsname=K key=k` | `cmd=get_result rc=0 value=v` (unknown key: `rc=-1 msg=..`) |
//! | `cmd=barrier_in` | `cmd=barrier_out` once every PE has sent `barrier_in` |
//! | `cmd=finalize` | `cmd=finalize_ack` |
//! | `cmd=abort exitcode=N` | none: rshmrun ends the job with status N, naming the PE |
//!
//! Anything else, or a request that breaks the limits, is answered `cmd=<request>_result rc=-1
//! msg=<why>` (words joined by `_`: a value has no spaces) and named on rshmrun's stderr, once per PE.
//! The key-value space holds at most [`KVS_KEYS_PER_PE`] keys and [`KVS_BYTES_PER_PE`] bytes of keys and
//! values per PE of the job; a `put` beyond that is refused, naming the limit.
//!
//! A PE that has spoken PMI and then closes its end (or exits) without `finalize` or `abort` would leave
//! the others waiting in a barrier forever: the server tells the launcher ([`Watch`]), which ends the
//! job naming the PE and what it did.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// Longest line a client reads or writes (MPICH's and NVSHMEM's simple PMI client: 1024 bytes).
pub const MAX_LINE: usize = 1024;
/// Limits the server announces (`get_maxes`); a value leaves room in a 1024-byte line for the rest of
/// a `put` or `get_result` line.
pub const KVSNAME_MAX: usize = 64;
pub const KEYLEN_MAX: usize = 64;
pub const VALLEN_MAX: usize = 512;
/// The one key-value space of a job.
const KVSNAME: &str = "rshmrun_kvs_0";
/// The key-value space holds at most this many keys per PE of the job (a PMI bootstrap puts a few per
/// PE and per collective)...
pub const KVS_KEYS_PER_PE: usize = 4096;
/// ...and at most this many bytes of keys and values per PE of the job (1 MiB).
pub const KVS_BYTES_PER_PE: usize = 1 << 20;

/// The first `abort` of the job: (PE, exit code).
static ABORT: Mutex<Option<(usize, i32)>> = Mutex::new(None);

/// The PE and exit code of the first `cmd=abort` (taken once).
pub fn take_abort() -> Option<(usize, i32)> {
    ABORT.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// The job's PMI state: the key-value space, the barrier and each PE's connection.
struct Shared {
    np: usize,
    state: Mutex<State>,
    barrier: Condvar,
    conns: Mutex<Vec<Conn>>,
}

#[derive(Default)]
struct State {
    kvs: HashMap<String, String>,
    /// Bytes of the keys and values in `kvs`.
    kvs_bytes: usize,
    /// PEs in the current barrier, and how many barriers completed.
    arrived: usize,
    generation: u64,
}

/// What PE's PMI connection did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Conn {
    /// It sent a request (the PE speaks PMI).
    pub started: bool,
    /// It sent `finalize` or `abort`: its end may close now.
    pub done: bool,
    /// When the server saw its end close (end of file or a broken connection), after reading every
    /// request sent before.
    pub closed: Option<Instant>,
}

impl Conn {
    /// The PE spoke PMI and its connection is not through (no finalize, no abort).
    pub fn unfinished(&self) -> bool {
        self.started && !self.done
    }
}

/// The launcher's view of the PEs' PMI connections.
#[derive(Clone)]
pub struct Watch(Arc<Shared>);

impl Watch {
    /// PE `pe`'s connection (the default for a PE out of range).
    pub fn conn(&self, pe: usize) -> Conn {
        self.0.conns.lock().unwrap_or_else(|e| e.into_inner()).get(pe).copied().unwrap_or_default()
    }
    /// The PEs whose connection closed before finalize (or abort), with when it closed.
    pub fn closed_unfinished(&self) -> Vec<(usize, Instant)> {
        let conns = self.0.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.iter().enumerate().filter(|(_, c)| c.unfinished()).filter_map(|(pe, c)| Some((pe, c.closed?))).collect()
    }
}

/// The server of one job: one thread per PE serves its end of the socket pair.
pub struct Server {
    /// The PEs' ends, until each PE is started (then closed here: the PE has its own copy).
    child_ends: Vec<Option<OwnedFd>>,
    shared: Arc<Shared>,
}

impl Server {
    /// Makes the socket pairs of `np` PEs and starts the threads that serve them; `wake` is called when
    /// a PE asks for the job to end (`abort`).
    pub fn start(np: usize, wake: fn()) -> io::Result<Server> {
        let shared = Arc::new(Shared {
            np,
            state: Mutex::new(State::default()),
            barrier: Condvar::new(),
            conns: Mutex::new(vec![Conn::default(); np]),
        });
        let mut child_ends = Vec::with_capacity(np);
        for pe in 0..np {
            // Both ends close-on-exec (std's default): each PE keeps its own end only, clearing the
            // flag between fork and exec (`ChildSetup`).
            let (mine, theirs) = UnixStream::pair()?;
            let shared = Arc::clone(&shared);
            std::thread::Builder::new().name(format!("rshmrun-pmi-{pe}")).spawn(move || {
                serve(&shared, pe, mine, wake);
                // End of file (or a broken wire): every request sent before was read and answered.
                let unfinished = {
                    let mut conns = shared.conns.lock().unwrap_or_else(|e| e.into_inner());
                    conns[pe].closed = Some(Instant::now());
                    conns[pe].unfinished()
                };
                if unfinished {
                    wake();
                }
            })?;
            child_ends.push(Some(OwnedFd::from(theirs)));
        }
        Ok(Server { child_ends, shared })
    }

    /// What the launcher watches: each PE's connection.
    pub fn watch(&self) -> Watch {
        Watch(Arc::clone(&self.shared))
    }

    /// The descriptor PE `pe` gets as `PMI_FD` (the same number in the PE: it is inherited).
    pub fn child_fd(&self, pe: usize) -> Option<RawFd> {
        self.child_ends.get(pe).and_then(|f| f.as_ref()).map(|f| f.as_raw_fd())
    }

    /// PE `pe` was started (or could not be): rshmrun closes its copy of the PE's end, so that the PE's
    /// exit is the server's end of file.
    pub fn started(&mut self, pe: usize) {
        if let Some(f) = self.child_ends.get_mut(pe) {
            f.take();
        }
    }
}

/// Serves PE `pe` until it closes its end (or breaks the wire).
fn serve(shared: &Shared, pe: usize, stream: UnixStream, wake: fn()) {
    let Ok(write_half) = stream.try_clone() else { return };
    let mut out = io::BufWriter::new(write_half);
    let mut lines = BufReader::new(stream);
    let mut warned = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        // At most MAX_LINE + 1 bytes: a longer line is an error, not a memory hog.
        match io::Read::take(&mut lines, MAX_LINE as u64 + 1).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let answer = if line.len() > MAX_LINE || line.last() != Some(&b'\n') {
            // The rest of the line is dropped, a bounded piece at a time, so that the next request
            // starts at the next line.
            let mut junk = Vec::new();
            while line.last() != Some(&b'\n') && junk.last() != Some(&b'\n') {
                junk.clear();
                match io::Read::take(&mut lines, 4096).read_until(b'\n', &mut junk) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
            Err(("request", format!("a line longer than {MAX_LINE} bytes")))
        } else {
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            respond(shared, pe, &text, wake)
        };
        let reply = match answer {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err((cmd, why)) => {
                if !warned {
                    eprintln!("rshmrun: PE {pe}: PMI: {why} (answered rc=-1; further problems of this PE are answered silently)");
                    warned = true;
                }
                format!("cmd={cmd}_result rc=-1 msg={}", why.replace([' ', '='], "_"))
            }
        };
        if out.write_all(reply.as_bytes()).and_then(|_| out.write_all(b"\n")).and_then(|_| out.flush()).is_err() {
            return;
        }
    }
}

/// The words of a request line as (key, value) pairs, in order; None when a word has no `=`.
pub fn parse(line: &str) -> Option<Vec<(&str, &str)>> {
    line.split(' ').filter(|w| !w.is_empty()).map(|w| w.split_once('=')).collect()
}

/// The answer to one request of PE `pe` (None: no answer), or (command, why) for an error answer.
fn respond(shared: &Shared, pe: usize, line: &str, wake: fn()) -> Result<Option<String>, (&'static str, String)> {
    let words = parse(line).ok_or(("request", format!("a word without '=' in {line:?}")))?;
    let get = |k: &str| words.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
    let cmd = get("cmd").ok_or(("request", format!("no cmd= in {line:?}")))?;
    let mark = |f: fn(&mut Conn)| f(&mut shared.conns.lock().unwrap_or_else(|e| e.into_inner())[pe]);
    mark(|c| c.started = true);
    let kvsname = |name: &'static str| -> Result<(), (&'static str, String)> {
        match get("kvsname") {
            Some(KVSNAME) => Ok(()),
            other => Err((name, format!("key-value space {other:?}, this job's is {KVSNAME}"))),
        }
    };
    let np = shared.np;
    Ok(Some(match cmd {
        "init" => {
            let ok = get("pmi_version") == Some("1");
            format!("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc={}", if ok { 0 } else { -1 })
        }
        "get_maxes" => format!("cmd=maxes kvsname_max={KVSNAME_MAX} keylen_max={KEYLEN_MAX} vallen_max={VALLEN_MAX} rc=0"),
        "get_appnum" => "cmd=appnum appnum=0 rc=0".into(),
        "get_my_kvsname" => format!("cmd=my_kvsname kvsname={KVSNAME} rc=0"),
        "get_universe_size" => format!("cmd=universe_size size={np} rc=0"),
        "put" => {
            kvsname("put")?;
            let (Some(key), Some(value)) = (get("key"), get("value")) else {
                return Err(("put", "a put without key= or value=".into()));
            };
            if key.len() > KEYLEN_MAX || value.len() > VALLEN_MAX {
                return Err(("put", format!("key of {} or value of {} bytes (at most {KEYLEN_MAX} and {VALLEN_MAX})", key.len(), value.len())));
            }
            let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            let (max_keys, max_bytes) = (KVS_KEYS_PER_PE.saturating_mul(np), KVS_BYTES_PER_PE.saturating_mul(np));
            let old = s.kvs.get(key).map(|v| key.len() + v.len());
            let keys = s.kvs.len() + usize::from(old.is_none());
            let bytes = s.kvs_bytes - old.unwrap_or(0) + key.len() + value.len();
            if keys > max_keys || bytes > max_bytes {
                return Err((
                    "put",
                    format!(
                        "the key-value space is full: it holds at most {max_keys} keys and {max_bytes} bytes of keys and values \
                         ({KVS_KEYS_PER_PE} keys and {KVS_BYTES_PER_PE} bytes per PE of the job); it has {} keys and {} bytes",
                        s.kvs.len(),
                        s.kvs_bytes
                    ),
                ));
            }
            s.kvs_bytes = bytes;
            s.kvs.insert(key.to_string(), value.to_string());
            "cmd=put_result rc=0".into()
        }
        "get" => {
            kvsname("get")?;
            let key = get("key").ok_or(("get", "a get without key=".to_string()))?;
            match shared.state.lock().unwrap_or_else(|e| e.into_inner()).kvs.get(key) {
                Some(v) => format!("cmd=get_result rc=0 value={v}"),
                // Not an error of the wire: the client asks before anyone put it (its own bug).
                None => format!("cmd=get_result rc=-1 msg=key_{key}_not_found"),
            }
        }
        "barrier_in" => {
            let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            let generation = s.generation;
            s.arrived += 1;
            if s.arrived == np {
                s.arrived = 0;
                s.generation += 1;
                shared.barrier.notify_all();
            } else {
                while s.generation == generation {
                    s = shared.barrier.wait(s).unwrap_or_else(|e| e.into_inner());
                }
            }
            "cmd=barrier_out".into()
        }
        "finalize" => {
            mark(|c| c.done = true);
            "cmd=finalize_ack".into()
        }
        "abort" => {
            mark(|c| c.done = true);
            let code = get("exitcode").and_then(|c| c.parse::<i32>().ok()).unwrap_or(1);
            let mut a = ABORT.lock().unwrap_or_else(|e| e.into_inner());
            if a.is_none() {
                *a = Some((pe, code));
            }
            drop(a);
            wake();
            return Ok(None);
        }
        other => {
            let name: &'static str = match other {
                "initack" | "spawn" | "publish_name" | "unpublish_name" | "lookup_name" => "unsupported",
                _ => "unknown",
            };
            return Err((name, format!("the command {other:?} is not served by rshmrun --pmi")));
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn ask(s: &mut UnixStream, req: &str) -> String {
        s.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        let mut b = [0u8; 1];
        while s.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
            out.push(b[0]);
        }
        String::from_utf8(out).unwrap()
    }

    /// Two PEs through the whole exchange, on real socket pairs: puts, a barrier, gets of each other's
    /// values, an unknown key, a put into another key-value space, a line too long, finalize.
    #[test]
    fn two_pes_exchange_through_the_server() {
        fn nothing() {}
        let mut server = Server::start(2, nothing).unwrap();
        let mut ends: Vec<UnixStream> = (0..2).map(|pe| UnixStream::from(server.child_ends[pe].take().unwrap())).collect();
        server.started(0);
        let pe1 = std::thread::spawn({
            let mut s = ends.pop().unwrap();
            move || {
                assert_eq!(ask(&mut s, "cmd=init pmi_version=1 pmi_subversion=1\n"), "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
                assert_eq!(ask(&mut s, &format!("cmd=put kvsname={KVSNAME} key=k1 value=one\n")), "cmd=put_result rc=0");
                assert_eq!(ask(&mut s, "cmd=barrier_in\n"), "cmd=barrier_out");
                assert_eq!(ask(&mut s, &format!("cmd=get kvsname={KVSNAME} key=k0\n")), "cmd=get_result rc=0 value=zero");
                assert_eq!(ask(&mut s, "cmd=finalize\n"), "cmd=finalize_ack");
            }
        });
        let mut s = ends.pop().unwrap();
        assert_eq!(ask(&mut s, "cmd=init pmi_version=2 pmi_subversion=0\n"), "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1");
        assert_eq!(ask(&mut s, "cmd=get_maxes\n"), format!("cmd=maxes kvsname_max={KVSNAME_MAX} keylen_max={KEYLEN_MAX} vallen_max={VALLEN_MAX} rc=0"));
        assert_eq!(ask(&mut s, "cmd=get_universe_size\n"), "cmd=universe_size size=2 rc=0");
        assert_eq!(ask(&mut s, "cmd=get_my_kvsname\n"), format!("cmd=my_kvsname kvsname={KVSNAME} rc=0"));
        assert_eq!(ask(&mut s, &format!("cmd=put kvsname={KVSNAME} key=k0 value=zero\n")), "cmd=put_result rc=0");
        assert!(ask(&mut s, "cmd=put kvsname=other key=k value=v\n").starts_with("cmd=put_result rc=-1 msg="));
        assert_eq!(ask(&mut s, "cmd=barrier_in\n"), "cmd=barrier_out");
        assert_eq!(ask(&mut s, &format!("cmd=get kvsname={KVSNAME} key=k1\n")), "cmd=get_result rc=0 value=one");
        assert_eq!(ask(&mut s, &format!("cmd=get kvsname={KVSNAME} key=nope\n")), "cmd=get_result rc=-1 msg=key_nope_not_found");
        assert!(ask(&mut s, &format!("cmd=put kvsname={KVSNAME} key=k value={}\n", "x".repeat(VALLEN_MAX + 1))).starts_with("cmd=put_result rc=-1"));
        assert!(ask(&mut s, &format!("cmd=put {}\n", "y".repeat(MAX_LINE))).starts_with("cmd=request_result rc=-1"));
        assert!(ask(&mut s, "cmd=spawn\n").starts_with("cmd=unsupported_result rc=-1"));
        assert!(ask(&mut s, "garbage\n").starts_with("cmd=request_result rc=-1"));
        assert_eq!(ask(&mut s, "cmd=finalize\n"), "cmd=finalize_ack");
        pe1.join().unwrap();
    }

    #[test]
    fn lines_split_into_words() {
        assert_eq!(parse("cmd=put kvsname=a key=b value=c=d"), Some(vec![("cmd", "put"), ("kvsname", "a"), ("key", "b"), ("value", "c=d")]));
        assert_eq!(parse("cmd=barrier_in  "), Some(vec![("cmd", "barrier_in")]));
        assert_eq!(parse("cmd=x word"), None);
    }
}
