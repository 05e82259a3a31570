//! Forwarding of the PEs' output: one thread, whatever the number of PEs, waits on every PE's stdout and
//! stderr pipe with epoll(7), cuts what arrives into lines and writes each line, tagged `[pe N] `, to
//! rshmrun's stdout or stderr. Lines are written whole, under one lock shared with rshmrun's own messages,
//! so lines of different PEs (and rshmrun's messages) never mix inside a line.
//!
//! The thread holds one read buffer for all pipes; per pipe it keeps only the unfinished last line. A
//! slow consumer of rshmrun's output blocks this thread (and, once their pipes fill, the PEs), never the
//! main thread, which keeps reacting to signals and failures.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// A line longer than this is forwarded in pieces of this size (each piece printed as its own line), so a
/// PE that writes megabytes without a newline cannot make rshmrun buffer without bound.
pub const MAX_LINE: usize = 1 << 20;

/// Bytes read from one pipe at a time; also how much output is gathered before it is written.
const CHUNK: usize = 64 * 1024;
/// Events taken from epoll per wait.
const EVENTS: usize = 256;
/// epoll token of the pipe that tells the thread to stop; pipes of PEs get tokens from 0 up.
const STOP: u64 = u64::MAX;

/// How long [`say`] waits for the output lock.
const SAY_LOCK_WAIT: Duration = Duration::from_millis(200);

/// One lock for both of rshmrun's output streams: with `2>&1` they are the same file.
static OUTPUT_LOCK: Mutex<()> = Mutex::new(());

/// Where a line goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    Stdout,
    Stderr,
}

/// Writes `bytes` (one or more whole lines) to `sink` under the output lock. Write errors (a closed
/// stdout, e.g. `rshmrun ... | head`) are ignored: the PEs' pipes must keep being drained regardless.
fn write_locked(sink: Sink, bytes: &[u8]) {
    let _guard = OUTPUT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    match sink {
        Sink::Stdout => {
            let mut out = io::stdout().lock();
            let _ = out.write_all(bytes);
            let _ = out.flush();
        }
        Sink::Stderr => {
            let _ = io::stderr().lock().write_all(bytes);
        }
    }
}

