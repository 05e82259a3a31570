//! libibverbs and libmlx5, loaded at run time (`dlopen`), and the few mlx5dv structs no crate binds.
//!
//! Types of `<infiniband/verbs.h>` come from `rdma-sys` (bindgen over the system's header at build
//! time). Its `extern "C"` functions are never called here: a call would make the linker record
//! libibverbs.so.1 as needed by every binary built with the `verbs` feature, and such binaries would not
//! start on machines without rdma-core. The functions are looked up with `dlsym` instead, once per
//! process, into the tables [`Verbs`] and [`Mlx5`] (as NVSHMEM and NCCL do). The verbs that
//! `<infiniband/verbs.h>` defines inline (`ibv_post_send`, `ibv_poll_cq`: calls through the context's
//! ops) come from `rdma-sys`'s Rust versions of them, which call through the same ops and link nothing.
//!
//! libmlx5 (the mlx5 provider, which libibverbs itself loads for ConnectX devices) exports the mlx5dv
//! and DevX functions; their structs are declared here, `#[repr(C)]` as in `<infiniband/mlx5dv.h>`
//! (rdma-core v44..v59; `tests/verbs_layout.rs` compares them with the system's header).

use rdma_sys::{
    ibv_ah, ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_device, ibv_device_attr, ibv_gid, ibv_gid_entry,
    ibv_mr, ibv_pd, ibv_port_attr, ibv_qp, ibv_qp_attr, ibv_qp_init_attr, ibv_srq, ibv_srq_init_attr, ibv_wc_status,
};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

/// The verbs library's file name (its ABI version 1, what rdma-core installs).
pub const LIBIBVERBS: &str = "libibverbs.so.1";
/// The mlx5 provider library (mlx5dv and DevX).
pub const LIBMLX5: &str = "libmlx5.so.1";

/// What to install when a library does not load.
pub const INSTALL_RDMA_CORE: &str = "install rdma-core's libraries (Debian/Ubuntu: apt install libibverbs1 ibverbs-providers; \
RHEL/Rocky: dnf install libibverbs) or NVIDIA's MLNX_OFED/DOCA-OFED";

/// `struct mlx5dv_context_attr` (`mlx5dv_open_device`). rdma-core v50 appended `fds`, read only when
/// `comp_mask` asks for it; declaring it keeps the struct as large as the newest header's.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Mlx5dvContextAttr {
    /// `MLX5DV_CONTEXT_FLAGS_*` bits ([`MLX5DV_CONTEXT_FLAGS_DEVX`]: open with a DevX context).
    pub flags: u32,
    /// `MLX5DV_CONTEXT_ATTR_MASK_*`: which optional members are valid (0 here: none).
    pub comp_mask: u64,
    /// `struct ibv_fd_arr *`: file descriptors to open the device with (rdma-core v50+); null here.
    pub fds: *mut c_void,
}

/// `MLX5DV_CONTEXT_FLAGS_DEVX`: open the context with a DevX user context (UCTX).
pub const MLX5DV_CONTEXT_FLAGS_DEVX: u32 = 1;

/// `struct mlx5dv_devx_uar`, filled in by `mlx5dv_devx_alloc_uar`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Mlx5dvDevxUar {
    /// Where the doorbell (or BlueFlame) register is written.
    pub reg_addr: *mut c_void,
    /// The UAR page's mapping.
    pub base_addr: *mut c_void,
    /// The UAR page number the QP and CQ contexts name (`uar_page`).
    pub page_id: u32,
    /// The offset at which the UAR page is `mmap`ed from the device's command file descriptor.
    pub mmap_off: libc::off_t,
    /// Reserved for extensions (`comp_mask`).
    pub comp_mask: u64,
}

/// `mlx5dv_devx_alloc_uar` flags (`MLX5DV_UAR_ALLOC_TYPE_*`).
pub mod uar_alloc {
    /// A BlueFlame UAR (write-combining).
    pub const BF: u32 = 0x0;
    /// A non-cached UAR, possibly shared with other users of the context.
    pub const NC: u32 = 0x1;
    /// A non-cached UAR of its own (rdma-core v46+; older libraries fail with EINVAL).
    pub const NC_DEDICATED: u32 = 1 << 31;
}

