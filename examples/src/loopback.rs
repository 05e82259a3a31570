//! The medium's bound for the remote engine's figures: TCP over loopback (or any address), measured by
//! a compiled program in the same call as the engine (`bench/`, the GPU scripts), so that a remote
//! figure is compared with what the kernel's TCP itself gives on that machine.
//!
//!   rshmem-loopback [--streams 1,4,8,16] [--bytes 256m] [--rtt-rounds 20000] [--io sys,uring,uring-sqpoll]
//!
//! Prints one line per figure:
//! - `loopback_bw streams=N GBps=X cpu_s_per_GB=C`: N connections, each with a sending and a receiving
//!   thread, `--bytes` in all split over them, in writes of 1 MiB (the engine's large frames), from the
//!   first byte sent to the last received; C is the process's CPU time (user + system, all its threads,
//!   io_uring's kernel threads included) over the run, per GB moved;
//! - `loopback_rtt mode=poll us=X` and `mode=block us=X`: the median round trip of 8 bytes between two
//!   threads over one connection, with the receiver spinning (as the engine's lane threads do on a
//!   machine of many cores) or sleeping in the kernel until the bytes come; ` rounds=K` follows where
//!   the figure's 10 s ran out before `--rtt-rounds` (a mode whose round trips take milliseconds).
//!
//! `--io` picks how the bytes move; each mode prints the lines above, those of a mode other than `sys`
//! with `io=MODE` after the figure's name (`loopback_bw io=uring streams=N ...`):
//! - `sys` (the default): read and write system calls, blocking, or non-blocking and retried for
//!   `mode=poll`;
//! - `uring`: the same transfers through io_uring, each thread with a ring of its own, its socket a
//!   registered file and its buffer a registered (fixed) buffer, moved by READ_FIXED and WRITE_FIXED;
//!   the bandwidth threads wait in io_uring_enter for each completion; `mode=poll` submits and then spins
//!   on the completion queue, `mode=block` waits in io_uring_enter. The ping submits its 8-byte write and
//!   the read of the answer in one call; the echo's write is linked to its read;
//! - `uring-sqpoll`: as `uring`, with a kernel thread polling the submission queues (SQPOLL), one
//!   thread for all the rings of a figure, so that submitting takes no system call while it is awake.
//!
//! Where io_uring (or SQPOLL) is not permitted, a mode prints one `loopback io=MODE unavailable: ...`
//! line saying why and the others go on.

use clap::Parser;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Io {
    /// read and write system calls.
    Sys,
    /// io_uring with registered buffers and files.
    Uring,
    /// io_uring with a kernel thread polling the submission queues.
    UringSqpoll,
}

impl Io {
    fn name(self) -> &'static str {
        match self {
            Io::Sys => "sys",
            Io::Uring => "uring",
            Io::UringSqpoll => "uring-sqpoll",
        }
    }

    /// What follows the figure's name on its line: nothing for `sys` (the lines as they were before
    /// io_uring), `io=MODE ` for the others.
    fn tag(self) -> String {
        match self {
            Io::Sys => String::new(),
            _ => format!("io={} ", self.name()),
        }
    }
}

#[derive(Parser)]
#[command(name = "rshmem-loopback", about = "TCP loopback bandwidth by stream count and 8-byte round trip, for comparison with the remote engine.")]
struct Cli {
    /// Stream counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,16", value_parser = parse_streams)]
    streams: Vec<usize>,
    /// Bytes per bandwidth run, all streams together (k, m, g suffixes).
    #[arg(long, default_value = "256m", value_parser = parse_bytes)]
    bytes: usize,
    /// Round trips per latency run.
    #[arg(long, default_value_t = 20000, value_parser = clap::value_parser!(u64).range(1..))]
    rtt_rounds: u64,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    addr: String,
    /// How the bytes move, comma-separated: sys (read/write system calls), uring (io_uring with
    /// registered buffers), uring-sqpoll (io_uring with a submission-polling kernel thread).
    #[arg(long, value_delimiter = ',', default_value = "sys")]
    io: Vec<Io>,
}

