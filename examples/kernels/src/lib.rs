//! Kernels of the examples, written once against `rshmem-device`: PTX kernels on GPUs, host-thread
//! functions on the CPU backend.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use rshmem_device as sh;
use rshmem_device::thread as T;

sh::kernels! {
    /// args: [destination] — each PE writes its PE number into `destination` on the next PE.
    fn ring_shift(a) {
        let destination = *a as *mut i32;
        let me = sh::my_pe();
        let peer = (me + 1) % sh::n_pes();
        sh::p(destination, me, peer);
    }

    /// [dst, src, bytes, iters, peer, scope(0 thread,1 warp,2 block), dir(0 put,1 get)] — bandwidth:
    /// `bytes` split over the launch's units of the scope (threads, warps or blocks), chunks of at least
    /// 8 bytes; `iters` rounds of nbi transfers, then quiet.
    fn bench_bw(a) {
        let (scope, dir) = (*a.add(5), *a.add(6));
        // One specialized loop per case (as NVSHMEM's program instantiates a template per case).
        match (scope, dir) {
            (0, 0) => bw_loop::<0, 0>(a),
            (1, 0) => bw_loop::<1, 0>(a),
            (_, 0) => bw_loop::<2, 0>(a),
            (0, _) => bw_loop::<0, 1>(a),
            (1, _) => bw_loop::<1, 1>(a),
            (_, _) => bw_loop::<2, 1>(a),
        }
    }
    /// [dst, src, bytes, iters, peer] — analysis variant of the block put: a raw 16-byte copy through
    /// the peer pointer with eight loads in flight per thread (chunks rounded down to 16 bytes).
    fn x_bw_deep(a) {
        let (dst, src, bytes, iters, peer) = (*a as *mut u8, *a.add(1) as *const u8, *a.add(2) as usize, *a.add(3), *a.add(4) as i32);
        let chunk = (bytes / T::grid_size() as usize) & !15;
        let off = T::block_index() as usize * chunk;
        let r = sh::ptr(dst.add(off), peer);
        for _ in 0..iters {
            sh::arch::copy16_deep(r, src.add(off), chunk / 16, T::block_rank() as usize, T::block_size() as usize);
            T::sync_block();
        }
        sh::quiet();
    }
    /// [dst, src, bytes, iters] — all pairs: every PE puts `bytes` to every other PE at once. Blocks
    /// are dealt round-robin over the peers; sender s writes at offset s * bytes of the receiver's buffer.
    fn bench_all_pairs(a) {
        let (dst, src, bytes, iters) = (*a as *mut u8, *a.add(1) as *const u8, *a.add(2) as usize, *a.add(3));
        let (me, n) = (sh::my_pe(), sh::n_pes());
        let peers = (n - 1) as u32;
        let (b, g) = (T::block_index(), T::grid_size());
        let pi = b % peers;
        let count = (g - pi).div_ceil(peers) as usize;
        let rank = (b / peers) as usize;
        let chunk = (bytes / count) & !15;
        let peer = (me + 1 + pi as i32) % n;
        let (d, s2) = (dst.add(me as usize * bytes + rank * chunk), src.add(rank * chunk));
        for _ in 0..iters {
            sh::putmem_nbi_block(d, s2, chunk, peer);
        }
        sh::quiet();
    }
    /// [slots(u64 x n_pes), iters] — analysis variant: a flag exchange with the peers' slot addresses
    /// computed once, fenced on both sides (fence.acq_rel.sys before the stores and after the relaxed
    /// polls; the library's barrier needs only the first fence and polls with acquire loads).
    fn x_barrier_raw(a) {
        let (slots, iters) = (*a as *mut u64, *a.add(1));
        let (me, n) = (sh::my_pe() as usize, sh::n_pes() as usize);
        let mut peer_slot = [core::ptr::null_mut::<u64>(); 8];
        for (pe, ps) in peer_slot.iter_mut().enumerate().take(n.min(8)) {
            *ps = sh::ptr(slots.add(me) as *const u64, pe as i32);
        }
        for e in 1..=iters {
            sh::arch::fence_acq_rel();
            for ps in peer_slot.iter().take(n.min(8)) {
                sh::arch::store_relaxed_u64(*ps, e);
            }
            for pe in 0..n.min(8) {
                while sh::arch::load_relaxed_u64(slots.add(pe)) < e {}
            }
            sh::arch::fence_acq_rel();
        }
    }
    /// [buf, iters, peer, out(local u64), kind] — one-thread latency loops:
    /// kind 0 p+quiet, 1 g (address depends on the previous value), 2 put 8 B + quiet, 3 get 8 B,
    /// 4 fetch_add, 5 compare_swap; analysis variants (not API calls): 6 volatile store through a
    /// pointer from `ptr` + fence.sc.sys, 7 the same + fence.acq_rel.sys, 8 quiet alone (no store),
    /// 9 fetch_add as a raw system-scope atom through a pointer from `ptr`.
    fn bench_lat(a) {
        // One specialized loop per kind (as NVSHMEM's program instantiates a template per kind).
        match *a.add(4) {
            0 => lat_loop::<0>(a),
            1 => lat_loop::<1>(a),
            2 => lat_loop::<2>(a),
            3 => lat_loop::<3>(a),
            4 => lat_loop::<4>(a),
            6 => lat_loop::<6>(a),
            7 => lat_loop::<7>(a),
            8 => lat_loop::<8>(a),
            9 => lat_loop::<9>(a),
            _ => lat_loop::<5>(a),
        }
    }
    /// [flag(i32), iters, peer, kind(0 p + wait_until, 1 put_signal + signal_wait_until), data, sig]
    /// — ping-pong between PE 0 and its peer.
    fn bench_pingpong(a) {
        let (flag, iters, peer, kind) = (*a as *mut i32, *a.add(1) as i32, *a.add(2) as i32, *a.add(3));
        let (data, sig) = (*a.add(4) as *mut u8, *a.add(5) as *mut u64);
        let me = sh::my_pe();
        let local = [0u64; 1];
        for i in 1..=iters {
            let send = || {
                if kind == 0 {
                    sh::p(flag, i, peer);
                } else {
                    sh::putmem_signal(data, local.as_ptr() as *const u8, 8, sig, i as u64, sh::SIGNAL_SET, peer);
                }
            };
            let recv = || {
                if kind == 0 {
                    sh::wait_until(flag as *const i32, sh::CMP_EQ, i);
                } else {
                    sh::signal_wait_until(sig, sh::CMP_EQ, i as u64);
                }
            };
            if me == 0 {
                send();
                recv();
            } else {
                recv();
                send();
            }
        }
    }
    /// [dst(u64 per thread), per_thread, peer] — posting rate: every thread `p`s `per_thread` values to
    /// its own word on `peer`, then its block quiets once. Against a PE on another node through IBGDA
    /// every `p` is one inline RDMA WRITE WQE this thread builds and posts (with
    /// RSHMEM_IBGDA_EMULATOR=ack the emulated NIC completes them without moving data, so the time is
    /// the posting side's).
    fn bench_post(a) {
        let (dst, n, peer) = (*a as *mut u64, *a.add(1), *a.add(2) as i32);
        let t = (T::block_index() * T::block_size() + T::block_rank()) as usize;
        for i in 0..n {
            sh::p(dst.add(t), i, peer);
        }
        T::sync_block();
        if T::block_rank() == 0 {
            sh::quiet();
        }
    }
    /// [dst, src, bytes, per_block, peer, kind(0 putmem_nbi, 1 p of a u64), slots] — message rate: thread
    /// 0 of every block (launch one thread per block) issues `per_block` puts of `bytes` to `peer`, one
    /// after another without waiting, then quiets once. Put i of block b writes `bytes` at offset
    /// `(b * slots + i % slots) * bytes` of `dst` from the same offset of `src` (kind 1: one `p` of the
    /// u64 there), so after a launch every slot a block touched holds this PE's `src` bytes.
    fn bench_rate(a) {
        let (dst, src, bytes, per, peer) = (*a as *mut u8, *a.add(1) as *const u8, *a.add(2) as usize, *a.add(3), *a.add(4) as i32);
        let (kind, slots) = (*a.add(5), (*a.add(6)).max(1));
        if T::block_rank() == 0 {
            let base = T::block_index() as u64 * slots;
            let mut slot = 0;
            for _ in 0..per {
                let off = ((base + slot) as usize) * bytes;
                if kind == 0 {
                    sh::putmem_nbi(dst.add(off), src.add(off), bytes, peer);
                } else {
                    sh::p(dst.add(off) as *mut u64, *(src.add(off) as *const u64), peer);
                }
                slot += 1;
                if slot == slots {
                    slot = 0;
                }
            }
            sh::quiet();
        }
    }
    /// [dst, src, total, calls, peer, mode, arrivals(u32 counter on this PE)] — the every-thread-quiet
    /// pattern of issue 19: each block makes `calls` `putmem_nbi_block` calls of `total / (grid x calls)`
    /// bytes (rounded down to 8; block b's call c at offset `(b * calls + c) * chunk`), then
    /// mode 0: every thread calls quiet; mode 1: thread 0 of every block quiets (after the block's sync);
    /// mode 2: one thread of the grid quiets: thread 0 of the block that arrives last (counted on
    /// `arrivals`, which only grows: the last of a launch sees `grid - 1` modulo `grid`), as NVSHMEM's
    /// shmem_put_bw does.
    fn bench_quiet(a) {
        let (dst, src, total, calls, peer) = (*a as *mut u8, *a.add(1) as *const u8, *a.add(2) as usize, *a.add(3), *a.add(4) as i32);
        let (mode, arrivals) = (*a.add(5), *a.add(6) as *mut u32);
        let (b, g) = (T::block_index(), T::grid_size());
        let chunk = (total / (g as usize * calls.max(1) as usize)) & !7;
        for c in 0..calls {
            let off = (b as usize * calls as usize + c as usize) * chunk;
            sh::putmem_nbi_block(dst.add(off), src.add(off), chunk, peer);
        }
        match mode {
            0 => sh::quiet(),
            1 => {
                T::sync_block();
                if T::block_rank() == 0 {
                    sh::quiet();
                }
            }
            _ => {
                T::sync_block();
                if T::block_rank() == 0 {
                    sh::arch::fence_acq_rel();
                    let before = sh::arch::rmw_u32(sh::arch::Rmw::Add, arrivals, 1);
                    if before % g == g - 1 {
                        // Every other block's puts happen before its arrival: see them.
                        sh::arch::fence_acq_rel();
                        sh::quiet();
                    }
                }
            }
        }
    }
    /// [ctrs(u64 per thread), per_thread, peer] — atomic rate: every thread adds to its own counter.
    fn bench_amo_rate(a) {
        let (ctrs, n, peer) = (*a as *mut u64, *a.add(1), *a.add(2) as i32);
        let t = (T::block_index() * T::block_size() + T::block_rank()) as usize;
        for _ in 0..n {
            sh::atomic_add(ctrs.add(t), 1, peer);
        }
        sh::quiet();
    }
    /// [iters, kind(0 barrier_all, 1 sync_all)] — device barrier latency.
    fn bench_barrier(a) {
        for _ in 0..*a {
            if *a.add(1) == 0 {
                sh::barrier_all();
            } else {
                sh::sync_all();
            }
        }
    }
}

