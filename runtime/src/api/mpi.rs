//! Initialization over an MPI communicator (NVSHMEM's `NVSHMEMX_INIT_WITH_MPI_COMM`): the communicator's
//! rank 0 makes a unique id, `MPI_Bcast` hands it to the other ranks, and every rank joins the job as PE
//! `rank` of `size`, so the PEs are exactly the communicator's ranks (a sub-communicator makes a job of
//! its own).
//!
//! rshmem does not link MPI: the program does. The MPI functions are looked up in the running process
//! (`dlsym`), which works with whatever MPI the program was linked against. The two MPI ABIs differ in
//! what a communicator and a datatype are: Open MPI's are pointers to library objects (`MPI_BYTE` is
//! `&ompi_mpi_byte`), MPICH's (and its derivatives') are integers. Open MPI is recognized by its
//! `ompi_mpi_byte` symbol; otherwise the MPICH ABI is assumed.

use crate::error::{Error, Result};
use std::ffi::{c_int, c_void, CStr};

/// MPICH's `MPI_BYTE`.
const MPICH_MPI_BYTE: c_int = 0x4c00_010d;

fn sym(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks a symbol up.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

/// Broadcasts a buffer from rank 0 of the communicator; returns MPI's error code.
type Bcast = Box<dyn Fn(&mut [u8]) -> c_int>;

/// Rank and size of the communicator at `comm` (a pointer to the program's `MPI_Comm` variable, as
/// NVSHMEM's `nvshmemx_init_attr_t::mpi_comm`), and a function that broadcasts bytes from its rank 0.
struct Comm {
    rank: c_int,
    size: c_int,
    bcast: Bcast,
}

/// # Safety
/// `comm` must point to a valid `MPI_Comm` of the MPI the program is linked with, and MPI must be
/// initialized (checked with `MPI_Initialized` first).
unsafe fn comm(call: &str, comm: *const c_void) -> Result<Comm> {
    if comm.is_null() {
        return Err(Error::new(format!("{call}: the attribute's mpi_comm is NULL (set it to the address of an MPI_Comm)")));
    }
    let (initialized, rank, size, bcast) = (sym(c"MPI_Initialized"), sym(c"MPI_Comm_rank"), sym(c"MPI_Comm_size"), sym(c"MPI_Bcast"));
    if [initialized, rank, size, bcast].iter().any(|p| p.is_null()) {
        return Err(Error::new(format!(
            "{call}: NVSHMEMX_INIT_WITH_MPI_COMM needs MPI, but MPI_Comm_rank/MPI_Comm_size/MPI_Bcast are not in this process (link the program with MPI)"
        )));
    }
    // SAFETY: MPI_Initialized(int *) in every MPI ABI.
    let initialized = unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_int) -> c_int>(initialized) };
    let mut flag = 0;
    // SAFETY: out-pointer to a live int.
    if unsafe { initialized(&mut flag) } != 0 || flag == 0 {
        return Err(Error::new(format!("{call}: MPI is not initialized (call MPI_Init before nvshmemx_init_attr)")));
    }
    let ompi_byte = sym(c"ompi_mpi_byte");
    let (mut r, mut s) = (0, 0);
    let rc;
    let bcast: Bcast = if !ompi_byte.is_null() {
        // Open MPI: MPI_Comm and MPI_Datatype are pointers.
        // SAFETY: the caller's contract: `comm` points to an Open MPI communicator handle.
        let c = unsafe { *(comm as *const *mut c_void) };
        type RankFn = unsafe extern "C" fn(*mut c_void, *mut c_int) -> c_int;
        type BcastFn = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, c_int, *mut c_void) -> c_int;
        // SAFETY: Open MPI's signatures of MPI_Comm_rank/size and MPI_Bcast.
        let (rank_f, size_f, bcast_f) = unsafe {
            (std::mem::transmute::<*mut c_void, RankFn>(rank), std::mem::transmute::<*mut c_void, RankFn>(size), std::mem::transmute::<*mut c_void, BcastFn>(bcast))
        };
        // SAFETY: valid communicator (caller), out-pointers to live ints.
        rc = unsafe { rank_f(c, &mut r) | size_f(c, &mut s) };
        // SAFETY: (for the closure's call) a live buffer of the given length, Open MPI's MPI_BYTE, root 0.
        Box::new(move |b: &mut [u8]| unsafe { bcast_f(b.as_mut_ptr() as *mut c_void, b.len() as c_int, ompi_byte, 0, c) })
    } else {
        // The MPICH ABI: MPI_Comm and MPI_Datatype are ints.
        // SAFETY: the caller's contract: `comm` points to an MPICH communicator handle.
        let c = unsafe { *(comm as *const c_int) };
        type RankFn = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;
        type BcastFn = unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, c_int) -> c_int;
        // SAFETY: MPICH's signatures of MPI_Comm_rank/size and MPI_Bcast.
        let (rank_f, size_f, bcast_f) = unsafe {
            (std::mem::transmute::<*mut c_void, RankFn>(rank), std::mem::transmute::<*mut c_void, RankFn>(size), std::mem::transmute::<*mut c_void, BcastFn>(bcast))
        };
        // SAFETY: valid communicator (caller), out-pointers to live ints.
        rc = unsafe { rank_f(c, &mut r) | size_f(c, &mut s) };
        // SAFETY: (for the closure's call) a live buffer of the given length, MPICH's MPI_BYTE, root 0.
        Box::new(move |b: &mut [u8]| unsafe { bcast_f(b.as_mut_ptr() as *mut c_void, b.len() as c_int, MPICH_MPI_BYTE, 0, c) })
    };
    if rc != 0 || s < 1 || r < 0 || r >= s {
        return Err(Error::new(format!("{call}: MPI_Comm_rank/MPI_Comm_size failed on the given communicator (rank {r}, size {s}, error {rc})")));
    }
    Ok(Comm { rank: r, size: s, bcast })
}

