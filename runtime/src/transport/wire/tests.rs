//! Tests of the wire: every kind round-trips, every bad field is named, fuzzed frames never panic.

use crate::transport::wire::*;
use crate::transport::wire::frame::*;
use bytemuck::Zeroable;
use rshmem_ibgda::Atomic;

const HEAP: u64 = 1 << 20;

fn ctx() -> Context {
    Context { me: 1, peer: 2, npes: 4, heap_size: HEAP, max_chunk: 64 << 10 }
}

fn sig() -> Signal {
    Signal { offset: 0x100, op: SignalOp::Add, value: 7 }
}

/// One valid message of every kind (and every AMO op and width).
fn samples(data: &[u8]) -> Vec<Message<'_>> {
    let mut v = vec![
        Message::Put { seq: 1, offset: 0x40, data, last: false },
        Message::Put { seq: 2, offset: HEAP - data.len() as u64, data, last: true },
        Message::PutSignal { seq: 3, offset: 0, data, signal: sig() },
        Message::GetRequest { seq: 4, offset: 8, len: HEAP - 8 },
        Message::GetResponse { seq: 4, offset: 8, data, last: true },
        Message::AmoResponse { seq: 6, width: Width::W4, value: 0xffff_ffff },
        Message::AmoResponse { seq: 6, width: Width::W8, value: u64::MAX },
        Message::Signal { seq: 7, signal: Signal { offset: HEAP - 8, op: SignalOp::Set, value: 1 } },
        Message::Quiet { seq: 9 },
        Message::QuietAck { seq: 9 },
        Message::Error { text: "out of memory on PE 2".into() },
        Message::Close,
        Message::NicWrite { seq: 11, rkey: 0x10001, raddr: 0x7f00_0000_1000, data, last: true },
        Message::NicWrite { seq: 12, rkey: 7, raddr: u64::MAX - data.len() as u64, data, last: false },
        Message::NicRead { seq: 13, rkey: 0x10001, raddr: 0x7f00_0000_1000, len: 1 << 31 },
        Message::NicReadResponse { seq: 13, offset: 4096, data, last: true },
        Message::NicAck { seq: 14, syndrome: 0, reason: 0, value: u64::MAX },
        Message::NicAck { seq: 15, syndrome: 0x13, reason: 0xf0, value: 0 },
    ];
    for op in [
        Atomic::Fa64 { add: u64::MAX },
        Atomic::Cs64 { compare: 1, swap: 2 },
        Atomic::MaskedFa32 { add: 3, boundary: u32::MAX },
        Atomic::MaskedCs32 { swap: 1, compare: 2, swap_mask: 3, compare_mask: u32::MAX },
        Atomic::MaskedFa64 { add: 5, boundary: 1 << 63 },
        Atomic::MaskedCs64 { swap: 1, compare: 2, swap_mask: u64::MAX, compare_mask: 4 },
    ] {
        v.push(Message::NicAtomic { seq: 16, rkey: 9, raddr: 0x1000, op });
    }
    for &op in AmoOp::ALL {
        for width in [Width::W4, Width::W8] {
            let value = if op.has_operand() { 5 } else { 0 };
            let compare = if op == AmoOp::CompareSwap { 9 } else { 0 };
            v.push(Message::Amo { seq: 5, op, width, offset: HEAP - width.bytes(), value, compare });
        }
    }
    v
}

#[test]
fn every_kind_round_trips() {
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    let msgs = samples(&data);
    for k in Kind::ALL {
        assert!(msgs.iter().any(|m| m.kind() == *k), "no sample of {k:?}");
    }
    for m in &msgs {
        let (h, payload) = m.encode(2);
        let bytes = encode_frame(&h, payload);
        let got = decode_frame(&bytes, &ctx()).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        assert_eq!(&got, m);
        // Through the streaming reader as well, several frames back to back.
        let twice = [bytes.clone(), bytes].concat();
        let mut r = FrameReader::new();
        let mut src = &twice[..];
        assert_eq!(&r.read(&mut src, &ctx()).unwrap(), m);
        assert_eq!(&r.read(&mut src, &ctx()).unwrap(), m);
        assert!(matches!(r.read(&mut src, &ctx()), Err(ReadError::Closed)));
    }
}

