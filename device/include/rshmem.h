/*
 * rshmem.h: the C API of rshmem, a PGAS runtime for NVIDIA GPUs.
 *
 * Host functions live in the host library (librshmem.so / librshmem.a, crate `rshmem`); device functions
 * live in the device library (librshmem_device.a: the Rust device crate compiled to PTX, plus a small
 * CUDA shim). CUDA C++ programs are compiled with `nvcc -rdc=true` and linked against both:
 *
 *   nvcc -rdc=true -arch=sm_90 -I device/include prog.cu librshmem_device.a -L target/release -lrshmem -lcuda
 *
 * From C or C++ compiled without nvcc only the host part is visible.
 *
 * Names that exist on both sides (rshmem_my_pe, rshmem_putmem, ...) are declared __host__ __device__:
 * host code calls the host library, device code the device library.
 *
 * Initialization from a CUDA program: call rshmem_init_cuda() (rshmem_init() followed by
 * rshmemi_bind_device_library(), which tells the runtime where this program's copy of the device state
 * lives). Device calls made without it fail with a message that names the call.
 */
#ifndef RSHMEM_H
#define RSHMEM_H

#include <stddef.h>
#include <stdint.h>
#if !defined(__cplusplus)
#include <stdbool.h>
#endif

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define RSHMEM_HOSTDEV __host__ __device__
#define RSHMEM_DEVICE __device__
#else
#define RSHMEM_HOSTDEV
#endif

/* The stream type of the *_on_stream calls: cudaStream_t when the CUDA runtime headers are in (always
 * under nvcc), otherwise the very same type spelled without them, so C programs need no CUDA headers.
 * A stream passed to rshmem is NULL (the legacy default stream) or a stream of this PE's GPU (created
 * in its primary context, the one the CUDA runtime uses), not destroyed before the work rshmem
 * enqueued on it has run: rshmem hands it to the CUDA driver as it is. */
#if defined(CUDART_VERSION)
#define RSHMEM_STREAM_T cudaStream_t
#else
struct CUstream_st;
#define RSHMEM_STREAM_T struct CUstream_st *
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ constants (device/src/state.rs) */
/* Comparison operators of rshmem_wait_until_*, rshmem_test_*, rshmem_signal_wait_until. */
enum {
    RSHMEM_CMP_EQ = 0,
    RSHMEM_CMP_NE = 1,
    RSHMEM_CMP_GT = 2,
    RSHMEM_CMP_LE = 3,
    RSHMEM_CMP_LT = 4,
    RSHMEM_CMP_GE = 5
};
/* Signal operators of rshmem_putmem_signal* and rshmem_signal_op. */
enum { RSHMEM_SIGNAL_SET = 9, RSHMEM_SIGNAL_ADD = 10 }; /* NVSHMEM's values */
/* Teams (NVSHMEM's handles; teams made by splits get handles from 6 up). */
enum { RSHMEM_TEAM_INVALID = -1, RSHMEM_TEAM_WORLD = 0, RSHMEM_TEAM_SHARED = 1, RSHMEM_TEAM_NODE = 2 };
/* Element types of rshmem_reduce / rshmem_reducescatter (device/src/coll.rs, coll::dtype). */
enum {
    RSHMEM_DTYPE_I8 = 0,
    RSHMEM_DTYPE_I16 = 1,
    RSHMEM_DTYPE_I32 = 2,
    RSHMEM_DTYPE_I64 = 3,
    RSHMEM_DTYPE_U8 = 4,
    RSHMEM_DTYPE_U16 = 5,
    RSHMEM_DTYPE_U32 = 6,
    RSHMEM_DTYPE_U64 = 7,
    RSHMEM_DTYPE_F16 = 8,
    RSHMEM_DTYPE_BF16 = 9,
    RSHMEM_DTYPE_F32 = 10,
    RSHMEM_DTYPE_F64 = 11,
    RSHMEM_DTYPE_DOUBLE2 = 12 /* (value, location) pairs of doubles: RSHMEM_OP_MAXLOC only */
};
/* Reduction operators (coll::op): bitwise ones for the integer types, MIN to PROD for all but DOUBLE2. */
enum {
    RSHMEM_OP_AND = 0,
    RSHMEM_OP_OR = 1,
    RSHMEM_OP_XOR = 2,
    RSHMEM_OP_MIN = 3,
    RSHMEM_OP_MAX = 4,
    RSHMEM_OP_SUM = 5,
    RSHMEM_OP_PROD = 6,
    RSHMEM_OP_MAXLOC = 7
};

