//! Tells the crates that depend on this one where its sources and C headers are (`links =
//! "rshmem_device"`: their build scripts read DEP_RSHMEM_DEVICE_ROOT and DEP_RSHMEM_DEVICE_INCLUDE).
//! rshmem's build script compiles this crate to PTX from there, wherever cargo keeps it.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR for build scripts");
    println!("cargo::metadata=root={dir}");
    println!("cargo::metadata=include={dir}/include");
    println!("cargo::rerun-if-changed=build.rs");
}