#[test]
fn hello_layout() {
    let h = Hello { magic: MAGIC, version: VERSION, npes: 3, heap_size: 0x0102, ..Hello::zeroed() };
    let b = bytemuck::bytes_of(&h);
    assert_eq!(&b[..8], b"RSHMWIRE");
    assert_eq!(&b[8..12], &VERSION.to_le_bytes());
    assert_eq!(&b[40..44], &3u32.to_le_bytes());
    assert_eq!(&b[48..56], &0x0102u64.to_le_bytes());
    for s in 0..8 {
        assert_eq!(HelloStatus::from_u32(s).map(|x| x as u32), Some(s));
    }
    assert_eq!(HelloStatus::from_u32(8), None);
}

fn err_of(h: OpHeader, payload: &[u8]) -> String {
    decode_frame(&encode_frame(&h, payload), &ctx()).expect_err("accepted").to_string()
}

#[test]
fn bad_fields_are_named() {
    let put = |offset: u64, len: u64| OpHeader { kind: 1, src_pe: 2, offset, len, payload_len: len as u32, ..Default::default() };
    let e = err_of(put(HEAP - 4, 8), &[0; 8]);
    assert!(e.contains("PE 2") && e.contains("`offset`") && e.contains("outside"), "{e}");
    let e = err_of(put(u64::MAX - 3, 8), &[0; 8]);
    assert!(e.contains("`offset`"), "{e}");
    let e = err_of(put(0, 100_000), &[]);
    assert!(e.contains("`len`") && e.contains("chunk limit"), "{e}");
    let mut h = put(0, 8);
    h.payload_len = 9;
    assert!(err_of(h, &[0; 9]).contains("`payload_len`"));
    let mut h = put(0, 8);
    h.src_pe = 3;
    let e = err_of(h, &[0; 8]);
    assert!(e.contains("`src_pe`") && e.contains("PE 2"), "{e}");
    let mut h = put(0, 8);
    h.flags = 0x80;
    assert!(err_of(h, &[0; 8]).contains("`flags`"));
    let mut h = put(0, 8);
    h.compare = 1;
    assert!(err_of(h, &[0; 8]).contains("`compare`"));
    // Payload shorter or longer than announced.
    let e = err_of(put(0, 8), &[0; 4]);
    assert!(e.contains("PE 2") && e.contains("4 payload bytes"), "{e}");
    assert!(decode_frame(&encode_frame(&put(0, 8), &[0; 12]), &ctx()).is_err());

    let amo = |op: u8, width: u8, offset: u64| OpHeader { kind: 5, src_pe: 2, op, width, offset, ..Default::default() };
    assert!(err_of(amo(99, 8, 0), &[]).contains("`op`"));
    assert!(err_of(amo(5, 2, 0), &[]).contains("`width`"));
    assert!(err_of(amo(5, 8, 4), &[]).contains("not aligned"));
    assert!(err_of(amo(5, 8, HEAP), &[]).contains("outside"));
    let mut h = amo(5, 4, 0);
    h.value = 1 << 32;
    assert!(err_of(h, &[]).contains("does not fit"));
    let mut h = amo(5, 8, 0);
    h.compare = 1;
    assert!(err_of(h, &[]).contains("only compare_swap"));

    let s = OpHeader { kind: 7, src_pe: 2, op: 1, signal_offset: 4, ..Default::default() };
    assert!(err_of(s, &[]).contains("`signal_offset`"));
    let s = OpHeader { kind: 7, src_pe: 2, op: 3, signal_offset: 8, ..Default::default() };
    assert!(err_of(s, &[]).contains("`op`"));
    let e = OpHeader { kind: 12, src_pe: 2, payload_len: 5000, ..Default::default() };
    assert!(err_of(e, &[]).contains("error text limit"));
    // NIC frames: framing is checked, addresses are the responder's business.
    let nw = |offset: u64, len: u64| OpHeader { kind: Kind::NicWrite as u8, src_pe: 2, key: 5, offset, len, payload_len: len as u32, ..Default::default() };
    assert!(err_of(nw(u64::MAX - 3, 8), &[0; 8]).contains("wraps"));
    assert!(err_of(nw(0, 100_000), &[]).contains("chunk limit"));
    let mut h = nw(0, 8);
    h.value = 1;
    assert!(err_of(h, &[0; 8]).contains("`value`"));
    assert!(err_of(OpHeader { kind: Kind::Put as u8, src_pe: 2, key: 1, ..Default::default() }, &[]).contains("`key`"));
    let nr = OpHeader { kind: Kind::NicRead as u8, src_pe: 2, key: 5, len: (1 << 31) + 1, ..Default::default() };
    assert!(err_of(nr, &[]).contains("2 GiB"));
    let na = |op: u8, width: u8| OpHeader { kind: Kind::NicAtomic as u8, src_pe: 2, key: 5, op, width, ..Default::default() };
    assert!(err_of(na(7, 8), &[]).contains("`op`"));
    assert!(err_of(na(3, 8), &[]).contains("`width`"));
    let mut h = na(3, 4);
    h.value = 1 << 32;
    assert!(err_of(h, &[]).contains("does not fit"));
    let mut h = na(1, 8);
    h.compare = 1;
    assert!(err_of(h, &[]).contains("operands"));
    assert!(err_of(OpHeader { kind: 0, ..Default::default() }, &[]).contains("unknown kind 0"));
    assert!(err_of(OpHeader { kind: Kind::Quiet as u8, src_pe: 2, len: 1, ..Default::default() }, &[]).contains("`len`"));
    // The kinds of wire version 2 that were never sent (FENCE 8, BARRIER 11) are unknown now.
    assert!(err_of(OpHeader { kind: 8, src_pe: 2, ..Default::default() }, &[]).contains("unknown kind 8"));
    assert!(err_of(OpHeader { kind: 11, src_pe: 2, ..Default::default() }, &[]).contains("unknown kind 11"));
}

