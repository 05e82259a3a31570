//! Throughput of the proxy request channel on the CPU backend: P posting threads and one proxy
//! thread on a ring of 1024 slots; the proxy's callback only sums a field (the channel's own cost).
//!
//!   ring_bench [REQUESTS_PER_RUN] [POSTERS...]      (default: 2000000 requests; 1 4 16 posters)
//!
//! Prints requests per second and the proxy's mean batch (entries per tail store) for each count.

use rshmem::platform::services::HostShared;
use rshmem::transport::proxy::ring::{deadline, init_ring, op, ring_bytes, Channel, Drain, Request, COUNTERS_BYTES};
use rshmem_device::remote::proxy::{post_with, wait_completed_with, COMPLETED_OFF};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const SLOTS: usize = 1024;

fn run(total: u64, posters: u64) -> (f64, f64) {
    let mem = HostShared::host_alloc(ring_bytes(SLOTS)).expect("ring memory");
    let counters = HostShared::host_alloc(COUNTERS_BYTES).expect("counters");
    // SAFETY: fresh zeroed memory of ring_bytes(SLOTS) bytes, owned here for the whole run.
    let rref = unsafe { init_ring(mem.host_ptr(), mem.len(), SLOTS, 0) }.expect("ring");
    let ch = Channel { ring: rref.header, slots: rref.slots, ret: 0, stage: 0, chunk: 0, counters: counters.host_ptr() as u64, thread_stage: 0, flags: 0 };
    let per = total / posters;
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let (stats, sum) = std::thread::scope(|s| {
        let proxy = s.spawn(|| {
            // The proxy engine's drain loop, completing each request as it is taken.
            // SAFETY: the ring lives in `mem` for the whole scope; this is its only drain, and `completed` an
            // 8-aligned word of its header, accessed atomically.
            let (mut d, completed) = unsafe { (Drain::attach(mem.host_ptr(), mem.len(), std::ptr::null(), 0).expect("drain"), std::sync::atomic::AtomicU64::from_ptr(mem.host_ptr().add(COMPLETED_OFF) as *mut u64)) };
            let mut sum = 0u64;
            let st = d
                .run(
                    &mut sum,
                    || stop.load(Ordering::Acquire),
                    |sum, e| {
                        *sum = sum.wrapping_add(e.req.value);
                        // In order: the ring's `completed` (release).
                        completed.store(e.seq, Ordering::Release);
                        Ok(())
                    },
                    |_| Ok(()),
                )
                .expect("drain");
            (st, sum)
        });
        let hs: Vec<_> = (0..posters)
            .map(|who| {
                s.spawn(move || {
                    let ring = &ch;
                    let mut last = 0;
                    for i in 0..per {
                        let r = Request { op: op::PUT_INLINE, pe: who as u32, offset: 8 * i, len: 8, value: 1, ..Request::default() };
                        // SAFETY: the ring outlives the scope.
                        last = unsafe { post_with(ring, &r, deadline(Duration::from_secs(60))) }.expect("post");
                    }
                    // SAFETY: as above.
                    unsafe { wait_completed_with(ring, last, deadline(Duration::from_secs(60))) }.expect("wait_completed");
                })
            })
            .collect();
        for h in hs {
            h.join().expect("poster");
        }
        stop.store(true, Ordering::Release);
        proxy.join().expect("proxy")
    });
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(sum, per * posters, "every request arrives once");
    (stats.requests as f64 / secs, stats.requests as f64 / stats.batches.max(1) as f64)
}

/// The ring benchmark's arguments (clap).
#[derive(clap::Parser)]
#[command(name = "ring_bench", about = "The proxy request ring's throughput on the CPU backend, by number of posting threads.")]
struct Cli {
    /// Requests per run.
    #[arg(default_value_t = 2_000_000)]
    requests_per_run: u64,
    /// Numbers of posting threads to measure (default 1 4 16).
    posters: Vec<u64>,
}

fn main() {
    use clap::Parser;
    let cli = Cli::parse();
    let total = cli.requests_per_run;
    let mut counts = cli.posters;
    if counts.is_empty() {
        counts = vec![1, 4, 16];
    }
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!("proxy ring, CPU backend: {SLOTS} slots, {total} requests per run, {cpus} CPUs available");
    println!("{:>8} {:>14} {:>12}", "posters", "requests/s", "mean batch");
    for p in counts {
        let (rate, batch) = run(total, p);
        println!("{p:>8} {rate:>14.0} {batch:>12.1}");
    }
}
