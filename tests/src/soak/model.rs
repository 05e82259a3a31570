//! The soak's reference model: plain Rust that replays every program of a round on byte images of
//! every PE's buffer and predicts each byte and each fetched value, and the checker that compares a
//! PE's real buffer and records with it. It does not share code with the device library: the
//! semantics of each call (put, get, p/g, each AMO, signals, flags, barriers) are written here again.

use rshmem_soak_kernels::*;
use std::collections::BTreeMap;

/// Who issued an operation.
#[derive(Clone, Copy, Debug)]
pub enum Who {
    Thread(usize),
    /// A block (u == 0) or a warp (u >= 1) of block `b`: local unit `lu`.
    Unit(usize),
    /// Thread 0 in device-barrier iteration `i`.
    Barrier(usize),
}

/// One operation of the round, for messages.
#[derive(Clone, Debug)]
pub struct OpInfo {
    pub pe: usize,
    pub who: Who,
    /// Position in its program (0-based).
    pub idx: usize,
    pub op: Op,
    /// The PE the operation acted on.
    pub target: usize,
}

/// What a record (a value a kernel saved) must be.
#[derive(Clone, Copy, Debug)]
pub enum Rec {
    Exact(u64),
    /// Fetched from a shared word: checked with the other fetches of that word.
    Shared { word: usize, target: usize, val: u64, op: AmoOp },
}

pub struct Model {
    pub lay: Layout,
    pub n: usize,
    pub seed: u64,
    pub round: u64,
    /// This PE's buffer before the round (what the host copies in).
    pub start: Vec<u8>,
    pub img: Vec<Vec<u8>>,
    /// Per PE, per byte: 1 + the id of the last operation that wrote it (0: nothing did).
    owner: Vec<Vec<u32>>,
    pub ops: Vec<OpInfo>,
    /// Per PE, per local thread / local unit: the records it must have saved, with the op id.
    pub recs: Vec<Vec<Vec<(Rec, usize)>>>,
    pub urecs: Vec<Vec<Vec<(Rec, usize)>>>,
    /// Per PE, per local thread: device API calls made.
    pub calls: Vec<Vec<u64>>,
    /// Initial values of the shared words, per PE.
    pub shared_init: Vec<[u64; SHARED_WORDS]>,
    /// Calls of the round by kind (for the summary).
    pub by_kind: BTreeMap<&'static str, u64>,
    pub total_calls: u64,
    /// Last value fetched from an own word, per thread being replayed (cswap compares with it).
    last: u64,
}

fn mask(bytes: usize) -> u64 {
    if bytes >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * bytes)) - 1
    }
}

