//! Typed symmetric memory: [`SymSlice<T>`] (and [`Sym<T>`], one value) for `T: bytemuck::Pod`, made
//! by collective allocation and copied to and from `&[T]` without byte juggling or `unsafe`.
//!
//! ```
//! # fn main() -> Result<(), rshmem::Error> {
//! rshmem::init()?;
//! let (me, n) = (rshmem::my_pe(), rshmem::n_pes());
//! let inbox = rshmem::SymSlice::<i64>::zeroed(4)?; // collective: every PE calls it
//! inbox.put_to((me + 1) % n, &[me as i64; 4])?; // into the next PE's copy
//! rshmem::barrier_all()?;
//! assert_eq!(inbox.to_vec()?, vec![((me + n - 1) % n) as i64; 4]);
//! inbox.free()?; // collective too
//! rshmem::finalize()
//! # }
//! ```
//!
//! **Freeing is explicit and collective** ([`SymSlice::free`], which consumes the handle). It is not done
//! in `Drop`: a symmetric free is a collective call that every PE must make in the same order, and a
//! drop happens wherever a value goes out of scope, including on one PE's early return or panic, where
//! a free in `Drop` would leave the other PEs waiting in it (a hang) or free in a different order (a
//! mismatch that corrupts the heap's symmetry). A handle dropped without `free` keeps its memory until
//! finalize and says so once in a warning naming its size.

use crate::api::coll::{self, ReduceElem, ReduceOp, Team};
use crate::api::stream::Stream;
use crate::error::{Error, Result};
use crate::heap::alloc::MIN_ALIGN;
use rshmem_device::coll::host_op;
use crate::runtime;
use bytemuck::Pod;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

/// `len` values of `T` in every PE's symmetric heap, at the same offset on every PE.
pub struct SymSlice<T: Pod> {
    ptr: *mut T,
    len: usize,
    _t: PhantomData<T>,
}

// SAFETY: the handle is an address into the symmetric heap and a length; every access goes through the
// runtime's calls, which are thread-safe. T: Pod has no thread-bound state.
unsafe impl<T: Pod> Send for SymSlice<T> {}
// SAFETY: as for Send: shared references only read the address and length.
unsafe impl<T: Pod> Sync for SymSlice<T> {}

impl<T: Pod> SymSlice<T> {
    /// Collective: `len` values, zeroed on every PE.
    pub fn zeroed(len: usize) -> Result<SymSlice<T>> {
        let call = "rshmem::SymSlice::zeroed";
        let bytes = len.max(1).checked_mul(std::mem::size_of::<T>().max(1)).ok_or_else(|| Error::new(format!("{call}({len}): size overflows")))?;
        let p = runtime::get(call)?.alloc(call, bytes, MIN_ALIGN.max(std::mem::align_of::<T>()), true)?;
        Ok(SymSlice { ptr: p as *mut T, len, _t: PhantomData })
    }
    /// Collective: `len` values, filled with this PE's `data` on every PE (each PE passes its own).
    pub fn from_slice(data: &[T]) -> Result<SymSlice<T>> {
        let s = SymSlice::zeroed(data.len())?;
        s.copy_from(data)?;
        Ok(s)
    }
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// This PE's address of the first value: the symmetric address that device code, the C API and
    /// kernel arguments take (the same offset on every PE).
    pub fn as_ptr(&self) -> *mut T {
        self.ptr
    }
    /// The address as a kernel argument (`KernelSet::run` takes u64 words).
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }
    /// PE `pe`'s copy of the first value as an address this process can load and store through
    /// (`rshmem_ptr`): Some for PEs of this node whose heap is mapped here, None otherwise.
    pub fn peer_ptr(&self, pe: i32) -> Option<*mut T> {
        runtime::get("rshmem::SymSlice::peer_ptr").ok()?;
        let p = rshmem_device::ptr(self.ptr as *const u8, pe);
        (!p.is_null()).then_some(p as *mut T)
    }
    /// The first value's symmetric address as a typed kernel argument (a field of a `kernels!`
    /// argument struct); device code reads it with `DevPtr::as_ptr`.
    pub fn dev_ptr(&self) -> crate::api::kernels::DevPtr<T> {
        crate::api::kernels::DevPtr::new(self.ptr)
    }
    /// The symmetric address of value `i` (for kernel arguments), or an error past the end.
    pub fn addr_of(&self, i: usize) -> Result<u64> {
        self.check(i, 1)?;
        Ok(self.ptr.wrapping_add(i) as u64)
    }
    fn bytes(n: usize) -> usize {
        n * std::mem::size_of::<T>()
    }
    fn check(&self, start: usize, n: usize) -> Result<()> {
        match start.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::new(format!(
                "SymSlice<{}>: values {start}..{} are outside its {} values",
                std::any::type_name::<T>(),
                start.saturating_add(n),
                self.len
            ))),
        }
    }
    /// Copies `src` into this PE's values (from the first; `src` may be shorter than the slice).
    pub fn copy_from(&self, src: &[T]) -> Result<()> {
        self.check(0, src.len())?;
        // SAFETY: the range is inside this live allocation (checked above) and `src` is a readable slice.
        unsafe { runtime::get("rshmem::SymSlice::copy_from")?.backend().copy_in(self.ptr as *mut u8, bytemuck::cast_slice(src)) }
    }
    /// Copies this PE's values (from the first) into `dst`.
    pub fn copy_to(&self, dst: &mut [T]) -> Result<()> {
        self.check(0, dst.len())?;
        // SAFETY: as in copy_from, with the roles swapped.
        unsafe { runtime::get("rshmem::SymSlice::copy_to")?.backend().copy_out(bytemuck::cast_slice_mut(dst), self.ptr as *const u8) }
    }
    /// This PE's values.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.len];
        self.copy_to(&mut v)?;
        Ok(v)
    }
    /// Puts `src` into PE `pe`'s values starting at `offset`: a blocking host put (`rshmem::putmem`:
    /// `src` reusable on return; visible at the target after a quiet or barrier).
    pub fn put_at(&self, pe: i32, offset: usize, src: &[T]) -> Result<()> {
        self.check(offset, src.len())?;
        // SAFETY: the symmetric range is inside this allocation (checked) and `src` is readable.
        unsafe { runtime::get("rshmem::SymSlice::put_at")?.putmem(self.ptr.wrapping_add(offset) as *mut u8, src.as_ptr() as *const u8, Self::bytes(src.len()), pe) }
    }
    /// Puts `src` into PE `pe`'s values from the first.
    pub fn put_to(&self, pe: i32, src: &[T]) -> Result<()> {
        self.put_at(pe, 0, src)
    }
    /// Gets PE `pe`'s values starting at `offset` into `dst`.
    pub fn get_at(&self, pe: i32, offset: usize, dst: &mut [T]) -> Result<()> {
        self.check(offset, dst.len())?;
        // SAFETY: as in put_at, `dst` writable.
        unsafe { runtime::get("rshmem::SymSlice::get_at")?.getmem(dst.as_mut_ptr() as *mut u8, self.ptr.wrapping_add(offset) as *const u8, Self::bytes(dst.len()), pe) }
    }
    /// Collective: frees the allocation on every PE (every PE frees the same allocations in the same
    /// order), after this PE's device work (on-stream collectives and kernels that may use it) has
    /// run. Consumes the handle.
    pub fn free(self) -> Result<()> {
        let p = self.ptr;
        std::mem::forget(self);
        runtime::get("rshmem::SymSlice::free")?.free("rshmem::SymSlice::free", p as *mut u8)
    }
}

