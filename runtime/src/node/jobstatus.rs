//! Job status board: one shared-memory page per job that rshmrun creates and every PE writes into, so that
//! when a job stalls the launcher (on `--timeout`) and the PEs themselves can say which PE everyone waits
//! for and what that PE last entered.
//!
//! rshmrun creates it with [`JobStatus::create`] and hands the descriptor to each PE in
//! `RSHMEM_STATUS_FD` (inherited, like the bootstrap listener). A PE opens it with
//! [`JobStatus::from_fd`] during init and records each host collective it enters and leaves
//! ([`JobStatus::enter`], [`JobStatus::leave`]). Outside rshmrun there is no board and these do nothing.
//!
//! Layout (a memfd): a 64-byte header (magic, PE count, record size), then one 128-byte record per PE.
//! Each PE writes only its own record; anyone may read any record. A record is a seqlock: its version
//! is odd while the PE rewrites it, and a reader retries until it reads the same even version before
//! and after the fields (see `Slot`).
//!
//! Every PE can write anywhere in the board (a stray pointer of the program can too), so the launcher
//! trusts nothing it reads there: the header must be as it made it, a global-exit request must name a
//! PE of the job and match the check word that PE wrote in its own record, and a record must hold a
//! state a PE can write (a flag 0 or 1, a process id, a printable name). Anything else makes the board
//! *corrupt*: the launcher says so instead of acting on it or quoting it.

use crate::bootstrap::pe_list;
use crate::error::{Error, Result};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What one PE last recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeStatus {
    /// The PE the record belongs to.
    pub pe: usize,
    /// Host collectives this PE has entered so far (0: none yet).
    pub seq: u64,
    /// Name of the last host collective it entered ("" before any).
    pub call: String,
    /// True while it is inside that collective (entered, not yet left).
    pub inside: bool,
    /// Process id that wrote the record (0: the PE has not initialized).
    pub pid: u32,
}

const MAGIC: u64 = u64::from_le_bytes(*b"RSHMJSB2");
const HEADER: usize = 64;
const NAME_WORDS: usize = 8;
/// The call name is kept to this many bytes (names are short: "rshmem_barrier_all").
const NAME_BYTES: usize = NAME_WORDS * 8;

#[repr(C)]
struct Header {
    magic: AtomicU64,
    npes: AtomicU64,
    record: AtomicU64,
    /// A PE's `nvshmem_global_exit` (`JobStatus::request_exit`): EXIT_SET | pe << 32 | status (u32);
    /// 0 while none asked. rshmrun polls it and ends the job with that status.
    exit: AtomicU64,
}
const EXIT_SET: u64 = 1 << 63;

/// One PE's record. `ver` is the seqlock version: odd while the owner rewrites the other fields.
/// `exit_check` is written once, outside the seqlock, just before the PE's global-exit request
/// ([`exit_check`] of the request's word): a request the PE did not make has no matching check.
#[repr(C)]
struct Slot {
    ver: AtomicU64,
    seq: AtomicU64,
    inside: AtomicU64,
    pid: AtomicU64,
    name: [AtomicU64; NAME_WORDS],
    exit_check: AtomicU64,
    _pad: [u64; 3],
}
const RECORD: usize = std::mem::size_of::<Slot>();
const _: () = assert!(RECORD == 128 && std::mem::size_of::<Header>() <= HEADER);

/// The largest process id Linux gives (PID_MAX_LIMIT on 64-bit systems).
const PID_MAX: u64 = 1 << 22;
/// More host collectives than any PE enters (one per nanosecond for a day): a larger count is garbage.
const SEQ_MAX: u64 = 1 << 47;

/// The check word of global-exit request `v` (never 0, and unlike any value a PE writes elsewhere).
fn exit_check(v: u64) -> u64 {
    (v.rotate_left(23) ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xff51_afd7_ed55_8ccd) | 1
}

/// The exit status a process shows for exit code `code` (what `exit(code)` gives the parent is its low 8
/// bits), except that a nonzero code whose low 8 bits are 0 (256, -256, 512, ...) gives 1: an
/// abort or global exit with a nonzero code must never read as success.
pub fn exit_status_of(code: i32) -> i32 {
    match code & 0xff {
        0 if code != 0 => 1,
        low => low,
    }
}

