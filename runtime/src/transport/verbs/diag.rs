//! The verbs checks of `rshmrun --diagnose` (`crate::probe::diagnose` runs them, bounded in time): each
//! makes the real library calls and ends with a PASS, or a FAIL/SKIP line saying what is missing and
//! what to do.

use super::device::{self, DeviceSurvey, Nic, NO_DEVICE_FIX};
use super::devx::Uar;
use super::gpu::{GpuMem, IoMap};
use super::mr::Via;
use super::sys;
use crate::config::parse::HcaList;
use crate::probe::check::{Check, Status};
use std::sync::Arc;

const LIBS: &str = "verbs libraries";
const DEVICES: &str = "verbs devices";
const DEVX: &str = "DevX";
const GPU_REG: &str = "GPU memory registration";
const UAR: &str = "UAR mapped into the GPU";

/// The checks, in order: the libraries load; the devices and ports the verbs library reports; DevX
/// (a DevX context opens and QUERY_HCA_CAP answers with what IBGDA needs); registering GPU memory
/// (dma-buf, else peer memory); mapping a UAR into the GPU. Never panics; what cannot be checked
/// (no device, no GPU) is a SKIP that says why. The GPU checks use the calling thread's CUDA context,
/// else GPU 0's primary context (which stays bound). `hca`: the devices and ports RSHMEM_IB_HCA allows.
pub fn diagnose(hca: &HcaList) -> Vec<Check> {
    run(true, hca)
}

/// The same without the two GPU checks (no CUDA call, no GPU memory): for deciding at a PE's init
/// whether the NIC is usable, where a context on GPU 0 would cost every PE of the node GPU memory.
pub fn quick_checks(hca: &HcaList) -> Vec<Check> {
    run(false, hca)
}

fn run(gpu_checks: bool, hca: &HcaList) -> Vec<Check> {
    let gpu_names: &[&str] = if gpu_checks { &[GPU_REG, UAR] } else { &[] };
    let mut out = Vec::new();
    let libs = libraries();
    let libs_ok = libs.status == Status::Pass;
    out.push(libs);
    if !libs_ok {
        for name in [DEVICES, DEVX].iter().chain(gpu_names) {
            out.push(Check::new(*name, Status::Skip, "not checked: the verbs libraries do not load"));
        }
        return out;
    }
    let devices = devices();
    let devices_ok = devices.status == Status::Pass;
    out.push(devices);
    let nic = match Nic::open_with(hca) {
        Ok(nic) => nic,
        Err(e) => {
            // The reason once: the devices line has it already unless it passed.
            let first = if devices_ok { format!("no NIC opened: {e}") } else { "no usable NIC (see the verbs devices line)".to_string() };
            out.push(Check::new(DEVX, Status::Skip, format!("not checked: {first}")));
            for name in gpu_names {
                out.push(Check::new(*name, Status::Skip, "not checked: no NIC opened (see above)"));
            }
            return out;
        }
    };
    let (devx, caps) = devx(&nic);
    out.push(devx);
    if !gpu_checks {
        return out;
    }
    let gpu = gpu_ready();
    out.push(match &gpu {
        Ok(()) => gpu_registration(&nic),
        Err(why) => Check::new(GPU_REG, Status::Skip, format!("not checked: {why}")),
    });
    out.push(match (&gpu, caps) {
        (Err(why), _) => Check::new(UAR, Status::Skip, format!("not checked: {why}")),
        (Ok(()), None) => Check::new(UAR, Status::Skip, "not checked: DevX does not work on this NIC (see the DevX line)"),
        (Ok(()), Some(caps)) => uar_mapping(&nic, &caps),
    });
    out
}

fn libraries() -> Check {
    // The loaders' errors end with what to install; here that goes to the fix.
    let what = |e: crate::error::Error| e.to_string().replace(&format!("; {}", sys::INSTALL_RDMA_CORE), "");
    let v = match sys::verbs() {
        Ok(v) => v,
        Err(e) => return Check::new(LIBS, Status::Fail, what(e)).with_fix(sys::INSTALL_RDMA_CORE),
    };
    let m = match sys::mlx5() {
        Ok(m) => m,
        Err(e) => {
            return Check::new(LIBS, Status::Fail, format!("{} loads, but {}", sys::LIBIBVERBS, what(e)))
                .with_fix("install rdma-core's mlx5 provider (Debian/Ubuntu: apt install ibverbs-providers) or MLNX_OFED/DOCA-OFED")
        }
    };
    let yes = |b: bool| if b { "yes" } else { "no (rdma-core too old)" };
    Check::new(
        LIBS,
        Status::Pass,
        format!(
            "{} and {} load (ibv_reg_dmabuf_mr: {}, mlx5dv_devx_umem_reg_ex: {})",
            sys::LIBIBVERBS,
            sys::LIBMLX5,
            yes(v.ibv_reg_dmabuf_mr.is_some()),
            yes(m.mlx5dv_devx_umem_reg_ex.is_some())
        ),
    )
}