/// The collectives of typed symmetric memory: each is collective over `team` (every member calls it
/// with its own handles to the same allocations), with the element counts taken from the slices and
/// checked. `self` is the destination. The `_on_stream` forms enqueue the collective on `stream` and
/// return (on the CPU backend they run at once); the memory stays valid until the stream has run them,
/// because `free` first waits for this PE's device work.
impl<T: Pod> SymSlice<T> {
    fn coll_check(&self, call: &str, src: &SymSlice<T>, dest_len: usize, src_len: usize) -> Result<()> {
        if self.len < dest_len || src.len < src_len {
            return Err(Error::new(format!(
                "{call}: needs a destination of {dest_len} and a source of {src_len} values; got {} and {}",
                self.len, src.len
            )));
        }
        Ok(())
    }

    /// Collective over `team`: `src`'s values on member `root` into this slice on every member (as many
    /// values as `src` has).
    pub fn broadcast(&self, team: Team, src: &SymSlice<T>, root: i32) -> Result<()> {
        self.coll_check("rshmem::SymSlice::broadcast", src, src.len, src.len)?;
        // SAFETY: both are live symmetric allocations of at least `src.len` values (checked above).
        unsafe { coll::broadcast(team, self.ptr, src.ptr, src.len, root) }
    }
    /// Collective over `team`: every member's `src` (all the same length), in member order, into this
    /// slice (at least `n_pes * src.len()` values).
    pub fn fcollect(&self, team: Team, src: &SymSlice<T>) -> Result<()> {
        let n = team_members(team, "rshmem::SymSlice::fcollect")?;
        self.coll_check("rshmem::SymSlice::fcollect", src, n * src.len, src.len)?;
        // SAFETY: live symmetric allocations of the sizes checked above.
        unsafe { coll::fcollect(team, self.ptr, src.ptr, src.len) }
    }
    /// Collective over `team`: the reduction with `op` of every member's `src` into this slice (as
    /// many values as `src` has).
    pub fn reduce(&self, team: Team, op: ReduceOp, src: &SymSlice<T>) -> Result<()>
    where
        T: ReduceElem,
    {
        self.coll_check("rshmem::SymSlice::reduce", src, src.len, src.len)?;
        // SAFETY: live symmetric allocations of at least `src.len` values (checked above).
        unsafe { coll::reduce(team, op, self.ptr, src.ptr, src.len) }
    }
    /// [`SymSlice::broadcast`] enqueued on `stream`.
    pub fn broadcast_on_stream(&self, team: Team, src: &SymSlice<T>, root: i32, stream: Stream) -> Result<()> {
        self.coll_check("rshmem::SymSlice::broadcast_on_stream", src, src.len, src.len)?;
        let bytes = src.len * std::mem::size_of::<T>();
        // SAFETY: live symmetric allocations of at least `src.len` values (checked above), valid until
        // the stream has run the collective (`free` waits for it); `stream` is null or a live stream of
        // this PE's context (every `Stream` is: `Stream::from_raw`'s contract).
        unsafe { coll::collective_on_stream(host_op::BROADCAST, team.0, self.ptr as *mut u8, src.ptr as *const u8, bytes, root as u64, 0, stream.as_raw() as _) }
    }
    /// [`SymSlice::fcollect`] enqueued on `stream`.
    pub fn fcollect_on_stream(&self, team: Team, src: &SymSlice<T>, stream: Stream) -> Result<()> {
        let n = team_members(team, "rshmem::SymSlice::fcollect_on_stream")?;
        self.coll_check("rshmem::SymSlice::fcollect_on_stream", src, n * src.len, src.len)?;
        let bytes = src.len * std::mem::size_of::<T>();
        // SAFETY: as in broadcast_on_stream.
        unsafe { coll::collective_on_stream(host_op::FCOLLECT, team.0, self.ptr as *mut u8, src.ptr as *const u8, bytes, 0, 0, stream.as_raw() as _) }
    }
    /// [`SymSlice::reduce`] enqueued on `stream`.
    pub fn reduce_on_stream(&self, team: Team, op: ReduceOp, src: &SymSlice<T>, stream: Stream) -> Result<()>
    where
        T: ReduceElem,
    {
        self.coll_check("rshmem::SymSlice::reduce_on_stream", src, src.len, src.len)?;
        // SAFETY: as in broadcast_on_stream.
        unsafe { coll::collective_on_stream(host_op::REDUCE, team.0, self.ptr as *mut u8, src.ptr as *const u8, src.len, T::DTYPE as u64, op.code() as u64, stream.as_raw() as _) }
    }
}

