//! Kernels of the multi-process test suite, written once: the CPU backend runs them on host threads,
//! the GPU backend as PTX kernels. Each reads its arguments from `a` (u64s; pointers are symmetric
//! addresses unless noted). Results a host must check go to symmetric memory; kernels never assert.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]
#![allow(clippy::missing_safety_doc)]

use rshmem_device as sh;
use rshmem_device::thread::{block_index, block_rank, block_size, warp_size};
use rshmem_device::Scope;

/// Kernel argument `i`.
///
/// # Safety
/// `a` points at the kernel's arguments, at least `i + 1` of them (the host side passes them).
#[inline(always)]
unsafe fn arg(a: *const u64, i: usize) -> u64 {
    // SAFETY: the caller's contract above.
    unsafe { *a.add(i) }
}
#[inline(always)]
fn next() -> i32 {
    (sh::my_pe() + 1) % sh::n_pes()
}
#[inline(always)]
fn prev() -> i32 {
    (sh::my_pe() + sh::n_pes() - 1) % sh::n_pes()
}
/// Global thread number in the launch.
#[inline(always)]
fn gtid() -> u32 {
    block_index() * block_size() + block_rank()
}

/// Scope `s` from its number (0 thread, 1 warp, 2 block).
#[inline(always)]
fn scope(s: u64) -> Scope {
    match s {
        0 => Scope::Thread,
        1 => Scope::Warp,
        _ => Scope::Block,
    }
}

/// This thread's share for a scope: (offset, bytes) of `total` split over the group instances of the
/// block (each thread / each warp / the whole block does one piece).
#[inline(always)]
fn piece(s: Scope, total: usize) -> (usize, usize) {
    let (idx, count) = match s {
        Scope::Thread => (block_rank() as usize, block_size() as usize),
        Scope::Warp => ((block_rank() / 32) as usize, block_size().div_ceil(32) as usize),
        Scope::Block => (0, 1),
    };
    let per = total / count;
    let off = idx * per;
    let len = if idx == count - 1 { total - off } else { per };
    (off, len)
}