/// Prints one of rshmrun's own messages (`rshmrun: ...`) on stderr, as one line. The main thread calls
/// this while it handles signals and failures, so it waits at most [`SAY_LOCK_WAIT`] for the output lock:
/// the forwarding thread may hold it for as long as a consumer of rshmrun's stdout does not read (e.g.
/// `rshmrun ... | less`, paused), and a message must not keep rshmrun from ending the job. Past that the
/// message is written without the lock (it may then land inside a PE's line if stdout and stderr are the
/// same file).
pub fn say(msg: impl AsRef<str>) {
    let mut line = format!("rshmrun: {}", msg.as_ref());
    if !line.ends_with('\n') {
        line.push('\n');
    }
    let deadline = Instant::now() + SAY_LOCK_WAIT;
    let _guard = loop {
        match OUTPUT_LOCK.try_lock() {
            Ok(g) => break Some(g),
            Err(TryLockError::Poisoned(e)) => break Some(e.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() >= deadline => break None,
            Err(TryLockError::WouldBlock) => thread::sleep(Duration::from_millis(1)),
        }
    };
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

/// Cuts a byte stream into lines, each handed over with the prefix in front and a newline at the end. A
/// last line without a newline gets one (in [`LineBuf::finish`]); a line longer than [`MAX_LINE`] is
/// handed over in pieces of [`MAX_LINE`] bytes. Bytes pass through unchanged (no UTF-8 check).
struct LineBuf {
    /// The prefix, then the unfinished line.
    line: Vec<u8>,
    prefix_len: usize,
}

impl LineBuf {
    fn new(prefix: &[u8]) -> LineBuf {
        LineBuf { line: prefix.to_vec(), prefix_len: prefix.len() }
    }

    /// Takes the next bytes of the stream and hands every line they complete to `emit`.
    fn feed(&mut self, mut data: &[u8], emit: &mut dyn FnMut(&[u8])) {
        while !data.is_empty() {
            // At least 1: a line that reaches MAX_LINE bytes is handed over at once.
            let room = self.prefix_len + MAX_LINE - self.line.len();
            let (take, complete) = match data.iter().position(|&b| b == b'\n') {
                Some(i) if i <= room => (i + 1, true),
                _ if data.len() >= room => (room, true),
                _ => (data.len(), false),
            };
            self.line.extend_from_slice(&data[..take]);
            data = &data[take..];
            if complete {
                self.emit_line(emit);
            }
        }
    }

    /// End of the stream: hands over the unfinished last line, if any.
    fn finish(&mut self, emit: &mut dyn FnMut(&[u8])) {
        if self.line.len() > self.prefix_len {
            self.emit_line(emit);
        }
    }

    fn emit_line(&mut self, emit: &mut dyn FnMut(&[u8])) {
        if self.line.last() != Some(&b'\n') {
            self.line.push(b'\n');
        }
        emit(&self.line);
        self.line.truncate(self.prefix_len);
        // A long line may have grown the buffer to a megabyte; with thousands of pipes, give it back.
        if self.line.capacity() > 4 * CHUNK {
            self.line.shrink_to(self.prefix_len + 256);
        }
    }
}

/// Whole lines waiting to be written, all for one sink.
struct Batch {
    sink: Sink,
    bytes: Vec<u8>,
}

impl Batch {
    fn push(&mut self, sink: Sink, line: &[u8]) {
        if sink != self.sink || self.bytes.len() + line.len() > CHUNK {
            self.flush();
            self.sink = sink;
        }
        self.bytes.extend_from_slice(line);
    }

    fn flush(&mut self) {
        if !self.bytes.is_empty() {
            write_locked(self.sink, &self.bytes);
            self.bytes.clear();
            if self.bytes.capacity() > 4 * CHUNK {
                self.bytes.shrink_to(CHUNK);
            }
        }
    }
}

/// One PE pipe, owned by the forwarding thread.
struct Pipe {
    fd: OwnedFd,
    lines: LineBuf,
    sink: Sink,
}

/// What the forwarding thread shares with the main thread.
#[derive(Default)]
struct Shared {
    /// Labels ("PE 3 stdout") of the pipes added and not yet at end of file with all their lines written.
    open: Mutex<BTreeMap<u64, String>>,
    /// Counts reads, over all pipes: tells the main thread whether output is still flowing.
    activity: AtomicU64,
    /// Set while the thread holds output it has read but not yet written (so it is not waiting on a PE).
    busy: AtomicBool,
}

impl Shared {
    fn open(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, String>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The output forwarding of a job: one thread and one epoll instance for all pipes.
pub struct Forwarder {
    epoll: Arc<OwnedFd>,
    pipes: Sender<(u64, Pipe)>,
    /// Write end of the stop pipe: closing it wakes the thread, which then ends.
    stop: Option<OwnedFd>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    next_token: u64,
}

impl Forwarder {
    /// Creates the epoll instance and starts the forwarding thread.
    pub fn start() -> io::Result<Forwarder> {
        // SAFETY: epoll_create1 takes a flag and no pointers.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let epoll = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let (stop_r, stop_w) = pipe()?;
        epoll_add(&epoll, stop_r.as_raw_fd(), STOP)?;
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let (ep, sh) = (Arc::clone(&epoll), Arc::clone(&shared));
        let thread = thread::Builder::new().name("rshmrun output".into()).spawn(move || {
            let _stop_r = stop_r; // kept open (and registered) for as long as the thread runs
            forward(&ep, &rx, &sh);
        })?;
        Ok(Forwarder { epoll, pipes: tx, stop: Some(stop_w), shared, thread: Some(thread), next_token: 0 })
    }

    /// Forwards `fd` (the read end of a PE's pipe) to `sink`, each line prefixed by `prefix`. `label` names
    /// the pipe in messages ("PE 3 stdout").
    pub fn add(&mut self, fd: OwnedFd, prefix: &str, label: String, sink: Sink) -> io::Result<()> {
        set_nonblocking(fd.as_raw_fd())?;
        let token = self.next_token;
        self.next_token += 1;
        epoll_add(&self.epoll, fd.as_raw_fd(), token)?;
        self.shared.open().insert(token, label);
        let pipe = Pipe { fd, lines: LineBuf::new(prefix.as_bytes()), sink };
        // The thread may see the first event before this message; it then looks again at the next wait
        // (epoll is level-triggered).
        self.pipes.send((token, pipe)).map_err(|_| io::Error::other("the output thread has ended"))
    }

    /// True when every pipe reached end of file and all its lines were written.
    pub fn all_done(&self) -> bool {
        self.shared.open().is_empty()
    }

    /// True when the thread has output in hand that it has not written yet (e.g. our stdout is a pipe to
    /// a slow reader): waiting for it is waiting for our consumer, not for a PE.
    pub fn busy(&self) -> bool {
        self.shared.busy.load(Ordering::SeqCst)
    }

    /// How many pipes were added and are not yet at end of file with all their lines written (their
    /// descriptors may still be open).
    pub fn open_pipes(&self) -> usize {
        self.shared.open().len()
    }

    /// Labels of the pipes not yet at end of file.
    pub fn pending(&self) -> Vec<String> {
        self.shared.open().values().cloned().collect()
    }

    /// A counter that changes whenever any pipe delivered data.
    pub fn activity(&self) -> u64 {
        self.shared.activity.load(Ordering::SeqCst)
    }

    /// Stops the thread and waits for it; call only when [`Forwarder::all_done`] is true (else the thread
    /// may be blocked writing to a consumer that does not read, and this waits for that).
    pub fn join(mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The forwarding thread: waits for readable pipes, forwards what they hold, until the stop pipe closes.
fn forward(epoll: &OwnedFd, new_pipes: &Receiver<(u64, Pipe)>, shared: &Shared) {
    let mut pipes: HashMap<u64, Pipe> = HashMap::new();
    let mut buf = vec![0u8; CHUNK];
    let mut batch = Batch { sink: Sink::Stdout, bytes: Vec::with_capacity(CHUNK) };
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
    loop {
        // SAFETY: `events` has room for EVENTS entries, which the kernel fills; the epoll descriptor is
        // open for as long as `epoll` is borrowed.
        let n = unsafe { libc::epoll_wait(epoll.as_raw_fd(), events.as_mut_ptr(), EVENTS as libc::c_int, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            say(format!("waiting for the PEs' output failed: {e}; no more output is forwarded"));
            return;
        }
        pipes.extend(new_pipes.try_iter());
        let mut stop = false;
        for ev in &events[..n as usize] {
            let token = ev.u64;
            if token == STOP {
                stop = true;
                continue;
            }
            let Some(pipe) = pipes.get_mut(&token) else { continue };
            // SAFETY: `buf` is a live buffer of `buf.len()` bytes; `pipe.fd` is open (owned by `pipe`).
            let got = unsafe { libc::read(pipe.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if got < 0 {
                let e = io::Error::last_os_error();
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) {
                    continue;
                }
            }
            shared.activity.fetch_add(1, Ordering::SeqCst);
            shared.busy.store(true, Ordering::SeqCst);
            let sink = pipe.sink;
            if got > 0 {
                pipe.lines.feed(&buf[..got as usize], &mut |line| batch.push(sink, line));
                continue;
            }
            // End of file (or an error that ends the pipe just as well): the last line, then close.
            pipe.lines.finish(&mut |line| batch.push(sink, line));
            batch.flush();
            if let Some(pipe) = pipes.remove(&token) {
                let (ep, fd) = (epoll.as_raw_fd(), pipe.fd.as_raw_fd());
                // SAFETY: removes a descriptor this thread registered; no pointer is passed for DEL.
                unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
            }
            shared.open().remove(&token);
        }
        batch.flush();
        shared.busy.store(false, Ordering::SeqCst);
        if stop {
            return;
        }
    }
}

/// A pipe (read end, write end), both close-on-exec.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn epoll_add(epoll: &OwnedFd, fd: RawFd, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
    // SAFETY: `ev` is a valid epoll_event that the kernel only reads; both descriptors are open.
    if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets O_NONBLOCK on our read end of a PE pipe (the PE's write end is another open file and stays
/// blocking).
fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL take and return integers; `fd` is an open descriptor we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `piece` bytes and returns the lines handed over.
    fn lines_in_pieces(input: &[u8], prefix: &str, piece: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut lb = LineBuf::new(prefix.as_bytes());
        for part in input.chunks(piece.max(1)) {
            lb.feed(part, &mut |l| out.push(l.to_vec()));
        }
        lb.finish(&mut |l| out.push(l.to_vec()));
        out
    }

    fn lines_of(input: &[u8], prefix: &str) -> Vec<Vec<u8>> {
        let whole = lines_in_pieces(input, prefix, input.len());
        for piece in [1, 3, 4096] {
            assert_eq!(lines_in_pieces(input, prefix, piece), whole, "fed in pieces of {piece}");
        }
        whole
    }

    #[test]
    fn tags_every_line_and_terminates_the_last() {
        let out = lines_of(b"a\n\nbc\nlast", "[pe 3] ");
        let want: Vec<&[u8]> = vec![b"[pe 3] a\n", b"[pe 3] \n", b"[pe 3] bc\n", b"[pe 3] last\n"];
        assert_eq!(out, want);
    }

    #[test]
    fn no_prefix_and_empty_input() {
        assert_eq!(lines_of(b"x\ny\n", ""), vec![b"x\n".to_vec(), b"y\n".to_vec()]);
        assert!(lines_of(b"", "[pe 0] ").is_empty());
    }

    #[test]
    fn non_utf8_passes_through() {
        assert_eq!(lines_of(b"\xff\xfe\n", "p "), vec![b"p \xff\xfe\n".to_vec()]);
    }

    #[test]
    fn long_lines_are_split() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.push(b'\n');
        let out = lines_in_pieces(&input, "> ", input.len());
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].len(), 2 + MAX_LINE + 1);
        assert_eq!(out[1], [b"> ".as_slice(), &[b'x'; 10], b"\n"].concat());
        assert_eq!(lines_in_pieces(&input, "> ", 65536), out);
        // Exactly MAX_LINE bytes and a newline stay one line.
        let mut input = vec![b'y'; MAX_LINE];
        input.push(b'\n');
        assert_eq!(lines_in_pieces(&input, "", 100_000).len(), 1);
    }
}