/// The member count of `team`, or an error naming `call` when there is no such team.
fn team_members(team: Team, call: &str) -> Result<usize> {
    usize::try_from(team.n_pes()).map_err(|_| Error::new(format!("{call}: team {} does not exist", team.0)))
}

impl<T: Pod> Drop for SymSlice<T> {
    fn drop(&mut self) {
        static SAID: AtomicBool = AtomicBool::new(false);
        if !SAID.swap(true, Ordering::Relaxed) {
            crate::log::warn(format!(
                "a SymSlice<{}> of {} values was dropped without free(): its symmetric memory stays allocated until finalize (freeing is collective, so it is never done in Drop; call .free() on every PE)",
                std::any::type_name::<T>(),
                self.len
            ));
        }
    }
}

impl<T: Pod> std::fmt::Debug for SymSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SymSlice<{}>({:p}, {} values)", std::any::type_name::<T>(), self.ptr, self.len)
    }
}

/// One value of `T` in every PE's symmetric heap.
#[derive(Debug)]
pub struct Sym<T: Pod>(SymSlice<T>);

impl<T: Pod> Sym<T> {
    /// Collective: one zeroed value on every PE.
    pub fn zeroed() -> Result<Sym<T>> {
        Ok(Sym(SymSlice::zeroed(1)?))
    }
    /// Collective: one value, this PE's `value` on every PE.
    pub fn new(value: T) -> Result<Sym<T>> {
        Ok(Sym(SymSlice::from_slice(&[value])?))
    }
    /// This PE's value.
    pub fn read(&self) -> Result<T> {
        let mut v = [T::zeroed()];
        self.0.copy_to(&mut v)?;
        Ok(v[0])
    }
    /// Sets this PE's value.
    pub fn write(&self, value: T) -> Result<()> {
        self.0.copy_from(&[value])
    }
    /// Puts `value` into PE `pe`'s copy.
    pub fn put_to(&self, pe: i32, value: T) -> Result<()> {
        self.0.put_to(pe, &[value])
    }
    /// PE `pe`'s value.
    pub fn get_from(&self, pe: i32) -> Result<T> {
        let mut v = [T::zeroed()];
        self.0.get_at(pe, 0, &mut v)?;
        Ok(v[0])
    }
    /// The symmetric address (device code, kernel arguments).
    pub fn as_ptr(&self) -> *mut T {
        self.0.as_ptr()
    }
    /// The address as a kernel argument.
    pub fn addr(&self) -> u64 {
        self.0.addr()
    }
    /// The symmetric address as a typed kernel argument (see `SymSlice::dev_ptr`).
    pub fn dev_ptr(&self) -> crate::api::kernels::DevPtr<T> {
        self.0.dev_ptr()
    }
    /// Collective: frees it on every PE.
    pub fn free(self) -> Result<()> {
        self.0.free()
    }
}
