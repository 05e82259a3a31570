//! Scenarios of the proxy transport (RSHMEM_REMOTE_TRANSPORT=proxy, under `rshmrun --nodes K`): PEs on
//! other nodes reached through each PE's CPU proxy over TCP. Driven by tests/tests/proxy.rs.
//!
//! - `proxy_rma`: host putmem/getmem to every PE (same node through p2p, other nodes through the
//!   proxy), 1 B to 3 MiB of random data, checked at the target after a barrier and read back; then
//!   16 MiB to the next PE on another node, into a region of its own there (several PEs of a node
//!   write to the same target), checked at the target and read back.
//! - `proxy_ops`: requests posted into this PE's proxy ring exactly as device code posts them
//!   (`rshmem_device::remote::proxy::post`): inline puts, puts with signal, signal set/add, AMOs of
//!   every kind from every PE at once on one counter (atomicity), fetched values through return
//!   slots, `g` through a return slot, ordering of a put and the signal behind it.
//! - `proxy_kill`: PE 3 kills itself (SIGKILL) in the middle of a transfer stream from PE 0, once 64 MiB
//!   have arrived, while a put is half-way (its first bytes here, its last not yet).
//! - `proxy_garbage`: PE 2 connects to PE 0's proxy with a wrong key, then with the right key and a
//!   bad frame, twice; PE 0 must cut those off by name and write nothing.

use super::{barrier, ck, die, fill, get_bytes, get_u64s, Ctx};
use rshmem_device::remote::proxy::{self as rp, amo, op, Request, ReturnSlot, SUB_RETURN};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether PE `pe` is on another node (its heap is not mapped here).
pub(crate) fn is_remote(sym: *const u8, pe: usize) -> bool {
    rshmem::ptr(sym, pe as i32).is_null()
}

pub(crate) fn put(dst: *mut u8, src: &[u8], pe: usize) {
    // SAFETY: dst is a symmetric allocation with room for src (each scenario sizes it so).
    ck(unsafe { rshmem::putmem(dst, src.as_ptr(), src.len(), pe as i32) }.map_err(|e| e.context(format!("putmem of {} bytes to PE {pe}", src.len()))))
}
pub(crate) fn get(src: *const u8, len: usize, pe: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: src is a symmetric allocation of at least len bytes; v holds len bytes.
    ck(unsafe { rshmem::getmem(v.as_mut_ptr(), src, len, pe as i32) }.map_err(|e| e.context(format!("getmem of {len} bytes from PE {pe}"))));
    v
}

fn first_diff(a: &[u8], b: &[u8]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!("first difference at byte {i} ({:#04x} vs {:#04x})", a[i], b[i]),
        None => format!("lengths {} vs {}", a.len(), b.len()),
    }
}