/// The loop of `bench_bw` for one scope (0 thread, 1 warp, 2 block) and direction (0 put, 1 get).
///
/// # Safety
/// `a` must point to the kernel's five arguments; `dst` and `src` must be symmetric buffers of at
/// least `bytes` bytes and `peer` a PE that this one reaches (the device calls check the ranges).
#[inline(always)]
unsafe fn bw_loop<const SCOPE: u64, const DIR: u64>(a: *const u64) {
    // SAFETY: the kernel's five arguments (the caller's contract).
    let (dst, src, bytes, iters, peer) = unsafe { (*a as *mut u8, *a.add(1) as *const u8, *a.add(2) as usize, *a.add(3), *a.add(4) as i32) };
    let (units, unit) = match SCOPE {
        0 => (T::grid_size() * T::block_size(), T::block_index() * T::block_size() + T::block_rank()),
        1 => (T::grid_size() * T::block_size().div_ceil(32), T::block_index() * T::block_size().div_ceil(32) + T::block_rank() / 32),
        _ => (T::grid_size(), T::block_index()),
    };
    let mut chunk = (bytes / units as usize) & !7;
    let mut active = units as usize;
    if chunk < 8 {
        chunk = 8;
        active = bytes / 8;
    }
    if (unit as usize) < active {
        let off = unit as usize * chunk;
        // SAFETY: unit < active, so `[off, off + chunk)` lies in both buffers of `bytes` bytes (the
        // caller's contract; the device calls check the ranges too); the group scopes are called by
        // every thread of the warp / block (the unit's members, all active alike); the buffers are not
        // read or changed before the quiet below.
        unsafe {
            let (d, s2) = (dst.add(off), src.add(off));
            for _ in 0..iters {
                match (SCOPE, DIR) {
                    (0, 0) => sh::putmem_nbi(d, s2, chunk, peer),
                    (1, 0) => sh::putmem_nbi_warp(d, s2, chunk, peer),
                    (_, 0) => sh::putmem_nbi_block(d, s2, chunk, peer),
                    (0, _) => sh::getmem_nbi(d, s2, chunk, peer),
                    (1, _) => sh::getmem_nbi_warp(d, s2, chunk, peer),
                    (_, _) => sh::getmem_nbi_block(d, s2, chunk, peer),
                }
            }
        }
    }
    sh::quiet();
}

