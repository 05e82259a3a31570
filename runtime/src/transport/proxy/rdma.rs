//! The proxy over verbs, its pure part: what one drained proxy request becomes as verbs work requests
//! on the QP to its target ([`plan`]), with no NIC involved, so every rule here is unit-tested
//! without one. The provider (`verbs`) posts the plan through `transport::verbs::rc` and acts on its
//! completions; that is the thin part that needs a NIC.
//!
//! # What goes where
//! - put → RDMA WRITEs into the peer's heap, cut at the NIC's largest message and at the peer's
//!   registered segments; inline (`IBV_SEND_INLINE`) when the bytes are in host memory and few. A
//!   source outside registered memory (a host buffer, GPU memory outside the heap) is copied into a
//!   registered staging buffer first, in chunks of its size.
//! - get → RDMA READs into the local buffer, or into a bounce buffer copied out on completion when
//!   the destination is not registered; `g` (into a return slot) reads into the request's scratch
//!   slot and delivers from there.
//! - 64-bit fetch-add, add, fetch and compare-swap → the NIC's atomics (fetch is a fetch-add of 0);
//!   the old value lands in the request's scratch slot.
//! - Everything the NIC cannot do natively → the TCP frame path to the peer's proxy, unchanged: 32-bit
//!   atomics, set/swap/and/or/xor of any width, a signal *set* (no NIC atomic sets a word), any atomic
//!   when either NIC lacks atomics, a range not registered with the NIC.
//! - put-with-signal → the WRITEs, then the signal: a signal add as a fetch-add with `IBV_SEND_FENCE`
//!   after them; a signal set over TCP once the WRITEs completed ([`Tcp::SignalAfter`]).
//!
//! # Order
//! The wire's order (a channel's requests to one PE are applied in order) holds across both paths:
//! a request for the TCP path first waits until every verbs operation to that peer completed
//! ([`Plan::wait_verbs`]), and a request for verbs first waits until the TCP path's requests to that
//! peer are complete at the target ([`Plan::wait_tcp`]). On the QP itself RC executes in order, except
//! that a WRITE or atomic may pass an earlier READ, and a WRITE an earlier atomic: those get
//! `IBV_SEND_FENCE` ([`PeerState`] tracks what is unfenced). Quiet waits for every outstanding
//! completion: [`PeerState::outstanding`] counts the signaled work requests not yet completed (the
//! last one of each request is signaled, and so are those whose buffer is reused on completion).

use crate::transport::verbs::rc::RdmaOp;
use crate::transport::wire::AmoOp;
use rshmem_device::remote::proxy::{op, Request, SUB_RETURN};

/// A registered local memory region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    /// Start address.
    pub(crate) addr: u64,
    /// Length in bytes.
    pub(crate) len: u64,
    /// Its lkey.
    pub(crate) lkey: u32,
    /// Host memory the CPU may read (so its bytes may go inline); false for GPU memory.
    pub(crate) host: bool,
}

/// A registered segment of a peer's heap: heap offsets `[start, end)` and the peer's rkey.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seg {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) rkey: u32,
}

/// What this PE knows of the target peer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peer<'a> {
    /// The peer's heap base address.
    pub(crate) heap_base: u64,
    /// Its registered heap segments, in order.
    pub(crate) segs: &'a [Seg],
    /// Both NICs do 64-bit atomics.
    pub(crate) atomics: bool,
}

/// The QP's limits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// The most bytes one work request moves.
    pub(crate) max_msg: u64,
    /// The most bytes an inline WRITE carries (0: none).
    pub(crate) max_inline: u32,
    /// Bytes of a staging (or bounce) buffer.
    pub(crate) stage: u64,
}

/// Where a work request's local bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Local {
    /// Registered memory.
    Mem { addr: u64, lkey: u32 },
    /// The request's own value (a `p`): written into its scratch slot and sent from there.
    Value(u64),
    /// Unregistered source bytes at this address: copied into a staging buffer, written from there.
    StageFrom(u64),
    /// Unregistered destination at this address: read into a bounce buffer, copied there on completion.
    BounceTo(u64),
    /// The request's 8-byte scratch slot (an atomic's old value, a `g`'s bytes).
    Scratch,
}

