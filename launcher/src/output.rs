//! Forwarding of the PEs' output: one thread per pipe reads lines and writes each one, tagged
//! `[pe N] `, to rshmrun's stdout or stderr with a single write under one lock, so lines of different PEs
//! (and rshmrun's own messages) never mix inside a line.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

/// A line longer than this is forwarded in pieces of this size (each piece printed as its own line), so a
/// PE that writes megabytes without a newline cannot make rshmrun buffer without bound.
pub const MAX_LINE: usize = 1 << 20;

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

/// Prints one of rshmrun's own messages (`rshmrun: ...`) on stderr, as one line.
pub fn say(msg: impl AsRef<str>) {
    let mut line = format!("rshmrun: {}", msg.as_ref());
    if !line.ends_with('\n') {
        line.push('\n');
    }
    write_locked(Sink::Stderr, line.as_bytes());
}

/// State one reader thread shares with the main thread.
#[derive(Default)]
struct ReaderState {
    label: String,
    /// Set when the pipe reached end of file and every line was written.
    done: AtomicBool,
    /// Set while the thread holds data it has read but not yet written (so it is not waiting on the PE).
    busy: AtomicBool,
}

/// The reader threads of a job.
#[derive(Default)]
pub struct Readers {
    threads: Vec<(JoinHandle<()>, Arc<ReaderState>)>,
    /// Counts chunks read, over all pipes: tells the main thread whether output is still flowing.
    activity: Arc<AtomicU64>,
}

impl Readers {
    /// Starts a thread that forwards `pipe` to `sink`, each line prefixed by `prefix`. `label` names the
    /// pipe in messages ("PE 3 stdout").
    pub fn spawn(
        &mut self,
        pipe: impl Read + Send + 'static,
        prefix: String,
        label: String,
        sink: Sink,
    ) -> io::Result<()> {
        let state = Arc::new(ReaderState { label, ..ReaderState::default() });
        let activity = Arc::clone(&self.activity);
        let st = Arc::clone(&state);
        let handle = thread::Builder::new().name(format!("rshmrun {}", state.label)).spawn(move || {
            forward_lines(pipe, prefix.as_bytes(), &mut |line| write_locked(sink, line), &st.busy, &activity);
            st.done.store(true, Ordering::SeqCst);
        })?;
        self.threads.push((handle, state));
        Ok(())
    }

    /// True when every pipe reached end of file and all its lines were written.
    pub fn all_done(&self) -> bool {
        self.threads.iter().all(|(_, s)| s.done.load(Ordering::SeqCst))
    }

    /// True when some thread has output in hand that it has not written yet (e.g. our stdout is a pipe
    /// to a slow reader): waiting for it is waiting for our consumer, not for a PE.
    pub fn any_busy(&self) -> bool {
        self.threads.iter().any(|(_, s)| !s.done.load(Ordering::SeqCst) && s.busy.load(Ordering::SeqCst))
    }

    /// Labels of the pipes not yet at end of file.
    pub fn pending(&self) -> Vec<String> {
        self.threads.iter().filter(|(_, s)| !s.done.load(Ordering::SeqCst)).map(|(_, s)| s.label.clone()).collect()
    }

    /// A counter that changes whenever any pipe delivered data.
    pub fn activity(&self) -> u64 {
        self.activity.load(Ordering::SeqCst)
    }

    /// Joins the threads; call only when [`Readers::all_done`] is true (else it blocks until it is).
    pub fn join(self) {
        for (handle, _) in self.threads {
            let _ = handle.join();
        }
    }
}

/// Reads `pipe` to end of file and hands each line, prefixed and newline-terminated, to `emit`. A last line
/// without a newline gets one; a line longer than [`MAX_LINE`] is handed over in pieces.
fn forward_lines(pipe: impl Read, prefix: &[u8], emit: &mut dyn FnMut(&[u8]), busy: &AtomicBool, activity: &AtomicU64) {
    let mut reader = BufReader::with_capacity(64 * 1024, pipe);
    let mut line: Vec<u8> = Vec::with_capacity(prefix.len() + 256);
    line.extend_from_slice(prefix);
    let flush = |line: &mut Vec<u8>, emit: &mut dyn FnMut(&[u8])| {
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        emit(line);
        line.truncate(prefix.len());
    };
    loop {
        busy.store(false, Ordering::SeqCst);
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        busy.store(true, Ordering::SeqCst);
        activity.fetch_add(1, Ordering::SeqCst);
        if chunk.is_empty() {
            break;
        }
        let room = prefix.len() + MAX_LINE - line.len();
        let (take, complete) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) if i <= room => (i + 1, true),
            _ if chunk.len() >= room => (room, true),
            _ => (chunk.len(), false),
        };
        line.extend_from_slice(&chunk[..take]);
        reader.consume(take);
        if complete {
            flush(&mut line, emit);
        }
    }
    if line.len() > prefix.len() {
        flush(&mut line, emit);
    }
    busy.store(false, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(input: &[u8], prefix: &str) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        forward_lines(
            input,
            prefix.as_bytes(),
            &mut |l| out.push(l.to_vec()),
            &AtomicBool::new(false),
            &AtomicU64::new(0),
        );
        out
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
        let out = lines_of(&input, "> ");
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].len(), 2 + MAX_LINE + 1);
        assert_eq!(out[1], [b"> ".as_slice(), &[b'x'; 10], b"\n"].concat());
    }
}
