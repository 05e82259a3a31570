//! Property test of the bootstrap wire decoder: valid frames of every kind, mutated (bits flipped,
//! bytes set to edge values, length fields rewritten, truncated, extended, spliced) and pure random
//! bytes, are fed through the same frame reader and decoders that PE 0 and the other PEs use, in
//! random chunks. Every case must end in a decoded message or an error with a clear text, never
//! panic, and never allocate more than a bounded amount for the bytes actually received (a tracking
//! allocator records the largest single allocation made on the test's thread). Valid frames must
//! decode to what was encoded.
//!
//! Reproducible: the seed is printed; RSHMEM_TEST_FUZZ_SEED=<n> and RSHMEM_TEST_FUZZ_CASES=<n> rerun a
//! case.

use super::wire::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{self, Read};

// ---- allocation tracking (this test binary only) ----

struct Tracking;

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the allocator may be called while this thread's locals are being torn down.
    if TRACKING.try_with(Cell::get).unwrap_or(false) {
        let _ = PEAK.try_with(|p| p.set(p.get().max(size)));
    }
}

// SAFETY: every method forwards to the system allocator with the caller's arguments unchanged, so
// the system allocator's guarantees hold; the extra work only reads and writes thread-local cells
// (const-initialized, without destructors, so accessing them never allocates).
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` was allocated by System through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// Runs `f` and returns its result and the largest single allocation it made on this thread.
fn tracked<T>(f: impl FnOnce() -> T) -> (T, usize) {
    PEAK.with(|p| p.set(0));
    TRACKING.with(|t| t.set(true));
    let out = f();
    TRACKING.with(|t| t.set(false));
    (out, PEAK.with(Cell::get))
}

// ---- a small deterministic generator ----

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

// ---- the sides that read frames ----

#[derive(Clone, Copy, Debug)]
enum Side {
    /// PE 0, reading a hello from a new connection.
    Hello,
    /// PE 0, reading the answer to its challenge.
    Proof,
    /// PE 0, reading from a joined PE.
    Peer,
    /// A PE, reading PE 0's answer to its hello.
    Handshake(usize),
    /// A PE, reading the result of a collective.
    Result(usize),
}

/// What a decoded frame said (enough to compare with what was encoded).
#[derive(Debug, PartialEq)]
enum Msg {
    Hello(Hello),
    NotRshmem,
    OtherVersion(u32),
    Welcome(Vec<HostId>),
    Challenge([u8; 16], [u8; 32]),
    Proof([u8; 32]),
    Text(u8, String),
    Request(u64, Op, String, Vec<u8>),
    Result(u64, Vec<Vec<u8>>),
}

/// Decodes one frame body as `side` does.
fn decode(side: Side, kind: u8, body: Vec<u8>) -> Result<Msg, String> {
    match (side, kind) {
        (Side::Hello, K_HELLO) => match decode_hello(&body) {
            HelloParse::Ok(h) => Ok(Msg::Hello(h)),
            HelloParse::NotRshmem => Ok(Msg::NotRshmem),
            HelloParse::OtherVersion { version, .. } => Ok(Msg::OtherVersion(version)),
            HelloParse::Garbled(e) => Err(e),
        },
        (Side::Proof, K_PROOF) => decode_proof(&body).map(Msg::Proof),
        (Side::Handshake(_), K_CHALLENGE) => decode_challenge(&body).map(|(n, p)| Msg::Challenge(n, p)),
        (Side::Peer, K_REQUEST) => decode_request(body).map(|r| Msg::Request(r.seq, r.op, r.call, r.payload)),
        (Side::Handshake(npes), K_WELCOME) => decode_welcome(&body, npes).map(Msg::Welcome),
        (Side::Result(_), K_RESULT) => decode_result(&body).map(|(s, p)| Msg::Result(s, p)),
        (_, K_ABORT | K_ERROR | K_REFUSE | K_BUSY) => Ok(Msg::Text(kind, decode_text(&body))),
        _ => unreachable!("the frame reader let kind {kind} through for {side:?}"),
    }
}

fn limit(side: Side) -> Box<dyn Fn(u8) -> Option<usize>> {
    match side {
        Side::Hello => Box::new(hello_limit),
        Side::Proof => Box::new(proof_limit),
        Side::Peer => Box::new(peer_limit),
        Side::Handshake(n) => Box::new(handshake_limit(n)),
        Side::Result(n) => Box::new(result_limit(n)),
    }
}

/// A socket that hands out the input in random small pieces, now and then "would block".
struct Chunky<'a> {
    data: &'a [u8],
    rng: XorShift,
}

impl Read for Chunky<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.data.is_empty() && self.rng.chance(10) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(self.data.len()).min(1 + self.rng.below(300));
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// How a stream of bytes ended for one reader.
#[derive(Debug)]
enum End {
    /// All frames decoded; the stream ended at a frame boundary or inside one (a closed connection).
    Closed,
    /// The reader or a decoder refused the bytes, with this message.
    Refused(String),
}

/// Reads `input` as `side` would: frame after frame, until the end or the first error.
fn read_stream(side: Side, input: &[u8], rng: u64) -> (Vec<Msg>, End) {
    let lim = limit(side);
    let mut reader = FrameReader::default();
    let mut src = Chunky { data: input, rng: XorShift(rng | 1) };
    let mut msgs = Vec::new();
    loop {
        match reader.pump(&mut src, &*lim) {
            Ok(Pumped::Pending) => continue,
            Ok(Pumped::Eof) => return (msgs, End::Closed),
            Ok(Pumped::Frame(kind, body)) => {
                let max = lim(kind).expect("a frame of a kind this side does not expect");
                assert!(body.len() <= max, "{} body of {} bytes over its limit {max}", kind_name(kind), body.len());
                match decode(side, kind, body) {
                    Ok(m) => msgs.push(m),
                    Err(e) => return (msgs, End::Refused(e)),
                }
            }
            Err(ReadFail::Bad(e)) => return (msgs, End::Refused(e)),
            Err(ReadFail::Io(e)) => panic!("I/O error from an in-memory source: {e}"),
        }
    }
}

// ---- valid frames of every kind ----

fn host(rng: &mut XorShift) -> HostId {
    let names = ["node001", "", "gpu-h200-17.cluster.example.org", "héllo"];
    HostId { hostname: names[rng.below(names.len())].into(), boot_id: format!("{:x}", rng.next()) }
}

fn payload(rng: &mut XorShift) -> Vec<u8> {
    let n = [0, 1, 8, 16, 100, 1000][rng.below(6)];
    rng.bytes(n)
}

fn op(rng: &mut XorShift) -> Op {
    match rng.below(3) {
        0 => Op::Allgather,
        1 => Op::Broadcast(rng.below(5)),
        _ => Op::Barrier,
    }
}

/// One valid frame, the side that reads it and the message it must decode to.
fn valid_frame(rng: &mut XorShift) -> (Vec<u8>, Side, Msg) {
    let npes = 1 + rng.below(5);
    match rng.below(10) {
        0 | 1 => {
            let h = Hello {
                nonce: rng.bytes(16).try_into().unwrap(),
                pe: rng.below(npes),
                npes,
                host: host(rng),
                job: ["", "Slurm job 12.0", "Open MPI job 978124801"][rng.below(3)].into(),
            };
            (encode_hello(&h.nonce, h.pe, h.npes, &h.host, &h.job), Side::Hello, Msg::Hello(h))
        }
        2 => {
            let hosts: Vec<HostId> = (0..npes).map(|_| host(rng)).collect();
            (encode_welcome(&hosts), Side::Handshake(npes), Msg::Welcome(hosts))
        }
        8 => {
            let (n, p): ([u8; 16], [u8; 32]) = (rng.bytes(16).try_into().unwrap(), rng.bytes(32).try_into().unwrap());
            (encode_challenge(&n, &p), Side::Handshake(npes), Msg::Challenge(n, p))
        }
        9 => {
            let p: [u8; 32] = rng.bytes(32).try_into().unwrap();
            (encode_proof(&p), Side::Proof, Msg::Proof(p))
        }
        3 => {
            let (kind, side) = [
                (K_REFUSE, Side::Handshake(npes)),
                (K_BUSY, Side::Handshake(npes)),
                (K_REFUSE, Side::Proof),
                (K_ERROR, Side::Result(npes)),
                (K_ABORT, Side::Peer),
            ][rng.below(5)];
            let text = ["wrong job key", "", "rshmem bootstrap: PE 3 failed: ünïcode"][rng.below(3)];
            (encode_text(kind, text), side, Msg::Text(kind, text.into()))
        }
        4 | 5 => {
            let (seq, op, call, p) = (rng.next() % 1000, op(rng), ["rshmem_malloc", "", "x"][rng.below(3)], payload(rng));
            (encode_request(seq, op, call, &p), Side::Peer, Msg::Request(seq, op, call.into(), p))
        }
        _ => {
            let parts: Vec<Vec<u8>> = (0..rng.below(npes + 1)).map(|_| payload(rng)).collect();
            let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            let seq = rng.next() % 1000;
            (encode_result(seq, &refs), Side::Result(npes), Msg::Result(seq, parts))
        }
    }
}

// ---- mutations ----

const EDGE: [u64; 10] = [0, 1, 2, 0x7f, 0x80, 0xff, 0xffff, 0xffff_ffff, u64::MAX, 1 << 30];

fn mutate(rng: &mut XorShift, f: &mut Vec<u8>, pool: &[Vec<u8>]) {
    for _ in 0..1 + rng.below(3) {
        let len = f.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                f[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                f[i] = EDGE[rng.below(EDGE.len())] as u8;
            }
            // A length or count field rewritten: u16, u32 or u64 at a random place (often the header's).
            2 if len > 0 => {
                let width = [2, 4, 8][rng.below(3)];
                let at = if rng.chance(30) { 1 } else { rng.below(len) };
                let v = match rng.below(3) {
                    0 => EDGE[rng.below(EDGE.len())],
                    1 => (len as u64).wrapping_add(rng.below(5) as u64).wrapping_sub(2),
                    _ => rng.next(),
                };
                for (k, b) in v.to_le_bytes()[..width].iter().enumerate() {
                    if at + k < len {
                        f[at + k] = *b;
                    }
                }
            }
            3 => f.truncate(rng.below(len + 1)),
            4 => {
                let n = rng.below(64);
                f.extend(rng.bytes(n));
            }
            5 if len > 0 => {
                let i = rng.below(len);
                let n = rng.below(16);
                let ins = rng.bytes(n);
                f.splice(i..i, ins);
            }
            6 if len > 0 => {
                let i = rng.below(len);
                let j = (i + rng.below(16)).min(len);
                f.drain(i..j);
            }
            // Another valid frame after (or in place of the tail of) this one.
            _ => {
                let other = &pool[rng.below(pool.len())];
                f.truncate(rng.below(len + 1));
                f.extend_from_slice(other);
            }
        }
    }
}

fn random_bytes(rng: &mut XorShift) -> Vec<u8> {
    let n = rng.below(200);
    let mut v = rng.bytes(n);
    if v.len() >= 9 && rng.chance(70) {
        // A plausible header: a known kind and a small length, so that the bodies get decoded.
        v[0] = 1 + rng.below(10) as u8;
        let n = (rng.below(v.len() + 8) as u64).saturating_sub(4);
        v[1..9].copy_from_slice(&n.to_le_bytes());
    }
    v
}

fn hex(b: &[u8]) -> String {
    let shown: String = b.iter().take(256).map(|x| format!("{x:02x}")).collect();
    if b.len() > 256 {
        format!("{shown}... ({} bytes)", b.len())
    } else {
        shown
    }
}

/// The most one case may allocate at once: the reader's first body chunk, twice what arrived (the
/// body buffer doubles), and small change for messages.
fn alloc_bound(input: usize) -> usize {
    (64 << 10) + 2 * input + 4096
}

/// Per-run counts of how the cases ended (to show the generator reaches every outcome).
#[derive(Default, Debug)]
struct Stats {
    decoded: u64,
    refused: u64,
    closed: u64,
}

fn check_case(seed: u64, case: u64, side: Side, input: &[u8], expect: Option<&Msg>, stats: &mut Stats) {
    let ((msgs, end), peak) = tracked(|| read_stream(side, input, seed ^ case.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
    let ctx = || format!("seed {seed} case {case} side {side:?} input {}", hex(input));
    assert!(peak <= alloc_bound(input.len()), "allocated {peak} bytes at once for {} input bytes: {}", input.len(), ctx());
    stats.decoded += msgs.len() as u64;
    match &end {
        End::Closed => stats.closed += 1,
        End::Refused(_) => stats.refused += 1,
    }
    if let End::Refused(e) = &end {
        assert!(!e.trim().is_empty(), "empty error: {}", ctx());
        assert!(!e.chars().any(|c| c.is_control()), "control characters in the error {e:?}: {}", ctx());
    }
    if let Some(want) = expect {
        assert!(matches!(end, End::Closed), "valid frame refused ({end:?}): {}", ctx());
        assert_eq!(msgs.len(), 1, "{}", ctx());
        assert_eq!(&msgs[0], want, "{}", ctx());
    }
}

/// The seed of the cases (a whole number; default 0x5eed_b007).
const SEED_VAR: &str = "RSHMEM_TEST_FUZZ_SEED";
/// How many cases (default 10^6, 10^5 in debug builds).
const CASES_VAR: &str = "RSHMEM_TEST_FUZZ_CASES";

#[test]
fn wire_decoder_survives_mutated_and_random_frames() {
    // The test's own knobs, read like every variable through config's one reader of the environment
    // (RSHMEM_TEST_* names: init's check of RSHMEM_* names leaves them alone). A bad value fails the
    // test by name instead of quietly fuzzing something else.
    let vars = crate::config::Vars::from_process();
    let knob = |name: &str, default: u64| match vars.raw(name) {
        None => default,
        Some(v) => v.trim().parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a whole number")),
    };
    let seed = knob(SEED_VAR, 0x5eed_b007);
    let cases = knob(CASES_VAR, if cfg!(debug_assertions) { 100_000 } else { 1_000_000 });
    eprintln!("wire fuzz: seed {seed}, {cases} cases ({SEED_VAR} / {CASES_VAR} to rerun)");
    let mut rng = XorShift(seed | 1);
    let pool: Vec<Vec<u8>> = (0..64).map(|_| valid_frame(&mut rng).0).collect();
    let sides = |rng: &mut XorShift| {
        let n = 1 + rng.below(5);
        [Side::Hello, Side::Proof, Side::Peer, Side::Handshake(n), Side::Result(n)][rng.below(5)]
    };
    let t = std::time::Instant::now();
    let mut stats = Stats::default();
    for case in 0..cases {
        let mut rng = XorShift((seed ^ case.wrapping_mul(0x2545_f491_4f6c_dd1d)) | 1);
        match case % 8 {
            // Valid: round trip.
            0 => {
                let (f, side, msg) = valid_frame(&mut rng);
                check_case(seed, case, side, &f, Some(&msg), &mut stats);
            }
            // Pure random bytes, to any side.
            1 => {
                let input = random_bytes(&mut rng);
                let side = sides(&mut rng);
                check_case(seed, case, side, &input, None, &mut stats);
            }
            // Mutated, to the side it was made for (most) or another.
            _ => {
                let (mut f, side, _) = valid_frame(&mut rng);
                mutate(&mut rng, &mut f, &pool);
                let side = if rng.chance(80) { side } else { sides(&mut rng) };
                check_case(seed, case, side, &f, None, &mut stats);
            }
        }
    }
    eprintln!("wire fuzz: {cases} cases in {:.2} s: {stats:?}", t.elapsed().as_secs_f64());
    // Each outcome is common: the mutations are neither all fatal nor all harmless.
    for n in [stats.decoded, stats.refused, stats.closed] {
        assert!(n > cases / 20, "{stats:?}");
    }
}

/// Headers that announce the largest frame each side accepts, followed by a few bytes: the reader
/// must not reserve the announced size before the bytes arrive.
#[test]
fn announced_lengths_are_not_allocated_up_front() {
    for (side, kind, len) in [
        (Side::Peer, K_REQUEST, MAX_REQUEST),
        (Side::Result(512), K_RESULT, max_result(512)),
        (Side::Handshake(512), K_WELCOME, max_welcome(512)),
        (Side::Peer, K_ABORT, MAX_TEXT),
    ] {
        let mut input = vec![kind];
        input.extend_from_slice(&(len as u64).to_le_bytes());
        input.extend_from_slice(&[7u8; 100]);
        let ((_, end), peak) = tracked(|| read_stream(side, &input, 1));
        assert!(matches!(end, End::Closed), "{end:?}");
        assert!(peak <= alloc_bound(input.len()), "{} frame announcing {len} bytes: allocated {peak}", kind_name(kind));
    }
    // A result that claims 2^32-1 parts in a 12-byte body.
    let mut body = 5u64.to_le_bytes().to_vec();
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    let (r, peak) = tracked(|| decode_result(&body));
    assert!(r.unwrap_err().contains("truncated collective result"));
    assert!(peak < 4096, "reserved {peak} bytes for the parts of an empty result");
}