#[test]
fn error_text_is_sanitized() {
    let h = OpHeader { kind: 12, src_pe: 2, payload_len: 6, ..Default::default() };
    let Message::Error { text } = decode_frame(&encode_frame(&h, b"a\x1b[2Jb"), &ctx()).unwrap() else { panic!() };
    assert_eq!(text, "a?[2Jb");
}

#[test]
fn chunks_cover_the_range() {
    for (len, max) in [(0u64, 4096u32), (1, 4096), (4096, 4096), (4097, 4096), (10 << 20, 1 << 20), (12345, 1000)] {
        for signal in [None, Some(sig())] {
            let chunks: Vec<Chunk> = Chunks::put(0, 9, 0x1000, len, max, signal).collect();
            assert_eq!(chunks.len(), (len.div_ceil(max as u64)).max(1) as usize);
            assert_eq!(Chunks::put(0, 9, 0x1000, len, max, signal).size_hint().0, chunks.len());
            let mut next = 0usize;
            for (i, c) in chunks.iter().enumerate() {
                let last = i + 1 == chunks.len();
                assert_eq!(c.range.start, next);
                assert!(c.range.len() <= max as usize);
                assert_eq!(c.header.offset, 0x1000 + next as u64);
                assert_eq!((c.header.len, c.header.payload_len as usize), (c.range.len() as u64, c.range.len()));
                assert_eq!(c.header.flags & FLAG_LAST != 0, last);
                let want = if last && signal.is_some() { Kind::PutSignal } else { Kind::Put };
                assert_eq!(c.header.kind, want as u8);
                assert_eq!(c.header.seq, 9);
                next = c.range.end;
            }
            assert_eq!(next as u64, len);
        }
    }
    // Every chunk of a valid transfer passes the receiver's checks.
    let c = Context { max_chunk: 4096, ..ctx() };
    for ch in Chunks::get_response(2, 1, 0, HEAP, 4096).chain(Chunks::put(2, 1, 0, 10_000, 4096, Some(sig()))) {
        check_header(&ch.header, &c).unwrap();
    }
    // An emulated NIC's WRITE and READ answer: the chunks decode to the messages the responder and
    // the requester act on, each at its place, the last one flagged.
    let payload = vec![0x5au8; 10_000];
    let raddr = 0x7f00_0000_1000u64;
    for (write, chunks) in [(true, Chunks::nic_write(2, 77, 0x1234, raddr, 10_000, 4096)), (false, Chunks::nic_read_response(2, 78, 10_000, 4096))] {
        let chunks: Vec<Chunk> = chunks.collect();
        assert_eq!(chunks.len(), 3);
        for (i, ch) in chunks.iter().enumerate() {
            let checked = check_header(&ch.header, &c).unwrap();
            let data = &payload[ch.range.clone()];
            let last = i + 1 == chunks.len();
            match message(&ch.header, checked, data, &c).unwrap() {
                Message::NicWrite { seq, rkey, raddr: at, data: d, last: l } if write => {
                    assert_eq!((seq, rkey, at, d.len(), l), (77, 0x1234, raddr + ch.range.start as u64, ch.range.len(), last))
                }
                Message::NicReadResponse { seq, offset, data: d, last: l } if !write => {
                    assert_eq!((seq, offset, d.len(), l), (78, ch.range.start as u64, ch.range.len(), last))
                }
                other => panic!("{other:?}"),
            }
        }
    }
}

use super::super::test_rng::Rng;