/// What a corrupt board looked like, for messages ("the job status board is corrupt (...)").
pub type Corrupt = String;

/// Bytes of a board for `npes` PEs.
fn board_bytes(npes: usize) -> Option<usize> {
    npes.checked_mul(RECORD)?.checked_add(HEADER)
}

/// Packs a call name into words (truncated, zero-padded).
pub(crate) fn pack_name(name: &str) -> [u64; NAME_WORDS] {
    let mut b = [0u8; NAME_BYTES];
    let n = name.len().min(NAME_BYTES);
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    let mut w = [0u64; NAME_WORDS];
    for (i, c) in b.chunks_exact(8).enumerate() {
        let mut x = [0u8; 8];
        x.copy_from_slice(c);
        w[i] = u64::from_le_bytes(x);
    }
    w
}
/// The name packed by [`pack_name`] (whatever bytes a peer left there: never panics).
pub(crate) fn unpack_name(w: &[u64]) -> String {
    let b: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).take_while(|&c| c != 0).collect();
    String::from_utf8_lossy(&b).into_owned()
}

/// A shared mapping of the whole board; unmapped on drop.
/// The board's shared mapping (memmap2's raw mapping: the board is read and written only through
/// atomics, never as a Rust slice).
struct Map {
    raw: memmap2::MmapRaw,
}

impl Map {
    fn new(fd: BorrowedFd, len: usize) -> std::io::Result<Map> {
        // A shared mapping of `len` bytes of the memfd at an address the kernel picks; the callers
        // checked that the file is at least `len` bytes long, so every page is backed. Unmapped when
        // the MmapRaw is dropped, with the JobStatus that owns it.
        let raw = memmap2::MmapOptions::new().len(len).map_raw(fd.as_raw_fd())?;
        Ok(Map { raw })
    }
    fn addr(&self) -> *mut u8 {
        self.raw.as_mut_ptr()
    }
}

/// A mapping of the job status board: the launcher's (reads every record) or a PE's (writes its own).
pub struct JobStatus {
    map: Map,
    npes: usize,
    /// This process's PE (None on the launcher side, which only reads).
    me: Option<usize>,
    /// Host collectives entered by this PE; guards the writer side of its record (one writer at a time).
    seq: Mutex<u64>,
}

// SAFETY: the mapping is plain shared memory accessed only through atomics (Header, Slot); the writer
// side is serialized by `seq`'s mutex. Nothing in it is tied to a thread.
unsafe impl Send for JobStatus {}
// SAFETY: as for Send: every shared access is atomic, and writes are serialized by `seq`'s mutex.
unsafe impl Sync for JobStatus {}

impl JobStatus {
    /// Launcher side: a zeroed board for `npes` PEs and the descriptor to hand down (not close-on-exec
    /// is the caller's business).
    pub fn create(npes: usize) -> Result<(JobStatus, OwnedFd)> {
        let bytes = board_bytes(npes).filter(|_| npes > 0).ok_or_else(|| Error::new(format!("job status board: {npes} PEs is not a valid job size")))?;
        let fd = crate::node::fdpass::memfd("rshmem-job-status", bytes as u64)?;
        let map = Map::new(fd_borrow(&fd), bytes).map_err(|e| Error::os(format!("job status board: cannot map {bytes} bytes"), e))?;
        let b = JobStatus { map, npes, me: None, seq: Mutex::new(0) };
        let h = b.header();
        h.npes.store(npes as u64, Ordering::Relaxed);
        h.record.store(RECORD as u64, Ordering::Relaxed);
        // Release: a PE that sees the magic sees the fields above (it maps the file after fork/exec
        // anyway; the ordering costs nothing and keeps the header self-contained).
        h.magic.store(MAGIC, Ordering::Release);
        Ok((b, fd))
    }