/// `struct mlx5dv_devx_umem`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Mlx5dvDevxUmem {
    /// The umem's id, which PRM commands name (`cq_umem_id`, `wq_umem_id`, `dbr_umem_id`).
    pub umem_id: u32,
}

/// `struct mlx5dv_devx_umem_in` (`mlx5dv_devx_umem_reg_ex`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Mlx5dvDevxUmemIn {
    /// The address to register; for a dma-buf, the offset into it.
    pub addr: *mut c_void,
    /// Length of the range in bytes.
    pub size: usize,
    /// `IBV_ACCESS_*` flags of the registration.
    pub access: u32,
    /// The page sizes the kernel may map the umem with.
    pub pgsz_bitmap: u64,
    /// `MLX5DV_UMEM_MASK_*`: which optional members are valid ([`MLX5DV_UMEM_MASK_DMABUF`]).
    pub comp_mask: u64,
    /// The dma-buf's file descriptor (read with [`MLX5DV_UMEM_MASK_DMABUF`]).
    pub dmabuf_fd: c_int,
}

/// `MLX5DV_UMEM_MASK_DMABUF`: `dmabuf_fd` is valid.
pub const MLX5DV_UMEM_MASK_DMABUF: u64 = 1;

/// `struct mlx5dv_pd`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Mlx5dvPd {
    /// The protection domain's number (the QP context's `pd`).
    pub pdn: u32,
    /// Reserved for extensions (`comp_mask`).
    pub comp_mask: u64,
}

/// `struct mlx5dv_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Mlx5dvCq {
    /// The CQE buffer.
    pub buf: *mut c_void,
    /// The CQ's doorbell record (consumer index and arm words, big-endian).
    pub dbrec: *mut u32,
    /// Number of CQEs in the buffer.
    pub cqe_cnt: u32,
    /// Bytes per CQE (64 or 128).
    pub cqe_size: u32,
    /// The UAR the CQ's arm doorbell is written to.
    pub cq_uar: *mut c_void,
    /// The CQ number (a QP context's `cqn_snd` / `cqn_rcv`).
    pub cqn: u32,
    /// Reserved for extensions (`comp_mask`).
    pub comp_mask: u64,
}

/// `struct mlx5dv_srq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Mlx5dvSrq {
    /// The receive WQE buffer.
    pub buf: *mut c_void,
    /// The SRQ's doorbell record.
    pub dbrec: *mut u32,
    /// Bytes per receive WQE.
    pub stride: u32,
    /// Index of the first WQE of the free list.
    pub head: u32,
    /// Index of the last WQE of the free list.
    pub tail: u32,
    /// `MLX5DV_SRQ_MASK_*`: which optional members to fill in ([`MLX5DV_SRQ_MASK_SRQN`]).
    pub comp_mask: u64,
    /// The SRQ number (the QP context's `srqn_rmpn_xrqn`), filled in when `comp_mask` asks for it.
    pub srqn: u32,
}

/// `MLX5DV_SRQ_MASK_SRQN`: ask `mlx5dv_init_obj` for the SRQ number.
pub const MLX5DV_SRQ_MASK_SRQN: u64 = 1;

/// `struct mlx5dv_ah`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Mlx5dvAh {
    /// The address vector the provider built for the AH.
    pub av: *mut Mlx5WqeAv,
    /// Reserved for extensions (`comp_mask`).
    pub comp_mask: u64,
}

/// `struct mlx5_wqe_av`: the address vector the provider resolved for an AH (research note §1.8);
/// read for the next hop's MAC and the GID of a RoCE path.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Mlx5WqeAv {
    /// The DC access key (big-endian); unused on RC.
    pub key: u64,
    /// Big-endian: bit 31 extended (full) AV, bits 23..0 the destination QP or DCT number.
    pub dqp_dct: u32,
    /// Static rate (bits 7..4) and service level (bits 3..0).
    pub stat_rate_sl: u8,
    /// Force-loopback (bit 7) and the source LID's path bits (bits 6..0).
    pub fl_mlid: u8,
    /// The remote LID (big-endian; InfiniBand).
    pub rlid: u16,
    /// Reserved.
    pub reserved0: [u8; 4],
    /// The next hop's MAC address (RoCE).
    pub rmac: [u8; 6],
    /// The GRH traffic class.
    pub tclass: u8,
    /// The GRH hop limit.
    pub hop_limit: u8,
    /// Big-endian: GRH present (bit 30), source GID index (bits 27..20), flow label (bits 19..0).
    pub grh_gid_fl: u32,
    /// The remote GID (on RoCE, the destination IP address as a GID).
    pub rgid: [u8; 16],
}

