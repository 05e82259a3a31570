//! Building the WQEs the device path posts, as values ([`Wqe`]), before they are written into the send
//! queue by [`crate::qp::QpDesc::write`]. The builders lay the segments out as NVSHMEM's RC path does
//! (research note §1.9): ctrl + raddr + data for WRITE/READ, ctrl + raddr + inline for small WRITEs,
//! ctrl + raddr + atomic + data for atomics (two atomic DS for the 8-byte masked CS), a ctrl-only NOP
//! written with ds 2, and DUMP as ctrl + data.
//!
//! The builders leave the WQE index and the QPN zero: `QpDesc::write` stamps them when it writes the
//! WQE at its reserved position.
//!
//! `no_std`, no allocation, no panics (every length is clamped, never indexed past).

use crate::mlx5::{self, opcode, opmod, AtomicSeg, CtrlSeg, DataSeg, InlineHdr, MaskedCs32Seg, MaskedCs64Seg, MaskedFa32Seg, MaskedFa64Seg, RaddrSeg, DS, DS_PER_WQEBB};

/// The most DS units one [`Wqe`] value holds (two WQEBBs).
pub const MAX_DS: usize = 8;
/// The largest inline payload a [`Wqe`] can carry: `MAX_DS` DS minus ctrl, raddr and the 4-byte header.
pub const MAX_INLINE: usize = MAX_DS * DS - 2 * DS - 4;
/// The largest inline payload that keeps an inline WRITE in one DS of data (ds 3, one WQEBB), as
/// NVSHMEM's RC inline put does.
pub const INLINE_DS3: usize = 12;

/// A WQE as a value: `ds` 16-byte segments, the control segment first.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Wqe {
    pub seg: [[u8; DS]; MAX_DS],
    pub ds: u8,
}

/// Where the data of a local buffer is: its address, lkey and length.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Local {
    pub addr: u64,
    pub lkey: u32,
}

/// A remote address with its rkey.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Remote {
    pub addr: u64,
    pub rkey: u32,
}

/// An atomic operation as the NIC executes it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Atomic {
    /// ATOMIC_FA: 64-bit fetch-and-add.
    Fa64 { add: u64 },
    /// ATOMIC_CS: 64-bit compare-and-swap.
    Cs64 { compare: u64, swap: u64 },
    /// ATOMIC_MASKED_FA, 4 bytes: add with carries stopped at the set bits of `boundary`.
    MaskedFa32 { add: u32, boundary: u32 },
    /// ATOMIC_MASKED_CS, 4 bytes: if `(old ^ compare) & compare_mask == 0`,
    /// `new = (old & !swap_mask) | (swap & swap_mask)`.
    MaskedCs32 { swap: u32, compare: u32, swap_mask: u32, compare_mask: u32 },
    /// ATOMIC_MASKED_FA, 8 bytes.
    MaskedFa64 { add: u64, boundary: u64 },
    /// ATOMIC_MASKED_CS, 8 bytes (two atomic DS: the WQE takes two WQEBBs).
    MaskedCs64 { swap: u64, compare: u64, swap_mask: u64, compare_mask: u64 },
}

codes! {
    /// The kind codes of [`Atomic::encode`], one per variant of [`Atomic`], with their names.
    #[derive(Debug)]
    pub enum AtomicKind: u8 [from_u8, name] {
        Fa64 = 1 => "fetch-and-add (64-bit)",
        Cs64 = 2 => "compare-and-swap (64-bit)",
        MaskedFa32 = 3 => "masked fetch-and-add (32-bit)",
        MaskedCs32 = 4 => "masked compare-and-swap (32-bit)",
        MaskedFa64 = 5 => "masked fetch-and-add (64-bit)",
        MaskedCs64 = 6 => "masked compare-and-swap (64-bit)",
    }
}

impl AtomicKind {
    /// The width in bytes of the target and the number of operands an encoding of this kind holds.
    #[inline(always)]
    pub const fn shape(self) -> (u32, usize) {
        match self {
            AtomicKind::Fa64 => (8, 1),
            AtomicKind::Cs64 | AtomicKind::MaskedFa64 => (8, 2),
            AtomicKind::MaskedFa32 => (4, 2),
            AtomicKind::MaskedCs32 => (4, 4),
            AtomicKind::MaskedCs64 => (8, 4),
        }
    }
}