/// A buffer as it is at the start of a round on PE `pe`: random bytes, except where a value must
/// start known (signals and flags, shared words, barrier slots, the results).
fn initial(seed: u64, round: u64, pe: usize, lay: &Layout) -> (Vec<u8>, [u64; SHARED_WORDS]) {
    let mut r = Rng::new(seed ^ 0x1417, round, pe as u64, 77, 0);
    let mut b = vec![0u8; lay.size];
    for c in b.chunks_mut(8) {
        let v = r.next_u64().to_le_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
    let put = |b: &mut Vec<u8>, off: usize, v: u64, bytes: usize| b[off..off + bytes].copy_from_slice(&v.to_le_bytes()[..bytes]);
    let d = distance(seed, round, lay.n);
    for from in 0..lay.n {
        for lt in 0..lay.w {
            let g = lay.gthread(from, lt);
            put(&mut b, lay.sig(g), 0, 8);
            // The flag starts at its channel's initial value where that channel arrives.
            let init = if (from + d) % lay.n == pe { Chan::new(seed, round, from, lt, false).init } else { 0 };
            put(&mut b, lay.flag(g), init, 8);
            // Own float words hold numbers (swap/compare_swap/fetch/set only move bits around).
            put(&mut b, lay.own_word(g, 2), ((r.next_u64() as i32 >> 8) as f32 / 8.0).to_bits() as u64, 4);
            put(&mut b, lay.own_word(g, 3), ((r.next_u64() as i64 >> 12) as f64 / 8.0).to_bits(), 8);
        }
        for lu in 0..lay.blocks * lay.ub {
            put(&mut b, lay.usig_of(lay.gunit(from, lu)), 0, 8);
        }
    }
    let mut sh = [0u64; SHARED_WORDS];
    for (i, s) in sh.iter_mut().enumerate() {
        let wide = i % 2 == 1;
        *s = match i {
            W_CHAIN32..=W_SUM64 => r.below(if wide { 1 << 62 } else { 1 << 30 }),
            W_OR32..=W_XOR64 => r.next_u64() & mask(if wide { 8 } else { 4 }),
            W_LOCK => 0,
            W_LOCKED => r.below(1 << 40),
            _ => r.next_u64(),
        };
        let bytes = if i < W_LOCK && !wide { 4 } else { 8 };
        put(&mut b, lay.shared_word(i), *s, bytes);
    }
    b[lay.bar..lay.bar + MAX_PES * 8].fill(0);
    b[lay.bar_snap..lay.bar_snap + BAR_ITERS * MAX_PES * 8].fill(0);
    b[lay.ures..lay.ures + lay.blocks * lay.ub * 32].fill(0);
    b[lay.res..].fill(0);
    (b, sh)
}

impl Model {
    /// Replays round `round` of every PE.
    #[allow(clippy::too_many_arguments)]
    pub fn build(seed: u64, round: u64, me: usize, n: usize, blocks: usize, threads: usize, per_thread: usize, per_unit: usize, skip: u32) -> Model {
        let lay = Layout::new(n, blocks, threads, per_thread);
        let mut img = Vec::with_capacity(n);
        let mut shared_init = Vec::with_capacity(n);
        for pe in 0..n {
            let (b, s) = initial(seed, round, pe, &lay);
            img.push(b);
            shared_init.push(s);
        }
        let mut m = Model {
            lay,
            n,
            seed,
            round,
            start: img[me].clone(),
            owner: vec![vec![0; lay.size]; n],
            img,
            ops: Vec::new(),
            recs: vec![vec![Vec::new(); lay.w]; n],
            urecs: vec![vec![Vec::new(); blocks * lay.ub]; n],
            calls: vec![vec![0; lay.w]; n],
            shared_init,
            by_kind: BTreeMap::new(),
            total_calls: 0,
            last: 0,
        };
        // Every program up to its receive; the receives once every message has been sent.
        let mut recvs = Vec::new();
        for pe in 0..n {
            for lt in 0..lay.w {
                let mut prog = Prog::new(seed, round, pe, lt, n, per_thread, skip, false);
                m.last = 0;
                let mut idx = 0;
                while let Some(op) = prog.next_op() {
                    if op == Op::Recv {
                        recvs.push((pe, Who::Thread(lt), idx));
                    } else {
                        m.thread_op(pe, lt, idx, op);
                    }
                    idx += 1;
                }
            }
            if skip & SKIP_GROUP == 0 {
                for lu in 0..blocks * lay.ub {
                    let mut prog = Prog::new(seed, round, pe, lu, n, per_unit, skip, true);
                    let mut idx = 0;
                    while let Some(op) = prog.next_op() {
                        if op == Op::Recv {
                            recvs.push((pe, Who::Unit(lu), idx));
                        } else {
                            m.unit_op(pe, lu, idx, op);
                        }
                        idx += 1;
                    }
                }
            }
        }
        for (pe, who, idx) in recvs {
            m.recv(pe, who, idx);
        }
        if skip & SKIP_BARRIER == 0 {
            m.barriers();
        }
        m
    }

    fn add_op(&mut self, pe: usize, who: Who, idx: usize, op: Op, target: usize) -> usize {
        self.ops.push(OpInfo { pe, who, idx, op, target });
        self.ops.len() - 1
    }

    fn count(&mut self, pe: usize, lt: usize, kind: &'static str, calls: u64) {
        self.calls[pe][lt] += calls;
        *self.by_kind.entry(kind).or_default() += calls;
        self.total_calls += calls;
    }

    fn write(&mut self, pe: usize, off: usize, bytes: &[u8], id: usize) {
        self.img[pe][off..off + bytes.len()].copy_from_slice(bytes);
        self.owner[pe][off..off + bytes.len()].fill(id as u32 + 1);
    }
    fn read(&self, pe: usize, off: usize, len: usize) -> Vec<u8> {
        self.img[pe][off..off + len].to_vec()
    }
    fn read_u64(&self, pe: usize, off: usize, bytes: usize) -> u64 {
        let mut v = [0u8; 8];
        v[..bytes].copy_from_slice(&self.img[pe][off..off + bytes]);
        u64::from_le_bytes(v)
    }
    fn write_u64(&mut self, pe: usize, off: usize, v: u64, bytes: usize, id: usize) {
        self.write(pe, off, &v.to_le_bytes()[..bytes], id);
    }

    /// One AMO on `bytes` at `off` of PE `pe`: returns the old value.
    #[allow(clippy::too_many_arguments)]
    fn amo(&mut self, pe: usize, off: usize, ty: Ty, op: AmoOp, val: u64, cond: u64, id: usize) -> u64 {
        let bytes = ty.bytes();
        let m = mask(bytes);
        let old = self.read_u64(pe, off, bytes);
        let new = match op {
            AmoOp::FetchAdd | AmoOp::Add => old.wrapping_add(val) & m,
            AmoOp::FetchInc | AmoOp::Inc => old.wrapping_add(1) & m,
            AmoOp::Cswap => {
                if old == cond & m {
                    val & m
                } else {
                    old
                }
            }
            AmoOp::Swap | AmoOp::Set => val & m,
            AmoOp::Fetch => old,
            AmoOp::FetchAnd | AmoOp::And => old & val,
            AmoOp::FetchOr | AmoOp::Or => (old | val) & m,
            AmoOp::FetchXor | AmoOp::Xor => (old ^ val) & m,
        };
        if op != AmoOp::Fetch {
            self.write_u64(pe, off, new, bytes, id);
        }
        old
    }

    fn thread_op(&mut self, pe: usize, lt: usize, idx: usize, op: Op) {
        let lay = self.lay;
        let g = lay.gthread(pe, lt);
        let target = match op {
            Op::P { pe, .. } | Op::G { pe, .. } | Op::Put { pe, .. } | Op::Get { pe, .. } => pe as usize,
            Op::AmoOwn { pe, .. } | Op::AmoShared { pe, .. } | Op::Lock { pe } => pe as usize,
            Op::Send { .. } => (pe + distance(self.seed, self.round, self.n)) % self.n,
            _ => pe,
        };
        let id = self.add_op(pe, Who::Thread(lt), idx, op, target);
        match op {
            Op::Fence => self.count(pe, lt, "fence", 1),
            Op::Quiet => self.count(pe, lt, "quiet", 1),
            Op::P { bytes, off, val, .. } => {
                self.write_u64(target, lay.slot(g) + off as usize, val, bytes as usize, id);
                self.count(pe, lt, "p", 1);
            }
            Op::G { bytes, src, off, .. } => {
                let base = if src == Src::Ro { lay.ro } else { lay.slot(g) };
                let v = self.read_u64(target, base + off as usize, bytes as usize);
                self.recs[pe][lt].push((Rec::Exact(v), id));
                self.count(pe, lt, "g", 1);
            }
            Op::Put { dst, src, len, nbi, elem, .. } => {
                let data = self.read(pe, lay.ro + src as usize, len as usize);
                self.write(target, lay.slot(g) + dst as usize, &data, id);
                self.count(pe, lt, if elem > 1 { "put (typed)" } else if nbi { "putmem_nbi" } else { "putmem" }, 1);
            }
            Op::Get { src, off, land, len, nbi, elem, .. } => {
                let base = if src == Src::Ro { lay.ro } else { lay.slot(g) };
                let data = self.read(target, base + off as usize, len as usize);
                self.write(pe, lay.land_of(lt) + land as usize, &data, id);
                self.count(pe, lt, if elem > 1 { "get (typed)" } else if nbi { "getmem_nbi" } else { "getmem" }, 1);
            }
            Op::AmoOwn { word, ty, op: aop, val, eq, .. } => {
                let cond = if eq { self.last } else { self.last ^ ty.flip() };
                let old = self.amo(target, lay.own_word(g, word as usize), ty, aop, val, cond, id);
                if aop.fetches() {
                    self.last = old;
                    self.recs[pe][lt].push((Rec::Exact(old), id));
                }
                self.count(pe, lt, aop.name(), 1);
            }
            Op::AmoShared { word, ty, op: aop, val, .. } => {
                let w = word as usize;
                self.amo(target, lay.shared_word(w), ty, aop, val, 0, id);
                if aop.fetches() {
                    self.recs[pe][lt].push((Rec::Shared { word: w, target, val, op: aop }, id));
                }
                self.count(pe, lt, aop.name(), 1);
            }
            Op::Lock { .. } => {
                let v = self.read_u64(target, lay.shared_word(W_LOCKED), 8);
                self.write_u64(target, lay.shared_word(W_LOCKED), v + 1, 8, id);
                self.write_u64(target, lay.shared_word(W_LOCK), 0, 8, id);
                self.count(pe, lt, "lock (compare_swap, fence, g, p, quiet, set)", 5);
            }
            Op::Send { i } => {
                let c = Chan::new(self.seed, self.round, pe, lt, false);
                let m = c.msg(i as usize);
                let data = self.read(pe, lay.ro + m.src, m.len);
                self.write(target, lay.slot(g) + SLOT_RMA + m.off, &data, id);
                match c.kind {
                    ChanKind::PutSigAdd | ChanKind::SigOpAdd => {
                        let v = self.read_u64(target, lay.sig(g), 8);
                        self.write_u64(target, lay.sig(g), v.wrapping_add(m.val), 8, id);
                    }
                    ChanKind::PutSigSet | ChanKind::SigOpSet => self.write_u64(target, lay.sig(g), m.val, 8, id),
                    ChanKind::Flag => self.write_u64(target, lay.flag(g), m.val & mask(c.ty.bytes()), c.ty.bytes(), id),
                }
                match c.kind {
                    ChanKind::PutSigAdd | ChanKind::PutSigSet => self.count(pe, lt, "putmem_signal", 1),
                    ChanKind::SigOpAdd | ChanKind::SigOpSet => self.count(pe, lt, "message: putmem, fence, signal_op", 3),
                    ChanKind::Flag => self.count(pe, lt, "message: putmem, fence, p(flag)", 3),
                }
            }
            Op::Recv => unreachable!("receives are replayed last"),
        }
    }

    /// Threads (local thread numbers) of local unit `lu`; the first one leads.
    fn members(&self, lu: usize) -> std::ops::Range<usize> {
        let (b, u) = (lu / self.lay.ub, lu % self.lay.ub);
        let first = b * self.lay.threads + if u == 0 { 0 } else { 32 * (u - 1) };
        first..first + self.lay.unit_threads(u)
    }

    fn unit_op(&mut self, pe: usize, lu: usize, idx: usize, op: Op) {
        let lay = self.lay;
        let gu = lay.gunit(pe, lu);
        let scope = if lu.is_multiple_of(lay.ub) { "block" } else { "warp" };
        let target = match op {
            Op::Put { pe, .. } | Op::Get { pe, .. } => pe as usize,
            Op::Send { .. } => (pe + distance(self.seed, self.round, self.n)) % self.n,
            _ => pe,
        };
        let id = self.add_op(pe, Who::Unit(lu), idx, op, target);
        let kind: &'static str = match op {
            Op::Fence => "fence",
            Op::Quiet => "quiet",
            Op::Put { src, dst, len, nbi, .. } => {
                let data = self.read(pe, lay.ro + src as usize, len as usize);
                self.write(target, lay.uslot(gu) + dst as usize, &data, id);
                match (scope, nbi) {
                    ("block", false) => "putmem_block",
                    ("block", true) => "putmem_nbi_block",
                    (_, false) => "putmem_warp",
                    _ => "putmem_nbi_warp",
                }
            }
            Op::Get { src, off, land, len, nbi, .. } => {
                let base = if src == Src::Ro { lay.ro } else { lay.uslot(gu) };
                let data = self.read(target, base + off as usize, len as usize);
                self.write(pe, lay.uland_of(lu) + land as usize, &data, id);
                match (scope, nbi) {
                    ("block", false) => "getmem_block",
                    ("block", true) => "getmem_nbi_block",
                    (_, false) => "getmem_warp",
                    _ => "getmem_nbi_warp",
                }
            }
            Op::Send { i } => {
                let c = Chan::new(self.seed, self.round, pe, lu, true);
                let m = c.msg(i as usize);
                let data = self.read(pe, lay.ro + m.src, m.len);
                self.write(target, lay.uslot(gu) + USLOT_RMA + m.off, &data, id);
                let s = lay.usig_of(gu);
                let v = if c.kind == ChanKind::PutSigAdd { self.read_u64(target, s, 8).wrapping_add(m.val) } else { m.val };
                self.write_u64(target, s, v, 8, id);
                if scope == "block" {
                    "putmem_signal_block"
                } else {
                    "putmem_signal_warp"
                }
            }
            other => unreachable!("no {other:?} in group programs"),
        };
        for lt in self.members(lu) {
            self.count(pe, lt, kind, 1);
        }
    }

    fn recv(&mut self, pe: usize, who: Who, idx: usize) {
        let lay = self.lay;
        let d = distance(self.seed, self.round, self.n);
        let from = (pe + self.n - d) % self.n;
        let id = self.add_op(pe, who, idx, Op::Recv, pe);
        match who {
            Who::Thread(lt) => {
                let c = Chan::new(self.seed, self.round, from, lt, false);
                if c.kind == ChanKind::Flag {
                    self.recs[pe][lt].push((Rec::Exact(1), id));
                    self.recs[pe][lt].push((Rec::Exact(0), id));
                    self.count(pe, lt, "wait_until + 2 test", 3);
                } else {
                    self.recs[pe][lt].push((Rec::Exact(c.last), id));
                    self.count(pe, lt, "signal_wait_until", 1);
                }
                let data = self.read(pe, lay.slot(lay.gthread(from, lt)) + SLOT_RMA, SLOT - SLOT_RMA);
                self.write(pe, lay.land_of(lt) + LAND_GET, &data, id);
            }
            Who::Unit(lu) => {
                let c = Chan::new(self.seed, self.round, from, lu, true);
                self.urecs[pe][lu].push((Rec::Exact(c.last), id));
                let leader = self.members(lu).start;
                self.count(pe, leader, "signal_wait_until", 1);
                let data = self.read(pe, lay.uslot(lay.gunit(from, lu)) + USLOT_RMA, USLOT - USLOT_RMA);
                self.write(pe, lay.uland_of(lu) + ULAND_GET, &data, id);
            }
            Who::Barrier(_) => unreachable!(),
        }
    }

    fn barriers(&mut self) {
        let lay = self.lay;
        let (k, variants) = barriers(self.seed, self.round);
        for (i, &v) in variants.iter().enumerate().take(k) {
            let tag = bar_tag(self.round, i);
            for pe in 0..self.n {
                let id = self.add_op(pe, Who::Barrier(i), i, Op::Fence, pe);
                for x in 0..self.n {
                    self.write_u64(x, lay.bar + 8 * pe, tag, 8, id);
                    self.write_u64(pe, lay.bar_snap + (i * MAX_PES + x) * 8, tag, 8, id);
                }
                self.count(pe, 0, "p", self.n as u64);
                if matches!(v, 1 | 4 | 5) {
                    self.count(pe, 0, "quiet", 1);
                }
                let joins = match v {
                    2 | 4 => lay.threads,
                    3 | 5 => lay.threads.min(32),
                    _ => 1,
                };
                for lt in 0..joins {
                    self.count(pe, lt, BAR_NAMES[v as usize], 2);
                }
            }
        }
    }

    // ------------------------------------------------------------------ reports

    fn who(&self, pe: usize, who: Who) -> String {
        match who {
            Who::Thread(lt) => format!("PE {pe} block {} thread {}", lt / self.lay.threads, lt % self.lay.threads),
            Who::Unit(lu) => {
                let (b, u) = (lu / self.lay.ub, lu % self.lay.ub);
                if u == 0 {
                    format!("PE {pe} block {b} (block scope)")
                } else {
                    format!("PE {pe} block {b} warp {} (warp scope)", u - 1)
                }
            }
            Who::Barrier(i) => format!("PE {pe} thread 0 (device barrier {i})"),
        }
    }

    /// The operation `id` in words: kind, scope, size, offsets, writer and target PE.
    pub fn describe(&self, id: usize) -> String {
        let o = &self.ops[id];
        let scope = match o.who {
            Who::Unit(lu) if lu % self.lay.ub == 0 => "block",
            Who::Unit(_) => "warp",
            _ => "thread",
        };
        let what = match o.op {
            Op::Fence => match o.who {
                Who::Barrier(i) => {
                    let (_, v) = barriers(self.seed, self.round);
                    format!("p of barrier tag {:#x} into its barrier slot on every PE, then {}", bar_tag(self.round, i), BAR_NAMES[v[i] as usize])
                }
                _ => "fence".into(),
            },
            Op::Quiet => "quiet".into(),
            Op::P { bytes, off, val, .. } => format!("p of {bytes} bytes (value {:#x}) at its slot + {off}", val & mask(bytes as usize)),
            Op::G { bytes, src, off, .. } => format!("g of {bytes} bytes from {} + {off}", if src == Src::Ro { "the read-only area" } else { "its slot" }),
            Op::Put { dst, src, len, nbi, elem, .. } => {
                format!("{} of {len} bytes, scope {scope}, from read-only area + {src} to its slot + {dst}", put_name(nbi, elem, "put"))
            }
            Op::Get { src, off, land, len, nbi, elem, .. } => format!(
                "{} of {len} bytes, scope {scope}, from {} + {off} to its landing area + {land}",
                put_name(nbi, elem, "get"),
                if src == Src::Ro { "the read-only area" } else { "its slot" }
            ),
            Op::AmoOwn { word, ty, op, val, eq, .. } => {
                format!("{}::<{}> on its own word {word}, operand {val:#x}{}", op.name(), ty.name(), if op == AmoOp::Cswap { if eq { " (compare: equal)" } else { " (compare: differs)" } } else { "" })
            }
            Op::AmoShared { word, ty, op, val, .. } => format!("{}::<{}> on shared word {word}, operand {val:#x}", op.name(), ty.name()),
            Op::Lock { .. } => "compare_swap lock, fence, g+p of the locked counter, quiet, unlock".into(),
            Op::Send { i } => {
                let unit = matches!(o.who, Who::Unit(_));
                let id = match o.who {
                    Who::Thread(x) | Who::Unit(x) => x,
                    Who::Barrier(_) => 0,
                };
                let c = Chan::new(self.seed, self.round, o.pe, id, unit);
                let m = c.msg(i as usize);
                format!(
                    "message {i} of {} ({:?}, scope {scope}{}): {} payload bytes from read-only area + {} to its slot + {}, signal/flag value {:#x}",
                    c.k,
                    c.kind,
                    if m.nbi { ", nbi" } else { "" },
                    m.len,
                    m.src,
                    if unit { USLOT_RMA } else { SLOT_RMA } + m.off,
                    m.val
                )
            }
            Op::Recv => {
                let d = distance(self.seed, self.round, self.n);
                format!("receive of the messages of PE {} (wait, then copy of the payload area to the landing area)", (o.pe + self.n - d) % self.n)
            }
        };
        format!("operation #{} of {}: {what}; target PE {}", o.idx, self.who(o.pe, o.who), o.target)
    }

    /// What lives at buffer offset `off`.
    pub fn region(&self, off: usize) -> String {
        let l = &self.lay;
        let thread = |g: usize| format!("PE {} block {} thread {}", g / l.w, (g % l.w) / l.threads, g % l.threads);
        let unit = |gu: usize| {
            let per = l.blocks * l.ub;
            let (pe, lu) = (gu / per, gu % per);
            format!("PE {pe} block {} unit {}", lu / l.ub, lu % l.ub)
        };
        if off < l.slots {
            format!("read-only area + {off}")
        } else if off < l.own {
            let g = (off - l.slots) / SLOT;
            format!("slot of {} + {}", thread(g), (off - l.slots) % SLOT)
        } else if off < l.chan {
            let w = (off - l.own) / 8;
            format!("own word {} of {} (byte {})", w % OWN, thread(w / OWN), (off - l.own) % 8)
        } else if off < l.shared {
            let g = (off - l.chan) / CHAN;
            let r = (off - l.chan) % CHAN;
            format!("{} word of {} (byte {})", if r < 8 { "signal" } else { "flag" }, thread(g), r % 8)
        } else if off < l.land {
            format!("shared word {} (byte {})", (off - l.shared) / 8, (off - l.shared) % 8)
        } else if off < l.uslots {
            format!("landing area of local thread {} + {}", (off - l.land) / LAND, (off - l.land) % LAND)
        } else if off < l.usig {
            format!("slot of {} + {}", unit((off - l.uslots) / USLOT), (off - l.uslots) % USLOT)
        } else if off < l.uland {
            format!("signal word of {}", unit((off - l.usig) / 8))
        } else if off < l.ures {
            format!("landing area of local unit {} + {}", (off - l.uland) / ULAND, (off - l.uland) % ULAND)
        } else if off < l.bar {
            "unit records".into()
        } else if off < l.bar_snap {
            format!("barrier slot of PE {}", (off - l.bar) / 8)
        } else if off < l.res {
            let s = (off - l.bar_snap) / 8;
            format!("barrier snapshot {} slot of PE {}", s / MAX_PES, s % MAX_PES)
        } else {
            "results".into()
        }
    }

    /// The first byte of PE `pe`'s buffer whose last writer is a put from another PE (fault injection).
    pub fn fault_target(&self, pe: usize) -> usize {
        let found = (self.lay.slots..self.lay.own).find(|&i| {
            let o = self.owner[pe][i];
            o != 0 && matches!(self.ops[o as usize - 1].op, Op::Put { .. }) && self.ops[o as usize - 1].pe != pe
        });
        found.or_else(|| (self.lay.slots..self.lay.res).find(|&i| self.owner[pe][i] != 0)).unwrap_or(self.lay.slots)
    }

    // ------------------------------------------------------------------ checks

    /// Checks PE `me`'s buffer and records. `res[pe]` holds PE pe's results area
    /// (`lay.res..lay.size` of its buffer). Err: what differed, for the user.
    pub fn check(&self, me: usize, actual: &[u8], res: &[Vec<u8>]) -> Result<(), String> {
        let lay = &self.lay;
        let head = format!("MISMATCH (seed {}, round {})", self.seed, self.round);
        // 1. Every byte but the record areas.
        let want = &self.img[me];
        let skip = |i: usize| (lay.ures..lay.bar).contains(&i) || i >= lay.res;
        if let Some(i) = (0..lay.size).find(|&i| !skip(i) && actual[i] != want[i]) {
            let bad = (0..lay.size).filter(|&i| !skip(i) && actual[i] != want[i]).count();
            let o = self.owner[me][i];
            let by = if o == 0 {
                "nothing wrote it this round (initial contents, copied in by the host)".to_string()
            } else {
                format!("written last by {}", self.describe(o as usize - 1))
            };
            let (s, e) = (i.saturating_sub(4), (i + 12).min(lay.size));
            return Err(format!(
                "{head}: PE {me}, buffer offset {i:#x} ({}): expected {:#04x}, actual {:#04x}; {by}. Bytes {s:#x}..{e:#x} expected {:02x?}, actual {:02x?}; {bad} bytes differ in all",
                self.region(i),
                want[i],
                actual[i],
                &want[s..e],
                &actual[s..e]
            ));
        }
        let word = |b: &[u8], off: usize| u64::from_le_bytes(b[off..off + 8].try_into().unwrap());
        // 2. Calls and exact records of my threads.
        for lt in 0..lay.w {
            let r = (lay.res_of(lt) - lay.res)..(lay.res_of(lt) - lay.res + lay.res_len * 8);
            let mine = &res[me][r];
            let calls = word(mine, 0);
            if calls != self.calls[me][lt] {
                return Err(format!(
                    "{head}: PE {me} {}: made {calls} device calls, the model {} (the program did not run as generated)",
                    self.who(me, Who::Thread(lt)),
                    self.calls[me][lt]
                ));
            }
            for (j, (rec, id)) in self.recs[me][lt].iter().enumerate() {
                if let Rec::Exact(v) = *rec {
                    let got = word(mine, 8 * (1 + j));
                    if got != v {
                        return Err(format!("{head}: PE {me}, value {j} recorded by {}: expected {v:#x}, actual {got:#x}", self.describe(*id)));
                    }
                }
            }
        }
        for lu in 0..lay.blocks * lay.ub {
            for (j, (rec, id)) in self.urecs[me][lu].iter().enumerate() {
                if let Rec::Exact(v) = *rec {
                    let got = word(actual, lay.ures_of(lu) + 8 * j);
                    if got != v {
                        return Err(format!("{head}: PE {me}, value {j} recorded by {}: expected {v:#x}, actual {got:#x}", self.describe(*id)));
                    }
                }
            }
        }
        // 3. The fetches from my shared words, from every PE's records.
        let mut fetched: BTreeMap<usize, Vec<(u64, u64, AmoOp, usize)>> = BTreeMap::new();
        for (pe, pres) in res.iter().enumerate() {
            for lt in 0..lay.w {
                for (j, (rec, id)) in self.recs[pe][lt].iter().enumerate() {
                    if let Rec::Shared { word: w, target, val, op } = *rec {
                        if target == me {
                            let got = word(pres, lay.res_of(lt) - lay.res + 8 * (1 + j));
                            fetched.entry(w).or_default().push((got, val, op, *id));
                        }
                    }
                }
            }
        }
        for (&w, list) in fetched.iter_mut() {
            let bytes = if w % 2 == 1 { 8 } else { 4 };
            let init = self.shared_init[me][w];
            let fin = self.read_u64(me, lay.shared_word(w), bytes);
            let fail = |what: String, id: usize, got: u64| {
                Err(format!("{head}: PE {me}, shared word {w} (initial {init:#x}, final {fin:#x}): {what}; the value {got:#x} was fetched by {}", self.describe(id)))
            };
            list.sort_by_key(|x| x.0);
            match w {
                W_CHAIN32 | W_CHAIN64 => {
                    // Only fetch_adds: sorted, each fetched value is the previous one plus its amount.
                    let mut at = init;
                    for &(got, val, _, id) in list.iter() {
                        if got != at {
                            return fail(format!("fetch_add results do not chain: expected {at:#x} next"), id, got);
                        }
                        at = (at + val) & mask(bytes);
                    }
                }
                W_TICKET32 | W_TICKET64 => {
                    for (i, &(got, _, _, id)) in list.iter().enumerate() {
                        if got != init + i as u64 {
                            return fail(format!("fetch_inc results are not a permutation of {init:#x}..{:#x}", init + list.len() as u64), id, got);
                        }
                    }
                }
                W_SUM32 | W_SUM64 => {
                    for (i, &(got, val, op, id)) in list.iter().enumerate() {
                        let amount = if op == AmoOp::FetchInc { 1 } else { val };
                        if got < init || got + amount > fin || (i > 0 && list[i - 1].0 == got) {
                            return fail("a fetched value is repeated or outside [initial, final - amount]".into(), id, got);
                        }
                    }
                }
                W_OR32 | W_OR64 | W_AND32 | W_AND64 => {
                    // Values only gain (or) / lose (and) bits: every fetch lies between initial and
                    // final, and the fetched values are nested.
                    let or = w == W_OR32 || w == W_OR64;
                    let sub = |a: u64, b: u64| a & !b == 0;
                    let mut byb: Vec<_> = list.clone();
                    byb.sort_by_key(|x| if or { x.0.count_ones() } else { 64 - x.0.count_ones() });
                    for (i, &(got, _, _, id)) in byb.iter().enumerate() {
                        let inside = if or { sub(init, got) && sub(got, fin) } else { sub(fin, got) && sub(got, init) };
                        let nested = i == 0 || if or { sub(byb[i - 1].0, got) } else { sub(got, byb[i - 1].0) };
                        if !inside || !nested {
                            return fail(format!("{} results are not nested between the initial and final values", if or { "fetch_or" } else { "fetch_and" }), id, got);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn put_name(nbi: bool, elem: u8, dir: &str) -> String {
    match elem {
        4 => format!("typed {dir}::<u32>"),
        8 => format!("typed {dir}::<u64>"),
        _ => format!("{dir}mem{}", if nbi { "_nbi" } else { "" }),
    }
}