    /// PE side: the board rshmrun handed down as descriptor `fd` (`RSHMEM_STATUS_FD`, from init's
    /// configuration), if any. A bad one (not an open descriptor, not a board, a board for another PE
    /// count, a PE outside it) is an error naming the variable.
    pub fn from_fd(fd: Option<i32>, pe: usize, npes: usize) -> Result<Option<JobStatus>> {
        let name = crate::config::env::STATUS_FD;
        let Some(fd) = fd else { return Ok(None) };
        let v = fd.to_string();
        // SAFETY: fcntl(F_GETFD) only queries the descriptor table; it fails with EBADF for a number that
        // is not an open descriptor, which is how we validate it before borrowing it.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(Error::os(
                format!("{name}={v:?}: not an open file descriptor in this process (set by rshmrun; was the variable copied into another program?)"),
                std::io::Error::last_os_error(),
            ));
        }
        // Keep the descriptor (a later init after finalize opens it again), but do not hand it to
        // programs this PE starts.
        // SAFETY: F_SETFD on a descriptor we just checked is open; it changes only the close-on-exec flag.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        // SAFETY: `fd` is open (checked above) and stays open at least for this call: nothing in this
        // process closes the inherited status descriptor.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        Self::open(fd, pe, npes).map_err(|e| e.context(format!("{name}={v:?}"))).map(Some)
    }

    /// Opens a board through `fd` as PE `pe` of `npes`, and records that this PE is in init.
    pub fn open(fd: BorrowedFd, pe: usize, npes: usize) -> Result<JobStatus> {
        if pe >= npes {
            return Err(Error::new(format!("PE {pe} is outside a job of {npes} PEs")));
        }
        // SAFETY: an all-zero libc::stat is a valid value; fstat fills it for an open descriptor.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is a valid open descriptor (BorrowedFd) and `st` a valid place to write.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(Error::os("fstat", std::io::Error::last_os_error()));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(Error::new("not a job status board (not a shared-memory file)"));
        }
        let need = board_bytes(npes).ok_or_else(|| Error::new(format!("{npes} PEs is not a valid job size")))?;
        let size = st.st_size as u64;
        if size < need as u64 {
            return Err(Error::new(format!(
                "the job status board is {size} bytes, too small for {npes} PEs ({need} bytes): made for another job?"
            )));
        }
        let map = Map::new(fd, need).map_err(|e| Error::os("cannot map the job status board", e))?;
        let b = JobStatus { map, npes, me: Some(pe), seq: Mutex::new(0) };
        let h = b.header();
        if h.magic.load(Ordering::Acquire) != MAGIC || h.record.load(Ordering::Relaxed) != RECORD as u64 {
            return Err(Error::new("not a job status board of this rshmem (bad magic or record size)"));
        }
        let board_npes = h.npes.load(Ordering::Relaxed);
        if board_npes != npes as u64 {
            return Err(Error::new(format!("the job status board is for {board_npes} PEs but this job has {npes}")));
        }
        b.slot(pe).pid.store(std::process::id() as u64, Ordering::Relaxed);
        b.write(0, "rshmem_init", true);
        Ok(b)
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is at least HEADER bytes, page-aligned, and only accessed through atomics.
        unsafe { &*(self.map.addr() as *const Header) }
    }
    fn slot(&self, pe: usize) -> &Slot {
        assert!(pe < self.npes, "job status board: PE {pe} out of range");
        // SAFETY: pe < npes, and the mapping holds HEADER + npes * RECORD bytes (checked at create/open);
        // records are 8-byte aligned (page + 64 + k * 128) and only accessed through atomics.
        unsafe { &*(self.map.addr().add(HEADER + pe * RECORD) as *const Slot) }
    }

    /// Seqlock writer (this PE's record only; the caller holds `seq`'s lock or is the only writer).
    fn write(&self, seq: u64, call: &str, inside: bool) {
        let Some(me) = self.me else { return };
        let s = self.slot(me);
        crate::node::seqlock::write(&s.ver, || {
            s.seq.store(seq, Ordering::Relaxed);
            s.inside.store(inside as u64, Ordering::Relaxed);
            for (w, x) in s.name.iter().zip(pack_name(call)) {
                w.store(x, Ordering::Relaxed);
            }
        });
    }

    /// Seqlock reader: a consistent copy of PE `pe`'s record, or None if it stayed inconsistent (its
    /// writer died in the middle of an update, or keeps rewriting it); Err when it holds what no PE
    /// writes.
    fn read(&self, pe: usize) -> Option<std::result::Result<PeStatus, Corrupt>> {
        let s = self.slot(pe);
        let (seq, inside, pid, name) = crate::node::seqlock::read(&s.ver, 10_000, || {
            let name: Vec<u64> = s.name.iter().map(|w| w.load(Ordering::Relaxed)).collect();
            (s.seq.load(Ordering::Relaxed), s.inside.load(Ordering::Relaxed), s.pid.load(Ordering::Relaxed), name)
        })?;
        Some(check_record(pe, seq, inside, pid, &name))
    }

    /// The header as [`JobStatus::create`] wrote it, or what is wrong with it.
    fn check_header(&self) -> std::result::Result<(), Corrupt> {
        let h = self.header();
        let (magic, npes, record) = (h.magic.load(Ordering::Acquire), h.npes.load(Ordering::Relaxed), h.record.load(Ordering::Relaxed));
        if magic != MAGIC || npes != self.npes as u64 || record != RECORD as u64 {
            return Err(format!(
                "its header was overwritten: magic {magic:#018x}, {npes} PEs, records of {record} bytes, where rshmrun wrote \
                 {MAGIC:#018x}, {} PEs, {RECORD} bytes",
                self.npes
            ));
        }
        Ok(())
    }

    /// Asks the launcher to end the job with exit status `status` on behalf of PE `pe`
    /// (`nvshmem_global_exit`); false when another PE asked first (its status is the job's), when this
    /// PE asked before, or when `pe` is outside the board.
    pub fn request_exit(&self, pe: usize, status: i32) -> bool {
        if pe >= self.npes {
            return false;
        }
        let v = EXIT_SET | ((pe as u64 & 0x7fff_ffff) << 32) | status as u32 as u64;
        // The check first, in this PE's own record (no other PE writes it), and only once: whatever wins
        // the request word below then has its check in place (the launcher's acquire load of the word
        // sees it).
        if self.slot(pe).exit_check.compare_exchange(0, exit_check(v), Ordering::AcqRel, Ordering::Acquire).is_err() {
            return false;
        }
        self.header().exit.compare_exchange(0, v, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }
    /// The launcher's side: the PE that asked for the job's end and its status, once one has; Err when
    /// the board is corrupt (its header overwritten, or a request word no PE of the job wrote).
    pub fn exit_request(&self) -> std::result::Result<Option<(usize, i32)>, Corrupt> {
        self.check_header()?;
        let v = self.header().exit.load(Ordering::Acquire);
        if v == 0 {
            return Ok(None);
        }
        let (pe, status) = (((v >> 32) & 0x7fff_ffff) as usize, v as u32 as i32);
        if v & EXIT_SET == 0 || pe >= self.npes {
            return Err(format!("its global-exit word holds {v:#018x}, which no PE of the job's {} wrote", self.npes));
        }
        let check = self.slot(pe).exit_check.load(Ordering::Acquire);
        if check != exit_check(v) {
            return Err(format!(
                "its global-exit word holds {v:#018x} (PE {pe}, status {status}), but PE {pe}'s record has no matching check \
                 ({check:#018x}): PE {pe} did not write it"
            ));
        }
        Ok(Some((pe, status)))
    }

    /// Records that this PE enters host collective `call`; returns its number (1, 2, ...).
    pub fn enter(&self, call: &str) -> u64 {
        let mut seq = self.seq.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *seq += 1;
        self.write(*seq, call, true);
        *seq
    }
    /// Records that this PE left the collective it entered last (or init).
    pub fn leave(&self) {
        let Some(me) = self.me else { return };
        // Under `seq`'s lock, as every writer of this PE's record; only the inside flag changes (no
        // read-back of the name: this runs in every host barrier).
        let _seq = self.seq.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let s = self.slot(me);
        crate::node::seqlock::write(&s.ver, || s.inside.store(0, Ordering::Relaxed));
    }
    /// Every PE's record (a PE whose record cannot be read consistently, or holds what no PE writes,
    /// is left out).
    pub fn snapshot(&self) -> Vec<PeStatus> {
        (0..self.npes).filter_map(|pe| self.read(pe)?.ok()).collect()
    }

    /// Every PE's record, checked: Err when the header or a record holds what rshmrun and the PEs never
    /// write.
    fn checked_snapshot(&self) -> std::result::Result<Vec<PeStatus>, Corrupt> {
        self.check_header()?;
        let mut snap = Vec::with_capacity(self.npes);
        for pe in 0..self.npes {
            if let Some(r) = self.read(pe) {
                snap.push(r?);
            }
        }
        Ok(snap)
    }

    /// One line per group of PEs for a stalled job, e.g. "PEs 0, 2-3 wait in rshmem_barrier_all (host
    /// collective #5) for PE 1, which last entered rshmem_malloc (#4) and left it"; None if nothing useful
    /// is recorded; Err (what is wrong) when the board is corrupt, so that nothing on it can be believed.
    pub fn stall_report(&self) -> std::result::Result<Option<String>, Corrupt> {
        Ok(describe(&self.checked_snapshot()?))
    }

    /// [`JobStatus::stall_report`] as one text: a corrupt board is described as such ("the job status
    /// board is corrupt (...)").
    pub fn describe_stall(&self) -> Option<String> {
        self.stall_report()
            .unwrap_or_else(|e| Some(format!("the job status board is corrupt ({e}): it cannot say what the PEs wait for")))
    }
}