/// Checks what the decoder accepted: every range it lets through lies inside the heap.
fn assert_in_heap(m: &Message<'_>, c: &Context) {
    let inside = |off: u64, len: u64| off.checked_add(len).is_some_and(|e| e <= c.heap_size);
    match m {
        Message::Put { offset, data, .. } | Message::GetResponse { offset, data, .. } => {
            assert!(inside(*offset, data.len() as u64) && data.len() <= c.max_chunk as usize, "{m:?}")
        }
        Message::PutSignal { offset, data, signal, .. } => {
            assert!(inside(*offset, data.len() as u64) && inside(signal.offset, 8) && signal.offset % 8 == 0, "{m:?}")
        }
        Message::GetRequest { offset, len, .. } => assert!(inside(*offset, *len), "{m:?}"),
        Message::Amo { offset, width, .. } => assert!(inside(*offset, width.bytes()) && offset % width.bytes() == 0, "{m:?}"),
        Message::Signal { signal, .. } => assert!(inside(signal.offset, 8) && signal.offset % 8 == 0, "{m:?}"),
        Message::Error { text } => assert!(text.len() <= 3 * MAX_ERROR_TEXT as usize),
        _ => {}
    }
}

/// Random, mutated, truncated and extended frames, through both the one-frame decoder and the
/// streaming reader: never a panic, never a buffer beyond the chunk limit, never an accepted range
/// outside the heap; every refusal names the peer.
#[test]
fn fuzz_frames() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let data: Vec<u8> = (0..700u32).map(|i| i as u8).collect();
    let base: Vec<Vec<u8>> = samples(&data[..300])
        .iter()
        .chain(samples(&data[..0]).iter())
        .map(|m| {
            let (h, p) = m.encode(2);
            encode_frame(&h, p)
        })
        .collect();
    let c = Context { me: 1, peer: 2, npes: 4, heap_size: HEAP, max_chunk: 512 };
    let (mut accepted, mut refused) = (0u64, 0u64);
    let mut reader = FrameReader::new();
    let start = std::time::Instant::now();
    for i in 0..400_000u64 {
        let mut f = base[rng.below(base.len() as u64) as usize].clone();
        match i % 8 {
            // Flip a few bits, header fields most often.
            0..=2 => {
                for _ in 0..1 + rng.below(4) {
                    let at = if rng.below(4) == 0 { rng.below(f.len() as u64) } else { rng.below(HEADER_LEN as u64) } as usize;
                    f[at] ^= 1 << rng.below(8);
                }
            }
            // Overwrite a header field with an interesting value.
            3 => {
                let at = (rng.below(HEADER_LEN as u64 / 4) * 4) as usize;
                let vals = [0u64, 1, 7, 8, HEAP - 8, HEAP, HEAP + 1, u32::MAX as u64, u64::MAX, u64::MAX - 7, 1 << 40];
                let v = vals[rng.below(vals.len() as u64) as usize].to_le_bytes();
                let n = if at.is_multiple_of(8) && rng.below(2) == 0 { 8 } else { 4 };
                f[at..at + n].copy_from_slice(&v[..n]);
            }
            // Truncate.
            4 => f.truncate(rng.below(f.len() as u64) as usize),
            // Extend with junk.
            5 => f.extend((0..1 + rng.below(100)).map(|_| rng.next() as u8)),
            // Random bytes, with a plausible kind and source PE half the time.
            _ => {
                f = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
                if f.len() >= 8 && rng.below(2) == 0 {
                    f[0] = 1 + rng.below(Kind::ALL.len() as u64) as u8;
                    f[1] &= 1;
                    f[4..8].copy_from_slice(&2u32.to_le_bytes());
                }
            }
        }
        match decode_frame(&f, &c) {
            Ok(m) => {
                assert_in_heap(&m, &c);
                accepted += 1;
            }
            Err(e) => {
                assert!(e.message().contains("PE 2"), "error without the peer: {e}");
                refused += 1;
            }
        }
        let mut src = &f[..];
        loop {
            match reader.read(&mut src, &c) {
                Ok(m) => assert_in_heap(&m, &c),
                Err(ReadError::Invalid(e)) => {
                    assert!(e.message().contains("PE 2"), "{e}");
                    break;
                }
                Err(ReadError::Closed | ReadError::Truncated { .. }) => break,
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        assert!(reader.buffer_capacity() <= (c.max_chunk.max(MAX_ERROR_TEXT)) as usize);
    }
    assert!(accepted > 10_000 && refused > 10_000, "accepted {accepted}, refused {refused}");
    eprintln!("fuzz_frames: {accepted} accepted, {refused} refused in {:?}", start.elapsed());
}
