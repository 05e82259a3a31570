// The test kernels as PTX, for the CUDA backend (the CPU backend calls the same functions directly).
fn main() {
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("kernels");
    rshmem_ptxbuild::build("rshmem-test-kernels", &dir, "sm_90", "test_kernels.ptx");
    rshmem_ptxbuild::build("rshmem-soak-kernels", &dir.with_file_name("soak-kernels"), "sm_90", "soak_kernels.ptx");
}
