//! The GPUs of this host (the kernel driver's list and the CUDA driver's view) and GPUDirect RDMA:
//! whether a NIC can reach GPU memory (dma-buf, else the peer-memory module).

use crate::probe::check::{Check, Status, CUDA_LIMIT};
use crate::probe::sysfs::{entries, is_bdf, read, under};
use rshmem_common::bounded;
use std::path::Path;

/// One GPU, as CUDA (ordinal, name, dma-buf support) or the kernel driver (/proc/driver/nvidia/gpus)
/// sees it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Gpu {
    /// The CUDA ordinal (None: seen by the kernel driver only).
    pub ordinal: Option<usize>,
    /// PCI address, lowercase (0000:17:00.0).
    pub bus_id: String,
    /// The model name (CUDA's, or the kernel driver's `Model:`), when known.
    pub name: Option<String>,
    /// CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (None: unknown).
    pub dma_buf: Option<bool>,
}

impl Gpu {
    pub(crate) fn label(&self) -> String {
        match self.ordinal {
            Some(o) => format!("GPU {o} ({})", self.bus_id),
            None => format!("GPU {}", self.bus_id),
        }
    }
}

/// What the GPU probe found.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum GpuProbe {
    /// GPUs; `cuda_error` says why CUDA could not be asked when the list comes from the kernel driver.
    Found {
        /// The GPUs, from CUDA, else from the kernel driver.
        gpus: Vec<Gpu>,
        /// The driver's CUDA version as `cuDriverGetVersion` gives it (12040 = 12.4); None: not asked.
        cuda_version: Option<i32>,
        /// Why CUDA could not be asked (None when the list is CUDA's).
        cuda_error: Option<String>,
    },
    /// No GPU on this host, and how we know.
    Missing(String),
    /// The probe did not answer (the CUDA driver hung).
    Failed(String),
}

/// The GPUs the kernel driver lists (`/proc/driver/nvidia/gpus/<bus id>`).
pub(crate) fn proc_gpus(root: &Path) -> Vec<Gpu> {
    entries(&under(root, "/proc/driver/nvidia/gpus"))
        .into_iter()
        .filter(|b| is_bdf(&b.to_ascii_lowercase()))
        .map(|b| {
            let info = read(&under(root, "/proc/driver/nvidia/gpus").join(&b).join("information")).unwrap_or_default();
            let name = info.lines().find_map(|l| l.strip_prefix("Model:")).map(|m| m.trim().to_string());
            Gpu { ordinal: None, bus_id: b.to_ascii_lowercase(), name, dma_buf: None }
        })
        .collect()
}

/// The GPUs CUDA sees, with their PCI addresses and dma-buf support, and the driver's CUDA version.
/// Creates no context (cuInit and device attributes only).
pub(crate) fn cuda_gpus() -> std::result::Result<(Vec<Gpu>, Option<i32>), String> {
    use cudarc::driver::sys as cu;
    let n = crate::platform::cuda::driver::device_count()?;
    let mut version = 0;
    // SAFETY: out-pointer to a local; device_count loaded the driver and ran cuInit.
    let cuda_version = (unsafe { cu::cuDriverGetVersion(&mut version) } == cu::CUresult::CUDA_SUCCESS).then_some(version);
    let mut gpus = Vec::new();
    for ordinal in 0..n {
        let mut dev: cu::CUdevice = 0;
        // SAFETY: out-pointer to a local; ordinal is below the device count.
        let r = unsafe { cu::cuDeviceGet(&mut dev, ordinal as i32) };
        crate::platform::cuda::driver::check(r, "cuDeviceGet").map_err(|e| e.to_string())?;
        let attr = |a: cu::CUdevice_attribute| {
            let mut v = 0;
            // SAFETY: out-pointer to a local; dev is a valid device handle (cuDeviceGet above).
            (unsafe { cu::cuDeviceGetAttribute(&mut v, a, dev) } == cu::CUresult::CUDA_SUCCESS).then_some(v)
        };
        use cu::CUdevice_attribute as A;
        let (domain, bus, device) = (
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID).unwrap_or(0),
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID).unwrap_or(0),
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID).unwrap_or(0),
        );
        // An unknown attribute (a driver older than CUDA 11.7) reads as "no dma-buf".
        let dma_buf = Some(attr(A::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED).unwrap_or(0) != 0);
        let mut buf = [0 as std::ffi::c_char; 256];
        // SAFETY: the buffer is 256 bytes and the length passed is 255, so the name stays NUL-terminated.
        let named = unsafe { cu::cuDeviceGetName(buf.as_mut_ptr(), 255, dev) } == cu::CUresult::CUDA_SUCCESS;
        let name = named.then(|| {
            // SAFETY: the driver wrote a NUL-terminated string into buf (zeroed, one byte kept spare).
            unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
        });
        gpus.push(Gpu { ordinal: Some(ordinal), bus_id: format!("{domain:04x}:{bus:02x}:{device:02x}.0"), name, dma_buf });
    }
    Ok((gpus, cuda_version))
}

