//! Kernels of the examples, written once against `rshmem-device`: PTX kernels on GPUs, host-thread
//! functions on the CPU backend. Each kernel takes one argument struct of the same name (`ring_shift`
//! takes a [`RingShift`]), launched with `rshmem::kernels::Kernel::launch`.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use rshmem_device as sh;
use rshmem_device::thread as T;
use rshmem_device::DevPtr;

/// The arguments of `ring_shift`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RingShift {
    /// A symmetric int: the next PE's copy receives this PE's number.
    pub destination: DevPtr<i32>,
}

/// The arguments of `bench_bw`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BenchBw {
    /// Symmetric destination of at least `bytes` bytes (on `peer` for puts, here for gets).
    pub dst: DevPtr<u8>,
    /// Symmetric source of at least `bytes` bytes (here for puts, on `peer` for gets).
    pub src: DevPtr<u8>,
    /// Bytes per round, split over the launch's units.
    pub bytes: u64,
    /// Rounds of nbi transfers before the quiet.
    pub iters: u64,
    /// The PE transferred to or from.
    pub peer: i32,
    /// 0 thread, 1 warp, 2 block.
    pub scope: u32,
    /// 0 put, 1 get.
    pub dir: u32,
    /// Round r uses the region `r % slots` of `bytes` bytes at `(r % slots) * bytes` of both buffers
    /// (which then hold `slots * bytes` bytes), so that repeated rounds do not rewrite or re-read the
    /// same cached lines; 0 or 1: every round the same region.
    pub slots: u32,
}

/// The arguments of `x_bw_deep`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct XBwDeep {
    /// Symmetric destination of at least `bytes` bytes (on `peer` for puts, here for gets).
    pub dst: DevPtr<u8>,
    /// Symmetric source of at least `bytes` bytes (here for puts, on `peer` for gets).
    pub src: DevPtr<u8>,
    /// Bytes per round, split over the blocks.
    pub bytes: u64,
    /// Rounds.
    pub iters: u64,
    /// A PE whose heap is mapped here.
    pub peer: i32,
    /// 0 put (store through the peer's address of `dst`), 1 get (load through the peer's address of
    /// `src`). It fills what was the struct's explicit padding, so the struct keeps its 40 bytes.
    pub dir: u32,
}

/// The arguments of `bench_all_pairs`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BenchAllPairs {
    /// Symmetric destination of at least `n_pes * bytes` bytes.
    pub dst: DevPtr<u8>,
    /// Symmetric source of at least `bytes` bytes.
    pub src: DevPtr<u8>,
    /// Bytes put to each other PE per round.
    pub bytes: u64,
    /// Rounds before the quiet.
    pub iters: u64,
}

/// The arguments of `x_barrier_raw`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct XBarrierRaw {
    /// Symmetric, one zeroed u64 per PE.
    pub slots: DevPtr<u64>,
    /// Exchanges.
    pub iters: u64,
}

/// The arguments of `bench_lat`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BenchLat {
    /// Symmetric buffer of at least 64 KiB + 8 bytes.
    pub buf: DevPtr<u8>,
    /// Operations.
    pub iters: u64,
    /// This PE's u64 that receives the loop's accumulated results.
    pub out: DevPtr<u64>,
    /// The PE operated on.
    pub peer: i32,
    /// Which operation (see `bench_lat`).
    pub kind: u32,
}

/// The arguments of `bench_pingpong`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BenchPingpong {
    /// Symmetric i32 flag, zero before the launch (kind 0).
    pub flag: DevPtr<i32>,
    /// Symmetric 8 bytes the put of kind 1 writes.
    pub data: DevPtr<u8>,
    /// Symmetric u64 signal, zero before the launch (kind 1).
    pub sig: DevPtr<u64>,
    /// Round trips.
    pub iters: i32,
    /// The other PE of the pair.
    pub peer: i32,
    /// 0 p + wait_until, 1 put_signal + signal_wait_until.
    pub kind: u32,
    /// Explicit padding to a multiple of 8 bytes (a Pod struct has no implicit padding); 0.
    pub _pad: u32,
}

