//! The randomized soak (`rshmem-soak`): the buffer layout, the program generator and the kernels.
//!
//! Every (PE, thread) of a round runs a deterministic random program drawn from (seed, round, PE,
//! thread); so does every warp and block (group-scoped calls). The host program (`tests/src/soak.rs`)
//! draws the same programs and predicts, with a reference model in plain Rust, every byte of every PE's
//! buffer and every value a kernel fetched. The generator is shared (it only decides *what* to do);
//! the kernel executes it with the device API, the model simulates it on bytes.
//!
//! What makes the model exact although everything runs concurrently:
//! - writers never share target bytes: every thread (and every warp/block) owns a slot, a few AMO
//!   words and a signal word in every PE's buffer, and lands gets in its own landing area;
//! - AMOs on words shared by all threads use one commutative operation per word (add, or, and, xor),
//!   so the final value is known, and the fetched values are checked for what must hold (the
//!   fetch_inc tickets are a permutation, the fetch_add chain links up, or/and values are nested);
//! - a thread orders its own accesses the way the API requires: a fence before a write that could
//!   overlap an earlier one to the same PE, a quiet before reading back what it wrote, a quiet before
//!   reusing a landing area after a non-blocking get;
//! - messages: each thread sends k messages (put_signal, or put + fence + signal_op, or put + fence +
//!   p of a flag) to PE me+d, then waits for the ones PE me-d sent it and copies the payload area it
//!   sees at that moment; the copy must hold every payload (payload before signal, fence order).
//!
//! Kernels never compare values: they record what they fetched and what they saw, and the host checks.
//! A crate of its own, so that its PTX (`soak_kernels.ptx`) is loaded only by `rshmem-soak`.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]
#![allow(clippy::too_many_arguments)]

use rshmem_device as sh;
use sh::thread::{block_index, block_rank, block_size, grid_size, sync_block};
use sh::Scope;

/// Most PEs the soak supports (a thread tracks what it wrote per PE).
pub const MAX_PES: usize = 64;
/// Random read-only bytes every PE holds; source of every put and payload.
pub const RO: usize = 4096;
/// Per thread of the job, on every PE: [0, SLOT_RMA) random puts, then MSG_MAX message payloads.
pub const SLOT: usize = 512;
pub const SLOT_RMA: usize = 384;
pub const MSG_MAX: usize = 4;
pub const MSG_LEN: usize = 32;
/// Per thread, on its own PE: [0, LAND_GET) gets land here, then the snapshot of incoming payloads.
pub const LAND: usize = 512;
pub const LAND_GET: usize = 384;
/// AMO words each thread owns on every PE (8 bytes each): 0 and 1 integer, 2 f32 (low half), 3 f64.
pub const OWN: usize = 4;
/// Per thread, on every PE: the signal word, then the flag word of the messages it sends there.
pub const CHAN: usize = 16;
/// Per warp/block ("unit") of the job, on every PE: [0, USLOT_RMA) group puts, then payloads.
pub const USLOT: usize = 512;
pub const USLOT_RMA: usize = 384;
pub const UMSG_MAX: usize = 2;
pub const UMSG_LEN: usize = 64;
/// Per unit, on its own PE: [0, ULAND_GET) group gets, then the snapshot of incoming payloads.
pub const ULAND: usize = 512;
pub const ULAND_GET: usize = 384;
/// Device barriers per round, at most.
pub const BAR_ITERS: usize = 3;

/// Shared AMO words on every PE (8 bytes each; 32-bit words use the low half).
pub const W_CHAIN32: usize = 0;
pub const W_CHAIN64: usize = 1;
pub const W_TICKET32: usize = 2;
pub const W_TICKET64: usize = 3;
pub const W_SUM32: usize = 4;
pub const W_SUM64: usize = 5;
pub const W_OR32: usize = 6;
pub const W_OR64: usize = 7;
pub const W_AND32: usize = 8;
pub const W_AND64: usize = 9;
pub const W_XOR32: usize = 10;
pub const W_XOR64: usize = 11;
pub const W_LOCK: usize = 12;
pub const W_LOCKED: usize = 13;
pub const SHARED_WORDS: usize = 16;

/// Operation kinds that `--skip` can leave out (bit masks).
pub const SKIP_P: u32 = 1;
pub const SKIP_G: u32 = 2;
pub const SKIP_PUT: u32 = 4;
pub const SKIP_GET: u32 = 8;
pub const SKIP_AMO_OWN: u32 = 16;
pub const SKIP_AMO_SHARED: u32 = 32;
pub const SKIP_LOCK: u32 = 64;
pub const SKIP_SIGNAL: u32 = 128;
pub const SKIP_GROUP: u32 = 256;
pub const SKIP_BARRIER: u32 = 512;
pub const SKIP_CHURN: u32 = 1024;
pub const SKIP_NAMES: [(&str, u32); 11] = [
    ("p", SKIP_P),
    ("g", SKIP_G),
    ("put", SKIP_PUT),
    ("get", SKIP_GET),
    ("amo_own", SKIP_AMO_OWN),
    ("amo_shared", SKIP_AMO_SHARED),
    ("lock", SKIP_LOCK),
    ("signal", SKIP_SIGNAL),
    ("group", SKIP_GROUP),
    ("barrier", SKIP_BARRIER),
    ("churn", SKIP_CHURN),
];

// ------------------------------------------------------------------ random numbers

/// splitmix64 over a key: the same stream on the host and on the device.
#[derive(Clone, Copy, Debug)]
pub struct Rng(u64);

#[inline(always)]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

impl Rng {
    #[inline(always)]
    pub fn new(seed: u64, a: u64, b: u64, c: u64, d: u64) -> Rng {
        let mut h = mix(seed ^ 0x5eed_50a4);
        h = mix(h ^ a.wrapping_mul(0x9e3779b97f4a7c15));
        h = mix(h ^ b.wrapping_mul(0xc2b2ae3d27d4eb4f));
        h = mix(h ^ c.wrapping_mul(0x165667b19e3779f9));
        h = mix(h ^ d.wrapping_mul(0x27d4eb2f165667c5));
        Rng(h)
    }
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        mix(self.0)
    }
    /// Uniform in [0, n) (0 for n == 0).
    #[inline(always)]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// In [lo, hi].
    #[inline(always)]
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability num/den.
    #[inline(always)]
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

// Stream keys (the third key of an Rng after round and PE).
const K_THREAD: u64 = 1;
const K_CHAN: u64 = 2;
const K_UNIT: u64 = 3;
const K_UCHAN: u64 = 4;
const K_ROUND: u64 = 5;
const K_BAR: u64 = 6;

// ------------------------------------------------------------------ layout

/// Where everything is in the soak buffer (the same offsets on every PE).
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub n: usize,
    pub blocks: usize,
    pub threads: usize,
    /// Threads per PE (blocks x threads) and units per block (the block, then each warp).
    pub w: usize,
    pub ub: usize,
    /// u64 words per thread in the results area: [0] the thread's call count, then the records.
    pub res_len: usize,
    pub ro: usize,
    pub slots: usize,
    pub own: usize,
    pub chan: usize,
    pub shared: usize,
    pub land: usize,
    pub uslots: usize,
    pub usig: usize,
    pub uland: usize,
    pub ures: usize,
    pub bar: usize,
    pub bar_snap: usize,
    pub res: usize,
    pub size: usize,
}

