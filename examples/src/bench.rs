//! rshmem-bench: device-initiated put/get bandwidth, p/g/atomic latency, ping-pong and barrier latency
//! between PE 0 and PE 1, the same cases as ../shared/anchor/nvshmem_bench.cu measures for NVSHMEM;
//! on the CPU backend also a plain memcpy in the same run, for scale. Each figure is the median of
//! several timed repeats after a warm-up, on random data.
//!
//!     rshmrun -np 2 target/release/rshmem-bench [--quick]

use rshmem::kernels::KernelSet;

static K: KernelSet = KernelSet::new(rshmem_example_kernels::CPU_KERNELS, include_str!(concat!(env!("OUT_DIR"), "/example_kernels.ptx")));

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() -> Result<(), rshmem::Error> {
    let quick = std::env::args().any(|a| a == "--quick");
    rshmem::init()?;
    let (me, n) = (rshmem::my_pe(), rshmem::n_pes());
    if n < 2 {
        return Err(rshmem::Error::new("rshmem-bench needs at least 2 PEs (rshmrun -np 2 ...)"));
    }
    let gpu = rshmem::backend_name()? == "cuda";
    let peer = ((me + 1) % n) as u64;
    let maxb: usize = if gpu { 256 << 20 } else if quick { 4 << 20 } else { 64 << 20 };
    let sbuf = rshmem::malloc(maxb)?;
    let rbuf = rshmem::malloc(maxb)?;
    // Random source data, poisoned destination.
    let mut x = 0x9E3779B97F4A7C15u64 ^ me as u64;
    let data: Vec<u8> = (0..maxb).map(|_| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 }).collect();
    // SAFETY: both buffers are symmetric allocations of maxb bytes.
    unsafe {
        rshmem::copy_in(sbuf, &data)?;
        rshmem::copy_in(rbuf, &vec![0xA5; maxb])?;
    }
    rshmem::barrier_all()?;
    let reps = if quick { 3 } else { 5 };
    let (grid, block) = if gpu { (132u32, 512u32) } else { (1u32, 2u32) };
    let backend = if gpu { "cuda" } else { "cpu" };
    if me == 0 {
        println!("# rshmem-bench: {backend} backend, {n} PEs, grid {grid} x {block} threads, median of {reps}");
        println!("{:<10} {:>12} {:>12} {:>12}", "bytes", "put_GBps", "get_GBps", "memcpy_GBps");
    }
    let mut bytes = 64usize << 10;
    while bytes <= maxb {
        if me == 0 {
            let iters: u64 = if bytes >= 16 << 20 { 10 } else { 50 };
            let g = if gpu { grid } else { 1 };
            let args = |peer: u64| [rbuf as u64, sbuf as u64, bytes as u64, iters, peer];
            K.run("bench_put_bw", g, block, &args(peer))?; // warm-up
            let put = median((0..reps).map(|_| K.run_timed("bench_put_bw", g, block, &args(peer)).unwrap()).collect());
            K.run("bench_get_bw", g, block, &args(peer))?;
            let get = median((0..reps).map(|_| K.run_timed("bench_get_bw", g, block, &args(peer)).unwrap()).collect());
            let gbps = |ms: f64| bytes as f64 * iters as f64 / ms / 1e6;
            let memcpy = if gpu {
                String::from("-")
            } else {
                let src = &data[..bytes];
                let mut dst = vec![0u8; bytes];
                let t = median(
                    (0..reps)
                        .map(|_| {
                            let s = std::time::Instant::now();
                            for _ in 0..iters {
                                dst.copy_from_slice(std::hint::black_box(src));
                            }
                            std::hint::black_box(&dst);
                            s.elapsed().as_secs_f64() * 1e3
                        })
                        .collect(),
                );
                format!("{:.1}", gbps(t))
            };
            println!("{bytes:<10} {:>12.1} {:>12.1} {:>12}", gbps(put), gbps(get), memcpy);
        }
        rshmem::barrier_all()?;
        bytes *= 4;
    }
    // Latencies.
    let flag = rshmem::calloc(4, 8)?;
    let out = rshmem::malloc(8)?;
    rshmem::barrier_all()?;
    let it: u64 = if gpu { 10000 } else if quick { 2000 } else { 20000 };
    if me == 0 {
        let us = |ms: f64| ms * 1e3 / it as f64;
        K.run("bench_p_lat", 1, 1, &[rbuf as u64, 100, peer])?;
        let p = median((0..reps).map(|_| K.run_timed("bench_p_lat", 1, 1, &[rbuf as u64, it, peer]).unwrap()).collect());
        let g = median((0..reps).map(|_| K.run_timed("bench_g_lat", 1, 1, &[sbuf as u64, it, peer, out as u64]).unwrap()).collect());
        let a = median((0..reps).map(|_| K.run_timed("bench_amo_lat", 1, 1, &[flag as u64, it, peer, out as u64]).unwrap()).collect());
        println!("p+quiet latency_us={:.3}", us(p));
        println!("g latency_us={:.3}", us(g));
        println!("atomic_fetch_add latency_us={:.3}", us(a));
    }
    rshmem::barrier_all()?;
    // Ping-pong (PE 0 <-> PE 1; other PEs idle).
    // SAFETY: flag is symmetric, 32 bytes.
    unsafe { rshmem::copy_in(flag, &[0u8; 32])? };
    rshmem::barrier_all()?;
    if me < 2 {
        let pp_peer = 1 - me as u64;
        let ms = K.run_timed("bench_pingpong", 1, 1, &[flag as u64, it, pp_peer])?;
        if me == 0 {
            println!("pingpong half-RTT_us={:.3}", ms * 1e3 / it as f64 / 2.0);
        }
    }
    rshmem::barrier_all()?;
    K.run("bench_barrier", 1, 1, &[10])?;
    rshmem::barrier_all()?;
    let ms = K.run_timed("bench_barrier", 1, 1, &[it])?;
    if me == 0 {
        println!("device barrier_all latency_us={:.3}", ms * 1e3 / it as f64);
    }
    rshmem::barrier_all()?;
    let t = std::time::Instant::now();
    let hb = 200;
    for _ in 0..hb {
        rshmem::barrier_all()?;
    }
    if me == 0 {
        println!("host barrier_all latency_us={:.3}", t.elapsed().as_secs_f64() * 1e6 / hb as f64);
    }
    rshmem::finalize()
}
