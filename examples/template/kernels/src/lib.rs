//! The kernels of my-app, written once: PTX kernels on GPUs (compiled by build.rs of the host crate),
//! host-thread functions on rshmem's CPU backend.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use rshmem_device as sh;
use rshmem_device::{thread as t, DevPtr};

/// The arguments of `shift_block`: plain data (`Pod`), passed by value as the kernel's parameter.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Shift {
    /// Symmetric destination of `n` values (written on the next PE).
    pub dst: DevPtr<f32>,
    /// Symmetric source of `n` values (this PE's).
    pub src: DevPtr<f32>,
    /// How many values.
    pub n: u64,
}

sh::kernels! {
    /// The whole block puts the `n` values at `src` (this PE) into `dst` on the next PE, then thread 0
    /// waits until they have arrived.
    fn shift_block(a: Shift) {
        let next = (sh::my_pe() + 1) % sh::n_pes();
        let bytes = a.n as usize * core::mem::size_of::<f32>();
        sh::putmem_block(a.dst.as_ptr() as *mut u8, a.src.as_ptr() as *const u8, bytes, next);
        if t::block_rank() == 0 {
            sh::quiet();
        }
    }
}
