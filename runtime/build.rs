//! Compiles the device library (crate rshmem-device) to PTX; the CUDA backend embeds it and links it
//! with the modules it loads.
fn main() {
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../device");
    rshmem_ptxbuild::build("rshmem-device", &dir, "sm_90", "rshmem_device.ptx");
}
