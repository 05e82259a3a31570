//! `--cases all_pairs`: every PE puts to every other PE at once (4 PEs and more is where this matters).

use crate::harness::{median, result, Ctx};
use rshmem::SymSlice;
use rshmem_example_kernels::BenchAllPairs;

pub fn run(c: &Ctx) -> Result<(), rshmem::Error> {
    let Ctx { k, o, me, n, sbuf, maxb, reps, wide, .. } = *c;
    // All pairs: every PE puts to every other PE at once (4+ PEs is where this matters).
    {
        let np = n as usize;
        let top = 64usize << 20;
        let recv = SymSlice::<u8>::zeroed(np * top.min(maxb / np))?;
        let times = SymSlice::<f64>::zeroed(np)?;
        for &bytes in &[64usize << 10, 1 << 20, 16 << 20, 64 << 20] {
            if bytes > maxb / np || bytes > top {
                continue;
            }
            let iters: u64 = if bytes >= 16 << 20 { 10 } else { 20 };
            if o.grid < n as u32 - 1 {
                break;
            }
            let args = BenchAllPairs { dst: recv.dev_ptr(), src: sbuf.dev_ptr(), bytes: bytes as u64, iters };
            rshmem::barrier_all()?;
            // SAFETY: bench_all_pairs' documented arguments: recv holds n_pes x bytes and sbuf
            // maxb >= bytes bytes, live symmetric buffers; the launch is waited for below.
            unsafe { k.all_pairs.launch(wide, &args)? };
            wide.stream.synchronize()?;
            let mut v = vec![];
            for _ in 0..reps {
                rshmem::barrier_all()?;
                // SAFETY: as above (launch_timed waits for the kernel).
                v.push(unsafe { k.all_pairs.launch_timed(wide, &args)? });
            }
            let mine = median(v);
            times.put_at(0, me as usize, &[mine])?;
            rshmem::barrier_all()?;
            if me == 0 {
                let t = times.to_vec()?;
                let bw: Vec<f64> = t.iter().map(|ms| (np - 1) as f64 * bytes as f64 * iters as f64 / ms / 1e6).collect();
                result("all_pairs_put_bw", "block", bytes, &o, bw.iter().cloned().fold(f64::INFINITY, f64::min), "GBps");
                result("all_pairs_put_bw_total", "block", bytes, &o, bw.iter().sum(), "GBps");
            }
            rshmem::barrier_all()?;
        }
        times.free()?;
        recv.free()?;
    }
    Ok(())
}
