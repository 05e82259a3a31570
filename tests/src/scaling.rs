//! `remote_scaling` (issue 19, tests/tests/remote_scaling.rs): the same bytes sent to a PE on another
//! node by 32 concurrent streams of small puts must not take longer than by one stream.
//!
//! The shapes are those of NVSHMEM's shmem_put_bw at 1 x 32 and 32 x 32 (issue 19's "more blocks never
//! slower"): in every round one stream puts P bytes, or 32 streams put P / 32 bytes each, the same
//! bytes. PE 0 sends `RSHMEM_TEST_SCALE_BYTES` (default 16 MiB) of random data to the first PE on
//! another node with kernel `k_scale_put` (blocks of one thread; each block puts its share in
//! putmem_nbi calls of one size, then quiets):
//!   one stream      1 block, puts of 32 x `RSHMEM_TEST_SCALE_PIECE` (default 32 x 4 KiB = 128 KiB);
//!   32 streams      32 blocks, puts of `RSHMEM_TEST_SCALE_PIECE` (4 KiB), 32 times as many requests;
//!   one small stream  1 block, puts of `RSHMEM_TEST_SCALE_PIECE` (for the record: the per-request cost
//!                   without concurrency).
//! Each launch is timed on the host (it returns when every block has quieted); the shapes alternate,
//! `RSHMEM_TEST_SCALE_REPS` (default 5) of each, and the best of each is printed as
//!   `PE 0: remote_scaling: B bytes to PE T: one stream of P1-byte puts X ms, 32 streams of P-byte puts
//!    Y ms, one stream of P-byte puts Z ms (best of R); ratio 32 streams / one stream Y/X`
//! `RSHMEM_TEST_SCALE_SHAPE=one` or `many` runs only that shape (its stage counters then count it alone).
//! Before every launch the target poisons its buffer, after it the target checks every byte.

use super::{barrier, ck, die, fill, get_bytes, put_bytes, run, Ctx};
use std::time::Instant;

fn env_num(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| die(format!("{name}={v:?} is not a number"))),
        Err(_) => default,
    }
}

const STREAMS: usize = 32;

pub fn scenario(c: &Ctx) {
    let total = env_num("RSHMEM_TEST_SCALE_BYTES", 16 << 20);
    let piece = env_num("RSHMEM_TEST_SCALE_PIECE", 4096);
    let reps = env_num("RSHMEM_TEST_SCALE_REPS", 5).max(1);
    // Which shapes run: all (default), or one of them (`one`, `many`): a job's stage counters then
    // count that shape alone.
    let only = std::env::var("RSHMEM_TEST_SCALE_SHAPE").unwrap_or_default();
    if !["", "all", "one", "many"].contains(&only.as_str()) {
        die(format!("RSHMEM_TEST_SCALE_SHAPE={only:?}: expected all, one or many"));
    }
    let big = STREAMS * piece;
    if piece == 0 || !total.is_multiple_of(big) {
        die(format!("remote_scaling: {total} bytes do not split into {STREAMS} streams of {piece}-byte puts and one of {big}-byte puts"));
    }
    let dst = ck(rshmem::malloc(total));
    let src = ck(rshmem::malloc(total));
    // PE 0 picks the first PE it cannot map (another node) and tells every PE.
    let choice = ck(rshmem::calloc(1, 8));
    if c.me == 0 {
        let t = (1..c.n).find(|&pe| rshmem::ptr(dst, pe as i32).is_null()).unwrap_or_else(|| die("remote_scaling: no PE on another node (run with rshmrun --nodes 2)"));
        for pe in 0..c.n {
            // SAFETY: choice is a symmetric allocation of 8 bytes; the source is 8 bytes.
            ck(unsafe { rshmem::putmem(choice, (t as u64).to_le_bytes().as_ptr(), 8, pe as i32) });
        }
    }
    barrier();
    let target = u64::from_le_bytes(get_bytes(choice, 8).try_into().unwrap()) as usize;
    barrier();
    ck(rshmem::free(choice));
    let seed = |pe: usize| c.seed ^ 0x5ca1_e000 ^ pe as u64;
    put_bytes(src, &fill(seed(c.me), total));
    let poison = fill(!seed(c.me), total);
    let want = fill(seed(0), total);
    // (blocks, put size): one stream of big puts, 32 streams of small puts, one stream of small puts.
    let shapes = [(1u32, big), (STREAMS as u32, piece), (1, piece)];
    let mut best = [f64::INFINITY; 3];
    for rep in 0..reps {
        for (k, &(grid, p)) in shapes.iter().enumerate() {
            if (only == "one" && k != 0) || (only == "many" && k != 1) {
                continue;
            }
            if c.me == target {
                put_bytes(dst, &poison);
            }
            barrier();
            if c.me == 0 {
                let t = Instant::now();
                run("k_scale_put", grid, 1, &[dst as u64, src as u64, total as u64, p as u64, target as u64]);
                best[k] = best[k].min(t.elapsed().as_secs_f64() * 1e3);
            }
            barrier();
            if c.me == target {
                let got = get_bytes(dst, total);
                if let Some(i) = (0..total).find(|&i| got[i] != want[i]) {
                    die(format!("remote_scaling: {grid} stream(s) of {p}-byte puts, repetition {rep}: byte {i} is {:#x}, PE 0 sent {:#x}", got[i], want[i]));
                }
            }
            barrier();
        }
    }
    if c.me == 0 {
        println!(
            "PE 0: remote_scaling: {total} bytes to PE {target}: one stream of {big}-byte puts {:.3} ms, {STREAMS} streams of {piece}-byte puts {:.3} ms, one stream of {piece}-byte puts {:.3} ms (best of {reps}); ratio {STREAMS} streams / one stream {:.3}",
            best[0],
            best[1],
            best[2],
            best[1] / best[0]
        );
    }
    ck(rshmem::free(src));
    ck(rshmem::free(dst));
}