fn parse_bytes(v: &str) -> Result<usize, String> {
    let v = v.trim().to_ascii_lowercase();
    let (n, m) = match v.chars().last() {
        Some('k') => (&v[..v.len() - 1], 1 << 10),
        Some('m') => (&v[..v.len() - 1], 1 << 20),
        Some('g') => (&v[..v.len() - 1], 1 << 30),
        _ => (&v[..], 1),
    };
    let n = n.parse::<usize>().map_err(|e| format!("{v:?}: {e}"))?;
    match n.checked_mul(m) {
        Some(0) => Err(format!("{v:?}: a run needs at least one byte")),
        Some(b) => Ok(b),
        None => Err(format!("{v:?}: too large for this machine")),
    }
}

fn parse_streams(v: &str) -> Result<usize, String> {
    match v.trim().parse::<usize>() {
        Ok(0) => Err("a stream count is at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{v:?}: {e}")),
    }
}

fn pair(addr: &str) -> (TcpStream, TcpStream) {
    let l = TcpListener::bind((addr, 0)).expect("listen");
    let a = l.local_addr().expect("address");
    let c = TcpStream::connect(a).expect("connect");
    let (s, _) = l.accept().expect("accept");
    c.set_nodelay(true).expect("nodelay");
    s.set_nodelay(true).expect("nodelay");
    (c, s)
}

/// The most seconds one round-trip figure takes (its warm-up a tenth of that): a mode whose round
/// trips are slow (SQPOLL's thread without a core of its own) measures fewer of them.
const RTT_SECS: f64 = 10.0;

/// The bytes of one bandwidth write (and of the receive buffer).
const WRITE: usize = 1 << 20;

/// The process's CPU time so far, user and system, all its threads (the live ones and those that
/// ended), in seconds.
fn cpu_seconds() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one `struct rusage` through the pointer, which points at one that lives
    // for the call; RUSAGE_SELF is a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    // SAFETY: getrusage returned 0, so it filled the struct (and it was zeroed before).
    let u = unsafe { u.assume_init() };
    let t = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// One bandwidth run: the bytes moved, the seconds from the first byte sent to the last received, and
/// the process's CPU seconds over them.
struct Run {
    bytes: usize,
    secs: f64,
    cpu: f64,
}

impl Run {
    fn line(&self, io: Io, streams: usize) -> String {
        let gb = self.bytes as f64 / 1e9;
        format!("loopback_bw {}streams={streams} GBps={:.3} cpu_s_per_GB={:.3}", io.tag(), gb / self.secs, self.cpu / gb)
    }
}

fn bandwidth(addr: &str, io: Io, streams: usize, bytes: usize) -> Result<Run, String> {
    let per = (bytes / streams).max(WRITE);
    let conns: Vec<(TcpStream, TcpStream)> = (0..streams).map(|_| pair(addr)).collect();
    match io {
        Io::Sys => Ok(bandwidth_sys(conns, per)),
        Io::Uring | Io::UringSqpoll => uring::bandwidth(conns, per, io == Io::UringSqpoll),
    }
}

fn bandwidth_sys(conns: Vec<(TcpStream, TcpStream)>, per: usize) -> Run {
    let streams = conns.len();
    let cpu = cpu_seconds();
    let start = Instant::now();
    std::thread::scope(|s| {
        for (mut tx, mut rx) in conns {
            s.spawn(move || {
                let buf = vec![0x5au8; WRITE];
                let mut left = per;
                while left > 0 {
                    let n = left.min(WRITE);
                    tx.write_all(&buf[..n]).expect("send");
                    left -= n;
                }
            });
            s.spawn(move || {
                let mut buf = vec![0u8; WRITE];
                let mut left = per;
                while left > 0 {
                    let n = rx.read(&mut buf).expect("receive");
                    assert!(n > 0, "the sender closed early");
                    left -= n;
                }
            });
        }
    });
    Run { bytes: per * streams, secs: start.elapsed().as_secs_f64(), cpu: cpu_seconds() - cpu }
}

