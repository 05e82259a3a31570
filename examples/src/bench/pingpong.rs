//! `--cases pingpong`: PE 0 and its partner bounce a flag (and a put with a signal), half a round trip
//! per iteration.

use crate::harness::{median, result, Ctx};
use rshmem::kernels::DevPtr;
use rshmem_example_kernels::BenchPingpong;

pub fn run(c: &Ctx) -> Result<(), rshmem::Error> {
    let Ctx { k, o, me, peer, in_pair, reps, lat, one, it, .. } = *c;
    // Ping-pongs (PE 0 <-> PE 1).
    for (kind, case) in [(0u32, "pingpong"), (1, "put_signal_pingpong")] {
        // The flag at byte 0 of lat, the put's 8 bytes at 1024, the signal at 2048.
        let args = BenchPingpong {
            flag: DevPtr::from_addr(lat.addr()),
            data: DevPtr::from_addr(lat.addr_of(1024)?),
            sig: DevPtr::from_addr(lat.addr_of(2048)?),
            iters: it as i32,
            peer,
            kind,
            _pad: 0,
        };
        let mut v = vec![];
        for _ in 0..reps {
            lat.copy_from(&[0u8; 4096])?;
            rshmem::barrier_all()?;
            if in_pair {
                // SAFETY: bench_pingpong's documented arguments: the flag, data and signal lie in
                // lat's first 4096 bytes (zeroed above), a live symmetric buffer.
                v.push(unsafe { k.pingpong.launch_timed(one, &args)? });
            }
            rshmem::barrier_all()?;
        }
        if me == 0 {
            result(case, "-", if kind == 0 { 4 } else { 8 }, &o, median(v) * 1e3 / it as f64 / 2.0, "us");
        }
    }
    Ok(())
}