impl Layout {
    pub fn new(n: usize, blocks: usize, threads: usize, per_thread: usize) -> Layout {
        let w = blocks * threads;
        let ub = 1 + threads.div_ceil(32);
        let g = n * w;
        let gu = n * blocks * ub;
        let res_len = 2 * per_thread + 16;
        let mut at = 0;
        let mut take = |bytes: usize| {
            let o = at;
            at += (bytes + 63) & !63;
            o
        };
        let ro = take(RO);
        let slots = take(g * SLOT);
        let own = take(g * OWN * 8);
        let chan = take(g * CHAN);
        let shared = take(SHARED_WORDS * 8);
        let land = take(w * LAND);
        let uslots = take(gu * USLOT);
        let usig = take(gu * 8);
        let uland = take(blocks * ub * ULAND);
        let ures = take(blocks * ub * 8 * 4);
        let bar = take(MAX_PES * 8);
        let bar_snap = take(BAR_ITERS * MAX_PES * 8);
        let res = take(w * res_len * 8);
        Layout { n, blocks, threads, w, ub, res_len, ro, slots, own, chan, shared, land, uslots, usig, uland, ures, bar, bar_snap, res, size: at }
    }
    /// Global thread number (of the job) of local thread `lt` of PE `pe`.
    #[inline(always)]
    pub fn gthread(&self, pe: usize, lt: usize) -> usize {
        pe * self.w + lt
    }
    #[inline(always)]
    pub fn gunit(&self, pe: usize, lu: usize) -> usize {
        pe * self.blocks * self.ub + lu
    }
    #[inline(always)]
    pub fn slot(&self, g: usize) -> usize {
        self.slots + g * SLOT
    }
    #[inline(always)]
    pub fn own_word(&self, g: usize, i: usize) -> usize {
        self.own + (g * OWN + i) * 8
    }
    #[inline(always)]
    pub fn sig(&self, g: usize) -> usize {
        self.chan + g * CHAN
    }
    #[inline(always)]
    pub fn flag(&self, g: usize) -> usize {
        self.chan + g * CHAN + 8
    }
    #[inline(always)]
    pub fn shared_word(&self, i: usize) -> usize {
        self.shared + i * 8
    }
    #[inline(always)]
    pub fn land_of(&self, lt: usize) -> usize {
        self.land + lt * LAND
    }
    #[inline(always)]
    pub fn uslot(&self, gu: usize) -> usize {
        self.uslots + gu * USLOT
    }
    #[inline(always)]
    pub fn usig_of(&self, gu: usize) -> usize {
        self.usig + gu * 8
    }
    #[inline(always)]
    pub fn uland_of(&self, lu: usize) -> usize {
        self.uland + lu * ULAND
    }
    #[inline(always)]
    pub fn ures_of(&self, lu: usize) -> usize {
        self.ures + lu * 32
    }
    #[inline(always)]
    pub fn res_of(&self, lt: usize) -> usize {
        self.res + lt * self.res_len * 8
    }
    /// Threads in unit `u` of a block (0: the block, 1..: warps).
    #[inline(always)]
    pub fn unit_threads(&self, u: usize) -> usize {
        if u == 0 {
            self.threads
        } else {
            core::cmp::min(32, self.threads - 32 * (u - 1))
        }
    }
}

/// The distance messages travel this round: every PE sends to me+d and receives from me-d.
#[inline(always)]
pub fn distance(seed: u64, round: u64, n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        1 + Rng::new(seed, round, 0, K_ROUND, 0).below(n as u64 - 1) as usize
    }
}

// ------------------------------------------------------------------ operations

/// Types of the AMO API used: 32-bit words take U32/I32/F32, 64-bit ones the others.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ty {
    U32,
    I32,
    F32,
    U64,
    I64,
    Usize,
    Isize,
    F64,
}
impl Ty {
    #[inline(always)]
    pub fn bytes(self) -> usize {
        match self {
            Ty::U32 | Ty::I32 | Ty::F32 => 4,
            _ => 8,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Ty::U32 => "u32",
            Ty::I32 => "i32",
            Ty::F32 => "f32",
            Ty::U64 => "u64",
            Ty::I64 => "i64",
            Ty::Usize => "usize",
            Ty::Isize => "isize",
            Ty::F64 => "f64",
        }
    }
    /// The bit that `Cswap { eq: false }` flips in the expected value so that it differs (the sign
    /// bit: never turns a float into a NaN).
    #[inline(always)]
    pub fn flip(self) -> u64 {
        1u64 << (8 * self.bytes() - 1)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AmoOp {
    FetchAdd,
    Add,
    FetchInc,
    Inc,
    Cswap,
    Swap,
    Set,
    Fetch,
    FetchAnd,
    And,
    FetchOr,
    Or,
    FetchXor,
    Xor,
}
impl AmoOp {
    #[inline(always)]
    pub fn fetches(self) -> bool {
        !matches!(self, AmoOp::Add | AmoOp::Inc | AmoOp::Set | AmoOp::And | AmoOp::Or | AmoOp::Xor)
    }
    pub fn name(self) -> &'static str {
        match self {
            AmoOp::FetchAdd => "atomic_fetch_add",
            AmoOp::Add => "atomic_add",
            AmoOp::FetchInc => "atomic_fetch_inc",
            AmoOp::Inc => "atomic_inc",
            AmoOp::Cswap => "atomic_compare_swap",
            AmoOp::Swap => "atomic_swap",
            AmoOp::Set => "atomic_set",
            AmoOp::Fetch => "atomic_fetch",
            AmoOp::FetchAnd => "atomic_fetch_and",
            AmoOp::And => "atomic_and",
            AmoOp::FetchOr => "atomic_fetch_or",
            AmoOp::Or => "atomic_or",
            AmoOp::FetchXor => "atomic_fetch_xor",
            AmoOp::Xor => "atomic_xor",
        }
    }
}

/// Where a get reads: the target PE's read-only area, or the caller's own slot on that PE.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Src {
    Ro,
    Slot,
}

/// One step of a program. Offsets are relative to the caller's slot / landing area / the RO area.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    Fence,
    Quiet,
    /// p of `bytes` (1, 2, 4, 8) into my slot on `pe` at `off`.
    P { bytes: u8, pe: u16, off: u16, val: u64 },
    /// g of `bytes` from `src` on `pe` at `off`; recorded.
    G { bytes: u8, pe: u16, src: Src, off: u16 },
    /// putmem (elem 1) or typed put of u32/u64 (elem 4/8): RO+src here -> my slot+dst on `pe`.
    Put { pe: u16, dst: u16, src: u16, len: u16, nbi: bool, elem: u8 },
    /// getmem / typed get: `src`+off on `pe` -> my landing area + land.
    Get { pe: u16, src: Src, off: u16, land: u16, len: u16, nbi: bool, elem: u8 },
    /// An AMO on my own word `word` on `pe`; fetched values recorded. Cswap compares with the value
    /// the preceding Fetch returned (eq) or with it with `ty.flip()` flipped (!eq).
    AmoOwn { pe: u16, word: u8, ty: Ty, op: AmoOp, val: u64, eq: bool },
    /// An AMO on shared word `word` on `pe`; fetched values recorded.
    AmoShared { pe: u16, word: u8, ty: Ty, op: AmoOp, val: u64 },
    /// compare_swap lock on `pe`, fence, g + p increment of the locked counter, quiet, set unlock.
    Lock { pe: u16 },
    /// Message `i` of my outgoing channel.
    Send { i: u8 },
    /// Wait for my incoming channel, record what the wait saw, copy the payload area.
    Recv,
}