sh::kernels! {
    /// Ring shift: [dst] — thread 0 writes my PE number into dst on the next PE.
    fn k_ring_p(a) {
        if gtid() == 0 {
            sh::p(arg(a, 0) as *mut i32, sh::my_pe(), next());
        }
    }

    /// [dst, src, bytes, scope, nbi, dir(0 put to next, 1 get from next)] with one block.
    fn k_rma(a) {
        let (dst, src, bytes) = (arg(a, 0) as *mut u8, arg(a, 1) as *const u8, arg(a, 2) as usize);
        let s = scope(arg(a, 3));
        let nbi = arg(a, 4) != 0;
        let (off, len) = piece(s, bytes);
        let (d, sr) = (dst.add(off), src.add(off));
        let pe = next();
        match (arg(a, 5), s, nbi) {
            (0, Scope::Thread, false) => sh::putmem(d, sr, len, pe),
            (0, Scope::Thread, true) => sh::putmem_nbi(d, sr, len, pe),
            (0, Scope::Warp, false) => sh::putmem_warp(d, sr, len, pe),
            (0, Scope::Warp, true) => sh::putmem_nbi_warp(d, sr, len, pe),
            (0, Scope::Block, false) => sh::putmem_block(d, sr, len, pe),
            (0, Scope::Block, true) => sh::putmem_nbi_block(d, sr, len, pe),
            (_, Scope::Thread, false) => sh::getmem(d, sr, len, pe),
            (_, Scope::Thread, true) => sh::getmem_nbi(d, sr, len, pe),
            (_, Scope::Warp, false) => sh::getmem_warp(d, sr, len, pe),
            (_, Scope::Warp, true) => sh::getmem_nbi_warp(d, sr, len, pe),
            (_, Scope::Block, false) => sh::getmem_block(d, sr, len, pe),
            (_, Scope::Block, true) => sh::getmem_nbi_block(d, sr, len, pe),
        }
        sh::quiet();
    }

    /// [src, out, count] — typed p/g: out[i] = g(src+i, next) for u8/u16/u32/u64 views, after
    /// writing p(src+i, pattern, next). Thread 0 only.
    fn k_pg(a) {
        if gtid() != 0 {
            return;
        }
        let (base, out, n) = (arg(a, 0) as *mut u8, arg(a, 1) as *mut u64, arg(a, 2) as usize);
        let me = sh::my_pe() as u64;
        let pe = next();
        for i in 0..n {
            let v = (me << 56) | (i as u64 * 0x0101_0101);
            sh::p((base as *mut u64).add(i), v, pe);
            sh::p((base.add(8 * n) as *mut u32).add(i), v as u32, pe);
            sh::p((base.add(12 * n) as *mut u16).add(i), v as u16, pe);
            sh::p(base.add(14 * n).add(i), v as u8, pe);
        }
        sh::quiet();
        for i in 0..n {
            let x = sh::g((base as *const u64).add(i), pe);
            let y = sh::g((base.add(8 * n) as *const u32).add(i), pe) as u64;
            let z = sh::g((base.add(12 * n) as *const u16).add(i), pe) as u64;
            let w = sh::g(base.add(14 * n).add(i), pe) as u64;
            *out.add(i) = x ^ y ^ z ^ w;
        }
    }

    /// [v32, v64, vi64, vf64, results] — every AMO on the next PE's variables (thread 0).
    fn k_amo(a) {
        if gtid() != 0 {
            return;
        }
        let pe = next();
        let r = arg(a, 4) as *mut u64;
        let mut k = 0;
        let mut rec = |v: u64| {
            *r.add(k) = v;
            k += 1;
        };
        macro_rules! seq {
            ($v:expr, $t:ty) => {{
                let v = $v as *mut $t;
                rec(sh::atomic_fetch_add(v, 3, pe) as u64);
                sh::atomic_add(v, 2, pe);
                rec(sh::atomic_fetch_inc(v, pe) as u64);
                sh::atomic_inc(v, pe);
                rec(sh::atomic_fetch(v, pe) as u64);
                rec(sh::atomic_swap(v, 100, pe) as u64);
                rec(sh::atomic_compare_swap(v, 7, 1, pe) as u64);
                rec(sh::atomic_compare_swap(v, 100, 0xF0, pe) as u64);
                rec(sh::atomic_fetch_and(v, 0x3C, pe) as u64);
                sh::atomic_and(v, 0x20, pe);
                rec(sh::atomic_fetch_or(v, 0x05, pe) as u64);
                sh::atomic_or(v, 0x40, pe);
                rec(sh::atomic_fetch_xor(v, 0xFF, pe) as u64);
                sh::atomic_xor(v, 0x0F, pe);
                rec(sh::atomic_fetch(v, pe) as u64);
                sh::atomic_set(v, 77 + sh::my_pe() as $t, pe);
                rec(sh::atomic_fetch(v, pe) as u64);
            }};
        }
        seq!(arg(a, 0), u32);
        seq!(arg(a, 1), u64);
        let vi = arg(a, 2) as *mut i64;
        rec(sh::atomic_fetch_add(vi, -10, pe) as u64);
        rec(sh::atomic_fetch_add(vi, 3, pe) as u64);
        let vf = arg(a, 3) as *mut f64;
        rec(sh::atomic_swap(vf, 2.5, pe).to_bits());
        rec(sh::atomic_compare_swap(vf, 2.5, -1.25, pe).to_bits());
        rec(sh::atomic_fetch(vf, pe).to_bits());
        sh::atomic_set(vf, 0.5, pe);
    }

    /// [counter(u64 on PE 0), out(u64 per thread per iter, local), iters, counter32(u32 on PE 0)] —
    /// every thread of every PE fetch_adds PE 0's counter; returned values recorded.
    fn k_contention(a) {
        let (ctr, out, iters, c32) = (arg(a, 0) as *mut u64, arg(a, 1) as *mut u64, arg(a, 2) as usize, arg(a, 3) as *mut u32);
        let t = gtid() as usize;
        for i in 0..iters {
            *out.add(t * iters + i) = sh::atomic_fetch_add(ctr, 1, 0);
            sh::atomic_inc(c32, 0);
        }
    }

    /// [lock(u32 on PE 0), data(u64 on PE 0), iters] — a compare_swap lock protecting a non-atomic
    /// read-modify-write of PE 0's data through g/p.
    ///
    /// A failed attempt backs off exponentially (up to 2 ms), as a lock over a network must: without
    /// it, the waiters' compare_swaps from a remote PE queue ahead of the holder's g, p, quiet and
    /// release in the same proxy or NIC queue, and each hand-over waits behind every waiter's request
    /// (2 x 256 threads over the TCP proxy took over 150 s on 2 x H200, 2026-11-27; with a 64 us cap
    /// still over 100 s: 256 waiters retrying every ~100 us ask the proxy for 2.6 M requests/s, ten
    /// times what one proxy thread serves, so the queue stays full). At 2 ms they ask for about 0.13 M/s.
    fn k_lock(a) {
        let (lock, data, iters) = (arg(a, 0) as *mut u32, arg(a, 1) as *mut u64, arg(a, 2) as usize);
        for _ in 0..iters {
            let mut failed = 0u32;
            while sh::atomic_compare_swap(lock, 0, 1, 0) != 0 {
                failed = (failed + 1).min(11);
                // 1 us (arch::backoff's longest sleep past 23 spins) times 2^failed.
                for _ in 0..(1u32 << failed) {
                    sh::arch::backoff(23);
                }
            }
            sh::fence();
            let v = sh::g(data, 0);
            sh::p(data, v + 1, 0);
            sh::quiet();
            sh::atomic_set(lock, 0, 0);
        }
    }

    /// [data, flag, ack, staging, rounds, words, errors(local u64)] — fence orders a data put before a
    /// flag put: each round I put `words` u64s then (fence) the round number to the next PE; I check what
    /// the previous PE sent me once its flag shows the round, then acknowledge.
    fn k_fence(a) {
        if gtid() != 0 {
            return;
        }
        let (data, flag, ack, stg) = (arg(a, 0) as *mut u64, arg(a, 1) as *mut u64, arg(a, 2) as *mut u64, arg(a, 3) as *mut u64);
        let (rounds, words, errs) = (arg(a, 4), arg(a, 5) as usize, arg(a, 6) as *mut u64);
        let (nx, pv) = (next(), prev());
        let me = sh::my_pe() as u64;
        let mut bad = 0u64;
        for r in 1..=rounds {
            if r > 1 {
                sh::wait_until(ack as *const u64, sh::CMP_GE, r - 1);
            }
            for i in 0..words {
                *stg.add(i) = (r << 40) | (me << 32) | i as u64;
            }
            sh::putmem(data as *mut u8, stg as *const u8, words * 8, nx);
            sh::fence();
            sh::p(flag, r, nx);
            sh::wait_until(flag as *const u64, sh::CMP_GE, r);
            let from = pv as u64;
            for i in 0..words {
                if core::ptr::read_volatile(data.add(i)) != (r << 40) | (from << 32) | i as u64 {
                    bad += 1;
                }
            }
            sh::fence();
            sh::p(ack, r, pv);
        }
        sh::quiet();
        *errs = bad;
    }

    /// [data, sig, ack, staging, rounds, bytes, errors, scope, op(0 set,1 add)] — put_signal: the
    /// payload is complete when the signal is seen. One block; all threads take part for warp/block scope
    /// (warp scope: warp 0 only).
    fn k_put_signal(a) {
        let (data, sig, ack, stg) = (arg(a, 0) as *mut u8, arg(a, 1) as *mut u64, arg(a, 2) as *mut u64, arg(a, 3) as *mut u8);
        let (rounds, bytes, errs) = (arg(a, 4), arg(a, 5) as usize, arg(a, 6) as *mut u64);
        let s = scope(arg(a, 7));
        let op = if arg(a, 8) == 0 { sh::SIGNAL_SET } else { sh::SIGNAL_ADD };
        let lead = block_rank() == 0;
        let active = match s {
            Scope::Thread => lead,
            Scope::Warp => block_rank() < warp_size() && block_rank() / 32 == 0,
            Scope::Block => true,
        };
        let (nx, pv) = (next(), prev());
        let me = sh::my_pe() as u64;
        let mut bad = 0u64;
        for r in 1..=rounds {
            if lead {
                if r > 1 {
                    sh::signal_wait_until(ack, sh::CMP_GE, r - 1);
                }
                for i in 0..bytes {
                    *stg.add(i) = (r as u8).wrapping_mul(31) ^ (me as u8).wrapping_mul(7) ^ (i as u8);
                }
            }
            sh::thread::sync_block();
            if active {
                let val = if op == sh::SIGNAL_SET { r } else { 1 };
                sh::putmem_signal_scoped(s, data, stg, bytes, sig, val, op, nx, "k_put_signal\0", true);
            }
            if lead {
                let got = sh::signal_wait_until(sig, sh::CMP_GE, r);
                if got != r {
                    bad += 1000;
                }
                let from = pv as u8;
                for i in 0..bytes {
                    let want = (r as u8).wrapping_mul(31) ^ from.wrapping_mul(7) ^ (i as u8);
                    if core::ptr::read_volatile(data.add(i)) != want {
                        bad += 1;
                    }
                }
                sh::signal_op(ack, r, sh::SIGNAL_SET, pv);
            }
            sh::thread::sync_block();
        }
        if lead {
            sh::quiet();
            *errs = bad;
        }
    }

    /// [ivar(i32), ack(u64), result(local u64)] — wait_until with each comparison, and test.
    fn k_wait(a) {
        if gtid() != 0 {
            return;
        }
        let (iv, ack, res) = (arg(a, 0) as *mut i32, arg(a, 1) as *mut u64, arg(a, 2) as *mut u64);
        let (nx, pv) = (next(), prev());
        // (value the previous PE sends me, cmp, operand): each wait is satisfied only by that value.
        let steps: [(i32, i32, i32); 6] = [
            (10, sh::CMP_EQ, 10),
            (11, sh::CMP_NE, 10),
            (20, sh::CMP_GT, 19),
            (-5, sh::CMP_LE, -5),
            (-9, sh::CMP_LT, -8),
            (50, sh::CMP_GE, 50),
        ];
        let negate = |c: i32| match c {
            sh::CMP_EQ => sh::CMP_NE,
            sh::CMP_NE => sh::CMP_EQ,
            sh::CMP_GT => sh::CMP_LE,
            sh::CMP_LE => sh::CMP_GT,
            sh::CMP_LT => sh::CMP_GE,
            _ => sh::CMP_LT,
        };
        let mut ok = 0u64;
        for (k, &(val, cmp, opd)) in steps.iter().enumerate() {
            sh::p(iv, val, nx);
            sh::quiet();
            sh::wait_until(iv as *const i32, cmp, opd);
            // My ivar cannot change until I acknowledge below: test must agree with the wait.
            if sh::test(iv as *const i32, cmp, opd) {
                ok += 1;
            }
            if !sh::test(iv as *const i32, negate(cmp), opd) {
                ok += 1;
            }
            // Both sides finished this step before the next value is sent.
            sh::atomic_add(ack, 1, pv);
            sh::wait_until(ack as *const u64, sh::CMP_GE, k as u64 + 1);
        }
        *res = ok;
    }

    /// [slots(u64 x n_pes), rounds, errors(local), variant(0 barrier_all,1 sync_all,2 block,3 warp)] —
    /// each round every PE writes the round into its slot on every PE, then barriers, then checks.
    fn k_barrier(a) {
        let (slots, rounds, errs, variant) = (arg(a, 0) as *mut u64, arg(a, 1), arg(a, 2) as *mut u64, arg(a, 3));
        let n = sh::n_pes();
        let me = sh::my_pe() as usize;
        let lead = block_rank() == 0;
        let mut bad = 0;
        let bar = |v: u64| match v {
            0 => sh::barrier_all(),
            1 => sh::sync_all(),
            2 => sh::barrier_all_block(),
            _ => sh::barrier_all_warp(),
        };
        let participates = match variant {
            2 => true,
            3 => block_rank() < 32,
            _ => lead,
        };
        for r in 1..=rounds {
            if lead {
                for pe in 0..n {
                    sh::p(slots.add(me), r, pe);
                }
                if variant == 1 {
                    sh::quiet(); // sync_all does not complete puts by itself
                }
            }
            if participates {
                bar(variant);
            }
            if lead {
                for pe in 0..n as usize {
                    if core::ptr::read_volatile(slots.add(pe)) != r {
                        bad += 1;
                    }
                }
            }
            if participates {
                bar(variant);
            }
        }
        if lead {
            *errs = bad;
        }
    }

    /// [table, count] — team collectives from device code: `count` entries of 8 u64s in `table`
    /// (symmetric memory, this PE's own copy), each [what, scope, team, dest, src, n, a, b] with `what`
    /// a `coll::host_op` code (0 sync, 1 barrier, 2 broadcast, 3 fcollect, 4 collect, 5 alltoall,
    /// 6 reduce, 7 reducescatter), `scope` 0 thread (the block's last thread), 1 warp (warp 0), 2 block,
    /// `n` bytes for the data collectives and elements for the reductions, `a` the root or the type
    /// code, `b` the operator. Entries run in order, the block synchronized between them.
    fn k_coll(a) {
        use rshmem_device::coll::{self as c, host_op};
        use rshmem_device::thread::sync_block;
        let (tab, count) = (arg(a, 0) as *const u64, arg(a, 1) as usize);
        for k in 0..count {
            let e = tab.add(8 * k);
            let f = |i: usize| core::ptr::read_volatile(e.add(i));
            let s = scope(f(1));
            let takes_part = match s {
                Scope::Thread => block_rank() == block_size() - 1,
                Scope::Warp => block_rank() < 32,
                Scope::Block => true,
            };
            if takes_part {
                let (team, dest, src, n, x, y) = (f(2) as i32, f(3) as *mut u8, f(4) as *const u8, f(5) as usize, f(6), f(7));
                match f(0) as u32 {
                    host_op::SYNC => c::team_sync_scoped(s, team, false, "rshmem_team_sync (k_coll)\0"),
                    host_op::BARRIER => c::team_sync_scoped(s, team, true, "rshmem_barrier (k_coll)\0"),
                    host_op::BROADCAST => c::broadcast(s, team, dest, src, n, x as i32, "rshmem_broadcast (k_coll)\0"),
                    host_op::FCOLLECT => c::fcollect(s, team, dest, src, n, "rshmem_fcollect (k_coll)\0"),
                    host_op::COLLECT => c::collect(s, team, dest, src, n, "rshmem_collect (k_coll)\0"),
                    host_op::ALLTOALL => c::alltoall(s, team, dest, src, n, "rshmem_alltoall (k_coll)\0"),
                    host_op::REDUCE => c::reduce(s, team, dest, src, n, x as u32, y as u32, false, "rshmem_reduce (k_coll)\0"),
                    _ => c::reduce(s, team, dest, src, n, x as u32, y as u32, true, "rshmem_reducescatter (k_coll)\0"),
                }
            }
            sync_block();
        }
    }

    /// [src(i64 x 4), dst(i64 x 4), fsrc(u16), fdst(u16 x n_pes), flag(u64)] — the typed device API,
    /// by one block: `coll::typed::reduce` (sum, i64) of src into dst, `fcollect` (u16) of fsrc into
    /// fdst, then a `p` of 1 into the next PE's flag and `wait_until(flag, Cmp::Ge, 1)`.
    fn k_typed(a) {
        use rshmem_device::coll::typed::{self as ty, Op};
        let (src, dst, fsrc, fdst, flag) = (arg(a, 0) as *const i64, arg(a, 1) as *mut i64, arg(a, 2) as *const u16, arg(a, 3) as *mut u16, arg(a, 4) as *mut u64);
        ty::reduce(Scope::Block, sh::TEAM_WORLD, dst, src, 4, Op::Sum);
        ty::fcollect(Scope::Block, sh::TEAM_WORLD, fdst, fsrc, 1);
        if block_rank() == 0 {
            sh::p(flag, 1u64, next());
            sh::wait_until(flag as *const u64, sh::Cmp::Ge, 1);
        }
    }

    /// [teams(i32 handles as u64), count, out, max] — device team queries, by thread 0: for each team
    /// t, out gets team_my_pe(t), team_n_pes(t), then for each team u and each i in -1..max,
    /// team_translate_pe(t, i, u) (all as i64).
    fn k_team_info(a) {
        if gtid() != 0 {
            return;
        }
        let (teams, count, out, max) = (arg(a, 0) as *const u64, arg(a, 1) as usize, arg(a, 2) as *mut i64, arg(a, 3) as i32);
        let mut k = 0;
        let mut rec = |v: i32| {
            *out.add(k) = v as i64;
            k += 1;
        };
        for t in 0..count {
            let tt = *teams.add(t) as i32;
            rec(sh::team_my_pe(tt));
            rec(sh::team_n_pes(tt));
            for u in 0..count {
                for i in -1..max {
                    rec(sh::team_translate_pe(tt, i, *teams.add(u) as i32));
                }
            }
        }
    }

    /// [dst, src, total, piece, peer] — remote scaling (tests/src/scaling.rs): launched with G blocks of
    /// one thread, block b sends its share `total / G` (a multiple of `piece`) at offset b x share as
    /// `share / piece` putmem_nbi of `piece` bytes to `peer`, one after another, then quiets. G = 1 is
    /// one stream of small puts, G = 32 the same bytes as 32 concurrent streams.
    fn k_scale_put(a) {
        let (dst, src, total, piece, peer) = (arg(a, 0) as *mut u8, arg(a, 1) as *const u8, arg(a, 2) as usize, arg(a, 3) as usize, arg(a, 4) as i32);
        let share = total / sh::thread::grid_size() as usize;
        let base = block_index() as usize * share;
        let mut off = 0;
        while off + piece <= share {
            sh::putmem_nbi(dst.add(base + off), src.add(base + off), piece, peer);
            off += piece;
        }
        sh::quiet();
    }

    /// [dst, pe] — a device call with a bad PE number or address (bad-input test).
    fn k_bad(a) {
        if gtid() == 0 {
            sh::p(arg(a, 0) as *mut u32, 1, arg(a, 1) as i32);
        }
    }

    /// [src, bytes, pe, mode] — an RDMA WRITE of `bytes` from the symmetric `src` to `pe`'s copy of it,
    /// posted through the IBGDA test hook with its rkey corrupted (mode 1) or its remote address moved
    /// past the target's heap (mode 2): the target NIC's error completion must stop this PE with a
    /// message naming the failure (bad-input test; needs RSHMEM_REMOTE_TRANSPORT=ibgda across nodes).
    fn k_nic_bad(a) {
        if gtid() == 0 {
            let (src, bytes, pe) = (arg(a, 0) as *const u8, arg(a, 1) as usize, arg(a, 2) as i32);
            if let Some((raddr, rkey)) = rshmem_device::remote::ibgda::remote_address(pe, src) {
                let (raddr, rkey) = if arg(a, 3) == 1 { (raddr, rkey ^ 0x00ff_0000) } else { (raddr + (1 << 40), rkey) };
                rshmem_device::remote::ibgda::raw_write(pe, src, bytes, raddr, rkey);
            }
        }
    }
}