/* Opaque unique id for programs with their own launcher (rshmem_get_unique_id on one PE, passed to all). */
typedef struct {
    char internal[128];
} rshmem_uniqueid_t;

/* ------------------------------------------------------------------ host library */
int rshmem_init(void);
int rshmem_init_unique_id(const rshmem_uniqueid_t *id, int pe, int npes);
/* Initializes with the ranks of the MPI communicator that mpi_comm points to (an MPI_Comm *) as the PEs.
 * The program links MPI; rshmem finds MPI_Comm_rank/size/Bcast in the process. 0 on success. */
int rshmem_init_mpi_comm(const void *mpi_comm);
/* nvshmemx_buffer_register / unregister, with NVSHMEM's checks and contract: the IBGDA transport registers the
 * buffer with its NIC, which may write into it until it is unregistered, so it must stay valid until then. */
int rshmem_buffer_register(void *addr, size_t len);
int rshmem_buffer_unregister(void *addr);
int rshmem_buffer_unregister_all(void);
int rshmem_get_unique_id(rshmem_uniqueid_t *id);
void rshmem_finalize(void);
/* Ends every PE of the job with `status` (under rshmrun: rshmrun exits with it). Does not return. */
void rshmem_global_exit(int status);
/* Collective resize of a symmetric allocation (NULL: malloc; 0 bytes: free, returns NULL); the first
 * min(old, new) bytes keep this PE's contents. NULL on an error (printed), the old allocation kept. */
void *rshmem_realloc(void *ptr, size_t bytes);
/* The CUmodule of a CUlibrary the program loaded (cuLibraryGetModule), registered as rshmem_cumodule_init
 * does; 0 on success. */
int rshmem_culibrary_init(void *library);
int rshmem_culibrary_finalize(void *library);
/* 0: rshmem is not initialized in this process; 2: it is (NVSHMEM's NVSHMEM_STATUS_* numbering). */
int rshmem_init_status(void);

void *rshmem_malloc(size_t bytes);
void *rshmem_calloc(size_t count, size_t size);
void *rshmem_align(size_t alignment, size_t bytes);
void rshmem_free(void *ptr);

void rshmem_barrier_all_on_stream(RSHMEM_STREAM_T stream);
void rshmem_sync_all_on_stream(RSHMEM_STREAM_T stream);
void rshmem_quiet_on_stream(RSHMEM_STREAM_T stream);
void rshmem_putmem_on_stream(void *dst, const void *src, size_t bytes, int pe, RSHMEM_STREAM_T stream);
void rshmem_getmem_on_stream(void *dst, const void *src, size_t bytes, int pe, RSHMEM_STREAM_T stream);
/* The host's putmem_nbi / getmem_nbi: complete by the next rshmem_quiet (the device library's
 * rshmem_putmem_nbi / rshmem_getmem_nbi are the device forms). */
void rshmem_host_putmem_nbi(void *dst, const void *src, size_t bytes, int pe);
void rshmem_host_getmem_nbi(void *dst, const void *src, size_t bytes, int pe);

