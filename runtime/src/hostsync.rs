//! Host-side synchronization of the PEs of one node in shared memory, with the safety of the TCP
//! bootstrap: every host collective (shared-memory or bootstrap) announces its sequence number and
//! name in this PE's record, so a PE waiting in a shared-memory barrier can see a peer that entered a
//! different collective (and name both calls) or a peer whose process is gone, instead of hanging.
//! On such a failure it aborts the bootstrap, so PEs blocked in TCP collectives learn it too.

use crate::backend::Collective;
use crate::error::{Error, Result};
use crate::segment::Segment;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const SEG_SYNC: u32 = 1;
const NAME: usize = 64;

/// One PE's record, at the start of its sync segment.
#[repr(C)]
struct Record {
    /// Sequence number of the host collective this PE entered last, then a seqlock-style copy
    /// written after the name.
    seq: AtomicU64,
    name: [AtomicU64; NAME / 8],
    seq_done: AtomicU64,
    /// Last barrier sequence this PE arrived at.
    arrived: AtomicU64,
    pid: AtomicU64,
}

pub struct HostSync {
    seg: Segment,
    me: usize,
    local: Vec<usize>,
    /// Host collectives entered by this PE.
    seq: AtomicU64,
}

fn record(seg: &Segment, pe: usize) -> &Record {
    // SAFETY: every node-local PE's segment is mapped for the runtime's life, zero-initialized
    // (memfd), at least 4 KiB, and accessed only through these atomics.
    unsafe { &*(seg.base(pe).unwrap() as *const Record) }
}

fn pack(name: &str) -> [u64; NAME / 8] {
    let mut b = [0u8; NAME];
    let n = name.len().min(NAME - 1);
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    let mut w = [0u64; NAME / 8];
    for (i, c) in b.chunks(8).enumerate() {
        w[i] = u64::from_le_bytes(c.try_into().unwrap());
    }
    w
}
fn unpack(w: &[u64]) -> String {
    let b: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).take_while(|&c| c != 0).collect();
    String::from_utf8_lossy(&b).into_owned()
}

impl HostSync {
    pub fn new(c: Collective) -> Result<HostSync> {
        let seg = Segment::create(c.boot, c.fds, c.job, SEG_SYNC, 4096, "host sync area")?;
        let me = c.boot.pe();
        record(&seg, me).pid.store(std::process::id() as u64, Ordering::Release);
        c.boot.barrier("rshmem_init")?;
        Ok(HostSync { seg, me, local: c.boot.node_pes().to_vec(), seq: AtomicU64::new(0) })
    }

    /// Announces that this PE enters host collective `call`; returns its sequence number.
    pub fn announce(&self, call: &str) -> u64 {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let r = record(&self.seg, self.me);
        r.seq.store(seq, Ordering::Release);
        for (slot, w) in r.name.iter().zip(pack(call)) {
            slot.store(w, Ordering::Relaxed);
        }
        r.seq_done.store(seq, Ordering::Release);
        seq
    }

    /// What PE `pe` announced last, if it is consistent (not being rewritten).
    fn peer_call(&self, pe: usize) -> Option<(u64, String)> {
        let r = record(&self.seg, pe);
        let s = r.seq_done.load(Ordering::Acquire);
        let name: Vec<u64> = r.name.iter().map(|w| w.load(Ordering::Relaxed)).collect();
        fence(Ordering::Acquire);
        (r.seq.load(Ordering::Relaxed) == s).then(|| (s, unpack(&name)))
    }

    /// Barrier of the node's PEs (all PEs of the job are on this node when this is used).
    pub fn barrier(&self, c: Collective, call: &str) -> Result<()> {
        let seq = self.announce(call);
        record(&self.seg, self.me).arrived.store(seq, Ordering::Release);
        let start = Instant::now();
        for &pe in &self.local {
            let r = record(&self.seg, pe);
            let mut spins = 0u64;
            while r.arrived.load(Ordering::Acquire) < seq {
                spins += 1;
                if spins < 2000 {
                    std::hint::spin_loop();
                    continue;
                }
                if spins % 64 == 0 {
                    if let Some(err) = self.check_peer(pe, seq, call, start) {
                        return Err(c.boot.abort(err));
                    }
                }
                if spins < 20000 {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
        }
        Ok(())
    }

    fn check_peer(&self, pe: usize, seq: u64, call: &str, start: Instant) -> Option<Error> {
        if let Some((s, other)) = self.peer_call(pe) {
            if s == seq && other != call {
                let (a, b) = if self.me < pe { ((self.me, call), (pe, other.as_str())) } else { ((pe, other.as_str()), (self.me, call)) };
                return Some(Error::new(format!(
                    "collective mismatch: PE {} called {} (host collective #{seq}) while PE {} called {} (host collective #{seq})",
                    a.0, a.1, b.0, b.1
                )));
            }
        }
        let pid = record(&self.seg, pe).pid.load(Ordering::Acquire) as i32;
        // SAFETY: kill with signal 0 only checks whether the process exists.
        if pid > 0 && unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
            return Some(Error::new(format!(
                "PE {pe} (pid {pid}) exited while PE {} waited for it in {call} (host collective #{seq}) after {:.1} s",
                self.me,
                start.elapsed().as_secs_f64()
            )));
        }
        None
    }
}