/// The AMO operations of the NVSHMEM API, mapped to NIC atomics by [`Atomic::amo`] the way NVSHMEM's
/// IBGDA path does (`ibgda_write_atomic_wqe`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Amo {
    /// Atomic read.
    Fetch,
    /// Set / swap (the fetched value is the old one).
    Swap,
    Add,
    And,
    Or,
    Xor,
    /// Compare-and-swap with `compare`.
    CompareSwap,
}

impl Atomic {
    /// The NIC atomic for an AMO on a `bytes`-wide (4 or 8; other widths are taken as 8) value, with
    /// the operand `value` and, for `CompareSwap`, `compare`. As NVSHMEM: 8-byte add and CAS use the
    /// standard opcodes, everything else the masked ones.
    #[inline(always)]
    pub const fn amo(op: Amo, bytes: u32, value: u64, compare: u64) -> Atomic {
        if bytes == 4 {
            let v = value as u32;
            match op {
                Amo::Fetch => Atomic::MaskedFa32 { add: 0, boundary: 0 },
                Amo::Swap => Atomic::MaskedCs32 { swap: v, compare: 0, swap_mask: u32::MAX, compare_mask: 0 },
                Amo::Add => Atomic::MaskedFa32 { add: v, boundary: 0 },
                Amo::And => Atomic::MaskedCs32 { swap: v, compare: 0, swap_mask: !v, compare_mask: 0 },
                Amo::Or => Atomic::MaskedCs32 { swap: v, compare: 0, swap_mask: v, compare_mask: 0 },
                Amo::Xor => Atomic::MaskedFa32 { add: v, boundary: u32::MAX },
                Amo::CompareSwap => Atomic::MaskedCs32 { swap: v, compare: compare as u32, swap_mask: u32::MAX, compare_mask: u32::MAX },
            }
        } else {
            match op {
                Amo::Fetch => Atomic::MaskedFa64 { add: 0, boundary: 0 },
                Amo::Swap => Atomic::MaskedCs64 { swap: value, compare: 0, swap_mask: u64::MAX, compare_mask: 0 },
                Amo::Add => Atomic::Fa64 { add: value },
                Amo::And => Atomic::MaskedCs64 { swap: value, compare: 0, swap_mask: !value, compare_mask: 0 },
                Amo::Or => Atomic::MaskedCs64 { swap: value, compare: 0, swap_mask: value, compare_mask: 0 },
                Amo::Xor => Atomic::MaskedFa64 { add: value, boundary: u64::MAX },
                Amo::CompareSwap => Atomic::Cs64 { compare, swap: value },
            }
        }
    }
    #[inline(always)]
    pub const fn opcode(&self) -> u8 {
        match self {
            Atomic::Fa64 { .. } => opcode::ATOMIC_FA,
            Atomic::Cs64 { .. } => opcode::ATOMIC_CS,
            Atomic::MaskedFa32 { .. } | Atomic::MaskedFa64 { .. } => opcode::ATOMIC_MASKED_FA,
            Atomic::MaskedCs32 { .. } | Atomic::MaskedCs64 { .. } => opcode::ATOMIC_MASKED_CS,
        }
    }
    #[inline(always)]
    pub const fn opmod(&self) -> u8 {
        match self {
            Atomic::Fa64 { .. } | Atomic::Cs64 { .. } => 0,
            Atomic::MaskedFa32 { .. } | Atomic::MaskedCs32 { .. } => opmod::EXT_AMO_4,
            Atomic::MaskedFa64 { .. } | Atomic::MaskedCs64 { .. } => opmod::EXT_AMO_8,
        }
    }
    /// Width of the target (and of the fetched value) in bytes.
    #[inline(always)]
    pub const fn bytes(&self) -> u32 {
        match self {
            Atomic::MaskedFa32 { .. } | Atomic::MaskedCs32 { .. } => 4,
            _ => 8,
        }
    }
    /// DS units of the atomic operand segment(s).
    #[inline(always)]
    pub const fn operand_ds(&self) -> u8 {
        match self {
            Atomic::MaskedCs64 { .. } => 2,
            _ => 1,
        }
    }
    /// A compact form of the atomic for carrying it elsewhere (the proxy transport's wire, the
    /// target's inbound queue): a kind code ([`AtomicKind`]) and four operands in the order of the
    /// variant's fields as listed below, unused ones 0: Fa64 [add]; Cs64 [swap, compare]; MaskedFa
    /// [add, boundary]; MaskedCs [swap, compare, swap_mask, compare_mask].
    #[inline(always)]
    pub const fn encode(&self) -> (u8, [u64; 4]) {
        match *self {
            Atomic::Fa64 { add } => (AtomicKind::Fa64 as u8, [add, 0, 0, 0]),
            Atomic::Cs64 { compare, swap } => (AtomicKind::Cs64 as u8, [swap, compare, 0, 0]),
            Atomic::MaskedFa32 { add, boundary } => (AtomicKind::MaskedFa32 as u8, [add as u64, boundary as u64, 0, 0]),
            Atomic::MaskedCs32 { swap, compare, swap_mask, compare_mask } => {
                (AtomicKind::MaskedCs32 as u8, [swap as u64, compare as u64, swap_mask as u64, compare_mask as u64])
            }
            Atomic::MaskedFa64 { add, boundary } => (AtomicKind::MaskedFa64 as u8, [add, boundary, 0, 0]),
            Atomic::MaskedCs64 { swap, compare, swap_mask, compare_mask } => (AtomicKind::MaskedCs64 as u8, [swap, compare, swap_mask, compare_mask]),
        }
    }
    /// The inverse of [`encode`](Self::encode); None for an unknown kind. 32-bit kinds take the low
    /// halves of their operands ([`Atomic::kind_shape`] says what a valid encoding holds).
    #[inline(always)]
    pub const fn decode(kind: u8, o: [u64; 4]) -> Option<Atomic> {
        let Some(k) = AtomicKind::from_u8(kind) else { return None };
        Some(match k {
            AtomicKind::Fa64 => Atomic::Fa64 { add: o[0] },
            AtomicKind::Cs64 => Atomic::Cs64 { swap: o[0], compare: o[1] },
            AtomicKind::MaskedFa32 => Atomic::MaskedFa32 { add: o[0] as u32, boundary: o[1] as u32 },
            AtomicKind::MaskedCs32 => Atomic::MaskedCs32 { swap: o[0] as u32, compare: o[1] as u32, swap_mask: o[2] as u32, compare_mask: o[3] as u32 },
            AtomicKind::MaskedFa64 => Atomic::MaskedFa64 { add: o[0], boundary: o[1] },
            AtomicKind::MaskedCs64 => Atomic::MaskedCs64 { swap: o[0], compare: o[1], swap_mask: o[2], compare_mask: o[3] },
        })
    }
    /// The width in bytes and the number of operands of encoded kind `kind`, or None when unknown.
    #[inline(always)]
    pub const fn kind_shape(kind: u8) -> Option<(u32, usize)> {
        match AtomicKind::from_u8(kind) {
            Some(k) => Some(k.shape()),
            None => None,
        }
    }
    /// The name of encoded kind `kind`, for messages.
    pub const fn kind_name(kind: u8) -> &'static str {
        match AtomicKind::from_u8(kind) {
            Some(k) => k.name(),
            None => "unknown atomic",
        }
    }
    /// The value the operation stores given the old one (what the NIC computes; the emulator uses it).
    #[inline]
    pub const fn apply(&self, old: u64) -> u64 {
        match *self {
            Atomic::Fa64 { add } => old.wrapping_add(add),
            Atomic::Cs64 { compare, swap } => {
                if old == compare {
                    swap
                } else {
                    old
                }
            }
            Atomic::MaskedFa32 { add, boundary } => masked_add(old as u32 as u64, add as u64, boundary as u64 | (1 << 31)) & 0xffff_ffff,
            Atomic::MaskedCs32 { swap, compare, swap_mask, compare_mask } => {
                let o = old as u32;
                (if (o ^ compare) & compare_mask == 0 { (o & !swap_mask) | (swap & swap_mask) } else { o }) as u64
            }
            Atomic::MaskedFa64 { add, boundary } => masked_add(old, add, boundary),
            Atomic::MaskedCs64 { swap, compare, swap_mask, compare_mask } => {
                if (old ^ compare) & compare_mask == 0 {
                    (old & !swap_mask) | (swap & swap_mask)
                } else {
                    old
                }
            }
        }
    }
    /// The fetched value from the bytes the NIC wrote into the local result buffer: 8-byte results in
    /// host (little-endian) order, 4-byte masked results big-endian, as NVSHMEM reads them (research
    /// note §1.7, inferred there from NVSHMEM's use).
    #[inline(always)]
    pub const fn fetched(&self, raw: [u8; 8]) -> u64 {
        if self.bytes() == 4 {
            u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) as u64
        } else {
            u64::from_le_bytes(raw)
        }
    }
    /// The bytes the NIC writes into the local result buffer for the old value `old` (the first
    /// `bytes()` of them).
    #[inline(always)]
    pub const fn result_bytes(&self, old: u64) -> [u8; 8] {
        if self.bytes() == 4 {
            let b = (old as u32).to_be_bytes();
            [b[0], b[1], b[2], b[3], 0, 0, 0, 0]
        } else {
            old.to_le_bytes()
        }
    }
}

