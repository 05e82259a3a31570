//! Ring shift: each PE writes its PE number into a symmetric int on the next PE, barriers, and prints
//! what it received. Runs on GPUs when present (the kernel is PTX), else on the CPU backend.
//!
//!     rshmrun -np 4 target/release/ring_shift

use rshmem::kernels::{KernelSet, LaunchConfig};
use rshmem_example_kernels::RingShift;

static KERNELS: KernelSet =
    KernelSet::new(rshmem_example_kernels::CPU_KERNELS, include_str!(concat!(env!("OUT_DIR"), "/example_kernels.ptx")));

fn main() -> Result<(), rshmem::Error> {
    let ring_shift = KERNELS.kernel::<RingShift>("ring_shift")?;
    rshmem::init()?;
    let me = rshmem::my_pe();
    // Collective: one i32 in every PE's symmetric heap.
    let destination = rshmem::Sym::<i32>::zeroed()?;
    let cfg = LaunchConfig::new(1, 1);
    // SAFETY: ring_shift's argument is a symmetric int, and destination is a live one (freed only
    // after the stream is synchronized below).
    unsafe { ring_shift.launch(cfg, &RingShift { destination: destination.dev_ptr() })? };
    cfg.stream.synchronize()?;
    rshmem::barrier_all()?;
    println!("{me}: received message {}", destination.read()?);
    destination.free()?;
    rshmem::finalize()
}
