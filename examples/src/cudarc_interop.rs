//! cudarc interoperability: a kernel launched with cudarc on a cudarc stream fills a symmetric buffer,
//! then rshmem's on-stream sum reduction runs on that same stream, and cudarc copies the result back.
//! The symmetric buffers are rshmem's (`SymSlice<f32>`), seen by cudarc as `CudaSlice<f32>` without a
//! copy (`SymSlice::cuda_view`). The kernel is plain PTX (`fill_f32.ptx`: out[i] = base + i), as a
//! program would get from nvcc or NVRTC.
//!
//! On the CPU backend (no GPU) the same computation takes the host path: the host fills the buffer and
//! the reduction is the host collective. Either way every PE checks every value.
//!
//!     rshmrun -np 2 target/release/cudarc_interop

use rshmem::coll::{ReduceOp, Team};
use rshmem::SymSlice;

/// Values per PE.
const N: usize = 1 << 16;
const FILL_PTX: &str = include_str!("fill_f32.ptx");

fn main() -> Result<(), Box<dyn std::error::Error>> {
    rshmem::init()?;
    let (me, n) = (rshmem::my_pe(), rshmem::n_pes());
    let src = SymSlice::<f32>::zeroed(N)?;
    let dst = SymSlice::<f32>::zeroed(N)?;
    let base = 1000.0 * me as f32;
    let (path, got) = if rshmem::backend_name()? == "cuda" {
        ("GPU: cudarc kernel and copy, rshmem reduction on the cudarc stream".to_string(), on_gpu(&src, &dst, base)?)
    } else {
        let filled: Vec<f32> = (0..N).map(|i| base + i as f32).collect();
        src.copy_from(&filled)?;
        dst.reduce(Team::WORLD, ReduceOp::Sum, &src)?;
        ("CPU backend, host path".to_string(), dst.to_vec()?)
    };
    // Sum over PEs p of (1000 p + i): exact in f32 for these sizes (below 2^24).
    let pes = (0..n).map(|p| 1000.0 * p as f32).sum::<f32>();
    let want = |i: usize| pes + (n as usize * i) as f32;
    if let Some(i) = (0..N).find(|&i| got[i] != want(i)) {
        return Err(format!("PE {me}: value {i} is {}, expected {}", got[i], want(i)).into());
    }
    println!("PE {me}: cudarc interop ok ({path}): {N} sums of {n} PEs' values");
    dst.free()?;
    src.free()?;
    rshmem::finalize()?;
    Ok(())
}

/// The GPU path: cudarc kernel, rshmem collective and cudarc copy, all on one cudarc stream.
fn on_gpu(src: &SymSlice<f32>, dst: &SymSlice<f32>, base: f32) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    use rshmem::interop::cudarc::driver::{LaunchConfig, PushKernelArg};
    use rshmem::interop::cudarc::nvrtc::Ptx;
    let ctx = rshmem::interop::context()?;
    let stream = ctx.new_stream()?;
    let fill = ctx.load_module(Ptx::from_src(FILL_PTX))?.load_function("fill_f32")?;
    {
        let mut view = src.cuda_view(&stream)?;
        let count = N as u32;
        let mut launch = stream.launch_builder(&fill);
        launch.arg(&mut *view).arg(&count).arg(&base);
        // SAFETY: fill_f32(float *out, unsigned n, float base) writes out[0..n), and the view holds
        // N = n floats of this PE's symmetric buffer.
        unsafe { launch.launch(LaunchConfig::for_num_elems(count)) }?;
    }
    // rshmem's collective on the cudarc stream: after the fill, before the copy below.
    let on = rshmem::interop::stream(&stream);
    dst.reduce_on_stream(Team::WORLD, ReduceOp::Sum, src, on)?;
    // Wait with rshmem (it polls) before cudarc's copy into pageable memory, which blocks in the
    // driver until the stream gets there: with PEs on other nodes the reduction needs the proxy
    // thread's own CUDA calls to get through meanwhile, and a thread blocked in the driver kept them
    // from it (the example hung across two simulated nodes on 2 x H100, 2026-11-27).
    on.synchronize()?;
    let out = stream.clone_dtoh(&*dst.cuda_view(&stream)?)?;
    Ok(out)
}
