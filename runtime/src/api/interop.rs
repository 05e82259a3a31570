//! cudarc interoperability (feature `cudarc-interop`, on by default): for programs that already use
//! cudarc's `CudaContext`, `CudaStream`, `CudaSlice` and `launch_builder`.
//!
//! - [`context`]: the cudarc context of this PE's GPU. It is the device's primary context, the one
//!   rshmem uses, so kernels, streams and memory are shared both ways.
//! - [`stream`]: a cudarc stream as an rshmem [`Stream`], for every `*_on_stream` call and
//!   `LaunchConfig::on`.
//! - [`SymSlice::cuda_view`]: a symmetric allocation as a `CudaSlice<T>` (no copy) for cudarc's kernel
//!   launches and copies. The view never frees the memory (the symmetric heap owns it; freeing stays
//!   collective, `SymSlice::free`).
//!
//! **Waiting.** While rshmem work that involves PEs on other nodes is on a stream, wait for it with
//! rshmem's [`Stream::synchronize`] (which polls), not with a call that blocks in the CUDA driver
//! (a copy into pageable host memory such as cudarc's `clone_dtoh` into a `Vec`): the proxy
//! thread that carries the remote part makes CUDA calls of its own, and a thread blocked in the driver
//! kept them from completing (a hang across two simulated nodes on 2 x H100). Once rshmem's wait has
//! returned, cudarc's calls on that stream are free to block.
//!
//! The CPU backend has no CUDA context: [`context`] says so, and programs take their host path there
//! (see `examples/src/cudarc_interop.rs`).

pub use cudarc;

use crate::api::stream::{device_ordinal, Stream};
use crate::error::{Error, Result};
use crate::api::sym::SymSlice;
use bytemuck::Pod;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// The cudarc context of the GPU this PE runs on (its primary context, which rshmem uses too), bound
/// to the calling thread. An error on the CPU backend.
pub fn context() -> Result<Arc<CudaContext>> {
    let call = "rshmem::interop::context";
    let ordinal = device_ordinal(call)?;
    CudaContext::new(ordinal).map_err(|e| Error::new(format!("{call}: cudarc could not open GPU {ordinal}'s primary context: {e:?}")))
}

/// `s` as an rshmem stream handle (the same CUDA stream). The handle may be copied and used after `s`
/// is dropped, so the stream is kept alive for the rest of the process: this holds one reference to
/// each stream ever converted (a stream converted again is not held twice). Panics when rshmem runs on
/// a GPU and `s` belongs to another one.
pub fn stream(s: &Arc<CudaStream>) -> Stream {
    if let Ok(mine) = device_ordinal("rshmem::interop::stream") {
        let theirs = s.context().ordinal();
        assert!(theirs == mine, "rshmem::interop::stream: the stream belongs to GPU {theirs}, but this PE runs on GPU {mine}");
    }
    static KEPT: std::sync::Mutex<Vec<Arc<CudaStream>>> = std::sync::Mutex::new(Vec::new());
    let mut kept = KEPT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !kept.iter().any(|k| Arc::ptr_eq(k, s)) {
        kept.push(s.clone());
    }
    // SAFETY: a cudarc stream lives in the primary context of its GPU (cudarc's `CudaContext::new`),
    // which is this PE's (checked above while rshmem runs on a GPU; on the CPU backend no stream
    // reaches the driver), and the reference kept above keeps it from being destroyed for the life of
    // the process, so the handle stays valid wherever the `Stream` goes.
    unsafe { Stream::from_raw(s.cu_stream()) }
}

impl From<&Arc<CudaStream>> for Stream {
    fn from(s: &Arc<CudaStream>) -> Stream {
        stream(s)
    }
}

/// This PE's copy of a [`SymSlice`] seen as a cudarc `CudaSlice<T>` (dereference it to use cudarc's
/// API: `launch_builder().arg(&*view)`, `stream.memcpy_dtov(&*view)`). No copy is made, and dropping
/// the view leaves the memory alone. It borrows the `SymSlice`, so the allocation cannot be freed
/// while a view exists.
pub struct SymCudaSlice<'a, T> {
    inner: ManuallyDrop<CudaSlice<T>>,
    _sym: PhantomData<&'a ()>,
}

impl<T: Pod + DeviceRepr> SymSlice<T> {
    /// This PE's values as a cudarc `CudaSlice<T>` whose work is ordered on `stream` (cudarc's event
    /// tracking applies to it as to its own slices). An error on the CPU backend.
    pub fn cuda_view(&self, stream: &Arc<CudaStream>) -> Result<SymCudaSlice<'_, T>> {
        device_ordinal("rshmem::SymSlice::cuda_view")?;
        // SAFETY: `as_ptr()..+len` is this PE's part of a live symmetric allocation of `len` values of
        // T in device memory of this context (checked: the CUDA backend runs); every value is a valid
        // T (Pod). The slice is never dropped as a CudaSlice (ManuallyDrop, leaked in Drop below), so
        // cudarc never frees it; the borrow of `self` keeps the allocation from being freed meanwhile.
        let inner = unsafe { stream.upgrade_device_ptr::<T>(self.as_ptr() as u64, self.len()) };
        Ok(SymCudaSlice { inner: ManuallyDrop::new(inner), _sym: PhantomData })
    }
}

impl<T> Deref for SymCudaSlice<'_, T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.inner
    }
}
impl<T> DerefMut for SymCudaSlice<'_, T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.inner
    }
}
impl<T> Drop for SymCudaSlice<'_, T> {
    fn drop(&mut self) {
        // SAFETY: `inner` is taken once, here, and not used afterwards.
        let s = unsafe { ManuallyDrop::take(&mut self.inner) };
        // Gives up cudarc's ownership without freeing (it waits for the slice's recorded work first).
        let _ = s.leak();
    }
}
