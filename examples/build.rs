// The example kernels as PTX for the CUDA backend.
fn main() {
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("kernels");
    rshmem_ptxbuild::build("rshmem-example-kernels", &dir, "sm_90", "example_kernels.ptx");
}