/// One verbs work request of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Wr {
    pub(crate) op: RdmaOp,
    pub(crate) local: Local,
    pub(crate) len: u32,
    /// The remote address (the peer's heap base plus the offset).
    pub(crate) remote: u64,
    pub(crate) rkey: u32,
    /// `IBV_SEND_FENCE`.
    pub(crate) fence: bool,
    /// `IBV_SEND_INLINE`.
    pub(crate) inline: bool,
    /// Asks for a completion.
    pub(crate) signaled: bool,
}

/// What completes the request once its last work request completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    /// Its tickets are complete.
    Done,
    /// The scratch slot's bytes (little-endian, zero-extended) go to the request's return slot.
    Return,
    /// The scratch slot's first `width` bytes go to `dst` (a fetching atomic with a local address).
    CopyOld { dst: u64, width: u32 },
}

/// Whether (part of) the request takes the TCP frame path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tcp {
    /// All of it through verbs.
    No,
    /// All of it over TCP, and why.
    All(&'static str),
    /// The data through verbs, then (once the WRITEs completed) the signal over TCP.
    SignalAfter,
}

/// What one request becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) wrs: Vec<Wr>,
    pub(crate) finish: Finish,
    pub(crate) tcp: Tcp,
    /// First wait until every verbs operation to the peer completed (before a TCP-path request).
    pub(crate) wait_verbs: bool,
    /// First wait until the TCP path's requests to the peer are complete at the target (before
    /// verbs operations).
    pub(crate) wait_tcp: bool,
}

/// The per-peer (per-QP) state the rules need: what is outstanding and what is unfenced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PeerState {
    /// Signaled work requests posted and not yet completed (quiet waits for 0).
    pub(crate) outstanding: u64,
    /// READs posted since the last fence.
    unfenced_reads: bool,
    /// Atomics posted since the last fence.
    unfenced_atomics: bool,
    /// Requests went over TCP since the last wait for them.
    pub(crate) tcp_pending: bool,
}

impl PeerState {
    /// `n` signaled work requests completed (with every unsignaled one before them).
    pub(crate) fn completed(&mut self, n: u64) {
        self.outstanding = self.outstanding.saturating_sub(n);
        if self.outstanding == 0 {
            // Everything posted is complete: nothing left for a fence to wait for.
            self.unfenced_reads = false;
            self.unfenced_atomics = false;
        }
    }
    /// Whether no verbs operation to the peer is outstanding.
    pub(crate) fn idle(&self) -> bool {
        self.outstanding == 0
    }
    /// Whether work request `op` needs `IBV_SEND_FENCE`, and the state after posting it: a WRITE may
    /// pass an earlier READ or atomic, an atomic an earlier READ; READs after READs and atomics after
    /// atomics stay in order.
    fn fence_for(&mut self, op: RdmaOp) -> bool {
        let fence = match op {
            RdmaOp::Write => self.unfenced_reads || self.unfenced_atomics,
            RdmaOp::Read => self.unfenced_atomics,
            _ => self.unfenced_reads,
        };
        if fence {
            self.unfenced_reads = false;
            self.unfenced_atomics = false;
        }
        self.unfenced_reads |= op == RdmaOp::Read;
        self.unfenced_atomics |= op.is_atomic();
        fence
    }
}

/// The registered region holding `[addr, addr + len)`, if any (`local`: lists of regions, searched in
/// order).
pub(crate) fn find(local: &[&[Region]], addr: u64, len: u64) -> Option<Region> {
    local.iter().flat_map(|l| l.iter()).copied().find(|r| addr >= r.addr && addr.checked_add(len).is_some_and(|e| e <= r.addr + r.len))
}