/// The GPUs of this host (root "/": CUDA, bounded; else the kernel driver's list under `root`).
pub fn probe_gpus(root: &Path) -> GpuProbe {
    let listed = proc_gpus(root);
    if root != Path::new("/") {
        // A synthetic tree: only its kernel-driver list.
        return if listed.is_empty() {
            GpuProbe::Missing("no GPU in /proc/driver/nvidia/gpus".into())
        } else {
            GpuProbe::Found { gpus: listed, cuda_version: None, cuda_error: Some("not asked (synthetic tree)".into()) }
        };
    }
    match bounded(CUDA_LIMIT, cuda_gpus) {
        Some(Ok((gpus, cuda_version))) => GpuProbe::Found { gpus, cuda_version, cuda_error: None },
        Some(Err(why)) if listed.is_empty() => GpuProbe::Missing(why),
        Some(Err(why)) => GpuProbe::Found { gpus: listed, cuda_version: None, cuda_error: Some(why) },
        None => GpuProbe::Failed(format!("the CUDA driver did not answer within {} s (cuInit or a device query hangs)", CUDA_LIMIT.as_secs())),
    }
}


/// (major, minor) of the running kernel (procfs `sys/kernel/osrelease` under `root`).
pub(crate) fn kernel_version(root: &Path) -> Option<(u32, u32, String)> {
    let rel = read(&under(root, "/proc/sys/kernel/osrelease"))?;
    let mut it = rel.split(['.', '-']).map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??, rel))
}

/// The loaded peer-memory module (nvidia_peermem, or the older nv_peer_mem), if any.
pub(crate) fn peermem(root: &Path) -> Option<&'static str> {
    let modules = read(&under(root, "/proc/modules")).unwrap_or_default();
    ["nvidia_peermem", "nv_peer_mem"].into_iter().find(|m| {
        modules.lines().any(|l| l.split_whitespace().next() == Some(m)) || under(root, "/sys/module").join(m).is_dir()
    })
}

/// Whether GPU memory can be registered with the NIC: dma-buf (Linux ≥ 5.12 and the CUDA driver's
/// support on every GPU) or the peer-memory module. No GPU: SKIP (the CPU backend needs neither).
pub fn gpudirect_check(root: &Path, gpus: &GpuProbe) -> Check {
    const NAME: &str = "GPUDirect RDMA";
    let kernel = kernel_version(root);
    let kernel_ok = kernel.as_ref().is_some_and(|(a, b, _)| (*a, *b) >= (5, 12));
    let ktext = match &kernel {
        Some((_, _, rel)) if kernel_ok => format!("Linux {rel} has dma-buf (5.12 or later)"),
        Some((_, _, rel)) => format!("Linux {rel} is older than 5.12 (no dma-buf for GPU memory)"),
        None => "the kernel version is unknown".to_string(),
    };
    let pm = peermem(root);
    let pmtext = match pm {
        Some(m) => format!("peer-memory module {m} loaded"),
        None => "peer-memory module (nvidia_peermem, nv_peer_mem) not loaded".to_string(),
    };
    let fix = "use dma-buf: Linux 5.12 or later with NVIDIA's open GPU kernel modules (R515 or later; CUDA 11.7 or later), or load the peer-memory module: modprobe nvidia_peermem (ships with the driver)";
    match gpus {
        GpuProbe::Missing(why) => Check::new(
            NAME,
            Status::Skip,
            format!("no GPU ({why}), so nothing to check: GPUDirect RDMA is for a heap in GPU memory, and the CPU backend's heap is host memory. For information: {ktext}; {pmtext}"),
        ),
        GpuProbe::Failed(why) => Check::new(NAME, Status::Fail, format!("{why}; {ktext}; {pmtext}"))
            .with_fix("check the GPU driver (nvidia-smi); a persistence daemon (nvidia-persistenced) makes cuInit fast"),
        GpuProbe::Found { gpus, cuda_version, cuda_error } => {
            let cuda = cuda_version.map(|v| format!("CUDA driver {}.{}", v / 1000, (v % 1000) / 10)).unwrap_or_else(|| "the CUDA driver".into());
            let dma = match cuda_error {
                Some(why) => format!("dma-buf support of the GPUs unknown: the CUDA driver cannot be used ({why})"),
                None => {
                    let without: Vec<String> = gpus.iter().filter(|g| g.dma_buf != Some(true)).map(Gpu::label).collect();
                    if without.is_empty() {
                        format!("{cuda} reports dma-buf support on {}", if gpus.len() == 1 { "the GPU".to_string() } else { format!("all {} GPUs", gpus.len()) })
                    } else {
                        format!("{cuda} reports no dma-buf support on {} (it needs NVIDIA's open GPU kernel modules)", without.join(", "))
                    }
                }
            };
            let dma_ok = kernel_ok && cuda_error.is_none() && gpus.iter().all(|g| g.dma_buf == Some(true));
            let how = match (dma_ok, pm) {
                (true, _) => "dma-buf",
                (false, Some(_)) => "the peer-memory module",
                (false, None) => "",
            };
            if how.is_empty() {
                let mut c = Check::new(NAME, Status::Fail, format!("neither dma-buf nor a peer-memory module: {ktext}; {dma}; {pmtext}")).with_fix(fix);
                if cuda_error.is_some() {
                    c.fix = Some(format!("install the CUDA driver library (libcuda.so) that matches the kernel driver; {fix}"));
                }
                c
            } else {
                Check::new(NAME, Status::Pass, format!("through {how}: {ktext}; {dma}; {pmtext}"))
            }
        }
    }
}