/// One `{in, out}` pair of `struct mlx5dv_obj`.
#[repr(C)]
pub struct Mlx5dvObjPair<I, O> {
    /// The verbs object to describe (`in`).
    pub input: *mut I,
    /// The mlx5dv struct `mlx5dv_init_obj` fills in (`out`).
    pub out: *mut O,
}

/// `struct mlx5dv_obj`: the objects `mlx5dv_init_obj` describes (those whose bit is in its
/// `obj_type`). Only the PD, CQ, SRQ and AH members are used; the others keep the offsets.
#[repr(C)]
pub struct Mlx5dvObj {
    /// `qp`: `struct ibv_qp` → `struct mlx5dv_qp` (unused).
    pub qp: Mlx5dvObjPair<c_void, c_void>,
    /// `cq`: `struct ibv_cq` → `struct mlx5dv_cq` ([`MLX5DV_OBJ_CQ`](obj::CQ)).
    pub cq: Mlx5dvObjPair<ibv_cq, Mlx5dvCq>,
    /// `srq`: `struct ibv_srq` → `struct mlx5dv_srq` ([`MLX5DV_OBJ_SRQ`](obj::SRQ)).
    pub srq: Mlx5dvObjPair<ibv_srq, Mlx5dvSrq>,
    /// `rwq`: `struct ibv_wq` → `struct mlx5dv_rwq` (unused).
    pub rwq: Mlx5dvObjPair<c_void, c_void>,
    /// `dm`: `struct ibv_dm` → `struct mlx5dv_dm` (unused).
    pub dm: Mlx5dvObjPair<c_void, c_void>,
    /// `ah`: `struct ibv_ah` → `struct mlx5dv_ah` ([`MLX5DV_OBJ_AH`](obj::AH)).
    pub ah: Mlx5dvObjPair<ibv_ah, Mlx5dvAh>,
    /// `pd`: `struct ibv_pd` → `struct mlx5dv_pd` ([`MLX5DV_OBJ_PD`](obj::PD)).
    pub pd: Mlx5dvObjPair<ibv_pd, Mlx5dvPd>,
}

/// `MLX5DV_OBJ_*`: which members of [`Mlx5dvObj`] to fill in.
pub mod obj {
    /// `MLX5DV_OBJ_CQ`: fill in [`super::Mlx5dvObj::cq`].
    pub const CQ: u64 = 1 << 1;
    /// `MLX5DV_OBJ_SRQ`: fill in [`super::Mlx5dvObj::srq`].
    pub const SRQ: u64 = 1 << 2;
    /// `MLX5DV_OBJ_AH`: fill in [`super::Mlx5dvObj::ah`].
    pub const AH: u64 = 1 << 5;
    /// `MLX5DV_OBJ_PD`: fill in [`super::Mlx5dvObj::pd`].
    pub const PD: u64 = 1 << 6;
}

/// An opaque `struct mlx5dv_devx_obj`.
#[repr(C)]
pub struct Mlx5dvDevxObj {
    _opaque: [u8; 0],
}

/// C structs for which all-zero bytes are a valid value (integers, raw pointers, arrays and unions of
/// them, enums whose 0 is a value) and which the C code expects zeroed before it fills them in.
///
/// # Safety
/// Implement only for such types.
pub unsafe trait Zeroed: Sized {
    /// The all-zero value (C's `= {0}`).
    fn zeroed() -> Self {
        // SAFETY: the trait's contract: all-zero bytes are a valid value of the type.
        unsafe { std::mem::zeroed() }
    }
}

