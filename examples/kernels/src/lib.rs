//! Kernels of the examples, written once against `rshmem-device`: PTX kernels on GPUs, host-thread
//! functions on the CPU backend.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use rshmem_device as sh;

sh::kernels! {
    /// args: [destination] — each PE writes its PE number into `destination` on the next PE.
    fn ring_shift(a) {
        let destination = *a as *mut i32;
        let me = sh::my_pe();
        let peer = (me + 1) % sh::n_pes();
        sh::p(destination, me, peer);
    }

    /// [dst, src, bytes, iters, peer] — every block puts its 1/grid share with block-scoped nbi puts.
    fn bench_put_bw(a) {
        let (dst, src, bytes, iters, peer) = (*a as *mut u8, *a.add(1) as *const u8, *a.add(2) as usize, *a.add(3), *a.add(4) as i32);
        let chunk = bytes / sh::thread::grid_size() as usize;
        let off = sh::thread::block_index() as usize * chunk;
        for _ in 0..iters {
            sh::putmem_nbi_block(dst.add(off), src.add(off), chunk, peer);
        }
        sh::quiet();
    }
    /// [dst, src, bytes, iters, peer] — the same with block-scoped gets.
    fn bench_get_bw(a) {
        let (dst, src, bytes, iters, peer) = (*a as *mut u8, *a.add(1) as *const u8, *a.add(2) as usize, *a.add(3), *a.add(4) as i32);
        let chunk = bytes / sh::thread::grid_size() as usize;
        let off = sh::thread::block_index() as usize * chunk;
        for _ in 0..iters {
            sh::getmem_nbi_block(dst.add(off), src.add(off), chunk, peer);
        }
        sh::quiet();
    }
    /// [dst(i32), iters, peer] — p + quiet latency.
    fn bench_p_lat(a) {
        let (dst, iters, peer) = (*a as *mut i32, *a.add(1), *a.add(2) as i32);
        for i in 0..iters {
            sh::p(dst, i as i32, peer);
            sh::quiet();
        }
    }
    /// [src(i32), iters, peer, out(local i32)] — g latency.
    fn bench_g_lat(a) {
        let (src, iters, peer, out) = (*a as *const i32, *a.add(1), *a.add(2) as i32, *a.add(3) as *mut i32);
        let mut acc = 0i32;
        for _ in 0..iters {
            acc = acc.wrapping_add(sh::g(src, peer));
        }
        *out = acc;
    }
    /// [ctr(i32), iters, peer, out(local i32)] — fetch_add latency.
    fn bench_amo_lat(a) {
        let (ctr, iters, peer, out) = (*a as *mut i32, *a.add(1), *a.add(2) as i32, *a.add(3) as *mut i32);
        let mut acc = 0i32;
        for _ in 0..iters {
            acc = acc.wrapping_add(sh::atomic_fetch_add(ctr, 1, peer));
        }
        *out = acc;
    }
    /// [flag(i32), iters, peer] — ping-pong of p + wait_until between PE 0 and its peer.
    fn bench_pingpong(a) {
        let (flag, iters, peer) = (*a as *mut i32, *a.add(1) as i32, *a.add(2) as i32);
        let me = sh::my_pe();
        for i in 1..=iters {
            if me == 0 {
                sh::p(flag, i, peer);
                sh::wait_until(flag as *const i32, sh::CMP_EQ, i);
            } else {
                sh::wait_until(flag as *const i32, sh::CMP_EQ, i);
                sh::p(flag, i, peer);
            }
        }
    }
    /// [iters] — device barrier_all latency.
    fn bench_barrier(a) {
        for _ in 0..*a {
            sh::barrier_all();
        }
    }
}
