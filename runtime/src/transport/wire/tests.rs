//! Tests of the wire: every builder's frame passes the check and says what it was built with; every
//! bad field is named; random bytes never panic the checker, and nothing it accepts reaches outside
//! the heap.

use crate::transport::test_rng::Rng;
use crate::transport::wire::*;

const HEAP: u64 = 1 << 20;

fn ctx() -> Context {
    Context { peer: 2, lanes: 4, lane: 1, backed: HEAP }
}

fn one(build: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut v = Vec::new();
    build(&mut v);
    v
}

#[test]
fn every_builder_passes_the_check() {
    let c = ctx();
    let cases: Vec<(Vec<u8>, Checked)> = vec![
        (one(|o| Frames::put(o, 0x40, &[7u8; 8])), Checked::Request),
        (one(|o| Frames::put(o, HEAP - 3, &[1, 2, 3])), Checked::Request),
        (one(|o| Frames::amo(o, AmoOp::FetchAdd as u8, 8, 0x100, 5, 0, Some(9))), Checked::Request),
        (one(|o| Frames::amo(o, AmoOp::Add as u8, 4, 0x104, 5, 0, None)), Checked::Request),
        (one(|o| Frames::amo(o, AmoOp::CompareSwap as u8, 4, 0x104, 5, 6, Some(1))), Checked::Request),
        (one(|o| Frames::signal(o, SIGNAL_OP_ADD, HEAP - 8, 3)), Checked::Request),
        (one(|o| Frames::get(o, 8, 4096, 77)), Checked::Request),
        (one(|o| Frames::mark(o, 3)), Checked::Request),
        (one(|o| Frames::wait(o, 3, 0b1101)), Checked::Request),
        (one(|o| Frames::ack(o, 1234)), Checked::Ack { count: 1234 }),
        (one(|o| Frames::nic_read(o, 9, 0x7f00_0000, 4096, 5, 8192, true)), Checked::Nic { key: 9, raddr: 0x7f00_0000, len: 4096, seq: 5 }),
        (one(|o| Frames::error(o, "out of memory")), Checked::Error("out of memory".into())),
        (one(Frames::close), Checked::Close),
    ];
    for (bytes, want) in cases {
        assert_eq!(bytes.len() % 16, 0, "{bytes:?}");
        let h: Head = bytemuck::pod_read_unaligned(&bytes[..16]);
        assert_eq!(frame_size(&h, &c).unwrap(), bytes.len());
        assert_eq!(check(&bytes, &c).unwrap(), want, "{}", describe(&h));
    }
    let mut w = Vec::new();
    Frames::nic_write_head(&mut w, 3, 0x1000, 5, 44, true);
    w.extend_from_slice(&[1, 2, 3, 4, 5]);
    w.extend_from_slice(pad(5));
    assert_eq!(check(&w, &c).unwrap(), Checked::Nic { key: 3, raddr: 0x1000, len: 5, seq: 44 });
    for a in [rshmem_ibgda::Atomic::Fa64 { add: 1 }, rshmem_ibgda::Atomic::MaskedCs32 { swap: 1, compare: 2, swap_mask: 3, compare_mask: 4 }] {
        let (kind, ops) = a.encode();
        let f = one(|o| Frames::nic_atomic(o, 3, 0x2000, kind, a.bytes() as u8, 8, ops));
        assert_eq!(check(&f, &c).unwrap(), Checked::Nic { key: 3, raddr: 0x2000, len: a.bytes() as u64, seq: 8 });
    }
}

fn err_of(bytes: &[u8]) -> String {
    check(bytes, &ctx()).unwrap_err()
}

#[test]
fn bad_fields_are_named() {
    let set = |mut b: Vec<u8>, at: usize, v: &[u8]| {
        b[at..at + v.len()].copy_from_slice(v);
        b
    };
    let put = one(|o| Frames::put(o, 0x40, &[7u8; 8]));
    assert!(err_of(&set(put.clone(), 8, &(HEAP - 4).to_le_bytes())).contains("beyond the 0x100000 bytes backed"));
    assert!(err_of(&set(put.clone(), 8, &u64::MAX.to_le_bytes())).contains("field `offset`"));
    assert!(err_of(&set(put.clone(), 1, &[1])).contains("field `op`"));
    assert!(err_of(&set(put.clone(), 3, &[0x80])).contains("field `flags`"));
    assert!(err_of(&set(put.clone(), 30, &[1])).contains("field `padding`"));
    let amo = one(|o| Frames::amo(o, AmoOp::Add as u8, 8, 0x100, 5, 0, None));
    assert!(err_of(&set(amo.clone(), 1, &[99])).contains("not an AMO code"));
    assert!(err_of(&set(amo.clone(), 2, &[2])).contains("field `width`"));
    assert!(err_of(&set(amo.clone(), 8, &0x104u64.to_le_bytes())).contains("not aligned"));
    assert!(err_of(&set(amo.clone(), 3, &[FLAG_FETCH])).contains("ask a fetch for add"));
    assert!(err_of(&set(amo.clone(), 24, &[1])).contains("field `compare`"));
    let amo4 = one(|o| Frames::amo(o, AmoOp::Add as u8, 4, 0x100, 5, 0, None));
    assert!(err_of(&set(amo4, 20, &[1])).contains("does not fit 4 bytes"));
    let sig = one(|o| Frames::signal(o, SIGNAL_OP_SET, 0x100, 3));
    assert!(err_of(&set(sig.clone(), 1, &[3])).contains("field `op`"));
    assert!(err_of(&set(sig, 8, &0x101u64.to_le_bytes())).contains("not 8-byte aligned"));
    let get = one(|o| Frames::get(o, 8, 4096, 77));
    assert!(err_of(&set(get.clone(), 4, &0u32.to_le_bytes())).contains("field `len`"));
    assert!(err_of(&set(get, 4, &(MAX_PAYLOAD + 1).to_le_bytes())).contains("field `len`"));
    // A wait on this very lane (1), or on a lane that does not exist.
    assert!(err_of(&one(|o| Frames::wait(o, 1, 0b10))).contains("not a mask of other lanes"));
    assert!(err_of(&one(|o| Frames::wait(o, 1, 0b10000))).contains("not a mask of other lanes"));
    let mut wrap = vec![0u8; 16];
    wrap[0] = WRAP;
    assert!(err_of(&wrap).contains("unknown kind"));
    let close = one(Frames::close);
    assert!(err_of(&set(close, 8, &[1])).contains("field `offset`"));
    // A frame shorter or longer than its head says.
    assert!(err_of(&put[..16]).contains("where its head says 32"));
}