/// PE `pe`'s record from its raw words, or what in it no PE writes: a flag other than 0 or 1, a process
/// id Linux never gives, a count beyond any job's, a name that is not printable ASCII padded with
/// zeros, or a state without a process.
fn check_record(pe: usize, seq: u64, inside: u64, pid: u64, name: &[u64]) -> std::result::Result<PeStatus, Corrupt> {
    let bytes: Vec<u8> = name.iter().flat_map(|x| x.to_le_bytes()).collect();
    let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let why = if inside > 1 {
        Some(format!("its in-a-collective flag is {inside:#x}"))
    } else if pid > PID_MAX {
        Some(format!("its process id is {pid}"))
    } else if seq > SEQ_MAX {
        Some(format!("its count of host collectives is {seq}"))
    } else if !bytes[..len].iter().all(|b| b.is_ascii_graphic() || *b == b' ') || bytes[len..].iter().any(|&b| b != 0) {
        Some(format!("its collective's name holds the bytes {:02x?}", &bytes[..len.max(1).min(bytes.len())]))
    } else if pid == 0 && (seq != 0 || inside != 0 || len != 0) {
        Some("it records a collective but no process".to_string())
    } else {
        None
    };
    match why {
        Some(why) => Err(format!("PE {pe}'s record: {why}")),
        None => Ok(PeStatus { pe, seq, call: String::from_utf8_lossy(&bytes[..len]).into_owned(), inside: inside != 0, pid: pid as u32 }),
    }
}