/* Point operations from the host (runtime/src/api/point.rs), run by the device library's implementation:
 * host AMOs (`code`: 1 fetch, 2 set, 3 swap, 4 compare_swap, 5 fetch_add, 6 add, 7 fetch_and, 8 and,
 * 9 fetch_or, 10 or, 11 fetch_xor, 12 xor; `width` 4 or 8; the old value returned by the fetching codes),
 * and the on-stream p, g, signal_op and waits (`width` 2, 4 or 8 bytes; `is_signed` for the comparison).
 * The on-stream waits block later work on the stream; `status` and `values` of the _all form are
 * device-accessible arrays of `nelems` (NULL: none). The CPU backend runs on-stream calls at once. */
uint64_t rshmem_host_amo(int code, unsigned width, void *dest, uint64_t value, uint64_t cond, int pe);
void rshmem_p_on_stream(void *dest, uint64_t value, unsigned width, int pe, RSHMEM_STREAM_T stream);
uint64_t rshmem_g_on_stream(const void *src, unsigned width, int pe, RSHMEM_STREAM_T stream);
void rshmem_signal_op_on_stream(uint64_t *sig, uint64_t value, int op, int pe, RSHMEM_STREAM_T stream);
void rshmem_wait_until_on_stream(void *ivar, int cmp, uint64_t value, unsigned width, bool is_signed,
                                 RSHMEM_STREAM_T stream);
void rshmem_wait_until_all_on_stream(void *ivars, size_t nelems, const int *status, int cmp, uint64_t value,
                                     const void *values, unsigned width, bool is_signed, RSHMEM_STREAM_T stream);
/* Strided put / get on a stream (`dst` / `sst`: strides in elements, at least 1; `width` 1, 2, 4, 8 or 16;
 * the local buffer device-accessible). The host forms are rshmem_iputmem / rshmem_igetmem below. */
void rshmem_iputmem_on_stream(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
                              unsigned width, int pe, RSHMEM_STREAM_T stream);
void rshmem_igetmem_on_stream(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
                              unsigned width, int pe, RSHMEM_STREAM_T stream);

/* Teams (collective over the parent team). `config` points to a 64-byte nvshmem_team_config_t or is
 * NULL; `mask` selects its fields (1: num_contexts, 2: uniqueid). A PE of the parent that is not in the
 * new team gets RSHMEM_TEAM_INVALID. 0 on success; otherwise the error is printed and 1 returned. */
int rshmem_team_split_strided(int parent, int start, int stride, int size, const void *config, long mask,
                              int *new_team);
int rshmem_team_split_2d(int parent, int xrange, const void *xaxis_config, long xaxis_mask, int *xaxis_team,
                         const void *yaxis_config, long yaxis_mask, int *yaxis_team);
int rshmem_team_destroy(int team);
int rshmem_team_get_config(int team, void *config);
/* Teams of arbitrary members. rshmem_team_get_uniqueid writes a fresh id (never all ones) for one PE to
 * hand to the members. rshmem_team_init is collective over the `npes` PEs that pass the same
 * config->uniqueid (a version-2 64-byte config; the id is read whatever `mask` says), and no others:
 * this PE becomes member `pe_idx_in_team` (each member its own index, 0 to npes - 1). *team is the new
 * team, or RSHMEM_TEAM_INVALID with 1 returned and the error printed (bad arguments, members that
 * disagree on npes or share an index, no team slot free on every member, or with RSHMEM_WAIT_TIMEOUT
 * members that never arrive). */
int rshmem_team_get_uniqueid(unsigned long long *uniqueid);
int rshmem_team_init(int *team, const void *config, long mask, int npes, int pe_idx_in_team);

/* Collectives enqueued on a stream (run there by one block; the CPU backend runs them at once). The
 * arguments are those of the host calls below. 0 on success; otherwise the error is printed and 1
 * returned. */
int rshmem_barrier_on_stream(int team, RSHMEM_STREAM_T stream);
int rshmem_team_sync_on_stream(int team, RSHMEM_STREAM_T stream);
int rshmem_broadcastmem_on_stream(int team, void *dest, const void *src, size_t bytes, int root,
                                  RSHMEM_STREAM_T stream);
