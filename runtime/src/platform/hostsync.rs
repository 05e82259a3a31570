//! Host-side synchronization of the PEs of one node in shared memory, with the safety of the TCP
//! bootstrap: every host collective (shared-memory or bootstrap) announces its sequence number and
//! name in this PE's record, so a PE waiting in a shared-memory barrier can see a peer that entered a
//! different collective (and name both calls), a peer whose process is gone, or (with
//! RSHMEM_WAIT_TIMEOUT) a peer that does not come, instead of hanging. On such a failure it aborts the
//! bootstrap, so PEs blocked in TCP collectives learn it too.
//!
//! Exact mismatch detection: each PE keeps the names of its last two host collectives, indexed by
//! sequence number (`entries[seq % 2]`). A peer can be at most one collective ahead of a PE that waits in
//! collective `seq` (it cannot finish `seq` without this PE), so the entry for `seq` is never overwritten
//! while anyone may still compare it. A PE publishes its entry before it marks itself arrived, and a
//! waiter compares the peer's entry for `seq` with its own call before it passes that peer, so both
//! sides of a mismatch see it, whatever the arrival order.

use crate::node::exchange::Collective;
use rshmem_common::Backoff;
use crate::error::{Error, Result};
use crate::bootstrap::pe_list;
use crate::node::jobstatus::{pack_name, unpack_name, JobStatus};
use crate::platform::segment::Segment;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Fd-server segment id of the host sync area.
pub const SEG_SYNC: u32 = 1;
const NAME_WORDS: usize = 8;

/// One announced host collective.
#[repr(C)]
struct Entry {
    /// Its sequence number (0: this entry was never written).
    seq: AtomicU64,
    name: [AtomicU64; NAME_WORDS],
}

/// One PE's record, at the start of its sync segment (zero-initialized memfd).
#[repr(C)]
struct Record {
    /// Seqlock version of `entries`: odd while the owner rewrites one of them.
    ver: AtomicU64,
    /// The last two announced collectives: collective `s` lives in `entries[s % 2]`.
    entries: [Entry; 2],
    /// Last barrier sequence this PE arrived at.
    arrived: AtomicU64,
    pid: AtomicU64,
}
const _: () = assert!(std::mem::size_of::<Record>() <= 4096);

/// The shared-memory host barrier of a job whose PEs are all on one node, over every PE's 4 KiB
/// record (the module notes).
pub struct HostSync {
    seg: Segment,
    me: usize,
    local: Vec<usize>,
    /// Host collectives entered by this PE; also serializes writers of this PE's record.
    seq: std::sync::Mutex<u64>,
    /// RSHMEM_WAIT_TIMEOUT, read once at init (validated there).
    limit: Option<Duration>,
}

fn record(seg: &Segment, pe: usize) -> &Record {
    let base = seg.base(pe).unwrap_or_else(|| panic!("hostsync: PE {pe} is not on this node"));
    // SAFETY: every node-local PE's segment is mapped for the runtime's life (Segment owns the
    // mappings and outlives this borrow), zero-initialized (memfd), at least 4 KiB (> size of Record),
    // page-aligned, and accessed only through these atomics.
    unsafe { &*(base as *const Record) }
}

/// A consistent copy of a record's two entries: (seq, name) each.
type Entries = [(u64, String); 2];

impl HostSync {
    /// Collective over the job at init: creates this PE's record, maps every peer's and waits for all.
    /// `limit`: RSHMEM_WAIT_TIMEOUT from init's configuration (None: wait forever).
    pub fn new(c: Collective, limit: Option<std::time::Duration>) -> Result<HostSync> {
        let seg = Segment::create(c.boot, c.fds, c.job, SEG_SYNC, 4096, "host sync area")?;
        let me = c.boot.pe();
        record(&seg, me).pid.store(std::process::id() as u64, Ordering::Release);
        c.boot.barrier("rshmem_init")?;
        Ok(HostSync { seg, me, local: c.boot.node_pes().to_vec(), seq: std::sync::Mutex::new(0), limit })
    }