/// Initializes rshmem with the ranks of the MPI communicator at `mpi_comm` as its PEs.
///
/// # Safety
/// `mpi_comm` must point to a valid `MPI_Comm` of the MPI the program is linked with; every rank of the
/// communicator must call this.
pub unsafe fn init_with_mpi_comm(mpi_comm: *const c_void) -> Result<()> {
    let call = "rshmem_init (NVSHMEMX_INIT_WITH_MPI_COMM)";
    // SAFETY: the caller's contract.
    let c = unsafe { comm(call, mpi_comm)? };
    // Rank 0's id, or its failure (an all-zero id), goes to every rank: no rank is left waiting.
    let mut id = [0u8; 128];
    let made = if c.rank == 0 { crate::api::host::get_unique_id().map(|u| id = u.0) } else { Ok(()) };
    let rc = (c.bcast)(&mut id);
    made.map_err(|e| e.context(call))?;
    if rc != 0 {
        return Err(Error::new(format!("{call}: MPI_Bcast of the unique id failed (error {rc})")));
    }
    if id.iter().all(|&b| b == 0) {
        return Err(Error::new(format!("{call}: rank 0 of the communicator could not make a unique id (see its error)")));
    }
    crate::runtime::init_with_unique_id(&crate::bootstrap::UniqueId(id), c.rank as usize, c.size as usize)
}

#[cfg(test)]
mod tests {
    #[test]
    fn without_mpi_in_the_process_the_error_says_so() {
        let comm = 0usize;
        // SAFETY: no MPI is linked into this test binary, so the lookup fails before `comm` is read.
        let e = unsafe { super::init_with_mpi_comm(&comm as *const usize as *const std::ffi::c_void) }.unwrap_err();
        assert!(e.to_string().contains("link the program with MPI"), "{e}");
        // SAFETY: a null communicator is refused before anything is read.
        let e = unsafe { super::init_with_mpi_comm(std::ptr::null()) }.unwrap_err();
        assert!(e.to_string().contains("mpi_comm is NULL"), "{e}");
    }
}