int rshmem_fcollectmem_on_stream(int team, void *dest, const void *src, size_t bytes, RSHMEM_STREAM_T stream);
int rshmem_collectmem_on_stream(int team, void *dest, const void *src, size_t bytes, RSHMEM_STREAM_T stream);
int rshmem_alltoallmem_on_stream(int team, void *dest, const void *src, size_t bytes, RSHMEM_STREAM_T stream);
int rshmem_reduce_on_stream(int team, void *dest, const void *src, size_t nreduce, int dtype, int op,
                            RSHMEM_STREAM_T stream);
int rshmem_reducescatter_on_stream(int team, void *dest, const void *src, size_t nreduce, int dtype, int op,
                                   RSHMEM_STREAM_T stream);

/* Modules the program loads itself (cuModuleLoad* of code linked with librshmem_device.a): init fills
 * in the module's copy of the device state, now and whenever it changes (heap growth); call finalize
 * before unloading the module. `module` is a CUmodule. 0 on success; otherwise the error is printed
 * (for instance: the module was not linked with the device library) and 1 returned. CUDA backend only. */
int rshmem_cumodule_init(void *module);
int rshmem_cumodule_finalize(void *module);

/* Internal: tells the runtime where an nvcc-linked module's rshmemi_device_state lives (bytes: 0 = the
 * runtime's own sizeof(DeviceState)). Called by rshmemi_bind_device_library. */
int rshmemi_register_device_state(void *device_address, size_t bytes);

/* In the device library archive (librshmem_device.a, device/cuda/rshmem_device_init.cu): finds this
 * program's rshmemi_device_state (a one-thread kernel on the current device) and registers it with the
 * runtime. Call after rshmem_init(); 0 on success, otherwise prints which CUDA call failed and returns 1.
 * Outside nvcc it is declared weak so that host-only programs that never link the archive still link. */
#if !defined(__CUDACC__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((weak))
#endif
int rshmemi_bind_device_library(void);

/* ------------------------------------------------------------------ host and device */
RSHMEM_HOSTDEV int rshmem_my_pe(void);
RSHMEM_HOSTDEV int rshmem_n_pes(void);
RSHMEM_HOSTDEV int rshmem_team_my_pe(int team);
RSHMEM_HOSTDEV int rshmem_team_n_pes(int team);
RSHMEM_HOSTDEV void *rshmem_ptr(const void *dest, int pe);
RSHMEM_HOSTDEV void rshmem_barrier_all(void);
RSHMEM_HOSTDEV void rshmem_sync_all(void);
RSHMEM_HOSTDEV void rshmem_quiet(void);
RSHMEM_HOSTDEV void rshmem_putmem(void *dst, const void *src, size_t bytes, int pe);
RSHMEM_HOSTDEV void rshmem_getmem(void *dst, const void *src, size_t bytes, int pe);
/* Strided put / get of `nelems` elements of `width` bytes (1, 2, 4, 8 or 16): element i of the source at
 * stride `sst` to element i of the destination at stride `dst` (strides in elements, at least 1). To any
 * PE, mapped or remote. The _warp / _block device forms split the elements over the group. */
RSHMEM_HOSTDEV void rshmem_iputmem(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
                                   unsigned width, int pe);
RSHMEM_HOSTDEV void rshmem_igetmem(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
                                   unsigned width, int pe);
/* signal_op: from the host complete on return; on the device as any signal update. */
RSHMEM_HOSTDEV void rshmem_signal_op(uint64_t *sig, uint64_t value, int op, int pe);

/* Teams and collectives. Every member of `team` calls with the same arguments; all return 0 (the host
 * calls: 1 after printing the error; the device calls stop the PE with a message naming the call).
 * Byte counts: broadcastmem `bytes` from member `root`; fcollectmem / alltoallmem `bytes` per member
 * block; collectmem this PE's `bytes` (each member may pass its own), concatenated in member order.
 * Reductions: `nreduce` elements of type `dtype` (RSHMEM_DTYPE_*) combined with `op` (RSHMEM_OP_*) in
 * member order; reducescatter reduces a `n_pes * nreduce`-element source and member i keeps block i. */
