//! What the PEs of a job exchange (bootstrap all-gathers) to run the proxy over verbs: per pair of PEs
//! and channel, one [`PeerDesc`] (the sending PE's heap base, its QP's address and first packet
//! number), and per registered heap segment one [`HeapKey`] (the segment's range and the sender's
//! rkey for it). Both are plain bytes (`bytemuck::Pod`) defined once here, in native byte order (the
//! PEs of a job share one architecture), and every field is checked by their decoders
//! ([`PeerDesc::decode`], [`HeapKey::decode_all`]) before anything uses it: a PE of another job or
//! version, a corrupted all-gather or a bad field is refused naming the PE and the field.

use super::handle::RcHandle;
use super::rc::PSN_MASK;
use bytemuck::{Pod, Zeroable};

/// `PeerDesc::magic`: "RSVP" (rshmem verbs proxy).
pub const PEER_MAGIC: u32 = u32::from_le_bytes(*b"RSVP");
/// `HeapKey::magic`: "RSVK".
pub const KEY_MAGIC: u32 = u32::from_le_bytes(*b"RSVK");
/// The layout version of both descriptors.
pub const VERSION: u16 = 1;
/// `PeerDesc::flags`: the sender's NIC does 64-bit atomics (`atomic_cap` HCA or global).
pub const FLAG_ATOMICS: u32 = 1;
/// Every flag this version knows.
const KNOWN_FLAGS: u32 = FLAG_ATOMICS;

/// One PE's half of the connection of channel `channel` between it (`from_pe`) and `to_pe`: 64 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct PeerDesc {
    /// [`PEER_MAGIC`].
    pub magic: u32,
    /// [`VERSION`].
    pub version: u16,
    /// The proxy channel (lane) the QP serves.
    pub channel: u16,
    /// The PE that sent the descriptor.
    pub from_pe: u32,
    /// The PE whose QP connects to this one.
    pub to_pe: u32,
    /// The sender's heap base address (what its heap offsets are added to in RDMA requests).
    pub heap_base: u64,
    /// The sender's heap size in bytes (the same on every PE).
    pub heap_size: u64,
    /// The first packet number the sender's QP sends with (24 bits).
    pub psn: u32,
    /// `FLAG_*`.
    pub flags: u32,
    /// The sender's QP: number, LID, link layer, MTU, GID.
    pub qp: RcHandle,
}

const _: () = assert!(size_of::<PeerDesc>() == 64);

/// What a [`PeerDesc`] must say, as the receiving PE knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerExpect {
    /// The PE whose all-gathered bytes these are.
    pub from_pe: u32,
    /// This PE.
    pub to_pe: u32,
    /// The channel.
    pub channel: u16,
    /// The job's heap size.
    pub heap_size: u64,
}

impl PeerDesc {
    /// Decodes and checks the descriptor in `bytes` (exactly 64 bytes, any alignment): every field
    /// against `want` and its own range. The error names the PE and the field.
    pub fn decode(bytes: &[u8], want: &PeerExpect) -> Result<PeerDesc, String> {
        let from = want.from_pe;
        let bad = |what: String| format!("verbs proxy: PE {from} sent a bad connection descriptor for channel {}: {what}", want.channel);
        if bytes.len() != size_of::<PeerDesc>() {
            return Err(bad(format!("{} bytes, expected {}", bytes.len(), size_of::<PeerDesc>())));
        }
        let d: PeerDesc = bytemuck::pod_read_unaligned(bytes);
        if d.magic != PEER_MAGIC {
            return Err(bad(format!("magic {:#x}, expected {PEER_MAGIC:#x} (a PE of another program or version?)", d.magic)));
        }
        if d.version != VERSION {
            return Err(bad(format!("version {}, this PE speaks {VERSION} (every PE must run the same rshmem)", d.version)));
        }
        if d.channel != want.channel {
            return Err(bad(format!("channel {}", d.channel)));
        }
        if d.from_pe != want.from_pe || d.to_pe != want.to_pe {
            return Err(bad(format!("it says it is from PE {} to PE {}, expected from PE {} to PE {}", d.from_pe, d.to_pe, want.from_pe, want.to_pe)));
        }
        if d.heap_size != want.heap_size {
            return Err(bad(format!("heap size {}, this PE's is {} (RSHMEM_SYMMETRIC_SIZE must be the same on every PE)", d.heap_size, want.heap_size)));
        }
        if d.heap_base == 0 || !d.heap_base.is_multiple_of(8) || d.heap_base.checked_add(d.heap_size).is_none() {
            return Err(bad(format!("heap base {:#x} (not 8-byte aligned, zero, or its heap wraps the address space)", d.heap_base)));
        }
        if d.psn & !PSN_MASK != 0 {
            return Err(bad(format!("packet number {:#x} has more than 24 bits", d.psn)));
        }
        if d.flags & !KNOWN_FLAGS != 0 {
            return Err(bad(format!("unknown flags {:#x}", d.flags & !KNOWN_FLAGS)));
        }
        if d.qp.qpn == 0 || d.qp.qpn & !PSN_MASK != 0 {
            return Err(bad(format!("QP number {:#x} (QP numbers are 24 bits, never 0 for an RC QP)", d.qp.qpn)));
        }
        if !matches!(d.qp.link_layer, 1 | 2) {
            return Err(bad(format!("link layer {} (1 InfiniBand or 2 Ethernet)", d.qp.link_layer)));
        }
        if !(1..=5).contains(&d.qp.mtu) {
            return Err(bad(format!("MTU code {} (1 to 5)", d.qp.mtu)));
        }
        Ok(d)
    }