    /// Announces that this PE enters host collective `call`; returns its sequence number.
    pub fn announce(&self, call: &str) -> u64 {
        let mut seq = self.seq.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *seq += 1;
        let s = *seq;
        let r = record(&self.seg, self.me);
        let e = &r.entries[(s % 2) as usize];
        // Only this PE writes its record, under `self.seq`'s lock.
        crate::node::seqlock::write(&r.ver, || {
            e.seq.store(s, Ordering::Relaxed);
            for (w, x) in e.name.iter().zip(pack_name(call)) {
                w.store(x, Ordering::Relaxed);
            }
        });
        s
    }

    /// A consistent copy of PE `pe`'s two entries, or None while it is being rewritten (after many
    /// tries: its writer may have died in the middle of an update).
    fn peer_entries(&self, pe: usize) -> Option<Entries> {
        let r = record(&self.seg, pe);
        let read = |e: &Entry| {
            let name: Vec<u64> = e.name.iter().map(|w| w.load(Ordering::Relaxed)).collect();
            (e.seq.load(Ordering::Relaxed), name)
        };
        let (a, b) = crate::node::seqlock::read(&r.ver, 1000, || (read(&r.entries[0]), read(&r.entries[1])))?;
        Some([(a.0, unpack_name(&a.1)), (b.0, unpack_name(&b.1))])
    }

    /// The packed name PE `pe` announced for collective `seq`, if it has announced it (and it is still
    /// kept), read without allocating.
    fn peer_packed(&self, pe: usize, seq: u64) -> Option<[u64; NAME_WORDS]> {
        let r = record(&self.seg, pe);
        let e = &r.entries[(seq % 2) as usize];
        let (s, name) = crate::node::seqlock::read(&r.ver, 1000, || {
            let mut w = [0u64; NAME_WORDS];
            for (d, x) in w.iter_mut().zip(e.name.iter()) {
                *d = x.load(Ordering::Relaxed);
            }
            (e.seq.load(Ordering::Relaxed), w)
        })?;
        (s == seq).then_some(name)
    }

    /// The name PE `pe` announced for collective `seq`, if it has announced it (and it is still kept).
    fn peer_call(&self, pe: usize, seq: u64) -> Option<String> {
        let e = self.peer_entries(pe)?;
        e.into_iter().find(|(s, _)| *s == seq).map(|(_, n)| n)
    }

    /// What PE `pe` last entered, as the end of "PE n, which ...".
    fn last_entered(&self, pe: usize) -> String {
        match self.peer_entries(pe) {
            None => "is rewriting its record (it may have died in the middle)".into(),
            Some(e) => match e.into_iter().max_by_key(|(s, _)| *s) {
                Some((s, name)) if s > 0 => format!("last entered {name} (host collective #{s})"),
                _ => "has not entered a host collective since init".into(),
            },
        }
    }

    /// Barrier of the node's PEs (all PEs of the job are on this node when this is used). Fails, naming
    /// the PEs involved, on a collective mismatch, an exited peer, or when RSHMEM_WAIT_TIMEOUT runs out;
    /// `board` (rshmrun's job status board) adds what every PE of the job is doing to a timeout error.
    pub fn barrier(&self, c: Collective, call: &str, board: Option<&JobStatus>) -> Result<()> {
        let seq = self.announce(call);
        // Release: a peer that sees `arrived >= seq` sees our entry for `seq` (announced above).
        record(&self.seg, self.me).arrived.store(seq, Ordering::Release);
        let start = Instant::now();
        let limit = self.limit;
        let mine = pack_name(call);
        for &pe in &self.local {
            if pe == self.me {
                continue;
            }
            let r = record(&self.seg, pe);
            let mut backoff = Backoff::new();
            loop {
                if r.arrived.load(Ordering::Acquire) >= seq {
                    // The peer's entry for `seq` is published (acquire above) and still kept (it is at
                    // most one collective ahead). Pass it only if it entered the same collective.
                    // Compared packed, without allocating: this is the barrier's fast path.
                    match self.peer_packed(pe, seq) {
                        Some(other) if other == mine => break,
                        Some(other) => return Err(c.boot.abort(self.mismatch(pe, seq, call, &unpack_name(&other)))),
                        // Being rewritten right now (the peer moves to its next collective): retry.
                        None => {}
                    }
                }
                backoff.snooze();
                if backoff.rounds().is_multiple_of(64) {
                    if let Some(err) = self.check_peer(pe, seq, call, start) {
                        return Err(c.boot.abort(err));
                    }
                    if let Some(limit) = limit.filter(|&l| start.elapsed() >= l) {
                        return Err(c.boot.abort(self.timed_out(seq, call, limit, board)));
                    }
                }
            }
        }
        Ok(())
    }