RSHMEM_HOSTDEV int rshmem_team_translate_pe(int src_team, int src_pe, int dest_team);
RSHMEM_HOSTDEV int rshmem_barrier(int team);
RSHMEM_HOSTDEV int rshmem_team_sync(int team);
RSHMEM_HOSTDEV int rshmem_broadcastmem(int team, void *dest, const void *src, size_t bytes, int root);
RSHMEM_HOSTDEV int rshmem_fcollectmem(int team, void *dest, const void *src, size_t bytes);
RSHMEM_HOSTDEV int rshmem_collectmem(int team, void *dest, const void *src, size_t bytes);
RSHMEM_HOSTDEV int rshmem_alltoallmem(int team, void *dest, const void *src, size_t bytes);
RSHMEM_HOSTDEV int rshmem_reduce(int team, void *dest, const void *src, size_t nreduce, int dtype, int op);
RSHMEM_HOSTDEV int rshmem_reducescatter(int team, void *dest, const void *src, size_t nreduce, int dtype, int op);

/* ------------------------------------------------------------------ device library (device/src/capi.rs) */
#if defined(__CUDACC__)
/* p / g by size. */
RSHMEM_DEVICE void rshmem_p8(void *dst, uint8_t value, int pe);
RSHMEM_DEVICE void rshmem_p16(void *dst, uint16_t value, int pe);
RSHMEM_DEVICE void rshmem_p32(void *dst, uint32_t value, int pe);
RSHMEM_DEVICE void rshmem_p64(void *dst, uint64_t value, int pe);
RSHMEM_DEVICE uint8_t rshmem_g8(const void *src, int pe);
RSHMEM_DEVICE uint16_t rshmem_g16(const void *src, int pe);
RSHMEM_DEVICE uint32_t rshmem_g32(const void *src, int pe);
RSHMEM_DEVICE uint64_t rshmem_g64(const void *src, int pe);

/* put / get: thread, warp and block scope; blocking and non-blocking (complete at rshmem_quiet). */
RSHMEM_DEVICE void rshmem_putmem_nbi(void *dst, const void *src, size_t bytes, int pe);
RSHMEM_DEVICE void rshmem_putmem_warp(void *dst, const void *src, size_t bytes, int pe);
RSHMEM_DEVICE void rshmem_putmem_nbi_warp(void *dst, const void *src, size_t bytes, int pe);
RSHMEM_DEVICE void rshmem_putmem_block(void *dst, const void *src, size_t bytes, int pe);
RSHMEM_DEVICE void rshmem_putmem_nbi_block(void *dst, const void *src, size_t bytes, int pe);
RSHMEM_DEVICE void rshmem_iputmem_warp(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
                                        unsigned width, int pe);
RSHMEM_DEVICE void rshmem_igetmem_warp(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
                                        unsigned width, int pe);
RSHMEM_DEVICE void rshmem_iputmem_block(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
                                         unsigned width, int pe);
RSHMEM_DEVICE void rshmem_igetmem_block(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
                                         unsigned width, int pe);
RSHMEM_DEVICE void rshmem_getmem_nbi(void *dst, const void *src, size_t bytes, int pe);
RSHMEM_DEVICE void rshmem_getmem_warp(void *dst, const void *src, size_t bytes, int pe);
RSHMEM_DEVICE void rshmem_getmem_nbi_warp(void *dst, const void *src, size_t bytes, int pe);
RSHMEM_DEVICE void rshmem_getmem_block(void *dst, const void *src, size_t bytes, int pe);
RSHMEM_DEVICE void rshmem_getmem_nbi_block(void *dst, const void *src, size_t bytes, int pe);