fn fd_borrow(fd: &OwnedFd) -> BorrowedFd<'_> {
    use std::os::fd::AsFd;
    fd.as_fd()
}

/// What PE `s` is doing, as the end of "PE n, which ...".
fn doing(s: &PeStatus) -> String {
    if s.pid == 0 {
        "has not reached rshmem_init".into()
    } else if s.seq == 0 && s.inside {
        "is still in rshmem_init".into()
    } else if s.seq == 0 {
        "has not entered a host collective since init".into()
    } else if s.inside {
        format!("is in {} (host collective #{})", s.call, s.seq)
    } else {
        format!("last entered {} (host collective #{}) and left it", s.call, s.seq)
    }
}

/// "is ..."/"has ..." for one PE, "are ..."/"have ..." for several.
fn plural(d: &str, n: usize) -> String {
    match (n, d.split_once(' ')) {
        (2.., Some(("is", rest))) => format!("are {rest}"),
        (2.., Some(("has", rest))) => format!("have {rest}"),
        _ => d.to_string(),
    }
}

/// The stall description of a snapshot: for each group of PEs inside the same collective, the other PEs
/// grouped by what they last did.
fn describe(snap: &[PeStatus]) -> Option<String> {
    use std::collections::BTreeMap;
    let mut groups: BTreeMap<(u64, &str), Vec<usize>> = BTreeMap::new();
    // Inside a collective, or still inside init (seq 0): a PE missing at init is named too.
    for s in snap.iter().filter(|s| s.inside && s.pid != 0) {
        groups.entry((s.seq, s.call.as_str())).or_default().push(s.pe);
    }
    if groups.is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    for ((seq, call), pes) in &groups {
        let mut others: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for s in snap.iter().filter(|s| !pes.contains(&s.pe)) {
            others.entry(doing(s)).or_default().push(s.pe);
        }
        let verb = if pes.len() == 1 { "waits" } else { "wait" };
        let place = if *seq == 0 { call.to_string() } else { format!("{call} (host collective #{seq})") };
        if others.is_empty() {
            lines.push(format!("{} {verb} in {place}; every PE is in it", pe_list(pes)));
            continue;
        }
        // Most PEs first would hide the odd one out: list the smallest groups first.
        let mut others: Vec<(String, Vec<usize>)> = others.into_iter().collect();
        others.sort_by_key(|(_, p)| (p.len(), p[0]));
        let who: Vec<String> = others.iter().map(|(d, p)| format!("{}, which {}", pe_list(p), plural(d, p.len()))).collect();
        lines.push(format!("{} {verb} in {place} for {}", pe_list(pes), who.join("; ")));
    }
    Some(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn two_boards_over_one_memfd() {
        let (launcher, fd) = JobStatus::create(4).unwrap();
        assert_eq!(launcher.describe_stall(), None);
        let pes: Vec<JobStatus> = (0..3).map(|pe| JobStatus::open(fd.as_fd(), pe, 4).unwrap()).collect();
        assert_eq!(launcher.describe_stall().unwrap(), "PEs 0-2 wait in rshmem_init for PE 3, which has not reached rshmem_init");
        for p in &pes {
            p.leave(); // init done
        }
        for p in &pes {
            assert_eq!(p.enter("rshmem_malloc"), 1);
            p.leave();
        }
        assert_eq!(pes[0].enter("rshmem_barrier_all"), 2);
        assert_eq!(pes[2].enter("rshmem_barrier_all"), 2);
        let snap = launcher.snapshot();
        assert_eq!(snap[1], PeStatus { pe: 1, seq: 1, call: "rshmem_malloc".into(), inside: false, pid: std::process::id() });
        assert_eq!(snap[3].pid, 0);
        let d = launcher.describe_stall().unwrap();
        assert_eq!(
            d,
            "PEs 0, 2 wait in rshmem_barrier_all (host collective #2) for PE 1, which last entered rshmem_malloc (host collective #1) and left it; PE 3, which has not reached rshmem_init"
        );
        // A mismatch shows as two groups naming each other.
        let p3 = JobStatus::open(fd.as_fd(), 3, 4).unwrap();
        assert!(p3.describe_stall().unwrap().contains("PE 3, which is still in rshmem_init"));
        p3.leave();
        p3.enter("rshmem_malloc");
        pes[1].enter("rshmem_finalize");
        let d = launcher.describe_stall().unwrap();
        assert!(d.contains("PE 1 waits in rshmem_finalize (host collective #2) for PE 3, which is in rshmem_malloc (host collective #1); PEs 0, 2, which are in rshmem_barrier_all (host collective #2)"), "{d}");
    }

    #[test]
    fn bad_boards_are_refused() {
        let (_l, fd) = JobStatus::create(2).unwrap();
        let e = JobStatus::open(fd.as_fd(), 0, 3).err().unwrap().to_string();
        assert!(e.contains("too small for 3 PEs"), "{e}");
        let e = JobStatus::open(fd.as_fd(), 2, 2).err().unwrap().to_string();
        assert!(e.contains("PE 2 is outside a job of 2 PEs"), "{e}");
        let other = crate::node::fdpass::memfd("not-a-board", 4096).unwrap();
        let e = JobStatus::open(other.as_fd(), 0, 2).err().unwrap().to_string();
        assert!(e.contains("bad magic"), "{e}");
        let (_l1, fd1) = JobStatus::create(1).unwrap();
        // Big enough file, other PE count.
        let (_l8, fd8) = JobStatus::create(8).unwrap();
        let e = JobStatus::open(fd8.as_fd(), 0, 2).err().unwrap().to_string();
        assert!(e.contains("for 8 PEs but this job has 2"), "{e}");
        drop(fd1);
    }

    #[test]
    fn exit_statuses_never_read_as_success() {
        for (code, status) in [(0, 0), (1, 1), (7, 7), (255, 255), (256, 1), (512, 1), (-256, 1), (257, 1), (300, 44), (-1, 255), (i32::MIN, 1)] {
            assert_eq!(exit_status_of(code), status, "{code}");
        }
    }

    /// Global-exit requests: a PE's own is believed once; a word no PE wrote (outside the job, without
    /// its check, with another status than checked) and an overwritten header make the board corrupt.
    #[test]
    fn global_exit_requests_are_checked() {
        let (launcher, fd) = JobStatus::create(4).unwrap();
        let pe = JobStatus::open(fd.as_fd(), 2, 4).unwrap();
        assert_eq!(launcher.exit_request(), Ok(None));
        assert!(!pe.request_exit(4, 1), "a PE outside the board");
        assert!(pe.request_exit(2, 256));
        assert!(!pe.request_exit(2, 3), "a second request of the same PE");
        assert_eq!(launcher.exit_request(), Ok(Some((2, 256))));

        // The scribble: a word that names PE 215850783.
        let h = launcher.header();
        let word = EXIT_SET | (215_850_783u64 << 32) | (-1_618_508_988i32 as u32 as u64);
        h.exit.store(word, Ordering::Release);
        let e = launcher.exit_request().unwrap_err();
        assert!(e.contains("which no PE of the job's 4 wrote"), "{e}");
        // A PE of the job, but without its check; then with PE 2's check but another status.
        h.exit.store(EXIT_SET | (1 << 32) | 5, Ordering::Release);
        let e = launcher.exit_request().unwrap_err();
        assert!(e.contains("(PE 1, status 5), but PE 1's record has no matching check"), "{e}");
        h.exit.store(EXIT_SET | (2 << 32) | 9, Ordering::Release);
        assert!(launcher.exit_request().unwrap_err().contains("PE 2 did not write it"));
        h.exit.store(0x1234, Ordering::Release);
        assert!(launcher.exit_request().unwrap_err().contains("holds 0x0000000000001234"));
        h.exit.store(0, Ordering::Release);
        assert_eq!(launcher.exit_request(), Ok(None));
        h.npes.store(215_850_783, Ordering::Relaxed);
        let e = launcher.exit_request().unwrap_err();
        assert!(e.contains("its header was overwritten") && e.contains("215850783 PEs"), "{e}");
        assert!(launcher.describe_stall().unwrap().starts_with("the job status board is corrupt (its header was overwritten"));
    }

    /// Records holding what no PE writes make the stall report say the board is corrupt, naming the PE.
    #[test]
    fn scribbled_records_are_not_quoted() {
        type Scribble = fn(&Slot);
        let cases: [(Scribble, &str); 4] = [
            (|s| s.inside.store(7, Ordering::Relaxed), "PE 1's record: its in-a-collective flag is 0x7"),
            (|s| s.pid.store(1 << 40, Ordering::Relaxed), "PE 1's record: its process id is 1099511627776"),
            (|s| s.name[0].store(u64::from_le_bytes(*b"ab\x01cdefg"), Ordering::Relaxed), "PE 1's record: its collective's name holds the bytes"),
            (|s| s.seq.store(u64::MAX, Ordering::Relaxed), "PE 1's record: its count of host collectives is"),
        ];
        for (scribble, want) in cases {
            let (launcher, fd) = JobStatus::create(2).unwrap();
            let pes: Vec<JobStatus> = (0..2).map(|pe| JobStatus::open(fd.as_fd(), pe, 2).unwrap()).collect();
            pes[0].enter("rshmem_barrier_all");
            pes[1].enter("rshmem_malloc");
            assert!(launcher.stall_report().unwrap().unwrap().contains("PE 0 waits in rshmem_barrier_all"));
            scribble(launcher.slot(1));
            let e = launcher.stall_report().unwrap_err();
            assert!(e.contains(want), "{e}");
            assert!(launcher.describe_stall().unwrap().contains(want));
            // The snapshot leaves the scribbled record out.
            assert_eq!(launcher.snapshot().iter().map(|r| r.pe).collect::<Vec<_>>(), [0]);
        }
    }

    #[test]
    fn concurrent_reader_never_sees_a_torn_record() {
        let (launcher, fd) = JobStatus::create(1).unwrap();
        let pe = JobStatus::open(fd.as_fd(), 0, 1).unwrap();
        let names = ["rshmem_barrier_all_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "rshmem_malloc_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"];
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..20_000 {
                    pe.enter(names[i % 2]);
                }
            });
            for _ in 0..20_000 {
                if let Some(r) = launcher.read(0) {
                    let r = r.unwrap();
                    if r.seq > 0 {
                        let want = &names[(r.seq as usize - 1) % 2][..NAME_BYTES];
                        assert_eq!(r.call, want, "torn record at #{}", r.seq);
                    }
                }
            }
        });
    }
}
