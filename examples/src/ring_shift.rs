//! Ring shift: each PE writes its PE number into a symmetric int on the next PE, barriers, and prints
//! what it received. Runs on GPUs when present (the kernel is PTX), else on the CPU backend.
//!
//!     rshmrun -np 4 target/release/ring_shift

use rshmem::kernels::KernelSet;

static KERNELS: KernelSet =
    KernelSet::new(rshmem_example_kernels::CPU_KERNELS, include_str!(concat!(env!("OUT_DIR"), "/example_kernels.ptx")));

fn main() -> Result<(), rshmem::Error> {
    rshmem::init()?;
    let me = rshmem::my_pe();
    let destination = rshmem::malloc(std::mem::size_of::<i32>())?;
    // SAFETY: ring_shift takes one argument, a symmetric int, and destination is a live one.
    unsafe { KERNELS.run("ring_shift", 1, 1, &[destination as u64])? };
    rshmem::barrier_all()?;
    let mut msg = [0u8; 4];
    // SAFETY: destination is a live symmetric allocation of 4 bytes on this PE.
    unsafe { rshmem::copy_out(&mut msg, destination)? };
    println!("{me}: received message {}", i32::from_le_bytes(msg));
    rshmem::free(destination)?;
    rshmem::finalize()
}