#[test]
fn error_text_is_sanitized() {
    let f = one(|o| Frames::error(o, "bad\u{1b}[31m text\nline"));
    assert_eq!(check(&f, &ctx()).unwrap(), Checked::Error("bad?[31m text\nline".into()));
    // A text longer than the limit is cut at a character boundary.
    let long = "é".repeat(3000);
    let f = one(|o| Frames::error(o, &long));
    let Checked::Error(t) = check(&f, &ctx()).unwrap() else { panic!() };
    assert!(t.len() <= MAX_ERROR_TEXT as usize && t.chars().all(|c| c == 'é'));
}

/// Random heads and bodies: the checker never panics, and every request it accepts touches only heap
/// bytes below `backed`.
#[test]
fn random_frames_never_escape_the_heap() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let c = ctx();
    let (mut accepted, mut touching) = (0, 0);
    for i in 0..400_000u64 {
        let mut h = Head {
            kind: [PUT, AMO, SIGNAL, GET, MARK, WAIT, NIC_WRITE, NIC_READ, NIC_ATOMIC, ACK, AMO_REPLY, GET_DATA, NIC_ACK, CLOSE, ERROR, WRAP, rng.next() as u8][rng.below(17) as usize],
            op: if rng.below(2) == 0 { rng.below(14) as u8 } else { rng.next() as u8 },
            width: [0u8, 4, 8, rng.next() as u8][rng.below(4) as usize],
            flags: if rng.below(3) == 0 { rng.next() as u8 } else { rng.below(2) as u8 },
            len: [0u32, 1, 8, 4096, MAX_PAYLOAD, MAX_PAYLOAD + 1, rng.next() as u32, rng.below(64) as u32][rng.below(8) as usize],
            offset: [0u64, HEAP - 8, HEAP, u64::MAX - 3, rng.below(HEAP * 2), rng.next()][rng.below(6) as usize] & !(rng.below(2) * 7),
        };
        if i % 7 == 0 {
            h.offset &= !7;
        }
        let Ok(size) = frame_size(&h, &c) else { continue };
        assert!(size <= MAX_PAYLOAD as usize + 64);
        let mut b = vec![0u8; size];
        b[..16].copy_from_slice(bytemuck::bytes_of(&h));
        // A third of the bodies random (padding and AMO operands that must be checked), the rest zero.
        let noisy = rng.below(3) == 0;
        for x in b[16..].iter_mut() {
            if noisy && rng.below(4) == 0 {
                *x = rng.next() as u8;
            }
        }
        if let Ok(Checked::Request) = check(&b, &c) {
            accepted += 1;
            if matches!(h.kind, PUT | GET | AMO | SIGNAL) {
                touching += 1;
            }
            let touched = match h.kind {
                PUT | GET => h.len as u64,
                AMO => h.width as u64,
                SIGNAL => 8,
                // MARK/WAIT and the rest touch no memory: their `offset` is not an address.
                _ => continue,
            };
            assert!(h.offset.checked_add(touched).is_some_and(|e| e <= HEAP), "accepted {}", describe(&h));
        }
    }
    assert!(accepted > 200 && touching > 200, "the generator made too few valid requests ({accepted}, {touching} touching memory)");
}

#[test]
fn hello_layout() {
    let h = Hello { magic: MAGIC, version: VERSION, status: 0, key: [7; 16], src_pe: 1, dst_pe: 2, npes: 3, lane: 4, lanes: 5, heap_size: 6, max_chunk: 7, _reserved: 0 };
    let b = bytemuck::bytes_of(&h);
    assert_eq!(b.len(), HELLO_LEN);
    assert_eq!(&b[..8], b"RSHMWIRE");
    assert_eq!(&b[16..32], &[7u8; 16]);
}