/// How messages are delivered on a channel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ChanKind {
    /// putmem_signal(_nbi) with SIGNAL_ADD / SIGNAL_SET.
    PutSigAdd,
    PutSigSet,
    /// putmem, fence, signal_op ADD / SET.
    SigOpAdd,
    SigOpSet,
    /// putmem, fence, p(flag); the receiver wait_until(flag, cmp, operand), then test twice.
    Flag,
}

/// The messages one thread (or unit) sends to PE me+d this round. The receiver regenerates it.
#[derive(Clone, Copy, Debug)]
pub struct Chan {
    pub kind: ChanKind,
    pub k: usize,
    /// Flag channels: the flag's type (U32, I32, U64, I64), whether values decrease, the wait.
    pub ty: Ty,
    pub down: bool,
    pub cmp: i32,
    pub operand: u64,
    /// Initial value of the flag word (0, or FLAG_HIGH for decreasing flags).
    pub init: u64,
    /// The value the signal/flag has after all k messages.
    pub last: u64,
    key: Rng,
    unit: bool,
}

/// A message: `len` payload bytes from RO+src to the message area + `off`; the signal/flag update.
#[derive(Clone, Copy, Debug)]
pub struct Msg {
    pub len: usize,
    pub src: usize,
    pub off: usize,
    pub val: u64,
    pub nbi: bool,
}

pub const FLAG_HIGH: u64 = 0x4000_0000;

impl Chan {
    /// The channel of thread `lt` (or unit `lt` when `unit`) of PE `pe` in `round`.
    pub fn new(seed: u64, round: u64, pe: usize, lt: usize, unit: bool) -> Chan {
        let key = Rng::new(seed, round, pe as u64, if unit { K_UCHAN } else { K_CHAN }, lt as u64);
        let mut r = key;
        let kind = if unit {
            if r.chance(1, 2) { ChanKind::PutSigAdd } else { ChanKind::PutSigSet }
        } else {
            match r.below(5) {
                0 => ChanKind::PutSigAdd,
                1 => ChanKind::PutSigSet,
                2 => ChanKind::SigOpAdd,
                3 => ChanKind::SigOpSet,
                _ => ChanKind::Flag,
            }
        };
        let k = r.range(1, if unit { UMSG_MAX } else { MSG_MAX } as u64) as usize;
        let ty = match r.below(4) {
            0 => Ty::U32,
            1 => Ty::I32,
            2 => Ty::U64,
            _ => Ty::I64,
        };
        let down = kind == ChanKind::Flag && r.chance(1, 2);
        let init = if down { FLAG_HIGH } else { 0 };
        let mut c = Chan { kind, k, ty, down, cmp: sh::CMP_GE, operand: 0, init, last: 0, key, unit };
        let mut last = init;
        for i in 0..k {
            let m = c.msg(i);
            last = match kind {
                ChanKind::PutSigAdd | ChanKind::SigOpAdd => last + m.val,
                _ => m.val,
            };
        }
        c.last = last;
        // A wait that holds exactly once the last value is there (values move monotonically).
        let pick = r.below(if k == 1 { 4 } else { 3 });
        let (cmp, operand) = match (down, pick) {
            (_, 3) => (sh::CMP_NE, init),
            (false, 0) => (sh::CMP_GE, last),
            (false, 1) => (sh::CMP_EQ, last),
            (false, _) => (sh::CMP_GT, last - 1),
            (true, 0) => (sh::CMP_LE, last),
            (true, 1) => (sh::CMP_EQ, last),
            (true, _) => (sh::CMP_LT, last + 1),
        };
        c.cmp = cmp;
        c.operand = operand;
        c
    }

    /// Message `i` (values: ADD increments 1..=100; SET/flag values move away from `init` by 1..=100
    /// per message).
    #[inline(always)]
    pub fn msg(&self, i: usize) -> Msg {
        let mut r = self.key;
        r.0 ^= mix(0x3e55 + i as u64);
        let area = if self.unit { UMSG_LEN } else { MSG_LEN };
        let len = r.range(1, area as u64) as usize;
        let off = r.below((area - len + 1) as u64) as usize;
        let src = r.below((RO - len + 1) as u64) as usize;
        let nbi = r.chance(1, 2);
        // SET/flag values: i-th value is init +- (100*i + 1..=100): strictly monotone.
        let step = r.range(1, 100);
        let val = match self.kind {
            ChanKind::PutSigAdd | ChanKind::SigOpAdd => step,
            _ => {
                let d = 100 * i as u64 + step;
                if self.down { self.init - d } else { self.init + d }
            }
        };
        Msg { len, src, off: i * area + off, val, nbi }
    }
}

/// Comparison `cmp` negated (for the second test of a flag channel).
#[inline(always)]
pub fn negate(cmp: i32) -> i32 {
    match cmp {
        sh::CMP_EQ => sh::CMP_NE,
        sh::CMP_NE => sh::CMP_EQ,
        sh::CMP_GT => sh::CMP_LE,
        sh::CMP_LE => sh::CMP_GT,
        sh::CMP_LT => sh::CMP_GE,
        _ => sh::CMP_LT,
    }
}

// Per-PE "written since the last fence" bits.
const A_SLOT: u8 = 1;
const A_OWN: u8 = 2;
const A_CHAN: u8 = 4;

/// A program: the ops of one thread (or one unit) in one round, drawn on the fly (no allocation).
pub struct Prog {
    rng: Rng,
    n: usize,
    unit: bool,
    skip: u32,
    left: usize,
    pending: Option<Op>,
    after: Option<Op>,
    dirty: [u8; MAX_PES],
    land_busy: bool,
    sends: usize,
    k: usize,
    d: usize,
    me: usize,
    stage: u8,
}

impl Prog {
    /// Thread `lt` of PE `me` (or unit `lt` when `unit`): `ops` random operations, then the sends
    /// not yet made, a quiet, and the receive.
    pub fn new(seed: u64, round: u64, me: usize, lt: usize, n: usize, ops: usize, skip: u32, unit: bool) -> Prog {
        let rng = Rng::new(seed, round, me as u64, if unit { K_UNIT } else { K_THREAD }, lt as u64);
        let k = if skip & SKIP_SIGNAL != 0 { 0 } else { Chan::new(seed, round, me, lt, unit).k };
        Prog {
            rng,
            n,
            unit,
            skip,
            left: ops,
            pending: None,
            after: None,
            dirty: [0; MAX_PES],
            land_busy: false,
            sends: 0,
            k,
            d: distance(seed, round, n),
            me,
            stage: 0,
        }
    }

    #[inline(always)]
    fn pe(&mut self) -> u16 {
        self.rng.below(self.n as u64) as u16
    }

    /// The fence or quiet `op` needs first, if any; updates the written-bits.
    #[inline(always)]
    fn guard(&mut self, op: Op) -> Option<Op> {
        let (pe, write, read): (usize, u8, u8) = match op {
            Op::P { pe, .. } | Op::Put { pe, .. } => (pe as usize, A_SLOT, 0),
            Op::G { pe, src: Src::Slot, .. } => (pe as usize, 0, A_SLOT),
            Op::Get { pe, src, .. } => {
                if self.land_busy {
                    return Some(Op::Quiet);
                }
                (pe as usize, 0, if src == Src::Slot { A_SLOT } else { 0 })
            }
            Op::AmoOwn { pe, op, .. } => {
                if op.fetches() {
                    (pe as usize, 0, A_OWN)
                } else {
                    (pe as usize, A_OWN, 0)
                }
            }
            Op::Send { .. } => ((self.me + self.d) % self.n, A_SLOT | A_CHAN, 0),
            _ => return None,
        };
        let dirty = self.dirty[pe % MAX_PES];
        if dirty & read != 0 {
            return Some(Op::Quiet);
        }
        if dirty & write != 0 {
            return Some(Op::Fence);
        }
        None
    }

