//! `--cases lat`: the latencies of one thread (p, g, put, get, fetch_add, compare-swap and the analysis
//! variants through the peer's address), then the atomic rate of the whole grid. PE 0 only.

use crate::harness::{result, time_kernel, Ctx};
use rshmem::kernels::DevPtr;
use rshmem_example_kernels::{BenchAmoRate, BenchLat};

pub fn run(c: &Ctx) -> Result<(), rshmem::Error> {
    let Ctx { k, o, me, peer, mapped, reps, lat, out, wide, one, it, .. } = *c;
    if me == 0 {
    for (kind, case) in [(0u32, "p_lat"), (1, "g_lat"), (2, "put_lat"), (3, "get_lat"), (4, "amo_fetch_add_lat"), (5, "amo_cswap_lat"), (6, "x_raw_st_fence_sc"), (7, "x_raw_st_fence_acqrel"), (8, "x_quiet_only"), (9, "x_raw_fetch_add")] {
        if !mapped && matches!(kind, 6 | 7 | 9) {
            continue;
        }
        let args = BenchLat { buf: lat.dev_ptr(), iters: it, out: out.dev_ptr(), peer, kind };
        // SAFETY: bench_lat's documented arguments: lat is a live symmetric buffer of at least
        // 1 MiB, out a live u64 of this PE; the analysis kinds 6, 7 and 9 only with a mapped peer.
        let ms = unsafe { time_kernel(k.lat, one, &args, reps)? };
        result(case, "-", if kind == 2 || kind == 3 { 8 } else { 4 }, &o, ms * 1e3 / it as f64, "us");
    }
    let per = if o.route == "remote" { 2u64 } else { 100 };
    let args = BenchAmoRate { ctrs: DevPtr::from_addr(lat.addr()), per_thread: per, peer, _pad: 0 };
    // SAFETY: bench_amo_rate's documented arguments: lat holds a u64 per thread of the launch.
    let ms = unsafe { time_kernel(k.amo_rate, wide, &args, reps)? };
    result("amo_rate", "-", 8, &o, (o.grid * o.threads) as f64 * per as f64 / ms / 1e3, "Mops");
    }
    Ok(())
}