/// The round trips of one figure: `rounds` of them, or fewer where `secs` ran out first (the ping
/// side then shuts its socket down and the echo side ends at that end of stream).
fn rtt(addr: &str, io: Io, rounds: u64, secs: f64, poll: bool) -> Result<Vec<f64>, String> {
    let (a, b) = pair(addr);
    let until = Instant::now() + std::time::Duration::from_secs_f64(secs);
    Ok(match io {
        Io::Sys => rtt_sys(a, b, rounds, until, poll),
        Io::Uring | Io::UringSqpoll => uring::rtt(a, b, rounds, until, poll, io == Io::UringSqpoll)?,
    })
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn rtt_sys(mut a: TcpStream, mut b: TcpStream, rounds: u64, until: Instant, poll: bool) -> Vec<f64> {
    if poll {
        a.set_nonblocking(true).expect("nonblocking");
        b.set_nonblocking(true).expect("nonblocking");
    }
    /// Reads 8 bytes; false at the end of the stream before any.
    fn read8(s: &mut TcpStream, poll: bool) -> bool {
        let mut buf = [0u8; 8];
        let mut got = 0;
        while got < 8 {
            match s.read(&mut buf[got..]) {
                Ok(0) if got == 0 => return false,
                Ok(0) => panic!("closed in the middle of a message"),
                Ok(n) => got += n,
                Err(e) if poll && e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
                Err(e) => panic!("read: {e}"),
            }
        }
        true
    }
    let echo = std::thread::spawn(move || {
        while read8(&mut b, poll) {
            b.write_all(&[1u8; 8]).expect("echo");
        }
    });
    let mut times = Vec::with_capacity(rounds as usize);
    while (times.len() as u64) < rounds && (times.is_empty() || Instant::now() < until) {
        let t = Instant::now();
        a.write_all(&[2u8; 8]).expect("ping");
        assert!(read8(&mut a, poll), "the echo closed");
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    a.shutdown(std::net::Shutdown::Write).expect("shutdown");
    echo.join().expect("echo thread");
    times
}

/// The figures through io_uring (the `io-uring` crate).
mod uring {
    use super::{cpu_seconds, Run, WRITE};
    use io_uring::{opcode, squeue, types, IoUring};
    use memmap2::MmapMut;
    use std::io;
    use std::net::TcpStream;
    use std::os::fd::{AsRawFd, RawFd};
    use std::time::Instant;

    /// How long the SQPOLL thread spins without work before it sleeps (ms).
    const SQ_IDLE_MS: u32 = 1000;

    /// What went wrong in setting io_uring up, with the reason where the kernel refuses it.
    fn refused(what: &str, e: io::Error) -> String {
        let why = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                ": not permitted here (kernel.io_uring_disabled, a seccomp filter or a container policy)"
            }
            Some(libc::ENOSYS) => ": the kernel has no io_uring (or a seccomp filter hides it)",
            Some(libc::ENOMEM) => ": out of lockable memory (RLIMIT_MEMLOCK, `ulimit -l`)",
            _ => "",
        };
        format!("{what}: {e}{why}")
    }

    /// Rings for the threads of one figure; with `sqpoll`, the first ring's kernel thread polls the
    /// submission queues of all of them (IORING_SETUP_ATTACH_WQ).
    struct Setup {
        sqpoll: bool,
        first: Option<RawFd>,
    }

    impl Setup {
        fn new(sqpoll: bool) -> Self {
            Setup { sqpoll, first: None }
        }

        /// A ring of its own for `sock`, with a registered buffer of `len` bytes (filled with `fill`).
        fn ring(&mut self, sock: TcpStream, len: usize, fill: u8) -> Result<Ring, String> {
            let build = |coop: bool| {
                let mut b = IoUring::builder();
                if coop {
                    // Completions are not pushed on a thread spinning in user space (an interrupt that
                    // made a spinning round trip 33 µs instead of 14 on a 2-core VM); the kernel raises
                    // a flag that `complete` watches instead.
                    b.setup_coop_taskrun().setup_taskrun_flag();
                }
                if self.sqpoll {
                    b.setup_sqpoll(SQ_IDLE_MS);
                    if let Some(fd) = self.first {
                        b.setup_attach_wq(fd);
                    }
                }
                b.build(8)
            };
            let what = if self.sqpoll { "io_uring_setup with IORING_SETUP_SQPOLL" } else { "io_uring_setup" };
            // Kernels before 5.19 know neither flag: without them there.
            let ring = match build(true) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => build(false),
                r => r,
            }
            .map_err(|e| refused(what, e))?;
            if self.first.is_none() {
                self.first = Some(ring.as_raw_fd());
            }
            let mut probe = io_uring::Probe::new();
            ring.submitter().register_probe(&mut probe).map_err(|e| refused("IORING_REGISTER_PROBE", e))?;
            for (code, name) in [(opcode::ReadFixed::CODE, "IORING_OP_READ_FIXED"), (opcode::WriteFixed::CODE, "IORING_OP_WRITE_FIXED")] {
                if !probe.is_supported(code) {
                    return Err(format!("this kernel's io_uring has no {name}"));
                }
            }
            let mut buf = MmapMut::map_anon(len).map_err(|e| format!("mmap of {len} bytes: {e}"))?;
            buf.fill(fill);
            let iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: len };
            // SAFETY: the iovec names `buf`, a private anonymous mapping of `len` bytes that the Ring
            // owns and unmaps only after the ring is closed (field order); the kernel pins its pages
            // while they are registered, so a request still in flight when the ring goes writes into
            // pages no longer mapped in this process rather than into memory reused for something else.
            unsafe { ring.submitter().register_buffers(&[iov]) }.map_err(|e| refused("IORING_REGISTER_BUFFERS", e))?;
            ring.submitter().register_files(&[sock.as_raw_fd()]).map_err(|e| refused("IORING_REGISTER_FILES", e))?;
            let base = buf.as_mut_ptr();
            Ok(Ring { ring, sock, _buf: buf, base, len })
        }
    }

    /// One thread's ring: its socket as registered file 0, its buffer as registered buffer 0.
    pub(super) struct Ring {
        // Dropped first: the ring is closed before the buffer it reads into is unmapped.
        ring: IoUring,
        sock: TcpStream,
        _buf: MmapMut,
        base: *mut u8,
        len: usize,
    }

    // SAFETY: `base` points into `_buf`, which the Ring owns; nothing else holds the pointer, so moving
    // the Ring to another thread moves the only user of the mapping with it.
    unsafe impl Send for Ring {}

    /// user_data of the two kinds of request.
    const READ: u64 = 1;
    const WRITE_OP: u64 = 2;

    impl Ring {
        /// The entry for moving `len` bytes at `off` in the buffer: READ_FIXED or WRITE_FIXED.
        fn entry(&self, read: bool, off: usize, len: usize) -> squeue::Entry {
            assert!(off <= self.len && len <= self.len - off && len <= u32::MAX as usize, "{off}+{len} outside the {}-byte buffer", self.len);
            // SAFETY: off <= self.len (the assert), the mapping's length, so the pointer stays inside
            // the mapping or one past its end, which is what `add` asks.
            let p = unsafe { self.base.add(off) };
            let f = types::Fixed(0);
            // Socket reads and writes take offset 0 (the socket layer refuses any other).
            if read {
                opcode::ReadFixed::new(f, p, len as u32, 0).offset(0).build().user_data(READ)
            } else {
                opcode::WriteFixed::new(f, p, len as u32, 0).offset(0).build().user_data(WRITE_OP)
            }
        }

        fn push(&mut self, e: squeue::Entry) {
            // SAFETY: every entry comes from `entry`: registered file 0 (the socket, which the ring
            // holds a reference to while registered) and a range of registered buffer 0, which lives as
            // long as the ring (see `Setup::ring`); the kernel checks the range against the registration.
            unsafe { self.ring.submission().push(&e) }.expect("the submission queue is full");
        }

        /// Submits what was pushed and gathers `want` completions as (user_data, result), spinning on
        /// the completion queue (`spin`) or waiting in io_uring_enter.
        fn complete(&mut self, want: usize, spin: bool, out: &mut Vec<(u64, i32)>) {
            out.clear();
            let mut submitted = false;
            while out.len() < want {
                let r = if spin {
                    // Once submitted, io_uring_enter only where the kernel flags completions waiting
                    // to be run (IORING_SQ_TASKRUN); otherwise the queue is read without a system call.
                    if !submitted || self.ring.submission().taskrun() {
                        self.ring.submit()
                    } else {
                        Ok(0)
                    }
                } else {
                    self.ring.submit_and_wait(want - out.len())
                };
                match r {
                    Ok(_) => submitted = true,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) || e.raw_os_error() == Some(libc::EBUSY) => {}
                    Err(e) => panic!("io_uring_enter: {e}"),
                }
                let before = out.len();
                out.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
                if spin && out.len() == before {
                    std::hint::spin_loop();
                }
            }
        }

        /// One request for `len` bytes at `off`: the bytes it moved (a read returns what had come, at
        /// least one byte; a write may be short).
        fn one(&mut self, read: bool, off: usize, len: usize, spin: bool, out: &mut Vec<(u64, i32)>) -> usize {
            let e = self.entry(read, off, len);
            self.push(e);
            self.complete(1, spin, out);
            moved(read, out[0].1)
        }

        /// Moves the rest of `len` bytes at `off` of which `done` already went.
        fn finish(&mut self, read: bool, off: usize, len: usize, mut done: usize, spin: bool, out: &mut Vec<(u64, i32)>) {
            while done < len {
                done += self.one(read, off + done, len - done, spin, out);
            }
        }
    }

    /// The bytes a completed read or write moved; a failure or a closed peer ends the measurement.
    fn moved(read: bool, res: i32) -> usize {
        let what = if read { "receive" } else { "send" };
        match res {
            0 if read => panic!("the peer closed early"),
            r if r < 0 => panic!("{what}: {}", io::Error::from_raw_os_error(-r)),
            r => r as usize,
        }
    }

    /// Whether io_uring (with SQPOLL where asked) can be set up here; the reason where it cannot.
    pub(super) fn available(addr: &str, sqpoll: bool) -> Result<(), String> {
        let (a, _b) = super::pair(addr);
        Setup::new(sqpoll).ring(a, 4096, 0).map(drop)
    }

    pub(super) fn bandwidth(conns: Vec<(TcpStream, TcpStream)>, per: usize, sqpoll: bool) -> Result<Run, String> {
        let streams = conns.len();
        let mut setup = Setup::new(sqpoll);
        let mut rings = Vec::with_capacity(streams);
        for (tx, rx) in conns {
            rings.push((setup.ring(tx, WRITE, 0x5a)?, setup.ring(rx, WRITE, 0)?));
        }
        let cpu = cpu_seconds();
        let start = Instant::now();
        std::thread::scope(|s| {
            for (mut tx, mut rx) in rings {
                s.spawn(move || {
                    let mut out = Vec::with_capacity(2);
                    let mut left = per;
                    while left > 0 {
                        let n = left.min(WRITE);
                        tx.finish(false, 0, n, 0, false, &mut out);
                        left -= n;
                    }
                });
                s.spawn(move || {
                    let mut out = Vec::with_capacity(2);
                    let mut left = per;
                    while left > 0 {
                        let n = rx.one(true, 0, WRITE, false, &mut out);
                        left = left.saturating_sub(n);
                    }
                });
            }
        });
        Ok(Run { bytes: per * streams, secs: start.elapsed().as_secs_f64(), cpu: cpu_seconds() - cpu })
    }

    /// The round trips' times (µs). Each ring's buffer: bytes 0..8 are sent, 8..16 receive.
    pub(super) fn rtt(a: TcpStream, b: TcpStream, rounds: u64, until: Instant, poll: bool, sqpoll: bool) -> Result<Vec<f64>, String> {
        let mut setup = Setup::new(sqpoll);
        let mut ping = setup.ring(a, 16, 2)?;
        let mut echo = setup.ring(b, 16, 1)?;
        let spin = poll;
        let echo = std::thread::spawn(move || {
            let mut out = Vec::with_capacity(2);
            loop {
                // The read, then the answer linked to it: one submission for both.
                let r = echo.entry(true, 8, 8).flags(squeue::Flags::IO_LINK);
                let w = echo.entry(false, 0, 8);
                echo.push(r);
                echo.push(w);
                echo.complete(2, spin, &mut out);
                let (got, sent) = results(&out);
                if got == 0 {
                    // The ping's end of the stream (its write was cancelled with the read).
                    break;
                }
                // A short read breaks the link: the write comes back cancelled and goes again here.
                echo.finish(true, 8, 8, moved(true, got), spin, &mut out);
                let sent = if sent == -libc::ECANCELED { 0 } else { moved(false, sent) };
                echo.finish(false, 0, 8, sent, spin, &mut out);
            }
        });
        let mut out = Vec::with_capacity(2);
        let mut times = Vec::with_capacity(rounds as usize);
        while (times.len() as u64) < rounds && (times.is_empty() || Instant::now() < until) {
            let t = Instant::now();
            // The ping and the read of its answer in one submission.
            let w = ping.entry(false, 0, 8);
            let r = ping.entry(true, 8, 8);
            ping.push(w);
            ping.push(r);
            ping.complete(2, spin, &mut out);
            let (got, sent) = results(&out);
            ping.finish(false, 0, 8, moved(false, sent), spin, &mut out);
            ping.finish(true, 8, 8, moved(true, got), spin, &mut out);
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
        ping.sock.shutdown(std::net::Shutdown::Write).expect("shutdown");
        echo.join().expect("echo thread");
        Ok(times)
    }

    /// The results of a read and a write completed together: (read's, write's).
    fn results(out: &[(u64, i32)]) -> (i32, i32) {
        let find = |ud| out.iter().find(|c| c.0 == ud).map(|c| c.1).expect("a completion per request");
        (find(READ), find(WRITE_OP))
    }
}