/// `a + b` where the carry out of every bit set in `boundary` is dropped (each field ends at such a
/// bit): boundary 0 is a plain add, all ones is XOR.
#[inline]
pub const fn masked_add(a: u64, b: u64, boundary: u64) -> u64 {
    let mut out = 0u64;
    let mut carry = 0u64;
    let mut i = 0;
    while i < 64 {
        let x = (a >> i) & 1;
        let y = (b >> i) & 1;
        let s = x ^ y ^ carry;
        out |= s << i;
        let c = (x & y) | (x & carry) | (y & carry);
        carry = if (boundary >> i) & 1 != 0 { 0 } else { c };
        i += 1;
    }
    out
}

impl Wqe {
    #[inline(always)]
    const fn empty() -> Wqe {
        Wqe { seg: [[0; DS]; MAX_DS], ds: 0 }
    }
    /// Puts a 16-byte segment at DS `at` (callers use constant positions below `MAX_DS`).
    #[inline(always)]
    fn put<T: bytemuck::Pod>(&mut self, at: usize, v: T) {
        if let Some(s) = self.seg.get_mut(at) {
            *s = bytemuck::must_cast(v);
        }
    }

    /// The control segment.
    #[inline(always)]
    pub fn ctrl(&self) -> CtrlSeg {
        bytemuck::must_cast(self.seg[0])
    }
    #[inline(always)]
    pub fn set_ctrl(&mut self, c: CtrlSeg) {
        self.seg[0] = bytemuck::must_cast(c);
    }
    /// WQEBBs this WQE takes (`ceil(ds / 4)`).
    #[inline(always)]
    pub const fn wqebbs(&self) -> u32 {
        (self.ds as u32).div_ceil(DS_PER_WQEBB)
    }
    /// The `fm_ce_se` byte.
    #[inline(always)]
    pub const fn flags(&self) -> u8 {
        self.seg[0][11]
    }
    #[inline(always)]
    pub fn set_flags(&mut self, fm_ce_se: u8) {
        self.seg[0][11] = fm_ce_se;
    }
    /// Sets the WQE index and QPN in the control segment (done by `QpDesc::write`).
    #[inline(always)]
    pub fn stamp(&mut self, idx: u16, qpn: u32) {
        let mut c = self.ctrl();
        c.set_wqe_index(idx);
        c.set_qpn_ds(qpn, self.ds);
        self.set_ctrl(c);
    }
    /// The WQE's bytes (`ds * 16`).
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        let all: &[u8] = self.seg.as_flattened();
        let n = (self.ds as usize * DS).min(all.len());
        all.get(..n).unwrap_or(all)
    }

    /// NOP: a control segment written with ds 2, as NVSHMEM's (the second DS is zero here).
    #[inline(always)]
    pub fn nop(fm_ce_se: u8) -> Wqe {
        let mut w = Wqe::empty();
        w.ds = 2;
        w.set_ctrl(CtrlSeg::new(opcode::NOP, 0, 0, 0, 2, fm_ce_se));
        w
    }

    /// RDMA WRITE of `len` bytes at `local` to `remote` (ctrl, raddr, data: ds 3).
    #[inline(always)]
    pub fn rdma_write(fm_ce_se: u8, remote: Remote, local: Local, len: u32) -> Wqe {
        Self::rw(opcode::RDMA_WRITE, fm_ce_se, remote, local, len)
    }

    /// RDMA READ of `len` bytes at `remote` into `local` (ctrl, raddr, data: ds 3).
    #[inline(always)]
    pub fn rdma_read(fm_ce_se: u8, remote: Remote, local: Local, len: u32) -> Wqe {
        Self::rw(opcode::RDMA_READ, fm_ce_se, remote, local, len)
    }

    #[inline(always)]
    fn rw(op: u8, fm_ce_se: u8, remote: Remote, local: Local, len: u32) -> Wqe {
        let mut w = Wqe::empty();
        w.ds = 3;
        w.set_ctrl(CtrlSeg::new(op, 0, 0, 0, 3, fm_ce_se));
        w.put(1, RaddrSeg::new(remote.addr, remote.rkey));
        w.put(2, DataSeg::new(len, local.lkey, local.addr));
        w
    }

    /// RDMA WRITE with the payload inline (ctrl, raddr, inline header + data padded to 16 bytes): ds 3
    /// for up to 12 bytes. Returns `None` above [`MAX_INLINE`] bytes.
    #[inline(always)]
    pub fn rdma_write_inline(fm_ce_se: u8, remote: Remote, data: &[u8]) -> Option<Wqe> {
        if data.len() > MAX_INLINE {
            return None;
        }
        let len = data.len() as u32;
        let ds = 2 + mlx5::inline_ds(len) as u8;
        let mut w = Wqe::empty();
        w.ds = ds;
        w.set_ctrl(CtrlSeg::new(opcode::RDMA_WRITE, 0, 0, 0, ds, fm_ce_se));
        w.put(1, RaddrSeg::new(remote.addr, remote.rkey));
        let flat: &mut [u8] = w.seg.as_flattened_mut();
        let hdr: [u8; 4] = bytemuck::must_cast(InlineHdr::new(len));
        if let Some(dst) = flat.get_mut(2 * DS..2 * DS + 4) {
            dst.copy_from_slice(&hdr);
        }
        if let Some(dst) = flat.get_mut(2 * DS + 4..2 * DS + 4 + data.len()) {
            dst.copy_from_slice(data);
        }
        Some(w)
    }

    /// RDMA WRITE of a value of up to 8 bytes inline (`p`): `bytes` of `value`'s little-endian bytes
    /// (the memory image of the value on the GPU and the host). ds 3.
    #[inline(always)]
    pub fn rdma_write_inline_value(fm_ce_se: u8, remote: Remote, value: u64, bytes: u32) -> Wqe {
        let n = if bytes > 8 { 8 } else { bytes };
        let mut w = Wqe::empty();
        w.ds = 3;
        w.set_ctrl(CtrlSeg::new(opcode::RDMA_WRITE, 0, 0, 0, 3, fm_ce_se));
        w.put(1, RaddrSeg::new(remote.addr, remote.rkey));
        let v = value.to_le_bytes();
        let h = InlineHdr::new(n).byte_count.0;
        let mut s = [0u8; DS];
        s[0] = h[0];
        s[1] = h[1];
        s[2] = h[2];
        s[3] = h[3];
        let mut i = 0;
        while i < 8 {
            if (i as u32) < n {
                s[4 + i] = v[i];
            }
            i += 1;
        }
        w.seg[2] = s;
        w
    }

    /// An atomic on `remote` whose old value the NIC writes to `result` (ctrl, raddr, operand(s), data
    /// of `op.bytes()` bytes): ds 4, or 5 (two WQEBBs) for the 8-byte masked CS.
    #[inline(always)]
    pub fn atomic(fm_ce_se: u8, remote: Remote, result: Local, op: Atomic) -> Wqe {
        let mut w = Wqe::empty();
        let ds = 3 + op.operand_ds();
        w.ds = ds;
        w.set_ctrl(CtrlSeg::new(op.opcode(), op.opmod(), 0, 0, ds, fm_ce_se));
        w.put(1, RaddrSeg::new(remote.addr, remote.rkey));
        match op {
            Atomic::Fa64 { add } => w.put(2, AtomicSeg { swap_add: mlx5::Be64::new(add), compare: mlx5::Be64::new(0) }),
            Atomic::Cs64 { compare, swap } => w.put(2, AtomicSeg { swap_add: mlx5::Be64::new(swap), compare: mlx5::Be64::new(compare) }),
            Atomic::MaskedFa32 { add, boundary } => {
                w.put(2, MaskedFa32Seg { add: mlx5::Be32::new(add), field_boundary: mlx5::Be32::new(boundary), reserved: [0; 8] })
            }
            Atomic::MaskedCs32 { swap, compare, swap_mask, compare_mask } => w.put(
                2,
                MaskedCs32Seg {
                    swap: mlx5::Be32::new(swap),
                    compare: mlx5::Be32::new(compare),
                    swap_mask: mlx5::Be32::new(swap_mask),
                    compare_mask: mlx5::Be32::new(compare_mask),
                },
            ),
            Atomic::MaskedFa64 { add, boundary } => w.put(2, MaskedFa64Seg { add: mlx5::Be64::new(add), field_boundary: mlx5::Be64::new(boundary) }),
            Atomic::MaskedCs64 { swap, compare, swap_mask, compare_mask } => {
                let two: [[u8; DS]; 2] = bytemuck::must_cast(MaskedCs64Seg {
                    swap: mlx5::Be64::new(swap),
                    compare: mlx5::Be64::new(compare),
                    swap_mask: mlx5::Be64::new(swap_mask),
                    compare_mask: mlx5::Be64::new(compare_mask),
                });
                w.put(2, two[0]);
                w.put(3, two[1]);
            }
        }
        w.put(ds as usize - 1, DataSeg::new(op.bytes(), result.lkey, result.addr));
        w
    }

    /// NVSHMEM's DUMP: the NIC reads `len` bytes at `local` (ctrl, data: ds 2); with
    /// [`fm_ce_se::FM_FENCE`](crate::mlx5::fm_ce_se::FM_FENCE) it waits for earlier READs and atomics.
    #[inline(always)]
    pub fn dump(fm_ce_se: u8, local: Local, len: u32) -> Wqe {
        let mut w = Wqe::empty();
        w.ds = 2;
        w.set_ctrl(CtrlSeg::new(opcode::DUMP, 0, 0, 0, 2, fm_ce_se));
        w.put(1, DataSeg::new(len, local.lkey, local.addr));
        w
    }

    /// An all-zero WQE of `ds` units, for tests that build malformed WQEs by hand.
    #[inline]
    pub fn raw(ds: u8) -> Wqe {
        let mut w = Wqe::empty();
        w.ds = if ds as usize > MAX_DS { MAX_DS as u8 } else { ds };
        w
    }
}