macro_rules! zeroed {
    ($($t:ty),* $(,)?) => { $(
        // SAFETY: a C struct of integers, raw pointers, arrays and unions of those (bindgen's enums are
        // integer aliases), for which C code uses `memset(.., 0, ..)` itself.
        unsafe impl Zeroed for $t {}
    )* };
}
zeroed!(
    ibv_port_attr, ibv_device_attr, ibv_gid, ibv_gid_entry, ibv_qp_init_attr, ibv_qp_attr, ibv_ah_attr, ibv_srq_init_attr,
    rdma_sys::ibv_send_wr, rdma_sys::ibv_sge, rdma_sys::ibv_wc, Mlx5dvContextAttr, Mlx5dvDevxUmemIn, Mlx5dvObj, Mlx5dvCq,
    Mlx5dvSrq, Mlx5dvAh,
);

/// A library opened with `dlopen`; never closed (the function tables live as long as the process).
struct Lib {
    handle: *mut c_void,
    name: &'static str,
}

impl Lib {
    fn open(name: &'static str) -> Result<Lib, String> {
        let c = std::ffi::CString::new(name).expect("library names have no NUL");
        // SAFETY: dlopen with a NUL-terminated name; the handle is never closed.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!("cannot load {name}: {}", dlerror_text()));
        }
        Ok(Lib { handle, name })
    }

    /// The address of `name`, as a function pointer of type `F`; `None` when the library lacks it.
    ///
    /// # Safety
    /// `F` must be an `unsafe extern "C" fn` type matching the symbol's C prototype.
    unsafe fn sym<F: Copy>(&self, name: &CStr) -> Option<F> {
        const { assert!(size_of::<F>() == size_of::<*mut c_void>()) };
        // SAFETY: dlsym on a live handle with a NUL-terminated name.
        let p = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        // SAFETY: F is a function pointer type of pointer size matching the symbol (the caller's
        // contract); a non-null symbol address is a valid value for it.
        (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }
}

fn dlerror_text() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call on this
    // thread, copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, NUL-terminated (see above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// Declares a table of C functions looked up in one library: `required` ones must exist (the table