pub fn rma(c: &Ctx) {
    let sizes = [1usize, 3, 8, 63, 4096, 65_537, (1 << 20) - 1, (1 << 20) + 3, 3 << 20];
    let slot = *sizes.iter().max().unwrap();
    // One region per sender on every PE.
    let buf = ck(rshmem::malloc(slot * c.n));
    let remote: Vec<bool> = (0..c.n).map(|pe| is_remote(buf, pe)).collect();
    if !remote.iter().any(|&r| r) {
        die("proxy_rma: no PE is on another node (run with rshmrun --nodes 2)");
    }
    for &len in &sizes {
        for pe in 0..c.n {
            let data = fill(c.seed ^ (len as u64) << 8 ^ (c.me * 31 + pe) as u64, len);
            // SAFETY: pointer arithmetic: region `me` of buf, inside the allocation.
            put(unsafe { buf.add(c.me * slot) }, &data, pe);
        }
        barrier();
        for from in 0..c.n {
            let want = fill(c.seed ^ (len as u64) << 8 ^ (from * 31 + c.me) as u64, len);
            // SAFETY: as above.
            let got = get_bytes(unsafe { buf.add(from * slot) }, len);
            if got != want {
                die(format!("proxy_rma: {len} bytes put by PE {from} differ at the target: {}", first_diff(&got, &want)));
            }
        }
        // Read back what this PE put everywhere, and another PE's region, through getmem.
        for pe in 0..c.n {
            let mine = fill(c.seed ^ (len as u64) << 8 ^ (c.me * 31 + pe) as u64, len);
            // SAFETY: as above.
            let back = get(unsafe { buf.add(c.me * slot) }, len, pe);
            if back != mine {
                die(format!("proxy_rma: getmem of {len} bytes from PE {pe} differs from what this PE put: {}", first_diff(&back, &mine)));
            }
            let other = (c.me + 1) % c.n;
            let theirs = fill(c.seed ^ (len as u64) << 8 ^ (other * 31 + pe) as u64, len);
            // SAFETY: as above.
            if get(unsafe { buf.add(other * slot) }, len, pe) != theirs {
                die(format!("proxy_rma: getmem of PE {other}'s {len} bytes on PE {pe} differs"));
            }
        }
        barrier();
    }
    ck(rshmem::free(buf));
    // 16 MiB to the next PE on another node and back, with a zero-length put and get on the way. Every
    // PE of a node before that node's first PE picks the same target, so each writer gets a region of
    // its own there: every PE tells every PE its target, and all allocate as many regions as the most
    // written-to PE needs (the allocation is collective: the same size everywhere).
    let big = 16usize << 20;
    let next = (1..c.n).map(|k| (c.me + k) % c.n).find(|&pe| remote[pe]).unwrap();
    let targets = ck(rshmem::calloc(c.n, 8));
    for pe in 0..c.n {
        // SAFETY: pointer arithmetic: word `me` of the n-word allocation.
        put(unsafe { targets.add(8 * c.me) }, &(next as u64).to_le_bytes(), pe);
    }
    barrier();
    let target_of: Vec<usize> = get_u64s(targets, c.n).into_iter().map(|t| t as usize).collect();
    barrier();
    ck(rshmem::free(targets));
    if target_of[c.me] != next || target_of.iter().any(|&t| t >= c.n) {
        die(format!("proxy_rma: the targets the PEs announced are wrong: {target_of:?} (this PE's is {next})"));
    }
    // Writer w's region at its target: the how-manieth writer to that target it is.
    let region = |w: usize| (0..w).filter(|&p| target_of[p] == target_of[w]).count();
    let regions = (0..c.n).map(|t| target_of.iter().filter(|&&x| x == t).count()).max().unwrap();
    let b = ck(rshmem::malloc(big * regions));
    // SAFETY: pointer arithmetic: region `region(me)` < regions of the allocation.
    let mine = unsafe { b.add(region(c.me) * big) };
    let data = fill(c.seed ^ 0xb16 ^ c.me as u64, big);
    put(mine, &data, next);
    put(mine, &[], next);
    let _ = get(mine, 0, next);
    barrier();
    let writers: Vec<usize> = (0..c.n).filter(|&w| target_of[w] == c.me).collect();
    for &w in &writers {
        // SAFETY: pointer arithmetic: writer w's region of the allocation.
        if get_bytes(unsafe { b.add(region(w) * big) }, big) != fill(c.seed ^ 0xb16 ^ w as u64, big) {
            die(format!("proxy_rma: the 16 MiB put by PE {w} differs at the target (its region {} of {regions})", region(w)));
        }
    }
    if get(mine, big, next) != data {
        die(format!("proxy_rma: 16 MiB read back from PE {next} differ"));
    }
    barrier();
    // Throughput (for the record; every PE streams at once, so this is a shared figure).
    let t = Instant::now();
    for _ in 0..8 {
        put(mine, &data, next);
    }
    let put_rate = 8.0 * big as f64 / t.elapsed().as_secs_f64() / 1e6;
    let t = Instant::now();
    let mut back = vec![0u8; big];
    for _ in 0..8 {
        // SAFETY: back holds big bytes; mine is a region of big bytes of a symmetric allocation.
        ck(unsafe { rshmem::getmem(back.as_mut_ptr(), mine, big, next as i32) });
    }
    let get_rate = 8.0 * big as f64 / t.elapsed().as_secs_f64() / 1e6;
    println!("PE {}: 16 MiB host putmem to PE {next}: {put_rate:.0} MB/s, getmem {get_rate:.0} MB/s (all PEs at once)", c.me);
    barrier();
    ck(rshmem::free(b));
    println!(
        "PE {}: proxy_rma: {} sizes to {} PEs ({} through the proxy), 16 MiB to PE {next} (region {} of {regions} there), 16 MiB from PEs {writers:?} checked",
        c.me,
        sizes.len(),
        c.n,
        remote.iter().filter(|&&r| r).count(),
        region(c.me)
    );
}