/* Atomics by size (signed and floating-point types: bit-cast to the unsigned type of their width). */
#define RSHMEMI_DECL_AMO(BITS)                                                                          \
    RSHMEM_DEVICE uint##BITS##_t rshmem_atomic_fetch_add##BITS(void *dst, uint##BITS##_t value, int pe); \
    RSHMEM_DEVICE void rshmem_atomic_add##BITS(void *dst, uint##BITS##_t value, int pe);                 \
    RSHMEM_DEVICE uint##BITS##_t rshmem_atomic_fetch_and##BITS(void *dst, uint##BITS##_t value, int pe); \
    RSHMEM_DEVICE void rshmem_atomic_and##BITS(void *dst, uint##BITS##_t value, int pe);                 \
    RSHMEM_DEVICE uint##BITS##_t rshmem_atomic_fetch_or##BITS(void *dst, uint##BITS##_t value, int pe);  \
    RSHMEM_DEVICE void rshmem_atomic_or##BITS(void *dst, uint##BITS##_t value, int pe);                  \
    RSHMEM_DEVICE uint##BITS##_t rshmem_atomic_fetch_xor##BITS(void *dst, uint##BITS##_t value, int pe); \
    RSHMEM_DEVICE void rshmem_atomic_xor##BITS(void *dst, uint##BITS##_t value, int pe);                 \
    RSHMEM_DEVICE uint##BITS##_t rshmem_atomic_fetch_inc##BITS(void *dst, int pe);                       \
    RSHMEM_DEVICE void rshmem_atomic_inc##BITS(void *dst, int pe);                                       \
    RSHMEM_DEVICE uint##BITS##_t rshmem_atomic_swap##BITS(void *dst, uint##BITS##_t value, int pe);      \
    RSHMEM_DEVICE uint##BITS##_t rshmem_atomic_compare_swap##BITS(void *dst, uint##BITS##_t cond,        \
                                                                  uint##BITS##_t value, int pe);         \
    RSHMEM_DEVICE uint##BITS##_t rshmem_atomic_fetch##BITS(const void *src, int pe);                     \
    RSHMEM_DEVICE void rshmem_atomic_set##BITS(void *dst, uint##BITS##_t value, int pe);
RSHMEMI_DECL_AMO(32)
RSHMEMI_DECL_AMO(64)
#undef RSHMEMI_DECL_AMO

/* Point-to-point synchronization on a symmetric variable of the calling PE (signedness matters). */
#define RSHMEMI_DECL_WAIT(SUFFIX, CTYPE)                                                   \
    RSHMEM_DEVICE void rshmem_wait_until_##SUFFIX(const void *ivar, int cmp, CTYPE value); \
    RSHMEM_DEVICE int rshmem_test_##SUFFIX(const void *ivar, int cmp, CTYPE value);
RSHMEMI_DECL_WAIT(i16, int16_t)
RSHMEMI_DECL_WAIT(u16, uint16_t)
RSHMEMI_DECL_WAIT(i32, int32_t)
RSHMEMI_DECL_WAIT(u32, uint32_t)
RSHMEMI_DECL_WAIT(i64, int64_t)
RSHMEMI_DECL_WAIT(u64, uint64_t)
#undef RSHMEMI_DECL_WAIT

/* Signals: put then update a symmetric uint64_t signal on `pe` (op RSHMEM_SIGNAL_SET / _ADD); the signal
 * never becomes visible before the data. */
#define RSHMEMI_DECL_PUT_SIGNAL(NAME)                                                              \
    RSHMEM_DEVICE void NAME(void *dst, const void *src, size_t bytes, uint64_t *sig, uint64_t value, \
                            int op, int pe);
