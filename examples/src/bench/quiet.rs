//! `--cases quiet`: the every-thread-quiet kernel beside the same with one quiet per block and one per
//! grid.

use crate::cli::{Cli, Opt};
use crate::harness::{check, poison, result, time_kernel, Ctx};
use rshmem::kernels::LaunchConfig;
use rshmem::Sym;
use rshmem_example_kernels::BenchQuiet;

/// `--cases quiet`: the every-thread-quiet kernel beside the same with fewer quiets.
pub fn run(c: &Ctx, cli: &Cli) -> Result<(), rshmem::Error> {
    let grid = cli.quiet_grid.unwrap_or(if c.gpu { 32 } else { 2 });
    let threads = cli.quiet_threads.unwrap_or(if c.gpu { 1024 } else { 4 });
    let calls = cli.quiet_calls.max(1);
    let sizes = cli.quiet_sizes.clone().unwrap_or(vec![1 << 20, 16 << 20, 256 << 20]);
    let arrivals = Sym::<u32>::zeroed()?;
    rshmem::barrier_all()?;
    for &total in &sizes {
        let chunk = (total / (grid as usize * calls as usize)) & !7;
        let covered = grid as usize * calls as usize * chunk;
        if total > c.maxb || chunk == 0 {
            if c.me == 0 {
                println!("# quiet_bw at {total} bytes left out: over --max-bytes {} or under 8 bytes per call", c.maxb);
            }
            continue;
        }
        for (mode, case) in [(0u32, "quiet_bw_all"), (1, "quiet_bw_block"), (2, "quiet_bw_one")] {
            poison(c, covered)?;
            if c.me == 0 {
                let args = BenchQuiet { dst: c.rbuf.dev_ptr(), src: c.sbuf.dev_ptr(), total: total as u64, calls, arrivals: arrivals.dev_ptr(), peer: c.peer, mode };
                // SAFETY: bench_quiet's documented arguments: the grid x calls chunks cover
                // covered <= total <= maxb bytes of both buffers; arrivals is a symmetric u32 that only
                // this kernel touches.
                let ms = unsafe { time_kernel(c.k.quiet, LaunchConfig::new(grid, threads), &args, c.reps)? };
                let o = Opt { grid, threads, ..c.o };
                result(case, "block", total, &o, covered as f64 / ms / 1e6, "GBps");
            }
            rshmem::barrier_all()?;
            check(c, &format!("{case} at {total} bytes"), covered, &[(0, covered)])?;
        }
    }
    arrivals.free()
}