/// `[offset, offset + len)` of the peer's heap cut into pieces of at most `chunk` bytes that do not
/// cross a registered segment: (offset in the transfer, length, remote address, rkey). None when a
/// byte of it is not registered.
fn pieces(peer: &Peer, offset: u64, len: u64, chunk: u64) -> Option<Vec<(u64, u32, u64, u32)>> {
    let chunk = chunk.clamp(1, u32::MAX as u64);
    let mut out = Vec::new();
    let mut at = 0;
    while at < len {
        let off = offset + at;
        let s = peer.segs.iter().find(|s| off >= s.start && off < s.end)?;
        let n = (len - at).min(s.end - off).min(chunk);
        out.push((at, n as u32, peer.heap_base + off, s.rkey));
        at += n;
    }
    Some(out)
}

/// Builds a plan's work requests, applying the fence rules as they are added.
struct Builder<'s> {
    wrs: Vec<Wr>,
    st: &'s mut PeerState,
    max_inline: u32,
}

impl Builder<'_> {
    fn push(&mut self, op: RdmaOp, local: Local, len: u32, remote: u64, rkey: u32, inline_ok: bool) {
        let fence = self.st.fence_for(op);
        let inline = op == RdmaOp::Write && inline_ok && len <= self.max_inline;
        // A staging or bounce buffer is reused when its request completes: it must complete alone.
        let signaled = matches!(local, Local::BounceTo(_)) || (matches!(local, Local::StageFrom(_)) && !inline);
        self.wrs.push(Wr { op, local, len, remote, rkey, fence, inline, signaled });
    }

    /// `len` bytes between local address `addr` and the peer's heap offset `offset` by `op` (a WRITE
    /// or a READ): with the registered region `reg` holding them, in pieces of the NIC's largest
    /// message; without one, through staging (WRITE) or bounce (READ) buffers, in pieces of their size.
    #[allow(clippy::too_many_arguments)]
    fn transfer(&mut self, op: RdmaOp, reg: Option<Region>, addr: u64, offset: u64, len: u64, peer: &Peer, lim: &Limits) -> Result<(), &'static str> {
        let chunk = if reg.is_some() { lim.max_msg } else { lim.max_msg.min(lim.stage) };
        for (o, k, remote, rkey) in pieces(peer, offset, len, chunk).ok_or(NOT_REGISTERED)? {
            let (local, inline_ok) = match reg {
                Some(reg) => (Local::Mem { addr: addr + o, lkey: reg.lkey }, reg.host),
                None if op == RdmaOp::Write => (Local::StageFrom(addr + o), true),
                None => (Local::BounceTo(addr + o), false),
            };
            self.push(op, local, k, remote, rkey, inline_ok);
        }
        Ok(())
    }

    /// The data of a put: `[src, src + len)` to heap offset `offset`, or the staged pieces.
    fn put(&mut self, r: &Request, staged: [(u64, u64); 2], local: &[&[Region]], peer: &Peer, lim: &Limits) -> Result<(), &'static str> {
        if matches!(r.op, op::PUT_STAGED | op::PUT_SIGNAL_STAGED) {
            let mut at = 0;
            for (addr, n) in staged.into_iter().filter(|p| p.1 > 0) {
                let reg = find(local, addr, n).ok_or("the staged bytes are outside registered memory")?;
                self.transfer(RdmaOp::Write, Some(reg), addr, r.offset + at, n, peer, lim)?;
                at += n;
            }
            return Ok(());
        }
        self.transfer(RdmaOp::Write, find(local, r.src, r.len), r.src, r.offset, r.len, peer, lim)
    }

    /// A 64-bit atomic on the heap word at `offset`, its old value into the scratch slot.
    fn atomic(&mut self, op: RdmaOp, peer: &Peer, offset: u64, fence: bool) -> Result<(), &'static str> {
        let p = pieces(peer, offset, 8, 8).ok_or(NOT_REGISTERED)?;
        let (_, _, remote, rkey) = p[0];
        self.push(op, Local::Scratch, 8, remote, rkey, false);
        if fence {
            self.wrs.last_mut().expect("just pushed").fence = true;
        }
        Ok(())
    }
}

const NOT_REGISTERED: &str = "the heap range is not registered with the NIC";

