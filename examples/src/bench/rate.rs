//! `--cases rate`: the message rate of puts and `p`s that thread 0 of each block issues back to back.

use crate::cli::{Cli, Opt};
use crate::harness::{check, poison, result, time_kernel, Ctx};
use rshmem::kernels::LaunchConfig;
use rshmem_example_kernels::BenchRate;

/// `--cases rate`: operations per second of puts and `p`s issued back to back by one thread per block.
pub fn run(c: &Ctx, cli: &Cli) -> Result<(), rshmem::Error> {
    let grids = cli.rate_grids.clone().unwrap_or(if c.gpu { vec![1, 32, 132] } else { vec![1, 4] });
    let sizes = cli.rate_sizes.clone().unwrap_or(vec![8, 64, 512, 4096]);
    let ops = cli.rate_ops.unwrap_or(match (c.gpu, c.o.route) {
        (false, _) => 2000,
        (true, "remote") => 20_000,
        (true, _) => 200_000,
    });
    let mut shown = false;
    for &grid in &grids {
        // (kind, bytes): the puts, then p of 8 bytes.
        for (kind, bytes) in sizes.iter().map(|&b| (0u32, b)).chain([(1u32, 8usize)]) {
            let case = if kind == 0 { "msg_rate_put" } else { "msg_rate_p" };
            // Each block cycles through up to 64 slots of its own.
            let slots = (c.maxb / (grid.max(1) as usize * bytes.max(8))).min(64);
            if grid == 0 || bytes == 0 || slots == 0 {
                if c.me == 0 {
                    println!("# {case} {bytes} B from {grid} blocks left out: {grid} x {bytes} bytes exceed --max-bytes {}", c.maxb);
                }
                continue;
            }
            let per = (ops / grid as u64).max(1);
            let used = (per as usize).min(slots);
            let len = grid as usize * slots * bytes;
            poison(c, len)?;
            if c.me == 0 {
                if !shown {
                    println!("# message rate: thread 0 of each block, {ops} operations per launch in all, then one quiet per block");
                    shown = true;
                }
                let args = BenchRate { dst: c.rbuf.dev_ptr(), src: c.sbuf.dev_ptr(), bytes: bytes as u64, per_block: per, slots: slots as u64, peer: c.peer, kind };
                // SAFETY: bench_rate's documented arguments: block b writes the slots
                // [(b * slots) * bytes, (b * slots + slots) * bytes) of rbuf from the same bytes of sbuf,
                // inside the grid * slots * bytes <= maxb bytes of both.
                let ms = unsafe { time_kernel(c.k.rate, LaunchConfig::new(grid, 1), &args, c.reps)? };
                let o = Opt { grid, threads: 1, ..c.o };
                result(case, "thread", bytes, &o, (per * grid as u64) as f64 / ms / 1e3, "Mops");
            }
            rshmem::barrier_all()?;
            let n = if kind == 0 { bytes } else { 8 };
            let ranges: Vec<(usize, usize)> = (0..grid as usize).flat_map(|b| (0..used).map(move |k| ((b * slots + k) * bytes, n))).collect();
            check(c, &format!("{case} {bytes} B from {grid} blocks"), len, &ranges)?;
        }
    }
    Ok(())
}
