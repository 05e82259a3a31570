//! `--posting`: what posting a WQE costs the device side (IBGDA), per thread, block and grid.

use crate::cli::Opt;
use crate::harness::{median, result, Kernels};
use rshmem::kernels::LaunchConfig;
use rshmem::SymSlice;
use rshmem_example_kernels::BenchPost;

/// `--posting`: what posting costs the device side. One `p` to the partner per iteration: through
/// IBGDA one inline RDMA WRITE WQE, built, written into the send queue and announced (doorbell record,
/// doorbell) by the calling thread (the lanes of a warp reserve and ring together). Reports ns per WQE
/// and WQEs per second for one thread (`post_1thread`), one block (`post_block`, one SM, `--threads`)
/// and the grid (`post_grid`, `--grid` blocks of each of `--posting-threads`), then says whether the
/// grid's rate never fell as threads were added. With RSHMEM_IBGDA_EMULATOR=device the queues are in
/// GPU memory and the NIC is a GPU kernel that completes every WQE without moving data (what posting
/// costs on a real ConnectX); with `ack` the same on a host thread over pinned host memory. The figures
/// are the posting code's and the harness's, not a NIC's; the delivered values are not checked.
pub fn run(k: &Kernels, o: &Opt, me: i32, peer: i32, gpu: bool, sweep: &[u32]) -> Result<(), rshmem::Error> {
    let most = sweep.iter().copied().chain([o.threads]).max().unwrap_or(1);
    let words = (o.grid * most).max(1) as usize;
    let dst = SymSlice::<u64>::zeroed(words)?;
    let span = SymSlice::<u64>::zeroed(2)?;
    rshmem::barrier_all()?;
    if me == 0 {
        let nic = std::env::var("RSHMEM_IBGDA_EMULATOR").unwrap_or_else(|_| "full".into());
        // The send queues' size and count, read with the runtime's own parsers (init already refused a
        // bad value; unset: the runtime's defaults, 512 WQEBBs and 2 QPs): the WQEs per thread are
        // chosen so that no queue fills during the posting phase.
        use rshmem::config::env;
        let depth = std::env::var(env::IBGDA_QP_DEPTH).ok().and_then(|v| env::parse_ibgda_depth(&v).ok()).map_or(512, |log| 1u64 << log);
        let qps = std::env::var(env::IBGDA_QPS_PER_PE).ok().and_then(|v| env::parse_ibgda_qps(&v).ok()).map_or(2, u64::from);
        println!("# posting: route={} RSHMEM_IBGDA_EMULATOR={nic} RSHMEM_IBGDA_QPS_PER_PE={qps} RSHMEM_IBGDA_QP_DEPTH={depth}", o.route);
        println!("# posting: *_ns and *_rate time the posting phase (first p to last, the global timer, before the quiet); *_kernel_ns the whole kernel with its quiet (waiting for the NIC)");
        let mut cases = vec![("post_1thread", 1u32, 1u32), ("post_block", 1, o.threads)];
        cases.extend(sweep.iter().map(|&t| ("post_grid", o.grid, t)));
        let mut grid_rates = vec![];
        for (case, grid, block) in cases {
            let threads = grid as u64 * block as u64;
            // A thread posts through its warp's QP: at most half of the QPs' WQEBBs during the phase.
            let used = qps.min(threads.div_ceil(32)).max(1);
            let per = if gpu { (depth / 2 * used / threads).clamp(8, 1000) } else { 100 };
            let args = BenchPost { dst: dst.dev_ptr(), per_thread: per, peer, _pad: 0, span: span.dev_ptr() };
            let cfg = LaunchConfig::new(grid, block);
            // SAFETY: bench_post's documented arguments: dst holds a u64 per thread of the launch
            // (words >= grid * block), span two u64, both live until the frees below; each launch is
            // waited for (launch_timed) before the next.
            unsafe { k.post.launch(cfg, &args)? };
            cfg.stream.synchronize()?;
            let (mut kernel, mut phase) = (vec![], vec![]);
            for _ in 0..o.reps {
                span.copy_from(&[0, 0])?;
                // SAFETY: as above.
                kernel.push(unsafe { k.post.launch_timed(cfg, &args)? });
                let s = span.to_vec()?;
                if s[1] != 0 {
                    phase.push(s[1].saturating_sub(!s[0]) as f64 / 1e6);
                }
            }
            let wqes = threads as f64 * per as f64;
            let p = Opt { grid, threads: block, ..*o };
            let kernel_ms = median(kernel);
            // Where the device has no timer (CPU backend) the kernel's time stands for the phase.
            let ms = if phase.is_empty() { kernel_ms } else { median(phase) };
            let rate = wqes / ms / 1e3;
            result(&format!("{case}_ns"), "thread", 8, &p, ms * 1e6 / wqes, "ns");
            result(&format!("{case}_rate"), "thread", 8, &p, rate, "MWQE/s");
            result(&format!("{case}_kernel_ns"), "thread", 8, &p, kernel_ms * 1e6 / wqes, "ns");
            if case == "post_grid" {
                grid_rates.push((block, rate));
            }
        }
        let fell: Vec<String> = grid_rates.windows(2).filter(|w| w[1].1 < w[0].1).map(|w| format!("{}x{} ({:.3}) < {}x{} ({:.3})", o.grid, w[1].0, w[1].1, o.grid, w[0].0, w[0].1)).collect();
        if fell.is_empty() {
            println!("# posting: post_grid never lower with more threads ({} cases)", grid_rates.len());
        } else {
            println!("# posting: post_grid LOWER with more threads: {}", fell.join(", "));
        }
    }
    rshmem::barrier_all()?;
    span.free()?;
    dst.free()
}