    /// Records what `op` leaves outstanding (called when it is handed out).
    #[inline(always)]
    fn issued(&mut self, op: Op) {
        match op {
            Op::Fence => self.dirty = [0; MAX_PES],
            Op::Quiet | Op::Lock { .. } => {
                self.dirty = [0; MAX_PES];
                self.land_busy = false;
            }
            Op::P { pe, .. } | Op::Put { pe, .. } => self.dirty[pe as usize % MAX_PES] |= A_SLOT,
            Op::Get { nbi, .. } => self.land_busy |= nbi,
            Op::AmoOwn { pe, op, .. } if !op.fetches() => self.dirty[pe as usize % MAX_PES] |= A_OWN,
            Op::Send { .. } => self.dirty[(self.me + self.d) % self.n % MAX_PES] |= A_SLOT | A_CHAN,
            _ => {}
        }
    }

    /// Draws one random operation (not yet guarded).
    fn draw(&mut self) -> Op {
        loop {
            // Sends are spread over the program; all are made before the receive.
            let sends_left = self.k - self.sends;
            if sends_left > 0 && (self.left <= sends_left || self.rng.chance(sends_left as u64, self.left as u64 + 1)) {
                self.sends += 1;
                return Op::Send { i: (self.sends - 1) as u8 };
            }
            let r = &mut self.rng;
            let kind = r.below(100);
            if self.unit {
                // Group-scoped programs: put, get, fence, quiet (and the messages).
                let op = match kind {
                    0..=44 => self.put_op(true),
                    45..=89 => self.get_op(true),
                    90..=94 => Some(Op::Fence),
                    _ => Some(Op::Quiet),
                };
                if let Some(op) = op {
                    return op;
                }
                continue;
            }
            let op = match kind {
                0..=11 => self.p_op(),
                12..=19 => self.g_op(),
                20..=31 => self.put_op(false),
                32..=42 => self.get_op(false),
                43..=66 => self.amo_own_op(),
                67..=91 => self.amo_shared_op(),
                92..=95 => Some(Op::Fence),
                96..=98 => Some(Op::Quiet),
                _ => {
                    if self.skip & SKIP_LOCK == 0 && self.rng.chance(1, 2) {
                        let pe = self.pe();
                        Some(Op::Lock { pe })
                    } else {
                        None
                    }
                }
            };
            if let Some(op) = op {
                return op;
            }
        }
    }

    fn p_op(&mut self) -> Option<Op> {
        if self.skip & SKIP_P != 0 {
            return None;
        }
        let pe = self.pe();
        let r = &mut self.rng;
        let bytes = 1u8 << r.below(4);
        let off = (r.below((SLOT_RMA / bytes as usize) as u64) as u16) * bytes as u16;
        let val = r.next_u64();
        Some(Op::P { bytes, pe, off, val })
    }

    fn g_op(&mut self) -> Option<Op> {
        if self.skip & SKIP_G != 0 {
            return None;
        }
        let pe = self.pe();
        let r = &mut self.rng;
        let bytes = 1u8 << r.below(4);
        let (src, area) = if r.chance(1, 2) { (Src::Ro, RO) } else { (Src::Slot, SLOT) };
        let off = (r.below((area / bytes as usize) as u64) as u16) * bytes as u16;
        Some(Op::G { bytes, pe, src, off })
    }

    /// A length: mostly small, sometimes up to `max`.
    #[inline(always)]
    fn len(&mut self, max: usize) -> usize {
        let r = &mut self.rng;
        match r.below(4) {
            0 => r.range(1, 8) as usize,
            1 | 2 => r.range(1, 64) as usize,
            _ => r.range(1, max as u64) as usize,
        }
    }

    fn put_op(&mut self, unit: bool) -> Option<Op> {
        if self.skip & SKIP_PUT != 0 {
            return None;
        }
        let pe = self.pe();
        let area = if unit { USLOT_RMA } else { SLOT_RMA };
        let elem = if unit || self.rng.chance(3, 4) { 1 } else { 4 << self.rng.below(2) };
        let len = self.len(area).div_ceil(elem) * elem;
        let len = if len > area { area / elem * elem } else { len };
        let r = &mut self.rng;
        let dst = r.below(((area - len) / elem + 1) as u64) as usize * elem;
        let src = r.below(((RO - len) / elem + 1) as u64) as usize * elem;
        let nbi = r.chance(1, 2);
        Some(Op::Put { pe, dst: dst as u16, src: src as u16, len: len as u16, nbi, elem: elem as u8 })
    }

    fn get_op(&mut self, unit: bool) -> Option<Op> {
        if self.skip & SKIP_GET != 0 {
            return None;
        }
        let pe = self.pe();
        let land_area = if unit { ULAND_GET } else { LAND_GET };
        let elem = if unit || self.rng.chance(3, 4) { 1 } else { 4 << self.rng.below(2) };
        let (src, area) = if self.rng.chance(1, 2) { (Src::Ro, RO) } else { (Src::Slot, if unit { USLOT } else { SLOT }) };
        let len = self.len(land_area).div_ceil(elem) * elem;
        let len = if len > land_area { land_area / elem * elem } else { len };
        let r = &mut self.rng;
        let off = r.below(((area - len) / elem + 1) as u64) as usize * elem;
        let land = r.below(((land_area - len) / elem + 1) as u64) as usize * elem;
        let nbi = r.chance(1, 2);
        Some(Op::Get { pe, src, off: off as u16, land: land as u16, len: len as u16, nbi, elem: elem as u8 })
    }

    fn amo_own_op(&mut self) -> Option<Op> {
        if self.skip & SKIP_AMO_OWN != 0 {
            return None;
        }
        let pe = self.pe();
        let r = &mut self.rng;
        let word = r.below(OWN as u64) as u8;
        let ops = [
            AmoOp::FetchAdd,
            AmoOp::Add,
            AmoOp::FetchInc,
            AmoOp::Inc,
            AmoOp::Cswap,
            AmoOp::Swap,
            AmoOp::Set,
            AmoOp::Fetch,
            AmoOp::FetchAnd,
            AmoOp::And,
            AmoOp::FetchOr,
            AmoOp::Or,
            AmoOp::FetchXor,
            AmoOp::Xor,
        ];
        let (ty, op) = match word {
            2 => (Ty::F32, ops[4 + r.below(4) as usize]),
            3 => (Ty::F64, ops[4 + r.below(4) as usize]),
            _ => {
                let ty = [Ty::U32, Ty::I32, Ty::U64, Ty::I64, Ty::Usize, Ty::Isize][r.below(6) as usize];
                (ty, ops[r.below(14) as usize])
            }
        };
        let val = match ty {
            Ty::F32 => ((r.next_u64() as i32 >> 8) as f32 / 16.0).to_bits() as u64,
            Ty::F64 => ((r.next_u64() as i64 >> 12) as f64 / 1024.0).to_bits(),
            Ty::U32 | Ty::I32 => r.next_u64() & 0xffff_ffff,
            _ => r.next_u64(),
        };
        let eq = r.chance(1, 2);
        let op = Op::AmoOwn { pe, word, ty, op, val, eq };
        if let Op::AmoOwn { op: AmoOp::Cswap, .. } = op {
            // A compare_swap compares with what a fetch just returned.
            self.after = Some(op);
            return Some(Op::AmoOwn { pe, word, ty, op: AmoOp::Fetch, val: 0, eq: false });
        }
        Some(op)
    }