    /// Whether the sender's NIC does 64-bit atomics.
    pub fn atomics(&self) -> bool {
        self.flags & FLAG_ATOMICS != 0
    }
}

/// One registered heap segment of the sending PE: 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct HeapKey {
    /// [`KEY_MAGIC`].
    pub magic: u32,
    /// The PE that sent it.
    pub from_pe: u32,
    /// The segment's first heap offset.
    pub start: u64,
    /// The segment's length in bytes.
    pub len: u64,
    /// The sender's rkey for the segment.
    pub rkey: u32,
    /// Zero.
    pub reserved: u32,
}

const _: () = assert!(size_of::<HeapKey>() == 32);

impl HeapKey {
    /// Decodes the keys PE `from_pe` sent for the segments `want` (heap offset ranges, the same on
    /// every PE since registration is collective), in that order; every field is checked. The error
    /// names the PE and the field.
    pub fn decode_all(bytes: &[u8], from_pe: u32, want: &[std::ops::Range<u64>], heap_size: u64) -> Result<Vec<HeapKey>, String> {
        let bad = |what: String| format!("verbs proxy: PE {from_pe} sent bad heap keys: {what}");
        if bytes.len() != want.len() * size_of::<HeapKey>() {
            return Err(bad(format!("{} bytes for {} segments ({} bytes each)", bytes.len(), want.len(), size_of::<HeapKey>())));
        }
        let mut out = Vec::with_capacity(want.len());
        for (i, (b, w)) in bytes.chunks_exact(size_of::<HeapKey>()).zip(want).enumerate() {
            let k: HeapKey = bytemuck::pod_read_unaligned(b);
            if k.magic != KEY_MAGIC {
                return Err(bad(format!("segment {i}: magic {:#x}, expected {KEY_MAGIC:#x}", k.magic)));
            }
            if k.from_pe != from_pe {
                return Err(bad(format!("segment {i}: it says it is from PE {}", k.from_pe)));
            }
            if k.reserved != 0 {
                return Err(bad(format!("segment {i}: reserved field {:#x} is not zero", k.reserved)));
            }
            let end = k.start.checked_add(k.len);
            if k.len == 0 || end.is_none_or(|e| e > heap_size) {
                return Err(bad(format!("segment {i}: [{:#x}, +{:#x}) is empty or outside the heap of {heap_size:#x} bytes", k.start, k.len)));
            }
            if k.start != w.start || end != Some(w.end) {
                return Err(bad(format!(
                    "segment {i}: [{:#x}, {:#x}) where this PE registered [{:#x}, {:#x}) (heap growth differs between PEs)",
                    k.start,
                    k.start + k.len,
                    w.start,
                    w.end
                )));
            }
            out.push(k);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::test_rng::Rng;

    const HEAP: u64 = 1 << 30;

    fn valid(rng: &mut Rng) -> (PeerDesc, PeerExpect) {
        let want = PeerExpect { from_pe: rng.below(64) as u32, to_pe: rng.below(64) as u32, channel: rng.below(8) as u16, heap_size: HEAP };
        let mut gid = [0u8; 16];
        gid.iter_mut().for_each(|g| *g = rng.next() as u8);
        let d = PeerDesc {
            magic: PEER_MAGIC,
            version: VERSION,
            channel: want.channel,
            from_pe: want.from_pe,
            to_pe: want.to_pe,
            heap_base: (1 + rng.below(1 << 40)) * 8,
            heap_size: HEAP,
            psn: rng.next() as u32 & PSN_MASK,
            flags: rng.below(2) as u32,
            qp: RcHandle { qpn: 1 + rng.below(PSN_MASK as u64 - 1) as u32, lid: rng.next() as u16, link_layer: 1 + rng.below(2) as u8, mtu: 1 + rng.below(5) as u8, gid },
        };
        (d, want)
    }

    /// Property: every valid descriptor round-trips through its bytes (at any alignment).
    #[test]
    fn valid_descriptors_round_trip() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..20_000 {
            let (d, want) = valid(&mut rng);
            let mut buf = [0u8; 65];
            let at = rng.below(2) as usize;
            buf[at..at + 64].copy_from_slice(bytemuck::bytes_of(&d));
            assert_eq!(PeerDesc::decode(&buf[at..at + 64], &want), Ok(d));
        }
    }

    /// Property: a mutated, truncated or extended descriptor never panics; what is accepted is still
    /// valid in every field, and every refusal names the PE and the channel.
    #[test]
    fn mutated_descriptors_are_refused_naming_the_field() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut accepted, mut refused) = (0u32, 0u32);
        for i in 0..100_000u64 {
            let (d, want) = valid(&mut rng);
            let mut b = bytemuck::bytes_of(&d).to_vec();
            match i % 4 {
                0 => {
                    for _ in 0..1 + rng.below(3) {
                        let at = rng.below(64) as usize;
                        b[at] ^= 1 << rng.below(8);
                    }
                }
                1 => {
                    let at = (rng.below(16) * 4) as usize;
                    let v = [0u32, 1, u32::MAX, PSN_MASK + 1, 7][rng.below(5) as usize];
                    b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
                }
                2 => b.truncate(rng.below(64) as usize),
                _ => b.extend((0..1 + rng.below(8)).map(|_| rng.next() as u8)),
            }
            match PeerDesc::decode(&b, &want) {
                Ok(got) => {
                    accepted += 1;
                    assert_eq!((got.magic, got.version, got.channel, got.from_pe, got.to_pe), (PEER_MAGIC, VERSION, want.channel, want.from_pe, want.to_pe));
                    assert!(got.heap_base != 0 && got.heap_base % 8 == 0 && got.psn <= PSN_MASK && got.qp.qpn != 0 && got.qp.qpn <= PSN_MASK);
                    assert!(matches!(got.qp.link_layer, 1 | 2) && (1..=5).contains(&got.qp.mtu) && got.flags & !KNOWN_FLAGS == 0);
                }
                Err(e) => {
                    refused += 1;
                    assert!(e.contains(&format!("PE {}", want.from_pe)) && e.contains(&format!("channel {}", want.channel)), "{e}");
                }
            }
        }
        assert!(accepted > 1000 && refused > 50_000, "accepted {accepted}, refused {refused}");
    }

    #[test]
    fn each_bad_field_is_named() {
        let mut rng = Rng(7);
        let (d, want) = valid(&mut rng);
        let check = |m: &dyn Fn(&mut PeerDesc), needle: &str| {
            let mut x = d;
            m(&mut x);
            let e = PeerDesc::decode(bytemuck::bytes_of(&x), &want).unwrap_err();
            assert!(e.contains(needle), "{needle}: {e}");
        };
        check(&|x| x.magic = 0, "magic");
        check(&|x| x.version = 2, "version 2");
        check(&|x| x.channel += 1, "channel");
        check(&|x| x.to_pe += 1, "expected from PE");
        check(&|x| x.heap_size = 5, "RSHMEM_SYMMETRIC_SIZE");
        check(&|x| x.heap_base = 4, "heap base");
        check(&|x| x.heap_base = u64::MAX - 7, "wraps");
        check(&|x| x.psn = 1 << 24, "24 bits");
        check(&|x| x.flags = 6, "unknown flags");
        check(&|x| x.qp.qpn = 0, "QP number");
        check(&|x| x.qp.link_layer = 3, "link layer 3");
        check(&|x| x.qp.mtu = 0, "MTU");
        assert!(PeerDesc::decode(&[0; 63], &want).unwrap_err().contains("63 bytes"));
    }

    /// Property: heap keys round-trip, and any corruption of a field (or of the length) is refused
    /// naming the PE; nothing panics.
    #[test]
    fn heap_keys_round_trip_and_refuse_corruption() {
        let mut rng = Rng(0xdead_beef_1234_5678);
        for _ in 0..20_000 {
            let n = rng.below(5) as usize;
            let mut at = 0;
            let ranges: Vec<std::ops::Range<u64>> = (0..n)
                .map(|_| {
                    let len = 1 + rng.below(HEAP / 8);
                    let r = at..at + len;
                    at += len;
                    r
                })
                .collect();
            let pe = rng.below(16) as u32;
            let keys: Vec<HeapKey> = ranges.iter().map(|r| HeapKey { magic: KEY_MAGIC, from_pe: pe, start: r.start, len: r.end - r.start, rkey: rng.next() as u32, reserved: 0 }).collect();
            let mut b: Vec<u8> = bytemuck::cast_slice(&keys).to_vec();
            assert_eq!(HeapKey::decode_all(&b, pe, &ranges, HEAP).unwrap(), keys);
            if b.is_empty() {
                continue;
            }
            let at = rng.below(b.len() as u64) as usize;
            let field = (at % 32) / 4;
            b[at] ^= 1 << rng.below(8);
            match HeapKey::decode_all(&b, pe, &ranges, HEAP) {
                // Only the rkey (bytes 24..28) may change freely.
                Ok(_) => assert_eq!(field, 6, "a corrupted field {field} was accepted"),
                Err(e) => assert!(e.contains(&format!("PE {pe}")), "{e}"),
            }
            b.pop();
            assert!(HeapKey::decode_all(&b, pe, &ranges, HEAP).unwrap_err().contains("bytes for"));
        }
    }
}
