//! my-app: every PE moves 1 Mi f32 values into the next PE with a block-wide put from a kernel, checks
//! what it received from the previous PE, then does the same with host puts and gets.
//!
//!     rshmrun -np 2 target/release/my-app

use my_app_kernels::Shift;
use rshmem::kernels::{KernelSet, LaunchConfig};
use rshmem::SymSlice;

/// The kernel crate's host functions (CPU backend) and its PTX (GPUs), which build.rs made.
static KERNELS: KernelSet =
    KernelSet::new(my_app_kernels::CPU_KERNELS, include_str!(concat!(env!("OUT_DIR"), "/my_app_kernels.ptx")));

const N: usize = 1 << 20;

fn main() -> Result<(), rshmem::Error> {
    rshmem::init()?;
    let (me, n) = (rshmem::my_pe(), rshmem::n_pes());
    let prev = (me + n - 1) % n;

    // Collective: every PE allocates the same two slices, in the same order.
    let src = SymSlice::<f32>::from_slice(&vec![me as f32; N])?; // this PE's values
    let dst = SymSlice::<f32>::zeroed(N)?;

    // One block of 256 threads puts `src` into the next PE's `dst`: enqueued, then waited for.
    let shift = KERNELS.kernel::<Shift>("shift_block")?; // name and argument size checked
    let launch = LaunchConfig::new(1, 256);
    let args = Shift { dst: dst.dev_ptr(), src: src.dev_ptr(), n: N as u64 };
    // SAFETY: dst and src are live symmetric slices of N f32 on every PE, all the kernel touches; they
    // are freed only after the stream is synchronized.
    unsafe { shift.launch(launch, &args)? };
    launch.stream.synchronize()?;
    rshmem::barrier_all()?; // every PE's put has completed

    let got = dst.to_vec()?;
    if let Some(i) = got.iter().position(|&v| v != prev as f32) {
        panic!("PE {me}: value {i} is {} instead of {prev}", got[i]);
    }
    println!("PE {me}: received {N} values from PE {prev}");

    // Host-side puts and gets work on the same handles.
    src.put_at(prev, 0, &[-1.0])?; // the first value of the previous PE's src
    rshmem::barrier_all()?;
    let mut first = [0.0f32];
    src.get_at(me, 0, &mut first)?; // a get from this PE's own copy
    assert_eq!(first[0], -1.0, "PE {me}: the host put from the next PE did not arrive");
    println!("PE {me}: host put and get ok");

    dst.free()?; // collective, like the allocation
    src.free()?;
    rshmem::finalize()
}