// ---------------------------------------------------------------- requests as device code posts them

struct Chan {
    ch: rshmem_device::state::Channel,
}

fn chan() -> Chan {
    let ch = rshmem::transport::proxy::host_channel().unwrap_or_else(|| die("no proxy channel (RSHMEM_REMOTE_TRANSPORT=proxy?)"));
    Chan { ch }
}

impl Chan {
    fn post(&self, r: Request) -> u64 {
        // SAFETY: the ring of this PE's running proxy (host addresses).
        unsafe { rp::post(&self.ch, &r) }
    }
    fn wait(&self, seq: u64) {
        // SAFETY: as in post.
        unsafe { rp::wait_completed(&self.ch, seq) }
    }
    /// Posts and waits; with SUB_RETURN, takes the value from the return slot (ReturnSlot protocol).
    fn call(&self, r: Request) -> u64 {
        let seq = self.post(r);
        self.wait(seq);
        if r.sub & SUB_RETURN == 0 {
            return 0;
        }
        let slot = (self.ch.ret + ((seq - 1) % self.ch.slots) * rp::RETURN_SLOT_BYTES as u64) as usize as *mut u8;
        // SAFETY: slot lies in the return area (slots entries); seq is accessed atomically.
        let seq_w = unsafe { AtomicU64::from_ptr(slot.add(std::mem::offset_of!(ReturnSlot, seq)) as *mut u64) };
        let start = Instant::now();
        while seq_w.load(Ordering::Acquire) != seq {
            if start.elapsed() > Duration::from_secs(10) {
                die(format!("request {seq} completed but its return slot never got the value"));
            }
            std::thread::yield_now();
        }
        // SAFETY: the proxy published the value before its release of seq (acquired above).
        let v = unsafe { std::ptr::read_volatile(slot.add(std::mem::offset_of!(ReturnSlot, value)) as *const u64) };
        seq_w.store(0, Ordering::Release);
        v
    }
}

fn off(p: *const u8) -> u64 {
    rshmem::heap_offset(p).unwrap_or_else(|| die("not a symmetric address")) as u64
}

