// The test kernels as PTX, for the CUDA backend (the CPU backend calls the same functions directly).
fn main() {
    rshmem_ptxbuild::PtxBuilder::new("kernels").file_name("test_kernels.ptx").build();
    rshmem_ptxbuild::PtxBuilder::new("soak-kernels").file_name("soak_kernels.ptx").build();
}