    fn mismatch(&self, pe: usize, seq: u64, call: &str, other: &str) -> Error {
        let (a, b) = if self.me < pe { ((self.me, call), (pe, other)) } else { ((pe, other), (self.me, call)) };
        Error::new(format!(
            "collective mismatch: PE {} called {} (host collective #{seq}) while PE {} called {} (host collective #{seq}); every PE must call the same collectives in the same order",
            a.0, a.1, b.0, b.1
        ))
    }

    /// A peer that has not arrived yet: did it enter another collective with this number, or exit?
    fn check_peer(&self, pe: usize, seq: u64, call: &str, start: Instant) -> Option<Error> {
        if let Some(other) = self.peer_call(pe, seq) {
            if other != call {
                return Some(self.mismatch(pe, seq, call, &other));
            }
        }
        // A peer's pid is data from another process: only a positive pid is ever passed to kill (0 or
        // a negative value would address process groups).
        let pid = record(&self.seg, pe).pid.load(Ordering::Acquire);
        let pid = i32::try_from(pid).unwrap_or(0);
        // SAFETY: kill with signal 0 sends nothing; it only checks whether the process exists.
        if pid > 0 && unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
            return Some(Error::new(format!(
                "PE {pe} (pid {pid}) exited while PE {} waited for it in {call} (host collective #{seq}) after {:.1} s",
                self.me,
                start.elapsed().as_secs_f64()
            )));
        }
        None
    }

    /// RSHMEM_WAIT_TIMEOUT ran out in collective `seq`: names every node-local PE that has not arrived
    /// and what it last entered, plus the job status board's view of the whole job.
    fn timed_out(&self, seq: u64, call: &str, limit: Duration, board: Option<&JobStatus>) -> Error {
        let missing: Vec<usize> = self
            .local
            .iter()
            .copied()
            .filter(|&pe| pe != self.me && record(&self.seg, pe).arrived.load(Ordering::Acquire) < seq)
            .collect();
        // Group the missing PEs by what they last entered, to keep the line short for many PEs.
        let mut by_what: Vec<(String, Vec<usize>)> = Vec::new();
        for pe in &missing {
            let what = self.last_entered(*pe);
            match by_what.iter_mut().find(|(w, _)| *w == what) {
                Some((_, pes)) => pes.push(*pe),
                None => by_what.push((what, vec![*pe])),
            }
        }
        let who: Vec<String> = by_what.iter().map(|(w, pes)| format!("{}, which {w}", pe_list(pes))).collect();
        let mut msg = format!(
            "{call} (host collective #{seq}): PE {} waited {} s ({}) for {}",
            self.me,
            limit.as_secs_f64(),
            crate::config::env::WAIT_TIMEOUT,
            if who.is_empty() { "the other PEs".to_string() } else { who.join("; ") }
        );
        if let Some(d) = board.and_then(JobStatus::describe_stall) {
            msg.push_str(&format!("\njob status: {}", d.replace('\n', "\njob status: ")));
        }
        Error::new(msg)
    }
}