fn main() {
    let cli = Cli::parse();
    // The modes that can run here; a refused one says why, once, and is left out.
    let mut modes = Vec::new();
    for &io in &cli.io {
        if modes.contains(&io) {
            continue;
        }
        let ok = match io {
            Io::Sys => Ok(()),
            Io::Uring | Io::UringSqpoll => uring::available(&cli.addr, io == Io::UringSqpoll),
        };
        match ok {
            Ok(()) => modes.push(io),
            Err(why) => println!("loopback io={} unavailable: {why}", io.name()),
        }
    }
    // The modes take turns at each figure, so that a change in the machine's load falls on all of them.
    for &n in &cli.streams {
        for &io in &modes {
            // A warm-up run, then the measured one.
            let r = bandwidth(&cli.addr, io, n, cli.bytes / 8).and_then(|_| bandwidth(&cli.addr, io, n, cli.bytes));
            match r {
                Ok(run) => println!("{}", run.line(io, n)),
                Err(why) => println!("loopback_bw {}streams={n} unavailable: {why}", io.tag()),
            }
        }
    }
    for (mode, poll) in [("poll", true), ("block", false)] {
        for &io in &modes {
            let r = rtt(&cli.addr, io, (cli.rtt_rounds / 10).max(1), RTT_SECS / 10.0, poll)
                .and_then(|_| rtt(&cli.addr, io, cli.rtt_rounds, RTT_SECS, poll));
            match r {
                Ok(times) => {
                    // The count where the time ran out first.
                    let cut = if (times.len() as u64) < cli.rtt_rounds { format!(" rounds={}", times.len()) } else { String::new() };
                    println!("loopback_rtt {}mode={mode} us={:.2}{cut}", io.tag(), median(times));
                }
                Err(why) => println!("loopback_rtt {}mode={mode} unavailable: {why}", io.tag()),
            }
        }
    }
}
