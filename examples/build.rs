// The example kernels as PTX for the CUDA backend.
fn main() {
    rshmem_ptxbuild::PtxBuilder::new("kernels").file_name("example_kernels.ptx").build();
}