    fn amo_shared_op(&mut self) -> Option<Op> {
        if self.skip & SKIP_AMO_SHARED != 0 {
            return None;
        }
        let pe = self.pe();
        let r = &mut self.rng;
        let word = r.below(12) as usize;
        let wide = word % 2 == 1;
        let ty = if wide { [Ty::U64, Ty::I64, Ty::Usize, Ty::Isize][r.below(4) as usize] } else { [Ty::U32, Ty::I32][r.below(2) as usize] };
        let mask = if wide { u64::MAX } else { 0xffff_ffff };
        let (op, val) = match word {
            W_CHAIN32 | W_CHAIN64 => (AmoOp::FetchAdd, r.range(1, 100)),
            W_TICKET32 | W_TICKET64 => (AmoOp::FetchInc, 0),
            W_SUM32 | W_SUM64 => ([AmoOp::FetchAdd, AmoOp::Add, AmoOp::FetchInc, AmoOp::Inc][r.below(4) as usize], r.range(1, 100)),
            // or: a few random bits; and: all bits but a few.
            W_OR32 | W_OR64 => (if r.chance(1, 2) { AmoOp::FetchOr } else { AmoOp::Or }, (1u64 << r.below(64)) & mask),
            W_AND32 | W_AND64 => (if r.chance(1, 2) { AmoOp::FetchAnd } else { AmoOp::And }, !(1u64 << r.below(64)) & mask),
            _ => (if r.chance(1, 2) { AmoOp::FetchXor } else { AmoOp::Xor }, r.next_u64() & mask),
        };
        Some(Op::AmoShared { pe, word: word as u8, ty, op, val })
    }

    /// The next operation, or None at the end.
    pub fn next_op(&mut self) -> Option<Op> {
        let op = if let Some(op) = self.pending.take() {
            op
        } else if let Some(op) = self.after.take() {
            op
        } else {
            match self.stage {
                0 if self.left > 0 || self.sends < self.k => {
                    let op = self.draw();
                    self.left = self.left.saturating_sub(1);
                    op
                }
                0 | 1 => {
                    self.stage = 2;
                    Op::Quiet
                }
                2 if self.k > 0 => {
                    self.stage = 3;
                    Op::Recv
                }
                _ => return None,
            }
        };
        if let Some(first) = self.guard(op) {
            self.pending = Some(op);
            self.issued(first);
            return Some(first);
        }
        self.issued(op);
        Some(op)
    }
}

/// The device barrier variants: barrier_all, sync_all, barrier_all_block, barrier_all_warp,
/// sync_all_block, sync_all_warp.
pub const BAR_NAMES: [&str; 6] = ["barrier_all", "sync_all", "barrier_all_block", "barrier_all_warp", "sync_all_block", "sync_all_warp"];

/// The device barriers of a round: (count, variant of each).
pub fn barriers(seed: u64, round: u64) -> (usize, [u8; BAR_ITERS]) {
    let mut r = Rng::new(seed, round, 0, K_BAR, 0);
    let k = r.range(1, BAR_ITERS as u64) as usize;
    let mut v = [0u8; BAR_ITERS];
    for x in v.iter_mut() {
        *x = r.below(6) as u8;
    }
    (k, v)
}
/// The tag barrier iteration `i` of `round` writes.
#[inline(always)]
pub fn bar_tag(round: u64, i: usize) -> u64 {
    (round << 8) | (i as u64 + 1)
}

// ------------------------------------------------------------------ kernels

/// Values as u64 bit patterns (zero-extended) and back, for every AMO type.
pub trait Bits64: Copy {
    fn from_u64(v: u64) -> Self;
    fn to_u64(self) -> u64;
}
macro_rules! bits64 {
    ($($t:ty => $via:ty;)*) => {$(
        impl Bits64 for $t {
            #[inline(always)]
            fn from_u64(v: u64) -> $t { v as $via as $t }
            #[inline(always)]
            fn to_u64(self) -> u64 { self as $via as u64 }
        }
    )*};
}
bits64! { u32 => u32; i32 => u32; u64 => u64; i64 => u64; usize => u64; isize => u64; }
impl Bits64 for f32 {
    #[inline(always)]
    fn from_u64(v: u64) -> f32 {
        f32::from_bits(v as u32)
    }
    #[inline(always)]
    fn to_u64(self) -> u64 {
        self.to_bits() as u64
    }
}
impl Bits64 for f64 {
    #[inline(always)]
    fn from_u64(v: u64) -> f64 {
        f64::from_bits(v)
    }
    #[inline(always)]
    fn to_u64(self) -> u64 {
        self.to_bits()
    }
}

/// Every AMO on an integer type; Some(fetched bits) for the fetching forms.
///
/// # Safety
/// `p` is a symmetric, naturally aligned `T` (an AMO word of the soak buffer) and `pe` a valid PE.
#[inline(always)]
unsafe fn amo_int<T: sh::AmoInt + Bits64>(op: AmoOp, p: *mut T, v: u64, cond: u64, pe: i32) -> Option<u64> {
    // SAFETY: `p` is a symmetric, naturally aligned `T` (an AMO word of the soak buffer) and `pe` a
    // valid PE (the caller's contract): what every AMO below requires.
    unsafe {
        let x = T::from_u64(v);
        match op {
            AmoOp::FetchAdd => Some(sh::atomic_fetch_add(p, x, pe).to_u64()),
            AmoOp::Add => {
                sh::atomic_add(p, x, pe);
                None
            }
            AmoOp::FetchInc => Some(sh::atomic_fetch_inc(p, pe).to_u64()),
            AmoOp::Inc => {
                sh::atomic_inc(p, pe);
                None
            }
            AmoOp::FetchAnd => Some(sh::atomic_fetch_and(p, x, pe).to_u64()),
            AmoOp::And => {
                sh::atomic_and(p, x, pe);
                None
            }
            AmoOp::FetchOr => Some(sh::atomic_fetch_or(p, x, pe).to_u64()),
            AmoOp::Or => {
                sh::atomic_or(p, x, pe);
                None
            }
            AmoOp::FetchXor => Some(sh::atomic_fetch_xor(p, x, pe).to_u64()),
            AmoOp::Xor => {
                sh::atomic_xor(p, x, pe);
                None
            }
            _ => amo_any(op, p, v, cond, pe),
        }
    }
}

/// swap, compare_swap, set, fetch (every AMO type, floats included).
///
/// # Safety
/// As `amo_int`.
#[inline(always)]
unsafe fn amo_any<T: sh::Amo + Bits64>(op: AmoOp, p: *mut T, v: u64, cond: u64, pe: i32) -> Option<u64> {
    // SAFETY: as in `amo_int`: `p` a symmetric, naturally aligned `T`, `pe` a valid PE.
    unsafe {
        let x = T::from_u64(v);
        match op {
            AmoOp::Swap => Some(sh::atomic_swap(p, x, pe).to_u64()),
            AmoOp::Cswap => Some(sh::atomic_compare_swap(p, T::from_u64(cond), x, pe).to_u64()),
            AmoOp::Set => {
                sh::atomic_set(p, x, pe);
                None
            }
            _ => Some(sh::atomic_fetch(p as *const T, pe).to_u64()),
        }
    }
}