fn devices() -> Check {
    let survey = match device::survey() {
        Ok(s) if s.is_empty() => return no_devices("ibv_get_device_list lists none".into()),
        Ok(s) => s,
        Err(why) => return no_devices(why),
    };
    let usable = survey.iter().any(|d| d.devx.is_ok() && d.ports.iter().flatten().any(|p| p.is_active() && p.gid.is_some()));
    let lines: Vec<String> = survey.iter().map(describe).collect();
    let c = Check::new(DEVICES, if usable { Status::Pass } else { Status::Fail }, lines.join("; "));
    if usable {
        c
    } else {
        c.with_fix(
            "IBGDA needs an mlx5 (ConnectX-4 or newer) device opened with DevX and an ACTIVE port with a GID: \
             check `ibv_devinfo`; an InfiniBand port needs a subnet manager, a RoCE port an IP address on its netdev",
        )
    }
}

/// The verbs library sees no device (`why`): a FAIL when the kernel lists RDMA devices in sysfs (the
/// verbs library should see them: a container without /dev/infiniband, no provider library), else a
/// SKIP (no NIC here; the RDMA devices line of `rshmrun --diagnose` reports that).
fn no_devices(why: String) -> Check {
    let sysfs: Vec<String> = crate::probe::rdma::rdma_devices(std::path::Path::new("/")).into_iter().map(|d| d.name).collect();
    if sysfs.is_empty() {
        return Check::new(DEVICES, Status::Skip, format!("not checked: no RDMA device ({why})")).with_fix(NO_DEVICE_FIX);
    }
    Check::new(DEVICES, Status::Fail, format!("the kernel lists {} but the verbs library sees no device: {why}", sysfs.join(", "))).with_fix(
        "give the process the RDMA device files (a container needs /dev/infiniband), load ib_uverbs (modprobe ib_uverbs), \
         and install the device's provider library (ibverbs-providers for mlx5)",
    )
}

fn describe(d: &DeviceSurvey) -> String {
    let attr = match &d.attr {
        Ok(a) => format!("firmware {}", a.fw_ver),
        Err(e) => return format!("{}: {e}", d.name),
    };
    let devx = match &d.devx {
        Ok(()) => "DevX".to_string(),
        Err(e) => format!("no DevX ({e})"),
    };
    let ports: Vec<String> = d.ports.iter().map(|p| p.as_ref().map_or_else(|e| e.clone(), |p| p.summary())).collect();
    format!("{}: {attr}, {devx}, {}", d.name, ports.join(", "))
}

fn devx(nic: &Arc<Nic>) -> (Check, Option<super::prm::HcaCaps>) {
    if let Err(e) = nic.devx() {
        return (Check::new(DEVX, Status::Fail, e.to_string()).with_fix("IBGDA needs DevX: use rdma-core v24+ (or MLNX_OFED) and check `dmesg` for mlx5_ib"), None);
    }
    let caps = match nic.hca_caps() {
        Ok(c) => c,
        Err(e) => return (Check::new(DEVX, Status::Fail, e.to_string()).with_fix("the NIC's firmware refused a DevX query: update the firmware and the driver"), None),
    };
    let gaps = caps.ibgda_gaps(super::devx::MIN_LOG_DEPTH);
    let facts = format!(
        "{}: DevX context open, QUERY_HCA_CAP answered (cqe_version {}, atomic operations {:#x}, QP atomic sizes {:#x}, QP up to 2^{} WQEs, BlueFlame register 2^{} bytes)",
        nic.port_name(),
        caps.cqe_version,
        caps.atomic_operations,
        caps.atomic_size_qp,
        caps.log_max_qp_sz,
        caps.log_bf_reg_size
    );
    let check = if gaps.is_empty() {
        Check::new(DEVX, Status::Pass, facts)
    } else {
        Check::new(DEVX, Status::Fail, format!("{facts}; missing: {}", gaps.join("; "))).with_fix("IBGDA needs a ConnectX-6 or newer NIC with current firmware")
    };
    (check, Some(caps))
}