/// What request `r` (checked by `ring::check_request`) becomes on the QP to its target: the work
/// requests, what completes it, whether (part of) it takes the TCP path, and what it waits for first.
/// `staged`: a staged put's pieces (address, length) in the channel memory; `local`: this PE's
/// registered regions (lists of them); `st`: the peer's state, updated as if the plan were posted.
pub(crate) fn plan(r: &Request, staged: [(u64, u64); 2], local: &[&[Region]], peer: &Peer, lim: &Limits, st: &mut PeerState) -> Plan {
    let snapshot = *st;
    let mut b = Builder { wrs: Vec::new(), st, max_inline: lim.max_inline };
    let signal_add = r.sub as i32 == rshmem_device::SIGNAL_ADD;
    let built: Result<(Finish, Tcp), &'static str> = (|| match r.op {
        op::PUT | op::PUT_STAGED => b.put(r, staged, local, peer, lim).map(|_| (Finish::Done, Tcp::No)),
        op::PUT_SIGNAL | op::PUT_SIGNAL_STAGED => {
            b.put(r, staged, local, peer, lim)?;
            if signal_add && peer.atomics {
                // Fenced, though RC keeps it behind the WRITEs anyway: the signal never passes them.
                b.atomic(RdmaOp::FetchAdd { add: r.sig_value }, peer, r.sig_offset, true)?;
                Ok((Finish::Done, Tcp::No))
            } else {
                Ok((Finish::Done, Tcp::SignalAfter))
            }
        }
        op::PUT_INLINE => {
            let (_, k, remote, rkey) = pieces(peer, r.offset, r.len, 8).ok_or(NOT_REGISTERED)?[0];
            b.push(RdmaOp::Write, Local::Value(r.value), k, remote, rkey, true);
            Ok((Finish::Done, Tcp::No))
        }
        op::SIGNAL if signal_add && peer.atomics => {
            b.atomic(RdmaOp::FetchAdd { add: r.sig_value }, peer, r.sig_offset, false)?;
            Ok((Finish::Done, Tcp::No))
        }
        op::SIGNAL => Err(if signal_add { "no NIC atomics" } else { "a signal set (no NIC atomic sets a word)" }),
        op::GET if r.len == 0 => Ok((Finish::Done, Tcp::No)),
        op::GET if r.sub & SUB_RETURN != 0 => {
            let (_, k, remote, rkey) = pieces(peer, r.offset, r.len, 8).ok_or(NOT_REGISTERED)?[0];
            b.push(RdmaOp::Read, Local::Scratch, k, remote, rkey, false);
            Ok((Finish::Return, Tcp::No))
        }
        op::GET => {
            b.transfer(RdmaOp::Read, find(local, r.src, r.len), r.src, r.offset, r.len, peer, lim)?;
            Ok((Finish::Done, Tcp::No))
        }
        op::AMO => {
            let code = (r.sub & 0xff) as u8;
            let aop = AmoOp::from_u8(code).ok_or("an unknown atomic (the TCP path names it)")?;
            if r.len != 8 {
                return Err("a 32-bit atomic (NIC atomics are 64-bit)");
            }
            if !peer.atomics {
                return Err("no NIC atomics");
            }
            let op = match aop {
                AmoOp::FetchAdd | AmoOp::Add => RdmaOp::FetchAdd { add: r.value },
                AmoOp::Fetch => RdmaOp::FetchAdd { add: 0 },
                AmoOp::CompareSwap => RdmaOp::CompareSwap { compare: r.sig_value, swap: r.value },
                _ => return Err("an atomic the NIC does not do (set, swap, and, or, xor)"),
            };
            b.atomic(op, peer, r.offset, false)?;
            let finish = if !aop.fetches() {
                Finish::Done
            } else if r.sub & SUB_RETURN != 0 {
                Finish::Return
            } else if r.src != 0 {
                Finish::CopyOld { dst: r.src, width: 8 }
            } else {
                Finish::Done
            };
            Ok((finish, Tcp::No))
        }
        _ => Err("not a data operation"),
    })();
    match built {
        Ok((finish, tcp)) => {
            let mut wrs = b.wrs;
            if let Some(last) = wrs.last_mut() {
                last.signaled = true;
            }
            st.outstanding += wrs.iter().filter(|w| w.signaled).count() as u64;
            let wait_tcp = st.tcp_pending && !wrs.is_empty();
            if !wrs.is_empty() {
                st.tcp_pending = false;
            }
            if tcp == Tcp::SignalAfter {
                st.tcp_pending = true;
            }
            Plan { wrs, finish, tcp, wait_verbs: false, wait_tcp }
        }
        Err(why) => {
            // Nothing was posted: back to the state before, then the TCP path after the verbs ones.
            *st = snapshot;
            let wait_verbs = !st.idle();
            st.tcp_pending = true;
            Plan { wrs: Vec::new(), finish: Finish::Done, tcp: Tcp::All(why), wait_verbs, wait_tcp: false }
        }
    }
}