/// The loop of `bench_lat` for one kind (see there).
///
/// # Safety
/// `a` must point to the kernel's four arguments: `buf` a symmetric buffer as `bench_lat` describes,
/// `out` a writable u64; for the analysis kinds 6, 7 and 9, `peer`'s heap must be mapped here.
#[inline(always)]
unsafe fn lat_loop<const KIND: u64>(a: *const u64) {
    // SAFETY: the kernel's four arguments (the caller's contract).
    let (buf, iters, peer, out) = unsafe { (*a as *mut u8, *a.add(1), *a.add(2) as i32, *a.add(3) as *mut u64) };
    let ints = buf as *mut i32;
    let raw = sh::ptr(ints as *const i32, peer);
    let mut acc: u64 = 0;
    let mut local = [0u64; 1];
    // SAFETY: `buf` is the symmetric buffer `bench_lat` describes (the caller's contract): the i32 words
    // at 0..4096 and 8192, the u64s at 0..1024 and the 8 bytes at 64 KiB lie in it, naturally aligned;
    // `local` is this thread's; the analysis kinds 6, 7 and 9 are run only with a peer whose heap is
    // mapped here (so `raw` is its address of `buf`, as the benchmark's driver arranges).
    unsafe {
        for i in 0..iters {
            match KIND {
                0 => {
                    sh::p(ints, i as i32, peer);
                    sh::quiet();
                }
                1 => acc = acc.wrapping_add(sh::g(ints.add(((i as usize) ^ (acc as usize & 1)) & 4095), peer) as u64),
                2 => {
                    sh::putmem(buf.add(64 * 1024), local.as_ptr() as *const u8, 8, peer);
                    sh::quiet();
                }
                3 => {
                    sh::getmem(local.as_mut_ptr() as *mut u8, buf.add((((i + acc) as usize) & 1023) * 8), 8, peer);
                    acc = acc.wrapping_add(local[0]);
                }
                4 => acc = acc.wrapping_add(sh::atomic_fetch_add(ints.add(8192), 1, peer) as u64),
                6 => {
                    core::ptr::write_volatile(raw, i as i32);
                    sh::arch::fence_sc();
                }
                7 => {
                    core::ptr::write_volatile(raw, i as i32);
                    sh::arch::fence_acq_rel();
                }
                8 => sh::quiet(),
                9 => acc = acc.wrapping_add(sh::arch::rmw_u32(sh::arch::Rmw::Add, raw.add(8192) as *mut u32, 1) as u64),
                _ => acc = acc.wrapping_add(sh::atomic_compare_swap(ints.add(8192), i as i32, i as i32 + 1, peer) as u64),
            }
        }
    }
    // SAFETY: `out` is a writable u64 (the caller's contract).
    unsafe { *out = acc };
}