pub fn ops(c: &Ctx) {
    let ch = chan();
    // On the CUDA backend the heap is GPU memory: the host reads it through copies only, and the
    // node-local adds (host atomics on a mapped heap) exist on the CPU backend only.
    let gpu = ck(rshmem::backend_name()) == "cuda";
    // [0]: counter (u64) everyone adds to on PE 0; [1]: u32 counter pair; [2..10]: inline targets;
    // [10]: signal word; [16..16+4096): put_signal payload (per sender: its own signal word at [11+me]).
    let words = 16 + 4096 / 8 * c.n + 16;
    let w = ck(rshmem::calloc(words, 8));
    let remote: Vec<usize> = (0..c.n).filter(|&pe| is_remote(w, pe)).collect();
    if remote.is_empty() {
        die("proxy_ops: no PE is on another node");
    }
    let at = |i: usize| -> u64 { off(w) + 8 * i as u64 };
    barrier();
    // Every PE adds me+1, 200 times, to PE 0's counter, through the proxy when PE 0 is remote (and
    // the local ones by p2p atomics from the host: the proxy's AMOs must be atomic with those).
    let iters = 200u64;
    let mut rtt = Duration::ZERO;
    for k in 0..iters {
        if is_remote(w, 0) {
            let fetch = k % 2 == 0;
            let code = if fetch { amo::FETCH_ADD } else { amo::ADD };
            let r = Request { op: op::AMO, sub: code | if fetch { SUB_RETURN } else { 0 }, pe: 0, offset: at(0), len: 8, value: c.me as u64 + 1, ..Default::default() };
            let t = Instant::now();
            let old = ch.call(r);
            rtt += t.elapsed();
            if fetch && old > (1..=c.n as u64).sum::<u64>() * iters {
                die(format!("proxy_ops: fetch_add returned {old}, more than the total"));
            }
            // 4-byte adds on the u32 at word 1.
            ch.call(Request { op: op::AMO, sub: amo::ADD, pe: 0, offset: at(1), len: 4, value: 1, ..Default::default() });
        } else if !gpu {
            let p = rshmem::ptr(w, 0) as *mut u64;
            // SAFETY: PE 0's counter is mapped here (same node), 8-aligned, accessed atomically by all.
            unsafe { AtomicU64::from_ptr(p) }.fetch_add(c.me as u64 + 1, Ordering::SeqCst);
            // SAFETY: as above, the u32 at word 1.
            unsafe { std::sync::atomic::AtomicU32::from_ptr(rshmem::ptr(w, 0).add(8) as *mut u32) }.fetch_add(1, Ordering::SeqCst);
        }
    }
    if is_remote(w, 0) {
        println!(
            "PE {}: remote AMO round trip to PE 0 ({} backend, host poster): {:.1} us",
            c.me,
            if gpu { "cuda: the target GPU's threads run it" } else { "cpu" },
            rtt.as_secs_f64() * 1e6 / iters as f64
        );
    }
    barrier();
    if c.me == 0 {
        let v = get_u64s(w, 2);
        // On the GPU only the remote PEs add (see above).
        let counted: Vec<u64> = (0..c.n).filter(|&pe| !gpu || !same_node_as_0(pe, w)).map(|pe| pe as u64 + 1).collect();
        let want = counted.iter().sum::<u64>() * iters;
        let want_u32 = counted.len() as u64 * iters;
        if v[0] != want {
            die(format!("proxy_ops: the counter on PE 0 is {}, expected {want}: a remote AMO was lost or doubled", v[0]));
        }
        if v[1] != want_u32 {
            die(format!("proxy_ops: the 4-byte counter is {:#x}, expected {want_u32} in the low word and 0 above", v[1]));
        }
    }
    barrier();
    // On the first remote PE, in this PE's own word there: inline puts of every width, g through the
    // return slot, swap, CAS (failing and succeeding), fetch, and/or/xor.
    let target = remote[0];
    let mine = 16 + c.me; // this PE's private word on every target
    let word = |i: usize| at(i);
    let v: u64 = 0x1122_3344_5566_7788 ^ (c.me as u64) << 56;
    for len in [8u64, 4, 2, 1] {
        ch.call(Request { op: op::PUT_INLINE, pe: target as u32, offset: word(mine), len, value: if len == 8 { v } else { 0xa5a5_a5a5_a5a5_a5a5 }, ..Default::default() });
    }
    // Now the word is v with its low byte, then low 2, then low 4 bytes overwritten by 0xa5: the 4-byte
    // store first, then 2, then 1 — all 0xa5, so the low 4 bytes are a5a5a5a5.
    let expect = (v & !0xffff_ffff) | 0xa5a5_a5a5;
    for len in [1u64, 2, 4, 8] {
        let g = ch.call(Request { op: op::GET, sub: SUB_RETURN, pe: target as u32, offset: word(mine), len, ..Default::default() });
        let mask = if len == 8 { u64::MAX } else { (1u64 << (8 * len)) - 1 };
        if g != expect & mask {
            die(format!("proxy_ops: g of {len} bytes from PE {target} returned {g:#x}, expected {:#x}", expect & mask));
        }
    }
    let a = |code: u16, value: u64, cmp: u64| ch.call(Request { op: op::AMO, sub: code | SUB_RETURN, pe: target as u32, offset: word(mine), len: 8, value, sig_value: cmp, ..Default::default() });
    let checks: [(&str, u64, u64); 7] = [
        ("swap", a(amo::SWAP, 10, 0), expect),
        ("compare_swap (fails)", a(amo::COMPARE_SWAP, 99, 11), 10),
        ("compare_swap (succeeds)", a(amo::COMPARE_SWAP, 12, 10), 10),
        ("fetch_or", a(amo::FETCH_OR, 0x100, 0), 12),
        ("fetch_and", a(amo::FETCH_AND, 0x10f, 0), 0x10c),
        ("fetch_xor", a(amo::FETCH_XOR, 0xff, 0), 0x10c),
        ("fetch", a(amo::FETCH, 0, 0), 0x1f3),
    ];
    for (name, got, want) in checks {
        if got != want {
            die(format!("proxy_ops: {name} on PE {target} returned {got:#x}, expected {want:#x}"));
        }
    }
    // A non-fetching set, then a fetch: acked in order on the one connection.
    ch.call(Request { op: op::AMO, sub: amo::SET, pe: target as u32, offset: word(mine), len: 8, value: 777, ..Default::default() });
    if a(amo::FETCH, 0, 0) != 777 {
        die("proxy_ops: set then fetch on the same PE did not see the set");
    }
    barrier();
    // put_signal: 4 KiB of data then a signal ADD on the target's signal word [10]; the target waits
    // for the signal to reach the number of senders and then checks every payload.
    // Payloads: 512 words (4 KiB) per sender from word 32 on.
    let sig_total = remote.len() as u64; // every PE sends to each remote PE once
    let data_off = |sender: usize| at(32 + sender * 512);
    for &pe in &remote {
        let data = fill(c.seed ^ 0x5165 ^ (c.me * 7 + pe) as u64, 4096);
        let seq = ch.post(Request { op: op::PUT_SIGNAL, sub: rshmem_device::SIGNAL_ADD as u16, pe: pe as u32, offset: data_off(c.me), len: 4096, src: data.as_ptr() as u64, sig_offset: at(10), sig_value: 1, ..Default::default() });
        ch.wait(seq);
        // A signal SET on [11] to the PE's number + 1000, and an ADD of 0 (no change).
        ch.call(Request { op: op::SIGNAL, sub: rshmem_device::SIGNAL_SET as u16, pe: pe as u32, sig_offset: at(11), sig_value: 1000 + pe as u64, ..Default::default() });
        ch.call(Request { op: op::NOP, ..Default::default() });
    }
    // Wait for the signals of every PE that sees this one as remote (symmetric: same count).
    let start = Instant::now();
    // Word 10 of this PE's own allocation, written by the proxy with atomics (read through copies:
    // on the GPU the heap is device memory).
    while get_u64s(w, 11)[10] < sig_total {
        if start.elapsed() > Duration::from_secs(20) {
            die("proxy_ops: the put_signal signals did not all arrive");
        }
        std::thread::yield_now();
    }
    for sender in (0..c.n).filter(|&s| is_remote(w, s)) {
        // SAFETY: pointer arithmetic: inside the allocation.
        let got = get_bytes(unsafe { w.add(8 * (32 + sender * 512)) }, 4096);
        if got != fill(c.seed ^ 0x5165 ^ (sender * 7 + c.me) as u64, 4096) {
            die(format!("proxy_ops: the put_signal payload from PE {sender} differs although its signal arrived"));
        }
    }
    barrier();
    let s11 = get_u64s(w, 12)[11];
    if s11 != 1000 + c.me as u64 {
        die(format!("proxy_ops: signal set word is {s11}, expected {}", 1000 + c.me));
    }
    barrier();
    if gpu {
        on_stream(c, w, &remote);
    }
    ck(rshmem::free(w));
    println!("PE {}: proxy_ops: AMOs, g, inline puts, signals and put_signal through the proxy to PEs {remote:?}", c.me);
}