#[cfg(all(test, feature = "verbs"))]
mod tests {
    use super::*;
    use rshmem_device::remote::proxy::amo;

    const BASE: u64 = 0x7f00_0000_0000;
    const HEAP_L: u64 = 0x5500_0000_0000;
    const CHAN: u64 = 0x6600_0000_0000;
    const LIM: Limits = Limits { max_msg: 1 << 20, max_inline: 64, stage: 1 << 16 };
    const SEGS: &[Seg] = &[Seg { start: 0, end: 1 << 24, rkey: 0xaa }, Seg { start: 1 << 24, end: 1 << 25, rkey: 0xbb }];

    fn local() -> Vec<Region> {
        vec![Region { addr: HEAP_L, len: 1 << 25, lkey: 0x11, host: false }, Region { addr: CHAN, len: 1 << 20, lkey: 0x22, host: true }]
    }
    fn peer(atomics: bool) -> Peer<'static> {
        Peer { heap_base: BASE, segs: SEGS, atomics }
    }
    fn req(op: u16, offset: u64, len: u64, src: u64) -> Request {
        Request { op, pe: 1, offset, len, src, ..Request::default() }
    }
    fn go(r: &Request, st: &mut PeerState) -> Plan {
        plan(r, [(0, 0); 2], &[&local()], &peer(true), &LIM, st)
    }

    #[test]
    fn a_put_from_the_heap_is_writes_cut_at_the_max_message_and_segments() {
        let mut st = PeerState::default();
        // 2.5 MiB from 1 MiB below the segment border: 1 MiB (seg a), then 1 MiB + 0.5 MiB (seg b).
        let off = (1 << 24) - (1 << 20);
        let p = go(&req(op::PUT, off, 5 << 19, HEAP_L + 8), &mut st);
        assert_eq!(p.tcp, Tcp::No);
        let got: Vec<(u64, u32, u64, u32, bool)> = p.wrs.iter().map(|w| match w.local {
            Local::Mem { addr, lkey } => (addr - HEAP_L, w.len, w.remote - BASE, w.rkey, w.signaled && lkey == 0x11),
            l => panic!("{l:?}"),
        }).collect();
        assert_eq!(got, vec![(8, 1 << 20, off, 0xaa, false), (8 + (1 << 20), 1 << 20, 1 << 24, 0xbb, false), (8 + (2 << 20), 1 << 19, (1 << 24) + (1 << 20), 0xbb, true)]);
        assert!(p.wrs.iter().all(|w| w.op == RdmaOp::Write && !w.inline && !w.fence));
        assert_eq!(st.outstanding, 1, "one completion per request");
    }

    #[test]
    fn inline_only_from_host_memory_and_up_to_the_threshold() {
        let mut st = PeerState::default();
        // GPU heap source: never inline (the CPU cannot read it).
        assert!(!go(&req(op::PUT, 0, 8, HEAP_L), &mut st).wrs[0].inline);
        // Staged bytes in host channel memory: inline up to 64 bytes.
        let mut staged = |n: u64| plan(&req(op::PUT_STAGED, 0, n, 0), [(CHAN, n), (0, 0)], &[&local()], &peer(true), &LIM, &mut st).wrs;
        assert!(staged(64)[0].inline);
        assert!(!staged(65)[0].inline);
        // `p`: the value itself, inline.
        let mut r = req(op::PUT_INLINE, 16, 4, 0);
        r.value = 0xdead_beef;
        let p = go(&r, &mut st);
        assert_eq!(p.wrs, vec![Wr { op: RdmaOp::Write, local: Local::Value(0xdead_beef), len: 4, remote: BASE + 16, rkey: 0xaa, fence: false, inline: true, signaled: true }]);
        // Without inline support the value is sent from the scratch slot.
        let no_inline = Limits { max_inline: 0, ..LIM };
        let p = plan(&r, [(0, 0); 2], &[&local()], &peer(true), &no_inline, &mut st);
        assert!(!p.wrs[0].inline);
    }

    #[test]
    fn a_staged_put_that_wraps_is_two_writes_in_order() {
        let mut st = PeerState::default();
        let p = plan(&req(op::PUT_STAGED, 0x100, 3000, 0), [(CHAN + 0xf000, 1000), (CHAN, 2000)], &[&local()], &peer(true), &LIM, &mut st);
        let got: Vec<(Local, u32, u64)> = p.wrs.iter().map(|w| (w.local, w.len, w.remote - BASE)).collect();
        assert_eq!(got, vec![(Local::Mem { addr: CHAN + 0xf000, lkey: 0x22 }, 1000, 0x100), (Local::Mem { addr: CHAN, lkey: 0x22 }, 2000, 0x100 + 1000)]);
        // Staged bytes outside registered memory take the TCP path.
        let p = plan(&req(op::PUT_STAGED, 0, 8, 0), [(0x1000, 8), (0, 0)], &[&local()], &peer(true), &LIM, &mut st);
        assert_eq!(p.tcp, Tcp::All("the staged bytes are outside registered memory"));
    }

    #[test]
    fn unregistered_sources_and_destinations_go_through_staging_chunks() {
        let mut st = PeerState::default();
        let p = go(&req(op::PUT, 0, (1 << 16) * 2 + 5, 0x1000), &mut st);
        assert_eq!(p.wrs.iter().map(|w| (w.local, w.len, w.signaled)).collect::<Vec<_>>(), vec![
            (Local::StageFrom(0x1000), 1 << 16, true),
            (Local::StageFrom(0x1000 + (1 << 16)), 1 << 16, true),
            (Local::StageFrom(0x1000 + (2 << 16)), 5, true),
        ]);
        assert_eq!(st.outstanding, 3, "each staging chunk completes alone");
        let p = go(&req(op::GET, 8, (1 << 16) + 1, 0x2000), &mut st);
        assert_eq!(p.wrs.iter().map(|w| (w.op, w.local, w.len, w.signaled)).collect::<Vec<_>>(), vec![
            (RdmaOp::Read, Local::BounceTo(0x2000), 1 << 16, true),
            (RdmaOp::Read, Local::BounceTo(0x2000 + (1 << 16)), 1, true),
        ]);
        assert_eq!(st.outstanding, 5);
    }

    #[test]
    fn gets_read_into_registered_memory_or_the_scratch_slot() {
        let mut st = PeerState::default();
        let p = go(&req(op::GET, 0, 3 << 20, HEAP_L), &mut st);
        assert_eq!(p.wrs.len(), 3);
        assert!(p.wrs.iter().all(|w| w.op == RdmaOp::Read && matches!(w.local, Local::Mem { lkey: 0x11, .. })));
        assert_eq!((p.finish, st.outstanding), (Finish::Done, 1));
        let mut g = req(op::GET, 0x40, 4, 0);
        g.sub = SUB_RETURN;
        let p = go(&g, &mut st);
        assert_eq!((p.wrs[0].local, p.wrs[0].len, p.finish), (Local::Scratch, 4, Finish::Return));
        // An empty GET completes at once, with no work request.
        let p = go(&req(op::GET, 0, 0, HEAP_L), &mut st);
        assert!(p.wrs.is_empty() && p.tcp == Tcp::No);
    }

    fn amo_req(code: u16, len: u64, fetch_to: u64, ret: bool) -> Request {
        let mut r = req(op::AMO, 0x80, len, fetch_to);
        r.sub = code | if ret { SUB_RETURN } else { 0 };
        r.value = 5;
        r.sig_value = 9;
        r
    }

    #[test]
    fn sixty_four_bit_adds_and_compare_swaps_are_nic_atomics_the_rest_tcp() {
        let mut st = PeerState::default();
        let one = |r: Request, st: &mut PeerState| go(&r, st);
        let p = one(amo_req(amo::FETCH_ADD, 8, 0, true), &mut st);
        assert_eq!((p.wrs[0].op, p.wrs[0].local, p.wrs[0].remote, p.finish), (RdmaOp::FetchAdd { add: 5 }, Local::Scratch, BASE + 0x80, Finish::Return));
        let p = one(amo_req(amo::ADD, 8, 0, false), &mut st);
        assert_eq!((p.wrs[0].op, p.finish), (RdmaOp::FetchAdd { add: 5 }, Finish::Done));
        let p = one(amo_req(amo::FETCH, 8, HEAP_L, false), &mut st);
        assert_eq!((p.wrs[0].op, p.finish), (RdmaOp::FetchAdd { add: 0 }, Finish::CopyOld { dst: HEAP_L, width: 8 }));
        let p = one(amo_req(amo::COMPARE_SWAP, 8, 0, true), &mut st);
        assert_eq!(p.wrs[0].op, RdmaOp::CompareSwap { compare: 9, swap: 5 });
        for code in [amo::SET, amo::SWAP, amo::AND, amo::FETCH_OR, amo::XOR] {
            let p = one(amo_req(code, 8, 0, true), &mut st);
            assert_eq!(p.tcp, Tcp::All("an atomic the NIC does not do (set, swap, and, or, xor)"), "code {code}");
            assert!(p.wrs.is_empty());
        }
        let p = one(amo_req(amo::FETCH_ADD, 4, 0, true), &mut st);
        assert_eq!(p.tcp, Tcp::All("a 32-bit atomic (NIC atomics are 64-bit)"));
        let p = plan(&amo_req(amo::FETCH_ADD, 8, 0, true), [(0, 0); 2], &[&local()], &peer(false), &LIM, &mut st);
        assert_eq!(p.tcp, Tcp::All("no NIC atomics"));
    }

    #[test]
    fn fences_after_reads_and_atomics() {
        let mut st = PeerState::default();
        // READ, READ: in order without a fence; then a WRITE must not pass them.
        assert!(!go(&req(op::GET, 0, 8, HEAP_L), &mut st).wrs[0].fence);
        assert!(!go(&req(op::GET, 8, 8, HEAP_L), &mut st).wrs[0].fence);
        assert!(go(&req(op::PUT, 0, 8, HEAP_L), &mut st).wrs[0].fence);
        // The fence covered them: the next WRITE needs none.
        assert!(!go(&req(op::PUT, 8, 8, HEAP_L), &mut st).wrs[0].fence);
        // Atomic, atomic: in order; a READ after them is fenced, and an atomic after a READ.
        assert!(!go(&amo_req(amo::ADD, 8, 0, false), &mut st).wrs[0].fence);
        assert!(!go(&amo_req(amo::ADD, 8, 0, false), &mut st).wrs[0].fence);
        assert!(go(&req(op::GET, 0, 8, HEAP_L), &mut st).wrs[0].fence);
        assert!(go(&amo_req(amo::ADD, 8, 0, false), &mut st).wrs[0].fence);
        // Once everything completed, nothing is left to fence.
        let n = st.outstanding;
        st.completed(n);
        assert!(st.idle());
        assert!(!go(&req(op::PUT, 0, 8, HEAP_L), &mut st).wrs[0].fence);
    }

    #[test]
    fn put_with_signal_orders_the_signal_after_the_data() {
        let mut st = PeerState::default();
        let mut r = req(op::PUT_SIGNAL, 0, 100, HEAP_L);
        r.sig_offset = 0x1000;
        r.sig_value = 3;
        r.sub = rshmem_device::SIGNAL_ADD as u16;
        let p = go(&r, &mut st);
        assert_eq!(p.tcp, Tcp::No);
        assert_eq!(p.wrs.len(), 2);
        let s = p.wrs[1];
        assert_eq!((s.op, s.remote, s.fence, s.signaled, p.wrs[0].signaled), (RdmaOp::FetchAdd { add: 3 }, BASE + 0x1000, true, true, false));
        // A signal set: the WRITEs through verbs, the signal over TCP after them.
        r.sub = rshmem_device::SIGNAL_SET as u16;
        let p = go(&r, &mut st);
        assert_eq!((p.tcp, p.wrs.len()), (Tcp::SignalAfter, 1));
        assert!(st.tcp_pending, "the signal is on the TCP path now");
        // No atomics: an add goes the same way.
        r.sub = rshmem_device::SIGNAL_ADD as u16;
        let p = plan(&r, [(0, 0); 2], &[&local()], &peer(false), &LIM, &mut st);
        assert_eq!(p.tcp, Tcp::SignalAfter);
        // A lone signal add is one atomic; a lone set is TCP.
        let mut sig = req(op::SIGNAL, 0, 0, 0);
        sig.sig_offset = 0x1000;
        sig.sig_value = 1;
        sig.sub = rshmem_device::SIGNAL_ADD as u16;
        assert_eq!(go(&sig, &mut st).wrs[0].op, RdmaOp::FetchAdd { add: 1 });
        sig.sub = rshmem_device::SIGNAL_SET as u16;
        assert_eq!(go(&sig, &mut st).tcp, Tcp::All("a signal set (no NIC atomic sets a word)"));
    }

    #[test]
    fn switching_paths_waits_for_the_other_one() {
        let mut st = PeerState::default();
        let p = go(&req(op::PUT, 0, 8, HEAP_L), &mut st);
        assert!(!p.wait_tcp && !p.wait_verbs && st.outstanding == 1);
        // A TCP-path request waits for the verbs completion first; the state is as before it.
        let p = go(&amo_req(amo::SWAP, 8, 0, true), &mut st);
        assert!(p.wait_verbs && p.tcp != Tcp::No && st.tcp_pending && st.outstanding == 1);
        st.completed(1);
        // The next verbs request waits for the TCP path first, once.
        let p = go(&req(op::PUT, 0, 8, HEAP_L), &mut st);
        assert!(p.wait_tcp && !st.tcp_pending);
        assert!(!go(&req(op::PUT, 0, 8, HEAP_L), &mut st).wait_tcp);
        // An unregistered heap range falls back to TCP.
        let p = go(&req(op::PUT, 1 << 25, 8, HEAP_L), &mut st);
        assert_eq!(p.tcp, Tcp::All(NOT_REGISTERED));
    }

    #[test]
    fn quiet_accounting_counts_one_completion_per_request_plus_buffer_reuses() {
        let mut st = PeerState::default();
        let mut expect = 0;
        for (r, n) in [
            (req(op::PUT, 0, 3 << 20, HEAP_L), 1),
            (req(op::GET, 0, 3 << 20, HEAP_L), 1),
            (req(op::PUT, 0, 100, 0x9000), 1),
            (req(op::PUT, 0, (1 << 16) + 1, 0x9000), 2),
            (amo_req(amo::FETCH_ADD, 8, 0, true), 1),
            (amo_req(amo::AND, 8, 0, true), 0),
        ] {
            go(&r, &mut st);
            expect += n;
            assert_eq!(st.outstanding, expect, "{r:?}");
        }
        st.completed(2);
        assert_eq!(st.outstanding, expect - 2);
        st.completed(100);
        assert!(st.idle());
    }
}