/// The arguments of `bench_post`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BenchPost {
    /// Symmetric, a u64 per thread of the launch.
    pub dst: DevPtr<u64>,
    /// `p`s per thread.
    pub per_thread: u64,
    /// The target PE.
    pub peer: i32,
    /// Explicit padding to a multiple of 8 bytes (a Pod struct has no implicit padding); 0.
    pub _pad: u32,
    /// Two u64 of this PE, zeroed before the launch: the posting phase's span as the GPU's global timer
    /// saw it, `[!earliest start, latest end]` over the launch's threads (both stay 0 where there is no
    /// timer: the CPU backend).
    pub span: DevPtr<u64>,
}

/// The arguments of `bench_rate`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BenchRate {
    /// Symmetric destination of at least `grid * slots * bytes` bytes, on `peer`.
    pub dst: DevPtr<u8>,
    /// Symmetric source, as large.
    pub src: DevPtr<u8>,
    /// Bytes per put.
    pub bytes: u64,
    /// Puts per block.
    pub per_block: u64,
    /// Slots per block (0 counts as 1).
    pub slots: u64,
    /// The target PE.
    pub peer: i32,
    /// 0 putmem_nbi, 1 p of a u64.
    pub kind: u32,
}

/// The arguments of `bench_quiet`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BenchQuiet {
    /// Symmetric destination of at least `total` bytes, on `peer`.
    pub dst: DevPtr<u8>,
    /// Symmetric source of at least `total` bytes.
    pub src: DevPtr<u8>,
    /// Bytes per launch, all blocks together.
    pub total: u64,
    /// `putmem_nbi_block` calls per block.
    pub calls: u64,
    /// This PE's u32 arrival counter (mode 2), touched by no other code.
    pub arrivals: DevPtr<u32>,
    /// The target PE.
    pub peer: i32,
    /// Who quiets: 0 every thread, 1 thread 0 of every block, 2 one thread of the grid.
    pub mode: u32,
}

/// The arguments of `bench_amo_rate`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BenchAmoRate {
    /// Symmetric, a u64 counter per thread of the launch.
    pub ctrs: DevPtr<u64>,
    /// Atomic adds per thread.
    pub per_thread: u64,
    /// The target PE.
    pub peer: i32,
    /// Explicit padding to a multiple of 8 bytes (a Pod struct has no implicit padding); 0.
    pub _pad: u32,
}

/// The arguments of `bench_barrier`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BenchBarrier {
    /// Barriers.
    pub iters: u64,
    /// 0 barrier_all, 1 sync_all.
    pub kind: u32,
    /// Explicit padding to a multiple of 8 bytes (a Pod struct has no implicit padding); 0.
    pub _pad: u32,
}