/// Called on PE 0: whether PE `pe` is on PE 0's node (its heap is mapped here).
fn same_node_as_0(pe: usize, w: *const u8) -> bool {
    !is_remote(w, pe)
}

/// CUDA only: putmem_on_stream / getmem_on_stream to a PE on another node (a host function on the
/// stream runs the proxy put/get), on the legacy default stream, then a context synchronize.
fn on_stream(c: &Ctx, w: *mut u8, remote: &[usize]) {
    let pe = remote[0];
    let data = fill(c.seed ^ 0x57 ^ c.me as u64, 4096);
    // SAFETY: pointer arithmetic: words 32.. of the allocation (room for 4 KiB per PE).
    let dst = unsafe { w.add(8 * (32 + c.me * 512)) };
    // SAFETY: dst is symmetric with 4 KiB of room; data lives until the synchronize below.
    ck(unsafe { rshmem::stream::putmem_on_stream(dst, data.as_ptr(), data.len(), pe as i32, rshmem::stream::Stream::DEFAULT) });
    let mut back = vec![0u8; 4096];
    // SAFETY: back holds 4 KiB and lives until the synchronize below.
    ck(unsafe { rshmem::stream::getmem_on_stream(back.as_mut_ptr(), dst, 4096, pe as i32, rshmem::stream::Stream::DEFAULT) });
    ck(rshmem::stream::synchronize());
    if back != data {
        die(format!("proxy_ops: putmem_on_stream then getmem_on_stream to PE {pe}: the bytes read back differ"));
    }
    barrier();
    println!("PE {}: on-stream put/get through the proxy to PE {pe} ok", c.me);
}

