//! Compiles the device library (crate rshmem-device) to PTX; the CUDA backend embeds it and links it
//! with the modules it loads. rshmem-device's build script says where its sources are (`links`:
//! DEP_RSHMEM_DEVICE_ROOT), wherever cargo has them: this workspace, a git checkout, or a package
//! unpacked from a registry.
fn main() {
    let Some(device) = std::env::var_os("DEP_RSHMEM_DEVICE_ROOT") else {
        println!("cargo::error=DEP_RSHMEM_DEVICE_ROOT is not set: rshmem-device's build script (links = \"rshmem_device\") did not run before rshmem's");
        std::process::exit(0)
    };
    rshmem_ptxbuild::PtxBuilder::new(device).file_name("rshmem_device.ptx").build();
}
