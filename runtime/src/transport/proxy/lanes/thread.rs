//! A lane's thread and what it shares with the sender: receiving straight into the lane's receive
//! ring, checking in place, publishing `written`, applying on the CPU backend, acknowledging, replying
//! and sending (`Lane::kick`, `Lane::flush` for the sender; `spawn` for the engine's set-up). The
//! lane's memory and queue are the parent module's; this part uses the engine, which the parent does
//! not (so the engine may hold lanes).

use super::*;
use crate::error::{Error, Result};
use crate::log;
use crate::transport::proxy::engine::Engine;
use crate::transport::proxy::target::Verdict;
use crate::transport::proxy::tcp::{io_failure, recv_some, send_some};
use crate::transport::wire::{self, check, Checked, Frames, Head, HEAD_BYTES};
use rshmem_device::remote::lane::{APPLIED_OFF, REPLY_SENT_OFF, REPLY_WRITTEN_OFF, WRITTEN_OFF};
use std::collections::VecDeque;
use std::io::IoSlice;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Lane {
    /// Sends what is queued without waiting, if no other thread is sending now and it is at most
    /// `INLINE_SEND_BYTES`; wakes the lane's thread for what is left (or for all of a larger queue, so
    /// that lanes send in parallel). For the sender at the end of a burst.
    pub(crate) fn kick(&self, eng: &Engine) -> Result<()> {
        if let Ok(mut out) = self.out.try_lock() {
            if out.holds_more_than(super::INLINE_SEND_BYTES) {
                drop(out);
                self.wake.signal();
                return Ok(());
            }
            let done = self.flush(eng, &mut out)?;
            drop(out);
            if done {
                return Ok(());
            }
        }
        self.wake.signal();
        Ok(())
    }

    /// Sends what it can of `out` without waiting; true when all of it left.
    pub(crate) fn flush(&self, eng: &Engine, out: &mut Out) -> Result<bool> {
        out.close_put();
        let mut total = 0usize;
        loop {
            if out.parts.is_empty() {
                break;
            }
            // A named source at the front: its bytes into the bounce buffer first.
            if let Some(&Part::Copy { src, len, .. }) = out.parts.front() {
                if !out.copied {
                    // SAFETY: the poster promised `src` readable for `len` bytes until the request's
                    // `consumed`; the bounce buffer holds MAX_PAYLOAD >= len bytes and is ours while the
                    // part is in front (it is sent before the next copy).
                    unsafe { eng.services.copy(self.bounce.host_ptr(), src as *const u8, len)? };
                    out.copied = true;
                    self.publish_oldest(out);
                    eng.consumed_moved();
                }
            }
            let mut iov: Vec<IoSlice<'_>> = Vec::with_capacity(MAX_IOV.min(out.parts.len()));
            for (i, p) in out.parts.iter().enumerate().take(MAX_IOV) {
                let skip = if i == 0 { out.first_sent } else { 0 };
                let s: &[u8] = match *p {
                    Part::Own { at, len } => &out.own[at - out.base + skip..at - out.base + len],
                    // SAFETY: see `Out`'s Send: the memory stays valid and unchanged until sent.
                    Part::Ext { ptr, len, .. } | Part::Reply { ptr, len, .. } | Part::Src { ptr, len, .. } => unsafe { std::slice::from_raw_parts(ptr.add(skip), len - skip) },
                    Part::Copy { len, .. } => {
                        if i != 0 {
                            break;
                        }
                        // SAFETY: the bounce buffer holds the copy (above).
                        unsafe { std::slice::from_raw_parts(self.bounce.host_ptr().add(skip), len - skip) }
                    }
                };
                iov.push(IoSlice::new(s));
            }
            let n = send_some(&self.sock, &iov).map_err(|e| io_failure(&self.who(), Some("frame".into()), &e))?;
            drop(iov);
            let before = out.parts.len();
            // (Empty parts at the front leave with nothing sent.)
            self.advance(out, n);
            total += n;
            if n == 0 && out.parts.len() == before {
                break;
            }
        }
        if total > 0 {
            if self.src_sent.swap(false, Ordering::AcqRel) {
                self.publish_oldest(out);
                eng.consumed_moved();
            }
            eng.count(|s| &s.sends, 1);
            eng.count(|s| &s.sent_bytes, total as u64);
            // Drop the own bytes before the first queued own part (all sent).
            let keep = out.parts.iter().find_map(|p| if let Part::Own { at, .. } = p { Some(*at) } else { None }).unwrap_or(out.base + out.own.len());
            let dead = keep - out.base;
            if dead > (256 << 10) || (dead > 0 && dead == out.own.len()) {
                out.own.drain(..dead);
                out.base += dead;
            }
            self.publish_oldest(out);
            eng.tickets_moved();
        }
        Ok(out.parts.is_empty())
    }

    /// Queues frames of our own and sends them (a NIC's frames, CLOSE, ERROR).
    pub(crate) fn send_frames(&self, eng: &Engine, bytes: &[u8]) -> Result<()> {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out.frames(bytes);
        let done = self.flush(eng, &mut out)?;
        drop(out);
        if !done {
            self.wake.signal();
        }
        Ok(())
    }
    fn serve(&self, eng: &Arc<Engine>, st: &mut RxState) -> Result<()> {
        let mut last_activity = Instant::now();
        let mut closing_since: Option<Instant> = None;
        let mut sent_close = false;
        loop {
            if eng.abort.load(Ordering::Acquire) {
                return Ok(());
            }
            let mut busy = false;
            // 1. Receive and check.
            match self.receive(eng, st)? {
                Rx::Data => busy = true,
                Rx::Nothing => {}
                Rx::Eof => {
                    if self.peer_closed.load(Ordering::Acquire) {
                        if sent_close || eng.closing.load(Ordering::Acquire) {
                            return Ok(());
                        }
                        // The peer finalized; we have not yet: our own finalize sends our CLOSE.
                        st.eof = true;
                    } else if eng.closing.load(Ordering::Acquire) {
                        return Ok(());
                    } else {
                        return self.peer_gone(eng);
                    }
                }
            }
            // 2. Apply (CPU backend: again, for frames a WAIT held) or see that the apply kernel runs.
            if st.written > st.applied {
                if eng.target.host_applies() {
                    eng.target.apply_lane(st.gl);
                } else {
                    eng.target.ensure_running(st.published_at)?;
                }
            }
            // A frame half received for long: the peer stalled in the middle of it.
            if st.received > st.checked && !st.wrap_pending {
                let (at, since) = *st.partial.get_or_insert((st.checked, Instant::now()));
                if at != st.checked {
                    st.partial = Some((st.checked, Instant::now()));
                } else if since.elapsed() > PARTIAL_TIMEOUT {
                    return Err(Error::new(format!(
                        "{} sent {} bytes of a frame and then nothing for {PARTIAL_TIMEOUT:?} (a stalled or broken peer)",
                        self.who(),
                        st.received - st.checked
                    )));
                }
            } else {
                st.partial = None;
            }
            // 3. Acknowledge and reply.
            if self.progress(eng, st)? {
                busy = true;
            }
            // 4. Send.
            {
                let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
                if !out.is_empty() {
                    self.flush(eng, &mut out)?;
                }
                st.out_pending = !out.is_empty();
            }
            // Finalize: CLOSE once everything of ours left.
            if eng.closing.load(Ordering::Acquire) && !sent_close && !st.out_pending {
                let mut b = Vec::new();
                Frames::close(&mut b);
                self.send_frames(eng, &b)?;
                sent_close = true;
                let _ = self.sock.shutdown(std::net::Shutdown::Write);
            }
            if sent_close {
                if self.peer_closed.load(Ordering::Acquire) && st.eof {
                    return Ok(());
                }
                let since = *closing_since.get_or_insert_with(Instant::now);
                if eng.abort.load(Ordering::Acquire) || since.elapsed() > CLOSE_WAIT {
                    log::debug(format!("proxy: {} sent no CLOSE within {CLOSE_WAIT:?} of finalize", self.who()));
                    return Ok(());
                }
            }
            if busy {
                last_activity = Instant::now();
                continue;
            }
            // 5. Wait: spin briefly after activity where that pays, then sleep in poll.
            if eng.set.spin && last_activity.elapsed() < Duration::from_micros(50) {
                std::hint::spin_loop();
                continue;
            }
            let gpu_pending = st.written > st.applied || st.reply_pending;
            let timeout = if gpu_pending { GPU_POLL } else if eng.closing.load(Ordering::Acquire) { Duration::from_millis(1) } else { IDLE_POLL };
            self.sleep(st, timeout);
        }
    }

    /// Sleeps until the socket has data (or room, when we have something to send), the lane is woken,
    /// or `timeout` passes.
    fn sleep(&self, st: &RxState, timeout: Duration) {
        let mut ev = 0;
        if st.room() > 0 && !st.eof {
            ev |= libc::POLLIN;
        }
        if st.out_pending {
            ev |= libc::POLLOUT;
        }
        let mut fds = [libc::pollfd { fd: self.sock.as_raw_fd(), events: ev, revents: 0 }, libc::pollfd { fd: self.wake.0.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        let ms = timeout.as_micros().div_ceil(1000).max(if timeout.is_zero() { 0 } else { 1 }) as libc::c_int;
        if timeout < Duration::from_millis(1) {
            // A short wait for the GPU: sleep rather than poll a timer of a millisecond.
            std::thread::sleep(timeout);
            return;
        }
        // SAFETY: two live pollfds.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if fds[1].revents != 0 {
            self.wake.clear();
        }
    }

    /// The peer's lane ended without CLOSE.
    fn peer_gone(&self, eng: &Arc<Engine>) -> Result<()> {
        let msg = format!("{} closed the connection without finalizing (it exited or crashed)", self.who());
        if self.idle() && eng.nic_outstanding(self.peer) == 0 {
            // Nothing was owed either way: most often a PE that reported an error and exited. This
            // PE may be about to report its own; it ends only if it still runs after the grace. The
            // grace passes on this thread, which finalize joins (ending the wait at once): no thread
            // of the engine outlives finalize.
            log::debug(format!("proxy: {msg}"));
            let start = Instant::now();
            while start.elapsed() < GONE_GRACE {
                if eng.closing.load(Ordering::Acquire) || eng.abort.load(Ordering::Acquire) {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            eng.fault(Error::new(format!("{msg} {GONE_GRACE:?} ago; nothing sent to it can complete")));
            return Ok(());
        }
        Err(Error::new(format!("{msg}; {}", self.in_flight())))
    }

    /// Reads what the socket has into the receive ring and checks every whole frame in it; publishes
    /// `written` past them.
    fn receive(&self, eng: &Engine, st: &mut RxState) -> Result<Rx> {
        let mut got = Rx::Nothing;
        if st.wrap_pending {
            self.parse(eng, st)?;
        }
        while !st.eof {
            let room = st.room();
            if room == 0 {
                break;
            }
            let at = (st.received % self.ring_bytes) as usize;
            // SAFETY: [at, at + room) lies in the receive ring (room stops at its end) and holds no
            // frame the apply code may still read (room stops at `applied` + ring size).
            let buf = unsafe { std::slice::from_raw_parts_mut(self.ring().add(at), room) };
            match recv_some(&self.sock, buf).map_err(|e| io_failure(&self.who(), None, &e))? {
                None => break,
                Some(0) => {
                    st.eof = true;
                    if st.received > st.checked {
                        return Err(Error::new(format!("{} closed the connection in the middle of a frame", self.who())));
                    }
                    if !matches!(got, Rx::Data) {
                        got = Rx::Eof;
                    }
                    break;
                }
                Some(n) => {
                    st.received += n as u64;
                    eng.count(|s| &s.recv_bytes, n as u64);
                    eng.count(|s| &s.recvs, 1);
                    got = Rx::Data;
                    if let Err(e) = self.parse(eng, st) {
                        // A frame the peer should never have sent: what came before it is applied,
                        // the peer is told why, and the lane ends.
                        self.publish(eng, st);
                        self.tell_peer(eng, &e);
                        return Err(e);
                    }
                    if n < room {
                        break;
                    }
                }
            }
        }
        if self.publish(eng, st) {
            got = Rx::Data;
        }
        Ok(got)
    }

    /// Publishes `written` past the frames checked; on the CPU backend applies them at once. Returns
    /// whether it moved.
    fn publish(&self, eng: &Engine, st: &mut RxState) -> bool {
        if st.checked <= st.written {
            return false;
        }
        st.written = st.checked;
        st.published_at = Instant::now();
        self.ctl(WRITTEN_OFF).store(st.written, Ordering::Release);
        if eng.target.host_applies() {
            eng.target.apply_lane(st.gl);
        }
        true
    }

    /// Tells the peer why this lane ends (an ERROR frame, sent within a short wait), best effort.
    fn tell_peer(&self, eng: &Engine, e: &Error) {
        let mut b = Vec::new();
        Frames::error(&mut b, &e.to_string());
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        out.frames(&b);
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(200) {
            match self.flush(eng, &mut out) {
                Ok(true) | Err(_) => break,
                Ok(false) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        let _ = self.sock.shutdown(std::net::Shutdown::Write);
    }

    /// Checks the whole frames received and not yet checked. A frame that would cross the ring's end
    /// moves to its start behind a WRAP (`wrap_pending` while the start is not free yet).
    fn parse(&self, eng: &Engine, st: &mut RxState) -> Result<()> {
        let r = self.ring_bytes;
        st.wrap_pending = false;
        loop {
            let have = st.received - st.checked;
            if have < HEAD_BYTES as u64 {
                return Ok(());
            }
            let at = (st.checked % r) as usize;
            // SAFETY: 16 received bytes at `at` (frames start 16-aligned and the ring is a multiple of
            // 16, so a head never crosses the end).
            let hb = unsafe { std::slice::from_raw_parts(self.ring().add(at), HEAD_BYTES) };
            let h: Head = bytemuck::pod_read_unaligned(hb);
            let ctx = wire::Context { peer: self.peer, lanes: self.count, lane: self.index, backed: eng.target.backed() };
            let size = wire::frame_size(&h, &ctx).map_err(Error::new)? as u64;
            if at as u64 + size > r {
                // It would cross the ring's end: the bytes received of it go to the start, behind a
                // WRAP here. The start must be free: the previous lap's bytes there applied.
                let skip = r - at as u64;
                let partial = have as usize;
                if st.applied + r < st.checked + skip + partial as u64 {
                    st.wrap_pending = true;
                    return Ok(());
                }
                // SAFETY: [at, at + partial) are received bytes inside the ring (nothing was read past
                // its end: `room`), [0, partial) free ring bytes (checked above); `copy` allows overlap.
                unsafe {
                    std::ptr::copy(self.ring().add(at), self.ring(), partial);
                    let w = Head { kind: wire::WRAP, ..Head::default() };
                    std::ptr::copy_nonoverlapping(bytemuck::bytes_of(&w).as_ptr(), self.ring().add(at), HEAD_BYTES);
                }
                st.checked += skip;
                st.received += skip;
                eng.count(|s| &s.wraps, 1);
                continue;
            }
            if have < size {
                return Ok(());
            }
            // SAFETY: the whole frame is received at [at, at + size), inside the ring.
            let fb = unsafe { std::slice::from_raw_parts_mut(self.ring().add(at), size as usize) };
            let c = check(fb, &ctx).map_err(Error::new)?;
            let end = st.checked + size;
            self.take(eng, st, c, fb, end)?;
            st.checked = end;
            eng.count(|s| &s.frames, 1);
        }
    }

    /// Acts on one checked frame at ring stream position `end - fb.len()` (rewriting it in place
    /// where the apply code needs the local view).
    fn take(&self, eng: &Engine, st: &mut RxState, c: Checked, fb: &mut [u8], end: u64) -> Result<()> {
        match c {
            Checked::Request => {
                st.requests += 1;
                st.ack_at.push_back((end, st.requests));
            }
            Checked::Nic { key, raddr, len, seq } => {
                st.requests += 1;
                st.ack_at.push_back((end, st.requests));
                let (kind, last) = (fb[0], fb[3] & wire::FLAG_LAST != 0);
                match eng.nic_check(self.peer, kind, key, raddr, len, seq, last)? {
                    Verdict::Apply(offset) => fb[8..16].copy_from_slice(&offset.to_le_bytes()),
                    Verdict::Skip => fb[3] |= wire::FLAG_TAKEN,
                    Verdict::Refuse(status, reason) => {
                        // Nothing applied; the apply code answers with the status (in order).
                        let rest = (fb.len() - 32) as u32;
                        let h = Head { kind: wire::NIC_REFUSED, op: status, width: reason, flags: 0, len: rest, offset: 0 };
                        fb[..16].copy_from_slice(bytemuck::bytes_of(&h));
                    }
                }
            }
            Checked::Ack { count } => {
                let issued = self.issued.load(Ordering::Acquire);
                if count > issued || count < st.ack_in {
                    return Err(Error::new(format!("{} acknowledged {count} requests, but this PE sent {issued} on the lane (and {} were acknowledged before)", self.who(), st.ack_in)));
                }
                st.ack_in = count;
                if st.getdata_end > st.applied {
                    // A GET's data before it is still in the ring: effective once applied.
                    st.held_acks.push_back((end, count));
                } else {
                    self.set_acked(eng, count);
                }
            }
            Checked::AmoReply { tag, value } => {
                let e = self.expect.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                let Some(Expect::Fetch { tag: want, ret, dst, width, seq }) = e else {
                    return Err(Error::new(format!("{} answered a fetch (tag {tag}) this PE did not ask for next (it awaits {e:?})", self.who())));
                };
                if want != tag {
                    return Err(Error::new(format!("{} answered fetch tag {tag} where tag {want} was due", self.who())));
                }
                self.credit_back.fetch_add(Expect::Fetch { tag, ret, dst, width, seq }.credit(), Ordering::AcqRel);
                if ret {
                    eng.deliver(seq, value);
                } else if dst != 0 {
                    let b = value.to_le_bytes();
                    // SAFETY: the poster promised `dst` writable for the AMO's width until completion.
                    unsafe { eng.services.copy(dst as *mut u8, b.as_ptr(), width as usize)? };
                }
            }
            Checked::GetData { tag, len } => {
                let e = self.expect.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                let Some(x @ Expect::Get { tag: want, len: asked, dst, ret, seq }) = e else {
                    return Err(Error::new(format!("{} sent GET data (tag {tag}) this PE did not ask for next (it awaits {e:?})", self.who())));
                };
                if want != tag || asked != len {
                    return Err(Error::new(format!("{} sent {len} bytes for GET tag {tag} where {asked} bytes for tag {want} were due", self.who())));
                }
                self.credit_back.fetch_add(x.credit(), Ordering::AcqRel);
                if ret {
                    let mut v = [0u8; 8];
                    v[..len as usize].copy_from_slice(&fb[HEAD_BYTES..HEAD_BYTES + len as usize]);
                    eng.deliver(seq, u64::from_le_bytes(v));
                    fb[3] |= wire::FLAG_TAKEN;
                } else {
                    fb[8..16].copy_from_slice(&dst.to_le_bytes());
                    st.getdata_end = end;
                }
            }
            Checked::NicAnswer => {
                eng.nic_answer(self.peer, fb)?;
            }
            Checked::Error(text) => return Err(Error::new(format!("{} reported an error and closed: {text}", self.who()))),
            Checked::Close => {
                self.peer_closed.store(true, Ordering::Release);
            }
        }
        Ok(())
    }

    fn set_acked(&self, eng: &Engine, count: u64) {
        if count > self.acked.load(Ordering::Relaxed) {
            self.acked.store(count, Ordering::Release);
            eng.acked_moved();
        }
    }

    /// Acts on the apply code's progress: acknowledges the peer's requests it applied (after the
    /// replies it wrote), lets held ACKs take effect, frees ring room. True when anything moved.
    fn progress(&self, eng: &Engine, st: &mut RxState) -> Result<bool> {
        let a = self.ctl(APPLIED_OFF).load(Ordering::Acquire);
        st.reply_pending = false;
        if a == st.applied && !st.reply_unsent(self) {
            return Ok(false);
        }
        st.applied = a;
        let rw = self.ctl(REPLY_WRITTEN_OFF).load(Ordering::Acquire);
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        // Replies first (they precede the ACK that covers their requests).
        while st.reply_queued < rw {
            let q = self.reply_bytes;
            let at = (st.reply_queued % q) as usize;
            // SAFETY: a reply head the apply code wrote below `reply_written` (acquired above).
            let h: Head = bytemuck::pod_read_unaligned(unsafe { std::slice::from_raw_parts(self.reply().add(at), HEAD_BYTES) });
            if h.kind == wire::WRAP {
                let skip = q - at as u64;
                st.reply_queued += skip;
                // Nothing to send for the WRAP: room the apply code may reuse at once if nothing
                // before it is unsent.
                out.reply(self.reply().wrapping_add(at), 0, st.reply_queued);
                continue;
            }
            let n = wire::frame_bytes(&h).ok_or_else(|| Error::new(format!("proxy: the reply ring holds a frame of unknown kind {} (bug)", h.kind)))? as u64;
            // Contiguous replies up to the WRAP or `rw` as one part.
            let mut len = n;
            while st.reply_queued + len < rw && at as u64 + len < q {
                // SAFETY: as above.
                let h2: Head = bytemuck::pod_read_unaligned(unsafe { std::slice::from_raw_parts(self.reply().add(at + len as usize), HEAD_BYTES) });
                if h2.kind == wire::WRAP {
                    break;
                }
                len += wire::frame_bytes(&h2).ok_or_else(|| Error::new("proxy: the reply ring holds a frame of unknown kind (bug)"))? as u64;
            }
            st.reply_queued += len;
            out.reply(self.reply().wrapping_add(at), len as usize, st.reply_queued);
            eng.count(|s| &s.replies, 1);
        }
        // The requests applied so far.
        let mut count = st.acked_out;
        while let Some(&(end, c)) = st.ack_at.front() {
            if end > a {
                break;
            }
            count = c;
            st.ack_at.pop_front();
        }
        if count > st.acked_out {
            let mut b = [0u8; 16];
            let mut v = Vec::with_capacity(16);
            Frames::ack(&mut v, count);
            b.copy_from_slice(&v);
            out.frames(&b);
            st.acked_out = count;
            eng.count(|s| &s.acks, 1);
        }
        drop(out);
        // ACKs held behind GET data that has now landed.
        while let Some(&(end, c)) = st.held_acks.front() {
            if end > a {
                break;
            }
            st.held_acks.pop_front();
            self.set_acked(eng, c);
        }
        st.reply_pending = rw > self.ctl(REPLY_SENT_OFF).load(Ordering::Acquire);
        Ok(true)
    }
}

/// What a receive found.
enum Rx {
    Data,
    Nothing,
    Eof,
}

/// The receiving state of a lane (its thread's own).
struct RxState {
    /// The lane's index in the engine.
    gl: usize,
    ring_bytes: u64,
    /// Stream positions in the receive ring: bytes received, checked, published, applied.
    received: u64,
    checked: u64,
    written: u64,
    applied: u64,
    /// When `written` last moved.
    published_at: Instant,
    /// Requests received, and (ring end position, count) of the last request of each batch.
    requests: u64,
    ack_at: VecDeque<(u64, u64)>,
    /// Requests acknowledged to the peer.
    acked_out: u64,
    /// ACKs of the peer held until the GET data before them is applied: (ring position, count).
    held_acks: VecDeque<(u64, u64)>,
    /// The largest ACK count received.
    ack_in: u64,
    /// The ring position after the last GET data to copy.
    getdata_end: u64,
    /// Reply bytes queued for sending.
    reply_queued: u64,
    reply_pending: bool,
    out_pending: bool,
    /// The peer closed its sending side.
    eof: bool,
    /// A frame waits to move to the ring's start (see `Lane::parse`).
    wrap_pending: bool,
    /// Where a frame was half received, and since when.
    partial: Option<(u64, Instant)>,
}

impl RxState {
    fn new(l: &Lane) -> RxState {
        RxState {
            gl: 0,
            ring_bytes: l.ring_bytes,
            received: 0,
            checked: 0,
            written: 0,
            applied: 0,
            published_at: Instant::now(),
            requests: 0,
            ack_at: VecDeque::new(),
            acked_out: 0,
            held_acks: VecDeque::new(),
            ack_in: 0,
            getdata_end: 0,
            reply_queued: 0,
            reply_pending: false,
            out_pending: false,
            eof: false,
            wrap_pending: false,
            partial: None,
        }
    }
    /// Bytes the next receive may write: up to the ring's end, and not past `applied + ring`.
    fn room(&self) -> usize {
        if self.wrap_pending {
            return 0;
        }
        let free = self.ring_bytes - (self.received - self.applied);
        let to_end = self.ring_bytes - self.received % self.ring_bytes;
        free.min(to_end) as usize
    }
    fn reply_unsent(&self, l: &Lane) -> bool {
        self.reply_queued < l.ctl(REPLY_WRITTEN_OFF).load(Ordering::Acquire)
    }
}

/// Starts the thread of lane `i` of `eng`.
pub(crate) fn spawn(eng: &Arc<Engine>, i: usize) -> Result<std::thread::JoinHandle<()>> {
    let lane = eng.lanes[i].clone();
    let e = eng.clone();
    let name = format!("rshmem-lane{}-pe{}", lane.index, lane.peer);
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let l = lane.clone();
            l.run_indexed(e, i)
        })
        .map_err(|e| Error::os(format!("proxy: starting thread {name}"), e))
}

impl Lane {
    /// The lane's thread: receives, applies (CPU backend), acknowledges and sends until the lane
    /// ends (both sides sent CLOSE) or fails (the engine's fault). `gl`: its index in the engine.
    fn run_indexed(self: Arc<Self>, eng: Arc<Engine>, gl: usize) {
        let mut st = RxState::new(&self);
        st.gl = gl;
        let r = self.serve(&eng, &mut st);
        self.ended.store(true, Ordering::Release);
        match r {
            Ok(()) => {}
            Err(e) if eng.closing.load(Ordering::Acquire) => log::debug(format!("proxy: lane {} to PE {} after finalize: {e}", self.index, self.peer)),
            Err(e) => eng.fault(e.context(format!("lane {} to PE {}", self.index, self.peer))),
        }
    }
}