/// Whether a GPU is there to check with: the calling thread's current CUDA context (a PE's), else GPU
/// 0's primary context, which this binds.
fn gpu_ready() -> Result<(), String> {
    crate::platform::cuda::driver::device_count().map_err(|e| format!("no usable GPU ({e})"))?;
    let mut current: cudarc::driver::sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the driver is present (device_count loaded and initialised it); out-pointer to a local.
    let r = unsafe { cudarc::driver::sys::cuCtxGetCurrent(&mut current) };
    if r == cudarc::driver::sys::CUresult::CUDA_SUCCESS && !current.is_null() {
        return Ok(());
    }
    crate::platform::cuda::driver::bind_primary(0).map(|_| ()).map_err(|e| format!("no usable GPU ({e})"))
}

fn gpu_registration(nic: &Arc<Nic>) -> Check {
    const LEN: usize = 2 << 20;
    let mem = match GpuMem::alloc(LEN, 1 << 16, 0) {
        Ok(m) => m,
        Err(e) => return Check::new(GPU_REG, Status::Fail, e.to_string()).with_fix("check the GPU with `nvidia-smi`"),
    };
    match nic.register_gpu(mem.ptr(), LEN as u64) {
        Ok(mr) if mr.via == Via::DmaBuf => Check::new(GPU_REG, Status::Pass, format!("2 MiB of GPU memory registered on {} as a dma-buf (lkey {:#x})", nic.name(), mr.lkey)),
        Ok(mr) => Check::new(
            GPU_REG,
            Status::Pass,
            format!("2 MiB of GPU memory registered on {} through nvidia-peermem (lkey {:#x}); dma-buf did not work", nic.name(), mr.lkey),
        ),
        Err(e) => Check::new(GPU_REG, Status::Fail, e.to_string())
            .with_fix("use the NVIDIA open kernel modules (driver 515+) on Linux 5.12+ for dma-buf, or load nvidia-peermem (modprobe nvidia-peermem)"),
    }
}

fn uar_mapping(nic: &Arc<Nic>, caps: &super::prm::HcaCaps) -> Check {
    let uar = match Uar::for_doorbell(nic, caps) {
        Ok(u) => u,
        Err(e) => return Check::new(UAR, Status::Fail, e.to_string()).with_fix("the NIC refused a DevX UAR: update rdma-core and the firmware"),
    };
    match IoMap::map(uar.reg_addr(), uar.reg_size) {
        Ok(map) => {
            let dev = map.device_addr(uar.reg_addr());
            drop(map);
            Check::new(
                UAR,
                Status::Pass,
                format!("a {:?} UAR of {} (doorbell at host {:#x}) mapped into the GPU at {dev:#x}, then unmapped", uar.kind, nic.name(), uar.reg_addr()),
            )
        }
        Err(e) => Check::new(UAR, Status::Fail, e.to_string()).with_fix(
            "load the nvidia module with NVreg_EnableStreamMemOPs=1 and NVreg_RegistryDwords=\"PeerMappingOverride=1;\" \
             (e.g. in /etc/modprobe.d/nvidia.conf, then reload the driver)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_ends_with_a_clear_line() {
        let quick: Vec<String> = quick_checks(&HcaList::default()).into_iter().map(|c| c.name).collect();
        assert_eq!(quick, [LIBS, DEVICES, DEVX]);
        let checks = diagnose(&HcaList::default());
        let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, [LIBS, DEVICES, DEVX, GPU_REG, UAR]);
        for c in &checks {
            assert!(!c.detail.is_empty(), "{c:?}");
            if c.status == Status::Fail {
                assert!(c.fix.is_some(), "a FAIL says what to do: {c:?}");
            }
            if c.status == Status::Skip {
                assert!(c.detail.starts_with("not checked: "), "{c:?}");
            }
        }
        // Without a NIC (CI): nothing fails (the sysfs line of the report says there is no device),
        // and every line after the libraries' says why it was not checked.
        if crate::probe::rdma::rdma_devices(std::path::Path::new("/")).is_empty() {
            assert!(checks[1..].iter().all(|c| c.status == Status::Skip), "{checks:?}");
            assert!(checks[1].detail.contains("no RDMA device") && checks[1].fix.is_some(), "{checks:?}");
        }
    }
}