RSHMEMI_DECL_PUT_SIGNAL(rshmem_putmem_signal)
RSHMEMI_DECL_PUT_SIGNAL(rshmem_putmem_signal_nbi)
RSHMEMI_DECL_PUT_SIGNAL(rshmem_putmem_signal_warp)
RSHMEMI_DECL_PUT_SIGNAL(rshmem_putmem_signal_nbi_warp)
RSHMEMI_DECL_PUT_SIGNAL(rshmem_putmem_signal_block)
RSHMEMI_DECL_PUT_SIGNAL(rshmem_putmem_signal_nbi_block)
#undef RSHMEMI_DECL_PUT_SIGNAL
RSHMEM_DEVICE uint64_t rshmem_signal_wait_until(const uint64_t *sig, int cmp, uint64_t value);
RSHMEM_DEVICE uint64_t rshmem_signal_fetch(const uint64_t *sig);

/* Ordering and collectives. */
RSHMEM_DEVICE void rshmem_fence(void);
RSHMEM_DEVICE void rshmem_barrier_all_block(void);
RSHMEM_DEVICE void rshmem_barrier_all_warp(void);
RSHMEM_DEVICE void rshmem_sync_all_block(void);
RSHMEM_DEVICE void rshmem_sync_all_warp(void);

/* Team collectives by warp / block (every thread of the warp/block calls with the same arguments). */
#define RSHMEMI_DECL_SCOPED_COLL(SCOPE)                                                                  \
    RSHMEM_DEVICE int rshmem_barrier_##SCOPE(int team);                                                  \
    RSHMEM_DEVICE int rshmem_team_sync_##SCOPE(int team);                                                \
    RSHMEM_DEVICE int rshmem_broadcastmem_##SCOPE(int team, void *dest, const void *src, size_t bytes,   \
                                                  int root);                                             \
    RSHMEM_DEVICE int rshmem_fcollectmem_##SCOPE(int team, void *dest, const void *src, size_t bytes);   \
    RSHMEM_DEVICE int rshmem_collectmem_##SCOPE(int team, void *dest, const void *src, size_t bytes);    \
    RSHMEM_DEVICE int rshmem_alltoallmem_##SCOPE(int team, void *dest, const void *src, size_t bytes);   \
    RSHMEM_DEVICE int rshmem_reduce_##SCOPE(int team, void *dest, const void *src, size_t nreduce,       \
                                            int dtype, int op);                                          \
    RSHMEM_DEVICE int rshmem_reducescatter_##SCOPE(int team, void *dest, const void *src, size_t nreduce, \
                                                   int dtype, int op);
RSHMEMI_DECL_SCOPED_COLL(warp)
RSHMEMI_DECL_SCOPED_COLL(block)
#undef RSHMEMI_DECL_SCOPED_COLL
#endif /* __CUDACC__ */

#ifdef __cplusplus
} /* extern "C" */
#endif

#if defined(__CUDACC__)
/* rshmem_init() and binding of this program's device library: the initialization for CUDA programs.
 * 0 on success; on failure the runtime or the binding has printed why. */
static inline int rshmem_init_cuda(void) {
    int rc = rshmem_init();
    if (rc != 0) return rc;
    return rshmemi_bind_device_library();
}
#endif

/* Inline fast paths of put/get/p/g for mapped PEs in CUDA C++ kernels (device pass only; they fall back
 * to the library functions declared above). */
#include "rshmem_inline.h"

#endif /* RSHMEM_H */

/* Collective launch: inline, with the CUDA runtime only (no device library needed). Outside the include
 * guard on purpose: defined at the first inclusion that comes after the CUDA runtime's header (a C++
 * program that includes rshmem.h before cuda_runtime.h gets it from nvshmem.h's inclusion, which brings
 * in the CUDA runtime first). */
#if (defined(__CUDACC__) || defined(CUDART_VERSION)) && !defined(RSHMEM_COLLECTIVE_LAUNCH_DEFINED)
#define RSHMEM_COLLECTIVE_LAUNCH_DEFINED
#include <stdio.h>