impl Default for Wqe {
    fn default() -> Self {
        Wqe::empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5::fm_ce_se::CQ_UPDATE;

    #[test]
    fn masked_add_boundaries() {
        assert_eq!(masked_add(5, 7, 0), 12);
        assert_eq!(masked_add(0xff, 1, 0), 0x100);
        assert_eq!(masked_add(0xff, 1, 0x80), 0x00); // carry out of bit 7 dropped
        assert_eq!(masked_add(0xdead_beef, 0x1234_5678, u64::MAX), 0xdead_beef ^ 0x1234_5678);
        assert_eq!(masked_add(u64::MAX, 1, 0), 0);
    }

    /// Every variant encodes to its kind's code and back, with the operand count and width its kind
    /// states; codes no kind has decode to None.
    #[test]
    fn atomic_kinds_round_trip() {
        let all = [
            Atomic::Fa64 { add: 0x1111_2222_3333_4444 },
            Atomic::Cs64 { compare: 5, swap: 6 },
            Atomic::MaskedFa32 { add: 7, boundary: 8 },
            Atomic::MaskedCs32 { swap: 9, compare: 10, swap_mask: 11, compare_mask: 12 },
            Atomic::MaskedFa64 { add: 13, boundary: 14 },
            Atomic::MaskedCs64 { swap: 15, compare: 16, swap_mask: 17, compare_mask: 18 },
        ];
        assert_eq!(all.len(), AtomicKind::ALL.len());
        for (a, &k) in all.iter().zip(AtomicKind::ALL) {
            let (code, ops) = a.encode();
            assert_eq!(code, k as u8);
            assert_eq!(Atomic::decode(code, ops), Some(*a));
            let (width, n) = Atomic::kind_shape(code).unwrap();
            assert_eq!(width, a.bytes());
            assert!(ops[n..].iter().all(|&o| o == 0), "{k:?}: operands past its count");
            assert_eq!(Atomic::kind_name(code), k.name());
        }
        for code in [0u8, 7, 0xff] {
            assert_eq!(Atomic::decode(code, [1; 4]), None);
            assert_eq!(Atomic::kind_shape(code), None);
            assert_eq!(Atomic::kind_name(code), "unknown atomic");
        }
    }

    #[test]
    fn amo_mapping_semantics() {
        for &(bytes, old, v, cmp) in &[(4u32, 0xf0f0_1234u64, 0x0ff0_00ffu64, 0xf0f0_1234u64), (8, 0xf0f0_1234_5678_9abc, 0x0ff0_00ff_1111_2222, 7)] {
            let m = if bytes == 4 { 0xffff_ffff } else { u64::MAX };
            let ap = |op| Atomic::amo(op, bytes, v, cmp).apply(old) & m;
            assert_eq!(ap(Amo::Fetch), old);
            assert_eq!(ap(Amo::Swap), v & m);
            assert_eq!(ap(Amo::Add), old.wrapping_add(v) & m);
            assert_eq!(ap(Amo::And), old & v & m);
            assert_eq!(ap(Amo::Or), (old | v) & m);
            assert_eq!(ap(Amo::Xor), (old ^ v) & m);
            assert_eq!(ap(Amo::CompareSwap), if old & m == cmp & m { v & m } else { old });
        }
    }

    #[test]
    fn shapes() {
        let r = Remote { addr: 0x1000, rkey: 7 };
        let l = Local { addr: 0x2000, lkey: 9 };
        assert_eq!(Wqe::rdma_write(0, r, l, 8).ds, 3);
        assert_eq!(Wqe::rdma_write_inline(0, r, &[1; 12]).unwrap().ds, 3);
        assert_eq!(Wqe::rdma_write_inline(0, r, &[1; 13]).unwrap().ds, 4);
        assert!(Wqe::rdma_write_inline(0, r, &[1; MAX_INLINE + 1]).is_none());
        assert_eq!(Wqe::rdma_write_inline_value(0, r, 0x0102, 2), Wqe::rdma_write_inline(0, r, &[2, 1]).unwrap());
        let cs = Wqe::atomic(CQ_UPDATE, r, l, Atomic::MaskedCs64 { swap: 1, compare: 2, swap_mask: 3, compare_mask: 4 });
        assert_eq!((cs.ds, cs.wqebbs()), (5, 2));
        assert_eq!(Wqe::atomic(0, r, l, Atomic::Fa64 { add: 1 }).wqebbs(), 1);
        assert_eq!(Wqe::nop(CQ_UPDATE).bytes().len(), 32);
    }
}