sh::kernels! {
    /// [`RingShift`] { destination } — each PE writes its PE number into `destination` on the next PE.
    fn ring_shift(a: RingShift) {
        let me = sh::my_pe();
        let peer = (me + 1) % sh::n_pes();
        sh::p(a.destination.as_ptr(), me, peer);
    }

    /// [`BenchBw`] { dst, src, bytes, iters, peer, scope (0 thread, 1 warp, 2 block), dir (0 put,
    /// 1 get), slots } — bandwidth: `bytes` split over the launch's units of the scope (threads, warps
    /// or blocks), chunks of at least 8 bytes; `iters` rounds of nbi transfers (round r in region
    /// `r % slots`), then quiet.
    fn bench_bw(a: BenchBw) {
        // One specialized loop per case (as NVSHMEM's program instantiates a template per case).
        match (a.scope, a.dir) {
            (0, 0) => bw_loop::<0, 0>(a),
            (1, 0) => bw_loop::<1, 0>(a),
            (_, 0) => bw_loop::<2, 0>(a),
            (0, _) => bw_loop::<0, 1>(a),
            (1, _) => bw_loop::<1, 1>(a),
            (_, _) => bw_loop::<2, 1>(a),
        }
    }
    /// [`XBwDeep`] { dst, src, bytes, iters, peer, dir (0 put, 1 get) } — analysis variant of the block
    /// put and get, the raw copy kernel they are held against: block b copies its chunk (`bytes / grid`
    /// rounded down to 16 bytes, at offset b * chunk) 16 bytes at a time with eight loads in flight per
    /// thread, through the peer's address from `ptr` (put: local `src` to the peer's `dst`; get: the
    /// peer's `src` to local `dst`), `iters` times, then quiets.
    fn x_bw_deep(a: XBwDeep) {
        let (dst, src, bytes, iters, peer) = (a.dst.as_ptr(), a.src.as_ptr(), a.bytes as usize, a.iters, a.peer);
        let chunk = (bytes / T::grid_size() as usize) & !15;
        let off = T::block_index() as usize * chunk;
        let (to, from) = if a.dir == 0 {
            (sh::ptr(dst.add(off), peer), src.add(off) as *const u8)
        } else {
            (dst.add(off), sh::ptr(src.add(off) as *const u8, peer) as *const u8)
        };
        for _ in 0..iters {
            sh::arch::copy16_deep(to, from, chunk / 16, T::block_rank() as usize, T::block_size() as usize);
            T::sync_block();
        }
        sh::quiet();
    }
    /// [`BenchAllPairs`] { dst, src, bytes, iters } — all pairs: every PE puts `bytes` to every other
    /// PE at once. Blocks are dealt round-robin over the peers; sender s writes at offset s * bytes of
    /// the receiver's buffer.
    fn bench_all_pairs(a: BenchAllPairs) {
        let (dst, src, bytes, iters) = (a.dst.as_ptr(), a.src.as_ptr(), a.bytes as usize, a.iters);
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
    /// [`XBarrierRaw`] { slots (u64 x n_pes), iters } — analysis variant: a flag exchange with the
    /// peers' slot addresses computed once, fenced on both sides (fence.acq_rel.sys before the stores
    /// and after the relaxed polls; the library's barrier needs only the first fence and polls with
    /// acquire loads).
    fn x_barrier_raw(a: XBarrierRaw) {
        let (slots, iters) = (a.slots.as_ptr(), a.iters);
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
    /// [`BenchLat`] { buf, iters, out (local u64), peer, kind } — one-thread latency loops:
    /// kind 0 p+quiet, 1 g (address depends on the previous value), 2 put 8 B + quiet, 3 get 8 B,
    /// 4 fetch_add, 5 compare_swap; analysis variants (not API calls): 6 volatile store through a
    /// pointer from `ptr` + fence.sc.sys, 7 the same + fence.acq_rel.sys, 8 quiet alone (no store),
    /// 9 fetch_add as a raw system-scope atom through a pointer from `ptr`.
    fn bench_lat(a: BenchLat) {
        // One specialized loop per kind (as NVSHMEM's program instantiates a template per kind).
        match a.kind {
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
    /// [`BenchPingpong`] { flag (i32), data, sig, iters, peer, kind (0 p + wait_until, 1 put_signal +
    /// signal_wait_until) } — ping-pong between PE 0 and its peer.
    fn bench_pingpong(a: BenchPingpong) {
        let (flag, iters, peer, kind) = (a.flag.as_ptr(), a.iters, a.peer, a.kind);
        let (data, sig) = (a.data.as_ptr(), a.sig.as_ptr());
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
    /// [`BenchPost`] { dst (u64 per thread), per_thread, peer, span } — posting rate: every thread `p`s
    /// `per_thread` values to its own word on `peer`, then its block quiets once. Against a PE on
    /// another node through IBGDA every `p` is one inline RDMA WRITE WQE this thread builds and posts
    /// (with RSHMEM_IBGDA_EMULATOR=ack the host-side emulated NIC completes them without moving data,
    /// and with RSHMEM_IBGDA_EMULATOR=device the device-resident NIC model does the same over queues
    /// in GPU memory, as a real ConnectX's are). The posting phase alone (first `p` to last, before the
    /// quiet, which waits for the NIC) is recorded in `span` from the global timer: with a send queue
    /// the phase never fills, it is what the posting threads pay, whatever the NIC's speed.
    fn bench_post(a: BenchPost) {
        let (dst, n, peer, span) = (a.dst.as_ptr(), a.per_thread, a.peer, a.span.as_ptr());
        let t = (T::block_index() * T::block_size() + T::block_rank()) as usize;
        let t0 = sh::arch::globaltimer_ns();
        for i in 0..n {
            sh::p(dst.add(t), i, peer);
        }
        let t1 = sh::arch::globaltimer_ns();
        if t1 != 0 {
            sh::arch::rmw_u64(sh::arch::Rmw::Max, span, !t0);
            sh::arch::rmw_u64(sh::arch::Rmw::Max, span.add(1), t1);
        }
        T::sync_block();
        if T::block_rank() == 0 {
            sh::quiet();
        }
    }
    /// [`BenchRate`] { dst, src, bytes, per_block, slots, peer, kind (0 putmem_nbi, 1 p of a u64) } —
    /// message rate: thread 0 of every block (launch one thread per block) issues `per_block` puts of
    /// `bytes` to `peer`, one after another without waiting, then quiets once. Put i of block b writes
    /// `bytes` at offset `(b * slots + i % slots) * bytes` of `dst` from the same offset of `src`
    /// (kind 1: one `p` of the u64 there), so after a launch every slot a block touched holds this PE's
    /// `src` bytes.
    fn bench_rate(a: BenchRate) {
        let (dst, src, bytes, per, peer) = (a.dst.as_ptr(), a.src.as_ptr(), a.bytes as usize, a.per_block, a.peer);
        let (kind, slots) = (a.kind, a.slots.max(1));
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
    /// [`BenchQuiet`] { dst, src, total, calls, arrivals (u32 counter on this PE), peer, mode } — the
    /// every-thread-quiet pattern of issue 19: each block makes `calls` `putmem_nbi_block` calls of
    /// `total / (grid x calls)` bytes (rounded down to 8; block b's call c at offset
    /// `(b * calls + c) * chunk`), then
    /// mode 0: every thread calls quiet; mode 1: thread 0 of every block quiets (after the block's sync);
    /// mode 2: one thread of the grid quiets: thread 0 of the block that arrives last (counted on
    /// `arrivals`, which only grows: the last of a launch sees `grid - 1` modulo `grid`), as NVSHMEM's
    /// shmem_put_bw does.
    fn bench_quiet(a: BenchQuiet) {
        let (dst, src, total, calls, peer) = (a.dst.as_ptr(), a.src.as_ptr(), a.total as usize, a.calls, a.peer);
        let (mode, arrivals) = (a.mode, a.arrivals.as_ptr());
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
    /// [`BenchAmoRate`] { ctrs (u64 per thread), per_thread, peer } — atomic rate: every thread adds
    /// to its own counter.
    fn bench_amo_rate(a: BenchAmoRate) {
        let (ctrs, n, peer) = (a.ctrs.as_ptr(), a.per_thread, a.peer);
        let t = (T::block_index() * T::block_size() + T::block_rank()) as usize;
        for _ in 0..n {
            sh::atomic_add(ctrs.add(t), 1, peer);
        }
        sh::quiet();
    }
    /// [`BenchBarrier`] { iters, kind (0 barrier_all, 1 sync_all) } — device barrier latency.
    fn bench_barrier(a: BenchBarrier) {
        for _ in 0..a.iters {
            if a.kind == 0 {
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
/// `a.dst` and `a.src` must be symmetric buffers of at least `a.bytes` bytes and `a.peer` a PE that
/// this one reaches (the device calls check the ranges).
#[inline(always)]
unsafe fn bw_loop<const SCOPE: u32, const DIR: u32>(a: BenchBw) {
    let (dst, src, bytes, iters, peer) = (a.dst.as_ptr(), a.src.as_ptr() as *const u8, a.bytes as usize, a.iters, a.peer);
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
        // SAFETY: unit < active, so `[at, at + chunk)` lies in region `r % slots` of both buffers of
        // `slots * bytes` bytes (the caller's contract; the device calls check the ranges too); the
        // group scopes are called by every thread of the warp / block (the unit's members, all active
        // alike); the buffers are not read or changed before the quiet below.
        unsafe {
            let span = bytes * (a.slots.max(1) as usize);
            let mut at = off;
            for _ in 0..iters {
                let (d, s2) = (dst.add(at), src.add(at));
                at += bytes;
                if at >= span {
                    at = off;
                }
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
/// `a.buf` must be a symmetric buffer as `bench_lat` describes, `a.out` a writable u64; for the
/// analysis kinds 6, 7 and 9, `a.peer`'s heap must be mapped here.
#[inline(always)]
unsafe fn lat_loop<const KIND: u32>(a: BenchLat) {
    let (buf, iters, peer, out) = (a.buf.as_ptr(), a.iters, a.peer, a.out.as_ptr());
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