/// The AMO `op` on the word of type `ty` at `p` on `pe`.
///
/// # Safety
/// As `amo_int`, with `p` aligned for `ty`.
#[inline(always)]
unsafe fn amo(ty: Ty, op: AmoOp, p: *mut u8, v: u64, cond: u64, pe: i32) -> Option<u64> {
    // SAFETY: `p` is aligned for `ty` (the caller's contract), so each arm's pointer is a naturally
    // aligned word of that type, as `amo_int`/`amo_any` require.
    unsafe {
        match ty {
            Ty::U32 => amo_int(op, p as *mut u32, v, cond, pe),
            Ty::I32 => amo_int(op, p as *mut i32, v, cond, pe),
            Ty::U64 => amo_int(op, p as *mut u64, v, cond, pe),
            Ty::I64 => amo_int(op, p as *mut i64, v, cond, pe),
            Ty::Usize => amo_int(op, p as *mut usize, v, cond, pe),
            Ty::Isize => amo_int(op, p as *mut isize, v, cond, pe),
            Ty::F32 => amo_any(op, p as *mut f32, v, cond, pe),
            Ty::F64 => amo_any(op, p as *mut f64, v, cond, pe),
        }
    }
}

/// What one executing thread (or unit member) needs to run a program.
struct Exec {
    base: *mut u8,
    lay: Layout,
    me: usize,
    n: usize,
    seed: u64,
    round: u64,
    /// My slot, signal word, flag word (offsets; the same on every PE) and my landing area (local).
    slot: usize,
    sig: usize,
    flag: usize,
    land: usize,
    /// Where the records go, how many fit, how many so far; calls made.
    res: *mut u64,
    cap: usize,
    recs: usize,
    calls: u64,
    last: u64,
    /// Unit programs: the scope, whether I lead the unit, the unit number (else the thread number).
    scope: Scope,
    leader: bool,
    id: usize,
}

// Safety of every method below: `base` is the soak buffer (a symmetric allocation of `lay.size`
// bytes on every PE, laid out by `lay`), `res` points at `cap` u64s of this thread's records, and the
// program's offsets stay inside the areas `Layout` reserves for them (the generator draws them so).
impl Exec {
    /// Saves a record (dropped past `cap`; the host then sees the count differ).
    ///
    /// # Safety
    /// See above.
    #[inline(always)]
    unsafe fn rec(&mut self, v: u64) {
        if self.recs < self.cap {
            // SAFETY: recs < cap: inside this thread's record area (`res` holds `cap` u64s).
            unsafe { *self.res.add(self.recs) = v };
        }
        self.recs += 1;
    }
    /// The buffer address at `off`.
    ///
    /// # Safety
    /// `off` <= `lay.size`.
    #[inline(always)]
    unsafe fn at(&self, off: usize) -> *mut u8 {
        // SAFETY: off <= lay.size: inside the soak buffer or one past it (the caller's contract).
        unsafe { self.base.add(off) }
    }

    /// The put of `len` bytes in this executor's scope (typed for `elem` 4/8 at thread scope).
    ///
    /// # Safety
    /// `dst` symmetric and `src` local, both valid for `len` bytes; in a group every member calls.
    unsafe fn put(&mut self, dst: *mut u8, src: *const u8, len: usize, nbi: bool, elem: u8, pe: i32) {
        // SAFETY: `dst` symmetric and `src` local, both valid for `len` bytes, every member of a group
        // calling (the caller's contract): each arm's contract; the typed puts move the same bytes.
        unsafe {
            self.calls += 1;
            match (self.scope, nbi, elem) {
                (Scope::Thread, _, 4) => sh::put(dst as *mut u32, src as *const u32, len / 4, pe),
                (Scope::Thread, _, 8) => sh::put(dst as *mut u64, src as *const u64, len / 8, pe),
                (Scope::Thread, false, _) => sh::putmem(dst, src, len, pe),
                (Scope::Thread, true, _) => sh::putmem_nbi(dst, src, len, pe),
                (Scope::Warp, false, _) => sh::putmem_warp(dst, src, len, pe),
                (Scope::Warp, true, _) => sh::putmem_nbi_warp(dst, src, len, pe),
                (Scope::Block, false, _) => sh::putmem_block(dst, src, len, pe),
                (Scope::Block, true, _) => sh::putmem_nbi_block(dst, src, len, pe),
            }
        }
    }

    /// The get of `len` bytes in this executor's scope.
    ///
    /// # Safety
    /// As `put`, with `src` symmetric and `dst` local.
    unsafe fn get(&mut self, dst: *mut u8, src: *const u8, len: usize, nbi: bool, elem: u8, pe: i32) {
        // SAFETY: as in `put`, with `src` symmetric and `dst` local.
        unsafe {
            self.calls += 1;
            match (self.scope, nbi, elem) {
                (Scope::Thread, _, 4) => sh::get(dst as *mut u32, src as *const u32, len / 4, pe),
                (Scope::Thread, _, 8) => sh::get(dst as *mut u64, src as *const u64, len / 8, pe),
                (Scope::Thread, false, _) => sh::getmem(dst, src, len, pe),
                (Scope::Thread, true, _) => sh::getmem_nbi(dst, src, len, pe),
                (Scope::Warp, false, _) => sh::getmem_warp(dst, src, len, pe),
                (Scope::Warp, true, _) => sh::getmem_nbi_warp(dst, src, len, pe),
                (Scope::Block, false, _) => sh::getmem_block(dst, src, len, pe),
                (Scope::Block, true, _) => sh::getmem_nbi_block(dst, src, len, pe),
            }
        }
    }

