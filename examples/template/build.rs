// Compiles the kernel crate in kernels/ to PTX (nightly rustc) into $OUT_DIR/my_app_kernels.ptx.
fn main() {
    rshmem_ptxbuild::PtxBuilder::new("kernels").build();
}
