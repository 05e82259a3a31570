//! PMI-1 and PMI-2 clients on the launcher's socket `PMI_FD` (the wire protocols of MPICH's process
//! managers, which `rshmrun --pmi` and Slurm's pmi2 plugin also serve; no library is needed).
//!
//! PMI-1: lines of `key=value` words, one answer line per request (`launcher/src/pmi.rs` lists them).
//! PMI-2: after the same `init` line, commands of `key=value;` pairs, each framed by its length in six
//! ASCII characters: `fullinit`, `kvs-put`, `kvs-fence`, `kvs-get`, `finalize`.
//!
//! The client asks for PMI-1 first (every server named above serves it) and for PMI-2 when the server
//! refuses PMI-1. The socket stays open for the program (it is the launcher's, not ours); the read
//! timeout that bounds each answer is restored when the client finishes.

use crate::config::env;
use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Longest answer line or command read (PMI-1 servers: 1024 bytes; PMI-2: 1024 plus the header).
const MAX_ANSWER: usize = 64 << 10;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Version {
    One,
    Two,
}

pub(super) struct Client {
    /// The launcher's socket, borrowed: never closed here.
    sock: ManuallyDrop<UnixStream>,
    fd: i32,
    version: Version,
    /// PMI-1: this job's key-value space.
    kvsname: String,
    /// PMI-1: the longest value the server takes.
    vallen_max: Option<usize>,
    timeout: Duration,
    /// The socket's read timeout before this client set its own.
    old_timeout: Option<Duration>,
}

/// The words of a PMI-1 answer line as (key, value) pairs.
fn words(line: &str) -> Vec<(&str, &str)> {
    line.split(' ').filter_map(|w| w.split_once('=')).collect()
}

fn field<'a>(pairs: &[(&'a str, &'a str)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// Checks that `fd` is an open socket (the launcher's PMI socket, not some other descriptor).
fn check_socket(fd: i32) -> Result<()> {
    // SAFETY: `st` is a plain C struct that fstat fills; a bad descriptor makes fstat fail, nothing else.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st` only.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(Error::os(
            format!("rshmem bootstrap: PMI_FD={fd} is not an open descriptor (the launcher's PMI socket)"),
            std::io::Error::last_os_error(),
        ));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(Error::new(format!("rshmem bootstrap: PMI_FD={fd} is not a socket (the launcher's PMI socket)")));
    }
    Ok(())
}

impl Client {
    /// Starts PMI on `fd` as PE `pe` of `npes` (PMI-1, else PMI-2).
    pub(super) fn init(fd: i32, pe: usize, npes: usize, timeout: Duration) -> Result<Client> {
        check_socket(fd)?;
        // SAFETY: `fd` is an open socket (checked above) that the launcher gave this process for PMI;
        // ManuallyDrop keeps it open when the client is dropped.
        let sock = ManuallyDrop::new(unsafe { UnixStream::from_raw_fd(fd) });
        let old_timeout = sock.read_timeout().unwrap_or(None);
        let mut c = Client { sock, fd, version: Version::One, kvsname: String::new(), vallen_max: None, timeout, old_timeout };
        c.sock.set_read_timeout(Some(timeout)).map_err(|e| c.io("setting the read timeout", e))?;
        let a = c.ask_line("cmd=init pmi_version=1 pmi_subversion=1")?;
        if field(&words(&a), "rc") == Some("0") {
            c.start_pmi1()?;
        } else {
            let b = c.ask_line("cmd=init pmi_version=2 pmi_subversion=0")?;
            if field(&words(&b), "rc") != Some("0") {
                return Err(Error::new(format!(
                    "rshmem bootstrap: the PMI server on PMI_FD={fd} serves neither PMI-1 nor PMI-2 (it answered {a:?} and {b:?})"
                )));
            }
            c.version = Version::Two;
            let r = c.ask2(&format!("cmd=fullinit;pmirank={pe};threaded=FALSE;"), "fullinit-response")?;
            let f = |k: &str| r.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
            let (rank, size) = (f("rank"), f("size"));
            if rank.and_then(|r| r.parse::<usize>().ok()) != Some(pe) || size.and_then(|s| s.parse::<usize>().ok()) != Some(npes) {
                return Err(Error::new(format!(
                    "rshmem bootstrap: the PMI-2 server on PMI_FD={fd} makes this process rank {} of {}, but the launcher's variables PE {pe} of {npes}",
                    rank.unwrap_or("?"),
                    size.unwrap_or("?")
                )));
            }
        }
        Ok(c)
    }

    fn start_pmi1(&mut self) -> Result<()> {
        let m = self.ask_line("cmd=get_maxes")?;
        self.vallen_max = field(&words(&m), "vallen_max").and_then(|v| v.parse().ok());
        let k = self.ask_line("cmd=get_my_kvsname")?;
        let w = words(&k);
        match (field(&w, "rc"), field(&w, "kvsname")) {
            (Some("0"), Some(name)) => self.kvsname = name.to_string(),
            _ => return Err(self.refused("get_my_kvsname", &k)),
        }
        Ok(())
    }