    /// Executes one operation of the program.
    ///
    /// # Safety
    /// See above; in a group program every member runs the same operation.
    unsafe fn run(&mut self, op: Op) {
        // SAFETY: the program's offsets stay inside the areas `Layout` reserves (the generator draws them
        // so), so every address below is in the soak buffer, symmetric, aligned for its use, and the AMO
        // words are touched only by AMOs; in a group every member runs the same operation (the caller's
        // contract).
        unsafe {
            match op {
                // In a group program, every member's fence/quiet is done before any member goes on
                // (one member's get may read what another member's share of a put wrote).
                Op::Fence => {
                    self.calls += 1;
                    sh::fence();
                    self.scope.sync();
                }
                Op::Quiet => {
                    self.calls += 1;
                    sh::quiet();
                    self.scope.sync();
                }
                Op::P { bytes, pe, off, val } => {
                    self.calls += 1;
                    let d = self.at(self.slot + off as usize);
                    match bytes {
                        1 => sh::p(d, val as u8, pe as i32),
                        2 => sh::p(d as *mut u16, val as u16, pe as i32),
                        4 => sh::p(d as *mut u32, val as u32, pe as i32),
                        _ => sh::p(d as *mut u64, val, pe as i32),
                    }
                }
                Op::G { bytes, pe, src, off } => {
                    self.calls += 1;
                    let s = self.at(if src == Src::Ro { self.lay.ro } else { self.slot } + off as usize);
                    let v = match bytes {
                        1 => sh::g(s, pe as i32) as u64,
                        2 => sh::g(s as *const u16, pe as i32) as u64,
                        4 => sh::g(s as *const u32, pe as i32) as u64,
                        _ => sh::g(s as *const u64, pe as i32),
                    };
                    self.rec(v);
                }
                Op::Put { pe, dst, src, len, nbi, elem } => {
                    let (d, s) = (self.at(self.slot + dst as usize), self.at(self.lay.ro + src as usize));
                    self.put(d, s, len as usize, nbi, elem, pe as i32);
                }
                Op::Get { pe, src, off, land, len, nbi, elem } => {
                    let s = self.at(if src == Src::Ro { self.lay.ro } else { self.slot } + off as usize);
                    let d = self.at(self.land + land as usize);
                    self.get(d, s, len as usize, nbi, elem, pe as i32);
                }
                Op::AmoOwn { pe, word, ty, op, val, eq } => {
                    self.calls += 1;
                    let g = self.lay.gthread(self.me, self.id);
                    let p = self.at(self.lay.own_word(g, word as usize));
                    let cond = if eq { self.last } else { self.last ^ ty.flip() };
                    if let Some(v) = amo(ty, op, p, val, cond, pe as i32) {
                        self.last = v;
                        self.rec(v);
                    }
                }
                Op::AmoShared { pe, word, ty, op, val } => {
                    self.calls += 1;
                    let p = self.at(self.lay.shared_word(word as usize));
                    if let Some(v) = amo(ty, op, p, val, 0, pe as i32) {
                        self.rec(v);
                    }
                }
                Op::Lock { pe } => {
                    let pe = pe as i32;
                    let lock = self.at(self.lay.shared_word(W_LOCK)) as *mut u64;
                    let ctr = self.at(self.lay.shared_word(W_LOCKED)) as *mut u64;
                    let mut spins = 0u64;
                    let id = self.lay.gthread(self.me, self.id) as u64 + 1;
                    while sh::atomic_compare_swap(lock, 0, id, pe) != 0 {
                        sh::arch::idle(&mut spins, "rshmem-soak lock\0");
                    }
                    sh::fence();
                    let v = sh::g(ctr as *const u64, pe);
                    sh::p(ctr, v + 1, pe);
                    sh::quiet();
                    sh::atomic_set(lock, 0, pe);
                    self.calls += 5;
                }
                Op::Send { i } => self.send(i as usize),
                Op::Recv => self.recv(),
            }
        }
    }

    /// Sends message `i` of my channel to PE me+d.
    ///
    /// # Safety
    /// See above.
    unsafe fn send(&mut self, i: usize) {
        // SAFETY: as in `run`: the message's offsets lie in this thread's (unit's) slot and the read-only
        // area, the signal and flag words are this thread's; the same operation in every group member.
        unsafe {
            let unit = self.scope != Scope::Thread;
            let c = Chan::new(self.seed, self.round, self.me, self.id, unit);
            let m = c.msg(i);
            let q = ((self.me + distance(self.seed, self.round, self.n)) % self.n) as i32;
            let area = if unit { USLOT_RMA } else { SLOT_RMA };
            let dst = self.at(self.slot + area + m.off);
            let src = self.at(self.lay.ro + m.src);
            let sig = self.at(self.sig) as *mut u64;
            match c.kind {
                ChanKind::PutSigAdd | ChanKind::PutSigSet => {
                    let op = if c.kind == ChanKind::PutSigAdd { sh::SIGNAL_ADD } else { sh::SIGNAL_SET };
                    self.calls += 1;
                    match (self.scope, m.nbi) {
                        (Scope::Thread, false) => sh::putmem_signal(dst, src, m.len, sig, m.val, op, q),
                        (Scope::Thread, true) => sh::putmem_signal_nbi(dst, src, m.len, sig, m.val, op, q),
                        (Scope::Warp, false) => sh::putmem_signal_warp(dst, src, m.len, sig, m.val, op, q),
                        (Scope::Warp, true) => sh::putmem_signal_nbi_warp(dst, src, m.len, sig, m.val, op, q),
                        (Scope::Block, false) => sh::putmem_signal_block(dst, src, m.len, sig, m.val, op, q),
                        (Scope::Block, true) => sh::putmem_signal_nbi_block(dst, src, m.len, sig, m.val, op, q),
                    }
                }
                ChanKind::SigOpAdd | ChanKind::SigOpSet => {
                    let op = if c.kind == ChanKind::SigOpAdd { sh::SIGNAL_ADD } else { sh::SIGNAL_SET };
                    if m.nbi {
                        sh::putmem_nbi(dst, src, m.len, q);
                    } else {
                        sh::putmem(dst, src, m.len, q);
                    }
                    sh::fence();
                    sh::signal_op(sig, m.val, op, q);
                    self.calls += 3;
                }
                ChanKind::Flag => {
                    if m.nbi {
                        sh::putmem_nbi(dst, src, m.len, q);
                    } else {
                        sh::putmem(dst, src, m.len, q);
                    }
                    sh::fence();
                    let f = self.at(self.flag);
                    match c.ty {
                        Ty::U32 => sh::p(f as *mut u32, m.val as u32, q),
                        Ty::I32 => sh::p(f as *mut i32, m.val as i32, q),
                        Ty::U64 => sh::p(f as *mut u64, m.val, q),
                        _ => sh::p(f as *mut i64, m.val as i64, q),
                    }
                    self.calls += 3;
                }
            }
        }
    }

    /// Waits for the channel of my counterpart on PE me-d, records what the wait saw, and copies the
    /// payload area it wrote here into my landing area.
    ///
    /// # Safety
    /// See above.
    unsafe fn recv(&mut self) {
        // SAFETY: as in `run` (`recv_wait`'s contract).
        unsafe {
            let unit = self.scope != Scope::Thread;
            // In a group, the leader waits and copies while the others go straight to the group's sync: all
            // threads reach that one sync instruction (a barrier reached from different instructions in
            // divergent code is undefined on GPUs: `bar.sync` must be reached uniformly; this hung 2 x H200).
            if !unit || self.leader {
                self.recv_wait();
            }
            if unit {
                self.scope.sync();
            }
        }
    }