// ---------------------------------------------------------------- failures

/// PE 3 kills itself while PE 0 (another node) streams 16 MiB puts to it: after 64 MiB, in the middle
/// of a put, checked: the put's first bytes have arrived at PE 3 and its last bytes have not. The job
/// must end, naming PE 3.
pub fn kill(c: &Ctx) {
    let len = 16usize << 20;
    let b = ck(rshmem::malloc(len));
    let flag = ck(rshmem::calloc(1, 8));
    if c.n < 4 || !is_remote(b, 3) && c.me == 0 {
        die("proxy_kill needs PE 3 on another node than PE 0 (rshmrun --nodes 2 -np 4)");
    }
    barrier();
    // Put number k carries k in its first and its last 8 bytes: PE 3 tells from them whether a put has
    // begun to arrive and whether it is complete.
    let stamp = |data: &mut [u8], k: u64| {
        let n = data.len();
        data[..8].copy_from_slice(&k.to_le_bytes());
        data[n - 8..].copy_from_slice(&k.to_le_bytes());
    };
    match c.me {
        0 => {
            let mut data = fill(c.seed, len);
            let start = Instant::now();
            let mut k = 0u64;
            while start.elapsed() < Duration::from_secs(30) {
                k += 1;
                stamp(&mut data, k);
                put(b, &data, 3);
                if k == 4 {
                    println!("PE 0: 64 MiB sent to PE 3, still going");
                    // Tell PE 3 (through the proxy, behind the data) that the stream is under way.
                    put(flag, &1u64.to_le_bytes(), 3);
                }
            }
            die("proxy_kill: PE 0 kept putting to PE 3 for 30 s after it was killed");
        }
        3 => {
            let start = Instant::now();
            // This PE's own 8-byte flag, written by its proxy (read through copies: GPU heaps).
            while get_u64s(flag, 1)[0] == 0 {
                if start.elapsed() > Duration::from_secs(30) {
                    die("proxy_kill: PE 0 never said it had sent 64 MiB");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            // SAFETY: pointer arithmetic: the last 8 bytes of the allocation of len bytes.
            let last_word = unsafe { b.add(len - 8) };
            let in_flight = || {
                let (first, last) = (get_u64s(b, 1)[0], get_u64s(last_word, 1)[0]);
                (first != last).then_some((first, last))
            };
            // Wait until a put is half-way here: one end of it arrived, the other not yet.
            let start = Instant::now();
            let (first, last) = loop {
                if let Some(seen) = in_flight() {
                    break seen;
                }
                if start.elapsed() > Duration::from_secs(30) {
                    die("proxy_kill: in 30 s PE 3 never saw a put from PE 0 arriving (first and last bytes always of the same put)");
                }
                std::thread::yield_now();
            };
            let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
            println!("PE 3: killing itself at {ms}, inside put {} from PE 0 (first 8 bytes from put {first}, last 8 from put {last})", first.max(last));
            let _ = std::io::stdout().flush();
            // SAFETY: kill(2) on this process's own pid with SIGKILL; no memory is involved.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            std::thread::sleep(Duration::from_secs(10));
            die("proxy_kill: PE 3 survived SIGKILL");
        }
        _ => {
            // Wait in a barrier that PE 3 never reaches.
            barrier();
            die("proxy_kill: a barrier without PE 3 completed");
        }
    }
}

/// A hello of this wire version (layout of `rshmem::transport::wire::Hello`, little-endian).
pub(crate) fn hello(key: [u8; 16], src: u32, dst: u32, npes: u32, heap: u64) -> Vec<u8> {
    hello_v(rshmem::transport::wire::VERSION, key, src, dst, npes, heap)
}

/// A hello claiming wire version `version`.
pub(crate) fn hello_v(version: u32, key: [u8; 16], src: u32, dst: u32, npes: u32, heap: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(64);
    h.extend_from_slice(&rshmem::transport::wire::MAGIC);
    h.extend_from_slice(&version.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(&key);
    for v in [src, dst, npes] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    h.extend_from_slice(&0u16.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&heap.to_le_bytes());
    h.extend_from_slice(&rshmem::transport::wire::MIN_CHUNK.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    assert_eq!(h.len(), 64);
    h
}

/// A PUT frame's head (wire layout, little-endian: `rshmem_device::remote::frame::Head`), with `op`
/// set to `op` (a PUT uses none: non-zero is a bad field).
fn put_header(offset: u64, len: u32, op: u8) -> Vec<u8> {
    let mut h = vec![rshmem_device::remote::frame::PUT, op, 0, 0];
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(&offset.to_le_bytes());
    assert_eq!(h.len(), 16);
    h
}

/// Connects to `addr`, sends a hello (and `frame`), returns what came back (hello answer + rest).
pub(crate) fn rogue(addr: std::net::SocketAddr, hello: &[u8], frame: &[u8]) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(addr).unwrap_or_else(|e| die(format!("rogue connect to {addr}: {e}")));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(hello).unwrap();
    let mut answer = [0u8; 64];
    if s.read_exact(&mut answer).is_err() {
        return vec![];
    }
    let mut out = answer.to_vec();
    if !frame.is_empty() && u32::from_le_bytes(answer[12..16].try_into().unwrap()) == 0 {
        let _ = s.write_all(frame);
        let _ = s.read_to_end(&mut out);
    }
    out
}

pub fn garbage(c: &Ctx) {
    let watched = ck(rshmem::calloc(4096, 1));
    let pe0 = pe0_proxy_addr_at_pe2(c, "proxy_garbage");
    if c.me == 0 {
        println!("PE 0: watched buffer at heap offset {:#x}", off(watched));
    }
    if let Some(addr) = pe0 {
        let key = job_key();
        let heap = rshmem::heap_size() as u64;
        let n = c.n as u32;
        // 1. A wrong key: refused (status 1, wrong key), nothing more.
        let mut bad_key = key;
        bad_key[0] ^= 0x55;
        let ans = rogue(addr, &hello(bad_key, 2, 0, n, heap), &[]);
        let status = ans.get(12..16).map(|s| u32::from_le_bytes(s.try_into().unwrap()));
        if status != Some(1) {
            die(format!("rogue with a wrong key: answer status {status:?}, expected 1 (wrong key)"));
        }
        println!("PE 2: rogue with a wrong key refused (status 1)");
        // 2. The right key, then a PUT into the watched buffer with a non-zero `op` field (unused by PUT).
        let mut frame = put_header(off(watched), 16, 7);
        frame.extend_from_slice(&[0xee; 16]);
        let ans = rogue(addr, &hello(key, 2, 0, n, heap), &frame);
        let text = String::from_utf8_lossy(ans.get(64..).unwrap_or_default()).into_owned();
        if !text.contains("`op`") {
            die(format!("rogue with a bad frame: PE 0 did not answer with an error naming the field: {text:?}"));
        }
        println!("PE 2: rogue bad frame answered: {}", text.chars().filter(|c| !c.is_control()).collect::<String>());
        // 3. The right key, then a PUT reaching past the end of the heap.
        let mut frame = put_header(heap - 8, 16, 0);
        frame.extend_from_slice(&[0xee; 16]);
        let ans = rogue(addr, &hello(key, 2, 0, n, heap), &frame);
        let text = String::from_utf8_lossy(ans.get(64..).unwrap_or_default()).into_owned();
        if !text.contains("beyond the") {
            die(format!("rogue with an out-of-heap frame: no error naming it: {text:?}"));
        }
    }
    barrier();
    if c.me == 0 {
        let b = get_bytes(watched, 4096);
        if b.iter().any(|&x| x != 0) {
            die("proxy_garbage: the watched buffer was written by a rogue connection");
        }
        // The job's own connections still work.
        put(watched, &[1, 2, 3], 2);
        if get(watched, 3, 2) != [1, 2, 3] {
            die("proxy_garbage: the proxy connection to PE 2 no longer works");
        }
    }
    barrier();
    ck(rshmem::free(watched));
}

/// Collective: PE 0 tells PE 2 (on another node) its proxy's listen address, through the proxy.
/// Returns it on PE 2, None elsewhere. `what` names the scenario for the error when the layout is not
/// `rshmrun --nodes 2 -np 4`.
pub(crate) fn pe0_proxy_addr_at_pe2(c: &Ctx, what: &str) -> Option<std::net::SocketAddr> {
    let slot = ck(rshmem::calloc(64, 1));
    if c.n < 3 || !is_remote(slot, 2) && c.me == 0 {
        die(format!("{what} needs PE 2 on another node than PE 0 (rshmrun --nodes 2 -np 4)"));
    }
    if c.me == 0 {
        let a = rshmem::transport::proxy::listen_addr().unwrap_or_else(|| die("no proxy listening")).to_string();
        let mut b = [0u8; 64];
        b[..a.len()].copy_from_slice(a.as_bytes());
        put(slot, &b, 2);
        println!("PE 0: proxy listens on {a}");
    }
    barrier();
    let addr = (c.me == 2).then(|| {
        let b = get_bytes(slot, 64);
        let text = String::from_utf8_lossy(&b[..b.iter().position(|&x| x == 0).unwrap_or(64)]).into_owned();
        text.parse().unwrap_or_else(|_| die(format!("bad address {text:?}")))
    });
    barrier();
    ck(rshmem::free(slot));
    addr
}

/// The job key rshmrun gave this PE (RSHMEM_JOB_KEY, 32 hex digits).
pub(crate) fn job_key() -> [u8; 16] {
    let key_hex = std::env::var("RSHMEM_JOB_KEY").unwrap_or_else(|_| die("RSHMEM_JOB_KEY not set"));
    (0..16).map(|i| u8::from_str_radix(&key_hex[2 * i..2 * i + 2], 16).unwrap()).collect::<Vec<_>>().try_into().unwrap()
}
