//! `--cases barrier`: the device barrier_all and sync_all of every PE, and the flag exchange alone
//! (`x_barrier_raw`, GPUs of one node).

use crate::harness::{median, result, Ctx};
use rshmem::SymSlice;
use rshmem_example_kernels::{BenchBarrier, XBarrierRaw};

pub fn run(c: &Ctx) -> Result<(), rshmem::Error> {
    let Ctx { k, o, me, n, gpu, reps, one, it, .. } = *c;
    // Device barriers (all PEs).
    for (kind, case) in [(0u32, "barrier_all"), (1, "sync_all")] {
        // SAFETY: bench_barrier takes no pointers; every PE launches it alike.
        unsafe { k.barrier.launch(one, &BenchBarrier { iters: 10, kind, _pad: 0 })? };
        one.stream.synchronize()?;
        let mut v = vec![];
        for _ in 0..reps {
            rshmem::barrier_all()?;
            // SAFETY: as above.
            v.push(unsafe { k.barrier.launch_timed(one, &BenchBarrier { iters: it, kind, _pad: 0 })? });
        }
        if me == 0 {
            result(case, "-", 0, &o, median(v) * 1e3 / it as f64, "us");
        }
    }
    // Analysis variant: the flag exchange alone.
    {
        let slots = SymSlice::<u64>::zeroed(n as usize)?;
        rshmem::barrier_all()?;
        // GPUs only: it spins without yielding, which host threads sharing cores cannot afford.
        if gpu && n <= 8 && rshmem::team_n_pes(rshmem_device::TEAM_NODE) == n {
            // SAFETY: x_barrier_raw's documented arguments: slots holds a u64 per PE, and every PE's
            // heap is mapped here (all on this node); the launch is waited for below.
            unsafe { k.barrier_raw.launch(one, &XBarrierRaw { slots: slots.dev_ptr(), iters: 10 })? };
            one.stream.synchronize()?;
            let mut v = vec![];
            for _ in 0..reps {
                slots.copy_from(&vec![0u64; n as usize])?;
                rshmem::barrier_all()?;
                // SAFETY: as above (launch_timed waits for the kernel).
                v.push(unsafe { k.barrier_raw.launch_timed(one, &XBarrierRaw { slots: slots.dev_ptr(), iters: it })? });
            }
            if me == 0 {
                result("x_barrier_raw", "-", 0, &o, median(v) * 1e3 / it as f64, "us");
            }
        }
        rshmem::barrier_all()?;
        slots.free()?;
    }
    Ok(())
}