/// fails to load otherwise), `optional` ones are `None` where the library is too old.
macro_rules! fn_table {
    (
        $(#[$m:meta])* pub struct $T:ident;
        required { $($(#[$fm:meta])* fn $f:ident($($a:ty),* $(,)?) $(-> $r:ty)?;)* }
        optional { $($(#[$om:meta])* fn $o:ident($($oa:ty),* $(,)?) $(-> $or:ty)?;)* }
    ) => {
        $(#[$m])*
        #[allow(non_snake_case)]
        pub struct $T {
            $(
                #[doc = concat!("`", stringify!($f), "`.")]
                $(#[$fm])*
                pub $f: unsafe extern "C" fn($($a),*) $(-> $r)?,
            )*
            $(
                #[doc = concat!("`", stringify!($o), "`; `None` where the library lacks it.")]
                $(#[$om])*
                pub $o: Option<unsafe extern "C" fn($($oa),*) $(-> $or)?>,
            )*
        }
        impl $T {
            fn load(lib: &Lib) -> Result<$T, String> {
                Ok($T {
                    $($f: {
                        // SAFETY: the field's type is the function's prototype in the rdma-core header
                        // it comes from (verbs.h, mlx5dv.h).
                        unsafe { lib.sym(cstr(concat!(stringify!($f), "\0"))) }
                            .ok_or_else(|| format!("{} has no {} (rdma-core too old?)", lib.name, stringify!($f)))?
                    },)*
                    $($o: {
                        // SAFETY: as for the required functions.
                        unsafe { lib.sym(cstr(concat!(stringify!($o), "\0"))) }
                    },)*
                })
            }
        }
    };
}

fn cstr(s: &'static str) -> &'static CStr {
    CStr::from_bytes_with_nul(s.as_bytes()).expect("symbol names end with one NUL")
}

fn_table! {
    /// The libibverbs functions used (prototypes from `<infiniband/verbs.h>`).
    pub struct Verbs;
    required {
        fn ibv_get_device_list(*mut c_int) -> *mut *mut ibv_device;
        fn ibv_free_device_list(*mut *mut ibv_device);
        fn ibv_get_device_name(*mut ibv_device) -> *const c_char;
        fn ibv_open_device(*mut ibv_device) -> *mut ibv_context;
        fn ibv_close_device(*mut ibv_context) -> c_int;
        fn ibv_query_device(*mut ibv_context, *mut ibv_device_attr) -> c_int;
        /// The exported (IBVERBS_1.1) `ibv_query_port`, which fills the fields up to `flags`.
        fn ibv_query_port(*mut ibv_context, u8, *mut ibv_port_attr) -> c_int;
        fn ibv_query_gid(*mut ibv_context, u8, c_int, *mut ibv_gid) -> c_int;
        fn ibv_alloc_pd(*mut ibv_context) -> *mut ibv_pd;
        fn ibv_dealloc_pd(*mut ibv_pd) -> c_int;
        fn ibv_reg_mr(*mut ibv_pd, *mut c_void, usize, c_int) -> *mut ibv_mr;
        fn ibv_dereg_mr(*mut ibv_mr) -> c_int;
        fn ibv_create_cq(*mut ibv_context, c_int, *mut c_void, *mut ibv_comp_channel, c_int) -> *mut ibv_cq;
        fn ibv_destroy_cq(*mut ibv_cq) -> c_int;
        fn ibv_create_qp(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp;
        fn ibv_modify_qp(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int;
        fn ibv_destroy_qp(*mut ibv_qp) -> c_int;
        fn ibv_create_srq(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq;
        fn ibv_destroy_srq(*mut ibv_srq) -> c_int;
        fn ibv_create_ah(*mut ibv_pd, *mut ibv_ah_attr) -> *mut ibv_ah;
        fn ibv_destroy_ah(*mut ibv_ah) -> c_int;
        fn ibv_wc_status_str(ibv_wc_status::Type) -> *const c_char;
    }
    optional {
        /// rdma-core v34+ (IBVERBS_1.12).
        fn ibv_reg_dmabuf_mr(*mut ibv_pd, u64, usize, u64, c_int, c_int) -> *mut ibv_mr;
        /// rdma-core v32+ (IBVERBS_1.11): the GID with its type (RoCE v1/v2).
        fn _ibv_query_gid_ex(*mut ibv_context, u32, u32, *mut ibv_gid_entry, u32, usize) -> c_int;
    }
}

fn_table! {
    /// The libmlx5 functions used (prototypes from `<infiniband/mlx5dv.h>`).
    pub struct Mlx5;
    required {
        fn mlx5dv_is_supported(*mut ibv_device) -> bool;
        fn mlx5dv_open_device(*mut ibv_device, *mut Mlx5dvContextAttr) -> *mut ibv_context;
        fn mlx5dv_init_obj(*mut Mlx5dvObj, u64) -> c_int;
        fn mlx5dv_devx_general_cmd(*mut ibv_context, *const c_void, usize, *mut c_void, usize) -> c_int;
        fn mlx5dv_devx_obj_create(*mut ibv_context, *const c_void, usize, *mut c_void, usize) -> *mut Mlx5dvDevxObj;
        fn mlx5dv_devx_obj_modify(*mut Mlx5dvDevxObj, *const c_void, usize, *mut c_void, usize) -> c_int;
        fn mlx5dv_devx_obj_destroy(*mut Mlx5dvDevxObj) -> c_int;
        fn mlx5dv_devx_umem_reg(*mut ibv_context, *mut c_void, usize, u32) -> *mut Mlx5dvDevxUmem;
        fn mlx5dv_devx_umem_dereg(*mut Mlx5dvDevxUmem) -> c_int;
        fn mlx5dv_devx_alloc_uar(*mut ibv_context, u32) -> *mut Mlx5dvDevxUar;
        fn mlx5dv_devx_free_uar(*mut Mlx5dvDevxUar);
        fn mlx5dv_devx_query_eqn(*mut ibv_context, u32, *mut u32) -> c_int;
    }
    optional {
        /// rdma-core v42+ (MLX5_1.19 with dma-buf): umems backed by a dma-buf.
        fn mlx5dv_devx_umem_reg_ex(*mut ibv_context, *mut Mlx5dvDevxUmemIn) -> *mut Mlx5dvDevxUmem;
    }
}

// SAFETY: the tables hold only function pointers into libraries that stay loaded for the process's
// life; calling them is what needs care (and `unsafe`).
unsafe impl Send for Verbs {}
// SAFETY: see `Send`: immutable function pointers.
unsafe impl Sync for Verbs {}
// SAFETY: see `Verbs`.
unsafe impl Send for Mlx5 {}
// SAFETY: see `Verbs`.
unsafe impl Sync for Mlx5 {}

fn load<T>(name: &'static str, make: fn(&Lib) -> Result<T, String>) -> Result<T, String> {
    make(&Lib::open(name)?).map_err(|e| format!("{e}; {INSTALL_RDMA_CORE}"))
}

/// The libibverbs table, loaded on first use. The error says which library or symbol is missing and
/// what to install.
pub fn verbs() -> crate::error::Result<&'static Verbs> {
    static V: OnceLock<Result<Verbs, String>> = OnceLock::new();
    V.get_or_init(|| load(LIBIBVERBS, Verbs::load).map_err(|e| with_hint(e, "rdma-core's verbs library")))
        .as_ref()
        .map_err(|e| crate::error::Error::new(e.clone()))
}

/// The libmlx5 table, loaded on first use (after libibverbs, which it needs).
pub fn mlx5() -> crate::error::Result<&'static Mlx5> {
    static M: OnceLock<Result<Mlx5, String>> = OnceLock::new();
    verbs()?;
    M.get_or_init(|| load(LIBMLX5, Mlx5::load).map_err(|e| with_hint(e, "the mlx5 (ConnectX) provider library")))
        .as_ref()
        .map_err(|e| crate::error::Error::new(e.clone()))
}

fn with_hint(e: String, what: &str) -> String {
    if e.contains(INSTALL_RDMA_CORE) {
        e
    } else {
        format!("{e} ({what}); {INSTALL_RDMA_CORE}")
    }
}

/// The last OS error (`errno`), as `"<text> (errno N)"`. Read it right after the failed call.
pub fn errno_text() -> String {
    io_text(&std::io::Error::last_os_error())
}

/// An OS error as `"<text> (errno N)"`.
pub fn io_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match e.raw_os_error() {
        // std's text ends with "(os error N)"; say errno, which is what the man pages name.
        Some(n) => format!("{} (errno {n})", text.split(" (os error").next().unwrap_or(&text)),
        None => text,
    }
}

/// A C string from the library (device name, status text), copied; "?" for NULL.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string that stays valid during the call.
pub unsafe fn c_text(p: *const c_char) -> String {
    if p.is_null() {
        return "?".into();
    }
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// `ibv_wc_status_str(status)` and the number, e.g. "remote access error (status 10)".
pub fn wc_status_text(status: ibv_wc_status::Type) -> String {
    let text = match verbs() {
        // SAFETY: ibv_wc_status_str accepts any value and returns a static NUL-terminated string.
        Ok(v) => unsafe { c_text((v.ibv_wc_status_str)(status)) },
        Err(_) => "?".into(),
    };
    format!("{text} (status {status})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_text_names_the_errno() {
        let t = io_text(&std::io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        assert_eq!(t, "Operation not supported (errno 95)");
    }

    #[test]
    fn a_missing_library_says_what_to_install() {
        let e = Lib::open("libdoes-not-exist-rshmem.so.7").err().unwrap();
        assert!(e.starts_with("cannot load libdoes-not-exist-rshmem.so.7: "), "{e}");
        let e = with_hint(e, "x");
        assert!(e.contains("apt install libibverbs1"), "{e}");
    }

    #[test]
    fn the_tables_load_where_rdma_core_is_installed() {
        // CI installs rdma-core's libraries (libibverbs-dev pulls them in); elsewhere say why not.
        match (verbs(), mlx5()) {
            (Ok(v), Ok(m)) => {
                assert!(v.ibv_reg_dmabuf_mr.is_some() || v._ibv_query_gid_ex.is_none());
                let _ = m.mlx5dv_devx_umem_reg_ex;
            }
            (v, m) => {
                let e = v.err().or(m.err()).unwrap().to_string();
                assert!(e.contains("cannot load") && e.contains(INSTALL_RDMA_CORE), "{e}");
            }
        }
    }
}