/* Blocks of `block` threads and `shmem` bytes of dynamic shared memory that can be resident at once on
 * the current device (occupancy x SMs), in *max_blocks; 0 if the device cannot launch cooperatively.
 * Returns 0, or 1 after printing which CUDA call failed. */
static inline int rshmemi_cooperative_capacity(const char *who, const void *func, dim3 block, size_t shmem,
                                               int *max_blocks) {
    int dev = 0, coop = 0, sms = 0, per_sm = 0;
    const char *what = "cudaGetDevice";
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) {
        what = "cudaDeviceGetAttribute(cudaDevAttrCooperativeLaunch)";
        e = cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev);
    }
    if (e == cudaSuccess) {
        what = "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)";
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    }
    if (e == cudaSuccess) {
        what = "cudaOccupancyMaxActiveBlocksPerMultiprocessor";
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, func, (int)(block.x * block.y * block.z), shmem);
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "rshmem: %s: %s failed on CUDA device %d: %s (%s)\n", who, what, dev, cudaGetErrorString(e),
                cudaGetErrorName(e));
        return 1;
    }
    if (!coop) {
        fprintf(stderr, "rshmem: %s: CUDA device %d does not support cooperative launch\n", who, dev);
        *max_blocks = 0;
        return 0;
    }
    *max_blocks = per_sm * sms;
    return 0;
}

/* cudaLaunchCooperativeKernel (all blocks resident at once, so that device-side barriers across blocks
 * cannot deadlock) after checking that the device supports it and that the grid fits. A grid of 0 x 0 x
 * 0 launches the largest grid that fits (as NVSHMEM does). 0 on success; otherwise prints why and
 * returns 1. */
static inline int rshmemx_collective_launch(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                            RSHMEM_STREAM_T stream) {
    const char *who = "rshmemx_collective_launch (nvshmemx_collective_launch)";
    int max_blocks = 0;
    long long blocks = (long long)grid.x * grid.y * grid.z;
    cudaError_t e;
    if (rshmemi_cooperative_capacity(who, func, block, shmem, &max_blocks) != 0) return 1;
    if (max_blocks == 0) {
        fprintf(stderr, "rshmem: %s: no block of %u threads and %zu bytes of dynamic shared memory can be resident "
                        "for a cooperative launch\n", who, block.x * block.y * block.z, shmem);
        return 1;
    }
    if (grid.x == 0 && grid.y == 0 && grid.z == 0) {
        grid.x = (unsigned)max_blocks;
        grid.y = grid.z = 1;
    } else if (blocks == 0 || blocks > max_blocks) {
        fprintf(stderr, "rshmem: %s: a grid of %ux%ux%u blocks cannot be resident at once: at most %d blocks of %u "
                        "threads and %zu bytes of dynamic shared memory\n",
                who, grid.x, grid.y, grid.z, max_blocks, block.x * block.y * block.z, shmem);
        return 1;
    }
    e = cudaLaunchCooperativeKernel(func, grid, block, args, shmem, stream);
    if (e != cudaSuccess) {
        fprintf(stderr, "rshmem: %s: cudaLaunchCooperativeKernel failed: %s (%s)\n", who, cudaGetErrorString(e),
                cudaGetErrorName(e));
        return 1;
    }
    return 0;
}

/* Largest grid (in blocks) that rshmemx_collective_launch accepts for `func` with this block and dynamic
 * shared memory size: occupancy per SM x SMs (0: none). 0 on success, else prints why and returns 1. */
static inline int rshmemx_collective_launch_query_gridsize(const void *func, dim3 block, void **args, size_t shmem,
                                                           int *gridsize) {
    const char *who = "rshmemx_collective_launch_query_gridsize (nvshmemx_collective_launch_query_gridsize)";
    (void)args;
    if (gridsize == NULL) {
        fprintf(stderr, "rshmem: %s: gridsize is null\n", who);
        return 1;
    }
    return rshmemi_cooperative_capacity(who, func, block, shmem, gridsize);
}
#endif