    /// The waiting part of `recv` (the leader's, in a group).
    ///
    /// # Safety
    /// See above.
    unsafe fn recv_wait(&mut self) {
        // SAFETY: as in `run`: the counterpart's flag, signal and slot are areas of the soak buffer of this
        // PE, written by others only with the API's atomic stores (flags, signals) or puts the wait orders.
        unsafe {
            let unit = self.scope != Scope::Thread;
            let d = distance(self.seed, self.round, self.n);
            let from = (self.me + self.n - d) % self.n;
            let c = Chan::new(self.seed, self.round, from, self.id, unit);
            let (their_slot, their_sig, their_flag) = if unit {
                let gu = self.lay.gunit(from, self.id);
                (self.lay.uslot(gu), self.lay.usig_of(gu), 0)
            } else {
                let g = self.lay.gthread(from, self.id);
                (self.lay.slot(g), self.lay.sig(g), self.lay.flag(g))
            };
            if c.kind == ChanKind::Flag {
                let f = self.at(their_flag);
                let (t1, t2) = match c.ty {
                    Ty::U32 => {
                        let (f, v) = (f as *const u32, c.operand as u32);
                        sh::wait_until(f, c.cmp, v);
                        (sh::test(f, c.cmp, v), sh::test(f, negate(c.cmp), v))
                    }
                    Ty::I32 => {
                        let (f, v) = (f as *const i32, c.operand as i32);
                        sh::wait_until(f, c.cmp, v);
                        (sh::test(f, c.cmp, v), sh::test(f, negate(c.cmp), v))
                    }
                    Ty::U64 => {
                        let (f, v) = (f as *const u64, c.operand);
                        sh::wait_until(f, c.cmp, v);
                        (sh::test(f, c.cmp, v), sh::test(f, negate(c.cmp), v))
                    }
                    _ => {
                        let (f, v) = (f as *const i64, c.operand as i64);
                        sh::wait_until(f, c.cmp, v);
                        (sh::test(f, c.cmp, v), sh::test(f, negate(c.cmp), v))
                    }
                };
                self.calls += 3;
                self.rec(t1 as u64);
                self.rec(t2 as u64);
            } else {
                let cmp = if c.kind == ChanKind::PutSigSet || c.kind == ChanKind::SigOpSet { sh::CMP_EQ } else { sh::CMP_GE };
                let v = sh::signal_wait_until(self.at(their_sig) as *const u64, cmp, c.last);
                self.calls += 1;
                self.rec(v);
            }
            // The payload area as this thread sees it right after the wait.
            let (area, len, snap) = if unit { (USLOT_RMA, UMSG_MAX * UMSG_LEN, ULAND_GET) } else { (SLOT_RMA, MSG_MAX * MSG_LEN, LAND_GET) };
            let from_p = self.at(their_slot + area);
            let to = self.at(self.land + snap);
            for j in 0..len {
                core::ptr::write_volatile(to.add(j), core::ptr::read_volatile(from_p.add(j)));
            }
        }
    }
}

/// Kernel argument `i`.
///
/// # Safety
/// `a` points at the kernel's arguments, at least `i + 1` of them.
#[inline(always)]
unsafe fn arg(a: *const u64, i: usize) -> u64 {
    // SAFETY: argument `i` of the kernel's arguments (the caller's contract).
    unsafe { *a.add(i) }
}

sh::kernels! {
    /// [buffer, seed, round, ops per thread, ops per unit, skip] — one round of the soak: every thread
    /// runs its program, then every block and every warp its group-scoped program. Launch with all
    /// blocks resident (run_collective): threads wait for messages from other PEs' threads.
    ///
    /// # Safety
    /// `a` holds these arguments; the buffer is a symmetric allocation of `Layout::size` bytes (the
    /// layout of this launch's PEs, blocks, threads and ops per thread) on every PE, and every PE
    /// launches this kernel for the same round with the same arguments.
    fn k_soak(a) {
        let (base, seed, round) = (arg(a, 0) as *mut u8, arg(a, 1), arg(a, 2));
        let (per_thread, per_unit, skip) = (arg(a, 3) as usize, arg(a, 4) as usize, arg(a, 5) as u32);
        let (me, n) = (sh::my_pe() as usize, sh::n_pes() as usize);
        let lay = Layout::new(n, grid_size() as usize, block_size() as usize, per_thread);
        let lt = (block_index() * block_size() + block_rank()) as usize;
        let g = lay.gthread(me, lt);
        let res = base.add(lay.res_of(lt)) as *mut u64;
        let mut ex = Exec {
            base,
            lay,
            me,
            n,
            seed,
            round,
            slot: lay.slot(g),
            sig: lay.sig(g),
            flag: lay.flag(g),
            land: lay.land_of(lt),
            res: res.add(1),
            cap: lay.res_len - 1,
            recs: 0,
            calls: 0,
            last: 0,
            scope: Scope::Thread,
            leader: true,
            id: lt,
        };
        let mut prog = Prog::new(seed, round, me, lt, n, per_thread, skip, false);
        while let Some(op) = prog.next_op() {
            ex.run(op);
        }
        let mut calls = ex.calls;
        if skip & SKIP_GROUP == 0 {
            sync_block();
            // The block's program, then my warp's.
            let rank = block_rank() as usize;
            for u in [0, 1 + rank / 32] {
                let lu = block_index() as usize * lay.ub + u;
                let gu = lay.gunit(me, lu);
                let mut ux = Exec {
                    base,
                    lay,
                    me,
                    n,
                    seed,
                    round,
                    slot: lay.uslot(gu),
                    sig: lay.usig_of(gu),
                    flag: 0,
                    land: lay.uland_of(lu),
                    res: base.add(lay.ures_of(lu)) as *mut u64,
                    cap: 4,
                    recs: 0,
                    calls: 0,
                    last: 0,
                    scope: if u == 0 { Scope::Block } else { Scope::Warp },
                    leader: if u == 0 { rank == 0 } else { rank.is_multiple_of(32) },
                    id: lu,
                };
                let mut prog = Prog::new(seed, round, me, lu, n, per_unit, skip, true);
                while let Some(op) = prog.next_op() {
                    ux.run(op);
                }
                calls += ux.calls;
            }
        }
        *res += calls;
    }

    /// [buffer, seed, round, ops per thread, blocks of k_soak] with one block — the round's device barriers: before
    /// each, thread 0 writes the barrier's tag into my slot on every PE; after it, thread 0 copies the
    /// slots it sees here into the barrier snapshot; a second barrier keeps the next writes out.
    ///
    /// # Safety
    /// As `k_soak`; launched with one block of k_soak's threads per block, on every PE.
    fn k_soak_barrier(a) {
        let (base, seed, round, per_thread) = (arg(a, 0) as *mut u8, arg(a, 1), arg(a, 2), arg(a, 3) as usize);
        let (me, n) = (sh::my_pe() as usize, sh::n_pes() as usize);
        let lay = Layout::new(n, arg(a, 4) as usize, block_size() as usize, per_thread);
        let rank = block_rank() as usize;
        let res = base.add(lay.res_of(rank)) as *mut u64;
        let slots = base.add(lay.bar) as *mut u64;
        let (k, variants) = barriers(seed, round);
        let mut calls = 0u64;
        for (i, &v) in variants.iter().enumerate().take(k) {
            let tag = bar_tag(round, i);
            let joins = match v {
                2 | 4 => true,
                3 | 5 => rank < 32,
                _ => rank == 0,
            };
            if rank == 0 {
                for pe in 0..n {
                    sh::p(slots.add(me), tag, pe as i32);
                }
                calls += n as u64;
                if v == 1 || v == 4 || v == 5 {
                    sh::quiet(); // sync_all does not complete puts by itself
                    calls += 1;
                }
            }
            if joins {
                match v {
                    0 => sh::barrier_all(),
                    1 => sh::sync_all(),
                    2 => sh::barrier_all_block(),
                    3 => sh::barrier_all_warp(),
                    4 => sh::sync_all_block(),
                    _ => sh::sync_all_warp(),
                }
                calls += 1;
            }
            if rank == 0 {
                let snap = base.add(lay.bar_snap + i * MAX_PES * 8) as *mut u64;
                for pe in 0..n {
                    core::ptr::write_volatile(snap.add(pe), core::ptr::read_volatile(slots.add(pe)));
                }
            }
            if joins {
                match v {
                    0 => sh::barrier_all(),
                    1 => sh::sync_all(),
                    2 => sh::barrier_all_block(),
                    3 => sh::barrier_all_warp(),
                    4 => sh::sync_all_block(),
                    _ => sh::sync_all_warp(),
                }
                calls += 1;
            }
        }
        *res += calls;
    }
}