    pub(super) fn version(&self) -> &'static str {
        match self.version {
            Version::One => "PMI-1",
            Version::Two => "PMI-2",
        }
    }

    fn io(&self, what: &str, e: std::io::Error) -> Error {
        let e = if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) {
            format!(
                "no answer within {} s ({}): a PE of the job did not reach this step (it may have exited or crashed; the launcher's output names it)",
                super::super::wire::secs(self.timeout),
                env::BOOTSTRAP_TIMEOUT
            )
        } else if e.kind() == std::io::ErrorKind::UnexpectedEof {
            "the launcher closed the PMI socket (it is ending the job?)".into()
        } else {
            e.to_string()
        };
        Error::new(format!("rshmem bootstrap: {} on PMI_FD={}: {what}: {e}", self.version(), self.fd))
    }

    fn refused(&self, what: &str, answer: &str) -> Error {
        Error::new(format!(
            "rshmem bootstrap: the {} server on PMI_FD={} refused {what}: {:?}",
            self.version(),
            self.fd,
            super::super::wire::truncate(answer, 300)
        ))
    }

    /// PMI-1: sends one line, reads the one-line answer.
    fn ask_line(&mut self, req: &str) -> Result<String> {
        let what = req.split(' ').next().unwrap_or(req).to_string();
        self.sock.write_all(format!("{req}\n").as_bytes()).map_err(|e| self.io(&what, e))?;
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        loop {
            match self.sock.read(&mut b) {
                Ok(0) => return Err(self.io(&what, std::io::ErrorKind::UnexpectedEof.into())),
                Ok(_) if b[0] == b'\n' => break,
                Ok(_) if line.len() < MAX_ANSWER => line.push(b[0]),
                Ok(_) => return Err(Error::new(format!("rshmem bootstrap: PMI_FD={}: an answer longer than {MAX_ANSWER} bytes", self.fd))),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io(&what, e)),
            }
        }
        Ok(String::from_utf8_lossy(&line).into_owned())
    }

    /// PMI-2: sends one command, reads the answer; checks that it is `expect` with rc=0.
    fn ask2(&mut self, cmd: &str, expect: &str) -> Result<Vec<(String, String)>> {
        let what = cmd.split(';').next().unwrap_or(cmd).to_string();
        let frame = format!("{:<6}{cmd}", cmd.len());
        self.sock.write_all(frame.as_bytes()).map_err(|e| self.io(&what, e))?;
        let mut len = [0u8; 6];
        self.sock.read_exact(&mut len).map_err(|e| self.io(&what, e))?;
        let n = std::str::from_utf8(&len).ok().and_then(|s| s.trim().parse::<usize>().ok()).filter(|&n| n <= MAX_ANSWER);
        let Some(n) = n else {
            return Err(Error::new(format!("rshmem bootstrap: PMI-2 on PMI_FD={}: a bad length field {len:?}", self.fd)));
        };
        let mut body = vec![0u8; n];
        self.sock.read_exact(&mut body).map_err(|e| self.io(&what, e))?;
        let text = String::from_utf8_lossy(&body).into_owned();
        let pairs: Vec<(String, String)> =
            text.split(';').filter_map(|p| p.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        if get("cmd") != Some(expect) || get("rc") != Some("0") {
            return Err(self.refused(&what, &text));
        }
        Ok(pairs)
    }

    pub(super) fn put(&mut self, key: &str, value: &str) -> Result<()> {
        match self.version {
            Version::One => {
                if let Some(max) = self.vallen_max.filter(|&m| value.len() > m) {
                    return Err(Error::new(format!(
                        "rshmem bootstrap: the PMI-1 server on PMI_FD={} takes values of at most {max} bytes; the bootstrap's is {}",
                        self.fd,
                        value.len()
                    )));
                }
                let a = self.ask_line(&format!("cmd=put kvsname={} key={key} value={value}", self.kvsname))?;
                let w = words(&a);
                if field(&w, "cmd") != Some("put_result") || field(&w, "rc") != Some("0") {
                    return Err(self.refused("put", &a));
                }
            }
            Version::Two => {
                self.ask2(&format!("cmd=kvs-put;key={key};value={value};"), "kvs-put-response")?;
            }
        }
        Ok(())
    }

    pub(super) fn fence(&mut self) -> Result<()> {
        match self.version {
            Version::One => {
                let a = self.ask_line("cmd=barrier_in")?;
                if field(&words(&a), "cmd") != Some("barrier_out") {
                    return Err(self.refused("barrier_in", &a));
                }
            }
            Version::Two => {
                self.ask2("cmd=kvs-fence;", "kvs-fence-response")?;
            }
        }
        Ok(())
    }

    pub(super) fn get(&mut self, pe: usize, key: &str) -> Result<String> {
        match self.version {
            Version::One => {
                let a = self.ask_line(&format!("cmd=get kvsname={} key={key}", self.kvsname))?;
                let w = words(&a);
                match (field(&w, "cmd"), field(&w, "rc"), field(&w, "value")) {
                    (Some("get_result"), Some("0"), Some(v)) => Ok(v.to_string()),
                    _ => Err(self.refused(&format!("get of PE {pe}'s {key}"), &a)),
                }
            }
            Version::Two => {
                let r = self.ask2(&format!("cmd=kvs-get;srcid={pe};key={key};"), "kvs-get-response")?;
                let get = |k: &str| r.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
                match (get("found").as_deref(), get("value")) {
                    (Some("TRUE"), Some(v)) => Ok(v),
                    _ => Err(Error::new(format!(
                        "rshmem bootstrap: the PMI-2 server on PMI_FD={} has no {key} from PE {pe}",
                        self.fd
                    ))),
                }
            }
        }
    }

    pub(super) fn finish(mut self) -> Result<()> {
        match self.version {
            Version::One => {
                let a = self.ask_line("cmd=finalize")?;
                if field(&words(&a), "cmd") != Some("finalize_ack") {
                    return Err(self.refused("finalize", &a));
                }
            }
            Version::Two => {
                self.ask2("cmd=finalize;", "finalize-response")?;
            }
        }
        let _ = self.sock.set_read_timeout(self.old_timeout);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Reads one PMI-2 command from `s` (6-character length, then the body).
    fn read2(s: &mut UnixStream) -> String {
        let mut len = [0u8; 6];
        s.read_exact(&mut len).unwrap();
        let mut b = vec![0u8; std::str::from_utf8(&len).unwrap().trim().parse().unwrap()];
        s.read_exact(&mut b).unwrap();
        String::from_utf8(b).unwrap()
    }

    fn write2(s: &mut UnixStream, cmd: &str) {
        s.write_all(format!("{:<6}{cmd}", cmd.len()).as_bytes()).unwrap();
    }

    fn read_line(s: &mut UnixStream) -> String {
        let mut out = Vec::new();
        let mut b = [0u8; 1];
        while s.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
            out.push(b[0]);
        }
        String::from_utf8(out).unwrap()
    }

    /// A server that refuses PMI-1 and serves PMI-2 (as a PMI-2-only process manager would): the
    /// client falls back to PMI-2 and speaks its framing. No PMI-2 process manager is installed on
    /// the test machines (the PMI-1 path runs for real under rshmrun --pmi); this pins the wire.
    #[test]
    fn a_pmi2_only_server_is_spoken_to_in_pmi2() {
        let (mut server, client) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            let mut seen = Vec::new();
            assert_eq!(read_line(&mut server), "cmd=init pmi_version=1 pmi_subversion=1");
            server.write_all(b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=-1\n").unwrap();
            assert_eq!(read_line(&mut server), "cmd=init pmi_version=2 pmi_subversion=0");
            server.write_all(b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n").unwrap();
            for answer in [
                "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=3;appnum=0;debugged=FALSE;pmiverbose=FALSE;",
                "cmd=kvs-put-response;rc=0;",
                "cmd=kvs-fence-response;rc=0;",
                "cmd=kvs-get-response;rc=0;found=TRUE;value=v0;",
                "cmd=kvs-get-response;rc=0;found=FALSE;",
                "cmd=finalize-response;rc=0;",
            ] {
                seen.push(read2(&mut server));
                write2(&mut server, answer);
            }
            seen
        });
        let mut c = Client::init(client.as_raw_fd(), 1, 3, Duration::from_secs(5)).unwrap();
        assert_eq!(c.version(), "PMI-2");
        c.put("k1", "v1").unwrap();
        c.fence().unwrap();
        assert_eq!(c.get(0, "k0").unwrap(), "v0");
        let e = c.get(2, "nope").unwrap_err().to_string();
        assert!(e.contains("has no nope from PE 2"), "{e}");
        c.finish().unwrap();
        assert_eq!(
            t.join().unwrap(),
            [
                "cmd=fullinit;pmirank=1;threaded=FALSE;",
                "cmd=kvs-put;key=k1;value=v1;",
                "cmd=kvs-fence;",
                "cmd=kvs-get;srcid=0;key=k0;",
                "cmd=kvs-get;srcid=2;key=nope;",
                "cmd=finalize;",
            ]
        );
        drop(client);
    }

    /// A server that does not answer: the client gives up after its timeout, saying which step and
    /// why; a PMI_FD that is no socket is refused naming it.
    #[test]
    fn silence_and_bad_descriptors_are_clear_errors() {
        let (_server, client) = UnixStream::pair().unwrap();
        let t = std::time::Instant::now();
        let e = Client::init(client.as_raw_fd(), 0, 2, Duration::from_millis(300)).err().unwrap().to_string();
        assert!(t.elapsed() < Duration::from_secs(3));
        assert!(e.contains("PMI-1 on PMI_FD=") && e.contains("cmd=init: no answer within 0.3 s (RSHMEM_BOOTSTRAP_TIMEOUT)"), "{e}");
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        let e = Client::init(f.as_raw_fd(), 0, 2, Duration::from_secs(1)).err().unwrap().to_string();
        assert!(e.contains(&format!("PMI_FD={} is not a socket", f.as_raw_fd())), "{e}");
        let e = Client::init(987_654, 0, 2, Duration::from_secs(1)).err().unwrap().to_string();
        assert!(e.contains("PMI_FD=987654 is not an open descriptor"), "{e}");
    }
}
