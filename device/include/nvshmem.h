/*
 * nvshmem.h: NVSHMEM 3.x source compatibility for rshmem.
 *
 * Programs written for NVSHMEM build unchanged against rshmem (`#include <nvshmem.h>` / `<nvshmemx.h>`
 * with -I <rshmem>/device/include): every name here is a static inline wrapper over the rshmem C API
 * (rshmem.h). Build with `nvcc -rdc=true` and link librshmem_device.a plus -lrshmem (see rshmem.h).
 *
 * Every public name of NVSHMEM 3.4.5's headers is declared here and in nvshmemx.h (the list:
 * tests/api/nvshmem-3.4.5.names, checked by scripts/check-api-names.sh). Declared but failing at
 * run time with a message: nvshmemx_buffer_register_symmetric / _unregister_symmetric (NVSHMEM's perftest
 * helper references them). The host AMOs, strided RMA, on-stream point operations and global_exit are
 * rshmem's own implementations (runtime/src/api/point.rs, device/src/point.rs); see README.md's compatibility
 * section for where their semantics go beyond NVSHMEM's.
 *
 * Teams and collectives (barrier, team_sync, broadcast, fcollect, alltoall, reduce, reducescatter, at
 * thread / warp / block scope, from the host and on streams, and team split/destroy/config) are the
 * device library's (device/src/coll.rs): see rshmem.h for their contracts. NVSHMEMX_INIT_WITH_MPI_COMM
 * and nvshmemx_buffer_register/unregister are provided (see nvshmemx.h).
 *
 * Differences to keep in mind:
 *  - Host-side nvshmem_TYPE_put_nbi / get_nbi / putmem_nbi complete by the next quiet: to PEs of this node
 *    on GPUs they are queued on the runtime's host-RMA stream; elsewhere they are blocking.
 *  - long is 64-bit (LP64 Linux only); char is signed (its reductions are those of int8_t).
 *  - half / __nv_bfloat16 RMA and collectives (and double2 for maxloc) exist under nvcc and in host C++
 *    where the CUDA headers are on the include path, not in C.
 */
#ifndef RSHMEM_NVSHMEM_H
#define RSHMEM_NVSHMEM_H

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
/* What NVSHMEM's headers bring in, for programs that rely on it (`half`, `__nv_bfloat16`, `double2`,
 * cudaStream_t, the driver API's types): always under nvcc; in host-only C++ when the CUDA headers are
 * on the include path (NVSHMEM's host programs, e.g. its perftests' .cpp files compiled by the host
 * compiler). With the PyPI CUDA tools, cuda_fp16.h needs the CCCL headers (nvidia-cuda-cccl;
 * scripts/install-cuda-tools.sh installs them). NVSHMEMI_HAVE_CUDA_TYPES says whether they are in. */
#if defined(__CUDACC__)
#define NVSHMEMI_HAVE_CUDA_TYPES 1
#elif defined(__cplusplus) && defined(__has_include)
#if __has_include(<cuda_runtime.h>) && __has_include(<cuda_fp16.h>) && __has_include(<cuda_bf16.h>) && \
    __has_include(<cuda.h>)
#define NVSHMEMI_HAVE_CUDA_TYPES 1
#endif
#endif
#if defined(NVSHMEMI_HAVE_CUDA_TYPES)
#include <cuda_runtime.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif
#include "rshmem.h"

/* ------------------------------------------------------------------ qualifiers */
#if defined(__CUDACC__)
#define NVSHMEMI_HD __host__ __device__
#define NVSHMEMI_DEV static inline __device__
#else
#define NVSHMEMI_HD
#endif
#define NVSHMEMI_HOSTDEV static inline NVSHMEMI_HD
#define NVSHMEMI_HOST static inline

/* ------------------------------------------------------------------ constants and types */
enum {
    NVSHMEM_CMP_EQ = RSHMEM_CMP_EQ,
    NVSHMEM_CMP_NE = RSHMEM_CMP_NE,
    NVSHMEM_CMP_GT = RSHMEM_CMP_GT,
    NVSHMEM_CMP_LE = RSHMEM_CMP_LE,
    NVSHMEM_CMP_LT = RSHMEM_CMP_LT,
    NVSHMEM_CMP_GE = RSHMEM_CMP_GE,
    NVSHMEM_CMP_SENTINEL = 0x7fffffff
};
enum { NVSHMEM_SIGNAL_SET = RSHMEM_SIGNAL_SET, NVSHMEM_SIGNAL_ADD = RSHMEM_SIGNAL_ADD };

typedef int32_t nvshmem_team_t;
typedef nvshmem_team_t nvshmemx_team_t;
/* NVSHMEM's team handles. NVSHMEMX_TEAM_SAME_MYPE_NODE is one of NVSHMEM's internal teams, which rshmem
 * does not make: a collective on it fails naming the team. */
enum {
    NVSHMEM_TEAM_INVALID = RSHMEM_TEAM_INVALID,
    NVSHMEM_TEAM_WORLD = RSHMEM_TEAM_WORLD,
    NVSHMEM_TEAM_SHARED = RSHMEM_TEAM_SHARED,
    NVSHMEMX_TEAM_NODE = RSHMEM_TEAM_NODE,
    NVSHMEMX_TEAM_SAME_MYPE_NODE = 3
};
/* NVSHMEM's numbering of its predefined teams (indices into its team table; rshmem's handles are the
 * same numbers for WORLD, SHARED and NODE). */
enum {
    NVSHMEM_TEAM_WORLD_INDEX = 0,
    NVSHMEM_TEAM_SHARED_INDEX = 1,
    NVSHMEM_TEAM_NODE_INDEX = 2,
    NVSHMEM_TEAM_SAME_MYPE_NODE_INDEX = 3,
    NVSHMEM_TEAM_SAME_GPU_INDEX = 4,
    NVSHMEM_TEAM_GPU_LEADERS_INDEX = 5,
    NVSHMEM_TEAMS_MIN = 6,
    NVSHMEM_TEAM_INDEX_MAX = 0x7fffffff
};

/* Team configuration, NVSHMEM 3.4's layout (64 bytes). rshmem has no per-team contexts: a split records
 * the fields its mask selects and nvshmem_team_get_config gives them back. */
typedef uint64_t nvshmemx_team_uniqueid_t;
/* A team unique id no team has (NVSHMEM's spelling). */
#define NVSHMEM_TEAM_UNIQUID_INITIALIZER 0xFFFFFFFFFFFFFFFFull
typedef struct {
    int version;
    int num_contexts;
    nvshmemx_team_uniqueid_t uniqueid;
    char padding[48];
} nvshmem_team_config_v2;
typedef nvshmem_team_config_v2 nvshmem_team_config_t;
typedef char nvshmemi_team_config_size_check[(sizeof(nvshmem_team_config_t) == 64) ? 1 : -1];
#define NVSHMEM_TEAM_CONFIG_INITIALIZER                                                             \
    {                                                                                               \
        (2 << 16) + (int)sizeof(nvshmem_team_config_t), -1, (nvshmemx_team_uniqueid_t)~0ULL, { 0 } \
    }
#define NVSHMEM_TEAM_CONFIG_MASK_NUM_CONTEXTS 0x0000000000000001
#define NVSHMEM_TEAM_CONFIG_MASK_UNIQUEID 0x0000000000000002

/* LP64 is assumed by the size tables below (long, size_t, ptrdiff_t are 64-bit). */
typedef char nvshmemi_lp64_check[(sizeof(long) == 8 && sizeof(size_t) == 8 && sizeof(ptrdiff_t) == 8) ? 1 : -1];

/* ------------------------------------------------------------------ type tables (NVSHMEM's)
 * X(NAME, TYPE, BITS) */
#define NVSHMEMI_FOR_RMA_TYPES(X)                                                                     \
    X(float, float, 32) X(double, double, 64) X(char, char, 8) X(schar, signed char, 8)               \
    X(short, short, 16) X(int, int, 32) X(long, long, 64) X(longlong, long long, 64)                  \
    X(uchar, unsigned char, 8) X(ushort, unsigned short, 16) X(uint, unsigned int, 32)                \
    X(ulong, unsigned long, 64) X(ulonglong, unsigned long long, 64) X(int8, int8_t, 8)               \
    X(int16, int16_t, 16) X(int32, int32_t, 32) X(int64, int64_t, 64) X(uint8, uint8_t, 8)            \
    X(uint16, uint16_t, 16) X(uint32, uint32_t, 32) X(uint64, uint64_t, 64) X(size, size_t, 64)       \
    X(ptrdiff, ptrdiff_t, 64)
/* Sizes of nvshmem_putSIZE / getSIZE: X(BITS) */
#define NVSHMEMI_FOR_SIZES(X) X(8) X(16) X(32) X(64) X(128)

#define NVSHMEMI_SIZE_CHECK(NAME, TYPE, BITS) \
    typedef char nvshmemi_size_check_##NAME[(sizeof(TYPE) * 8 == (BITS)) ? 1 : -1];
NVSHMEMI_FOR_RMA_TYPES(NVSHMEMI_SIZE_CHECK)
#undef NVSHMEMI_SIZE_CHECK

/* NVSHMEM's STANDARD_RMA types (those of broadcast, fcollect, alltoall): the RMA types above plus half
 * and bfloat16 where the CUDA types are in. X(NAME, TYPE, BITS) */
#if defined(NVSHMEMI_HAVE_CUDA_TYPES)
#define NVSHMEMI_FOR_FP16_TYPES(X) X(bfloat16, __nv_bfloat16, 16) X(half, half, 16)
#else
#define NVSHMEMI_FOR_FP16_TYPES(X)
#endif
#define NVSHMEMI_FOR_STANDARD_RMA_TYPES(X) NVSHMEMI_FOR_FP16_TYPES(X) NVSHMEMI_FOR_RMA_TYPES(X)

/* Reduction types, NVSHMEM's lists: X(NAME, TYPE, KIND, OP), KIND naming the element type code
 * (NVSHMEMI_DT_##KIND(TYPE)): integers by size and signedness, the floating-point types by name. */
#define NVSHMEMI_FOR_BITWISE_REDUCE_TYPES(X, OP)                                                       \
    X(uchar, unsigned char, INT, OP) X(ushort, unsigned short, INT, OP) X(uint, unsigned int, INT, OP) \
    X(ulong, unsigned long, INT, OP) X(ulonglong, unsigned long long, INT, OP) X(int8, int8_t, INT, OP) \
    X(int16, int16_t, INT, OP) X(int32, int32_t, INT, OP) X(int64, int64_t, INT, OP)                   \
    X(uint8, uint8_t, INT, OP) X(uint16, uint16_t, INT, OP) X(uint32, uint32_t, INT, OP)               \
    X(uint64, uint64_t, INT, OP) X(size, size_t, INT, OP)
#if defined(NVSHMEMI_HAVE_CUDA_TYPES)
#define NVSHMEMI_FOR_FP16_REDUCE_TYPES(X, OP) X(bfloat16, __nv_bfloat16, BF16, OP) X(half, half, F16, OP)
#else
#define NVSHMEMI_FOR_FP16_REDUCE_TYPES(X, OP)
#endif
#define NVSHMEMI_FOR_STANDARD_REDUCE_TYPES(X, OP)                                                      \
    NVSHMEMI_FOR_BITWISE_REDUCE_TYPES(X, OP) X(char, char, INT, OP) X(schar, signed char, INT, OP)     \
    X(short, short, INT, OP) X(int, int, INT, OP) X(long, long, INT, OP) X(longlong, long long, INT, OP) \
    NVSHMEMI_FOR_FP16_REDUCE_TYPES(X, OP) X(float, float, F32, OP) X(double, double, F64, OP)
#define NVSHMEMI_FOR_ARITH_REDUCE_TYPES(X, OP) NVSHMEMI_FOR_STANDARD_REDUCE_TYPES(X, OP)
/* Every (type, operator) pair NVSHMEM has: bitwise and/or/xor, standard min/max, arithmetic sum/prod. */
#define NVSHMEMI_FOR_REDUCTIONS(X)                                                                     \
    NVSHMEMI_FOR_BITWISE_REDUCE_TYPES(X, and) NVSHMEMI_FOR_BITWISE_REDUCE_TYPES(X, or)                 \
    NVSHMEMI_FOR_BITWISE_REDUCE_TYPES(X, xor) NVSHMEMI_FOR_STANDARD_REDUCE_TYPES(X, min)               \
    NVSHMEMI_FOR_STANDARD_REDUCE_TYPES(X, max) NVSHMEMI_FOR_ARITH_REDUCE_TYPES(X, sum)                 \
    NVSHMEMI_FOR_ARITH_REDUCE_TYPES(X, prod)

/* Element type codes (RSHMEM_DTYPE_*): an integer type's from its size and signedness. */
#define NVSHMEMI_DT_INT(T)                                                                             \
    ((T)0 < (T)-1 ? (sizeof(T) == 1   ? RSHMEM_DTYPE_U8                                               \
                     : sizeof(T) == 2 ? RSHMEM_DTYPE_U16                                              \
                     : sizeof(T) == 4 ? RSHMEM_DTYPE_U32                                              \
                                      : RSHMEM_DTYPE_U64)                                             \
                  : (sizeof(T) == 1   ? RSHMEM_DTYPE_I8                                               \
                     : sizeof(T) == 2 ? RSHMEM_DTYPE_I16                                              \
                     : sizeof(T) == 4 ? RSHMEM_DTYPE_I32                                              \
                                      : RSHMEM_DTYPE_I64))
#define NVSHMEMI_DT_F16(T) RSHMEM_DTYPE_F16
#define NVSHMEMI_DT_BF16(T) RSHMEM_DTYPE_BF16
#define NVSHMEMI_DT_F32(T) RSHMEM_DTYPE_F32
#define NVSHMEMI_DT_F64(T) RSHMEM_DTYPE_F64
/* Operator codes (RSHMEM_OP_*) by NVSHMEM's operator names. */
#define NVSHMEMI_OP_and RSHMEM_OP_AND
#define NVSHMEMI_OP_or RSHMEM_OP_OR
#define NVSHMEMI_OP_xor RSHMEM_OP_XOR
#define NVSHMEMI_OP_min RSHMEM_OP_MIN
#define NVSHMEMI_OP_max RSHMEM_OP_MAX
#define NVSHMEMI_OP_sum RSHMEM_OP_SUM
#define NVSHMEMI_OP_prod RSHMEM_OP_PROD

/* ------------------------------------------------------------------ initialization (host) */
/* Binds the device library of this program to the runtime (see rshmem.h). Under nvcc it is always
 * linked; from a host-only compiler the weak reference is bound when librshmem_device.a is linked. */
NVSHMEMI_HOST int nvshmemi_bind_device_library(void) {
#if defined(__CUDACC__)
    return rshmemi_bind_device_library();
#else
    return rshmemi_bind_device_library ? rshmemi_bind_device_library() : 0;
#endif
}

NVSHMEMI_HOST void nvshmem_init(void) {
    if (rshmem_init() != 0) {
        fprintf(stderr, "nvshmem_init (rshmem): initialization failed, aborting\n");
        exit(1);
    }
    if (nvshmemi_bind_device_library() != 0) {
        fprintf(stderr, "nvshmem_init (rshmem): binding the device library failed, aborting\n");
        exit(1);
    }
}
NVSHMEMI_HOST void nvshmem_finalize(void) { rshmem_finalize(); }
/* Ends every PE of the job with `status`. From the host: under rshmrun, rshmrun ends all PEs and exits
 * with `status`; elsewhere this process exits with it. From device code: the calling thread prints the
 * status and traps, which fails its kernel; the host's next CUDA call reports that and the PE exits
 * with an error, which ends the job (the status itself is only printed). */
NVSHMEMI_HOSTDEV void nvshmem_global_exit(int status) {
#if defined(__CUDA_ARCH__)
    printf("nvshmem_global_exit(%d) called on the device (rshmem): trapping\n", status);
    __trap();
#else
    rshmem_global_exit(status);
#endif
}
/* Collective: resizes a symmetric allocation, keeping min(old, new) bytes of this PE's contents. */
NVSHMEMI_HOST void *nvshmem_realloc(void *ptr, size_t size) { return rshmem_realloc(ptr, size); }

/* Thread levels (OpenSHMEM's, NVSHMEM's values). rshmem's host calls may come from any thread, one at a
 * time: every init provides NVSHMEM_THREAD_SERIALIZED, whatever was requested (a request for MULTIPLE
 * gets less, as the specification allows); an unknown level is an error (1 returned, nothing done). */
typedef enum {
    NVSHMEM_THREAD_SINGLE = 0,
    NVSHMEM_THREAD_FUNNELED = 1,
    NVSHMEM_THREAD_SERIALIZED = 2,
    NVSHMEM_THREAD_MULTIPLE = 3,
    NVSHMEM_THREAD_TYPE_SENTINEL = 0x7fffffff
} nvshmemx_thread_support_t;
NVSHMEMI_HOST int nvshmem_init_thread(int requested, int *provided) {
    if (requested < NVSHMEM_THREAD_SINGLE || requested > NVSHMEM_THREAD_MULTIPLE) {
        fprintf(stderr, "nvshmem_init_thread (rshmem): requested thread level %d is not one of NVSHMEM_THREAD_*\n", requested);
        return 1;
    }
    nvshmem_init();
    if (provided) *provided = NVSHMEM_THREAD_SERIALIZED;
    return 0;
}
NVSHMEMI_HOST void nvshmem_query_thread(int *provided) {
    if (provided) *provided = NVSHMEM_THREAD_SERIALIZED;
}

/* ------------------------------------------------------------------ queries (host and device) */
/* Versions: the OpenSHMEM specification version NVSHMEM reports (1.3), and as the vendor version
 * rshmem's own (so a program that prints or logs it says what it runs on). */
#define NVSHMEM_MAJOR_VERSION 1
#define NVSHMEM_MINOR_VERSION 3
#define NVSHMEM_VENDOR_MAJOR_VERSION 0
#define NVSHMEM_VENDOR_MINOR_VERSION 1
#define NVSHMEM_VENDOR_PATCH_VERSION 0
#define NVSHMEM_VENDOR_VERSION \
    ((NVSHMEM_VENDOR_MAJOR_VERSION)*10000 + (NVSHMEM_VENDOR_MINOR_VERSION)*100 + (NVSHMEM_VENDOR_PATCH_VERSION))
#define NVSHMEM_VENDOR_STRING "rshmem v0.1.0 (NVSHMEM API)"
#define NVSHMEM_VENDOR_PACKAGE_VERSION 0
#define NVSHMEM_MAX_NAME_LEN 256
NVSHMEMI_HOSTDEV void nvshmem_info_get_version(int *major, int *minor) {
    *major = NVSHMEM_MAJOR_VERSION;
    *minor = NVSHMEM_MINOR_VERSION;
}
NVSHMEMI_HOSTDEV void nvshmem_info_get_name(char *name) {
    const char *s = NVSHMEM_VENDOR_STRING;
    int i = 0;
    for (; i < NVSHMEM_MAX_NAME_LEN - 1 && s[i] != '\0'; i++) name[i] = s[i];
    name[i] = '\0';
}
NVSHMEMI_HOSTDEV int nvshmem_my_pe(void) { return rshmem_my_pe(); }
NVSHMEMI_HOSTDEV int nvshmem_n_pes(void) { return rshmem_n_pes(); }
NVSHMEMI_HOSTDEV int nvshmem_team_my_pe(nvshmem_team_t team) { return rshmem_team_my_pe(team); }
NVSHMEMI_HOSTDEV int nvshmem_team_n_pes(nvshmem_team_t team) { return rshmem_team_n_pes(team); }
NVSHMEMI_HOSTDEV void *nvshmem_ptr(const void *ptr, int pe) { return rshmem_ptr(ptr, pe); }

/* ------------------------------------------------------------------ memory (host) */
NVSHMEMI_HOST void *nvshmem_malloc(size_t size) { return rshmem_malloc(size); }
NVSHMEMI_HOST void *nvshmem_calloc(size_t count, size_t size) { return rshmem_calloc(count, size); }
NVSHMEMI_HOST void *nvshmem_align(size_t alignment, size_t size) { return rshmem_align(alignment, size); }
NVSHMEMI_HOST void nvshmem_free(void *ptr) { rshmem_free(ptr); }

/* ------------------------------------------------------------------ ordering and barriers */
NVSHMEMI_HOSTDEV void nvshmem_quiet(void) { rshmem_quiet(); }
NVSHMEMI_HOSTDEV void nvshmem_barrier_all(void) { rshmem_barrier_all(); }
NVSHMEMI_HOSTDEV void nvshmem_sync_all(void) { rshmem_sync_all(); }
/* From the host, a fence is a quiet: every earlier operation complete, so ordered before later ones. */
NVSHMEMI_HOSTDEV void nvshmem_fence(void) {
#if defined(__CUDA_ARCH__)
    rshmem_fence();
#else
    rshmem_quiet();
#endif
}
/* From the host: a read of this PE's signal word (a symmetric address in its own heap). */
NVSHMEMI_HOSTDEV uint64_t nvshmem_signal_fetch(uint64_t *sig_addr) {
#if defined(__CUDA_ARCH__)
    return rshmem_signal_fetch(sig_addr);
#else
    uint64_t v = 0;
    rshmem_getmem(&v, sig_addr, sizeof(v), rshmem_my_pe());
    return v;
#endif
}

/* ------------------------------------------------------------------ teams */
NVSHMEMI_HOSTDEV int nvshmem_team_translate_pe(nvshmem_team_t src_team, int src_pe, nvshmem_team_t dest_team) {
    return rshmem_team_translate_pe(src_team, src_pe, dest_team);
}
/* Collective over the parent team; 0 on success (the error is printed otherwise). A PE of the parent
 * outside the new team gets NVSHMEM_TEAM_INVALID. */
NVSHMEMI_HOST int nvshmem_team_split_strided(nvshmem_team_t parent_team, int PE_start, int PE_stride, int PE_size,
                                             const nvshmem_team_config_t *config, long config_mask,
                                             nvshmem_team_t *new_team) {
    return rshmem_team_split_strided(parent_team, PE_start, PE_stride, PE_size, config, config_mask, new_team);
}
NVSHMEMI_HOST int nvshmem_team_split_2d(nvshmem_team_t parent_team, int xrange,
                                        const nvshmem_team_config_t *xaxis_config, long xaxis_mask,
                                        nvshmem_team_t *xaxis_team, const nvshmem_team_config_t *yaxis_config,
                                        long yaxis_mask, nvshmem_team_t *yaxis_team) {
    return rshmem_team_split_2d(parent_team, xrange, xaxis_config, xaxis_mask, xaxis_team, yaxis_config,
                                yaxis_mask, yaxis_team);
}
NVSHMEMI_HOST void nvshmem_team_destroy(nvshmem_team_t team) { (void)rshmem_team_destroy(team); }
NVSHMEMI_HOST void nvshmem_team_get_config(nvshmem_team_t team, nvshmem_team_config_t *config) {
    (void)rshmem_team_get_config(team, config);
}
/* Teams of arbitrary members from a unique id (see rshmem_team_init in rshmem.h). */
NVSHMEMI_HOST int nvshmemx_team_get_uniqueid(nvshmemx_team_uniqueid_t *uniqueid) {
    return rshmem_team_get_uniqueid((unsigned long long *)uniqueid);
}
NVSHMEMI_HOST int nvshmemx_team_init(nvshmem_team_t *team, nvshmem_team_config_t *config, long config_mask, int npes,
                                     int pe_idx_in_team) {
    return rshmem_team_init(team, config, config_mask, npes, pe_idx_in_team);
}

/* ------------------------------------------------------------------ collectives (host and device)
 * Device side: one thread of the PE calls (see nvshmemx.h for warp / block scope). Host side: the call
 * returns when the collective is complete. Counts are elements (bytes for the *mem forms). */
NVSHMEMI_HOSTDEV int nvshmem_barrier(nvshmem_team_t team) { return rshmem_barrier(team); }
NVSHMEMI_HOSTDEV int nvshmem_team_sync(nvshmem_team_t team) { return rshmem_team_sync(team); }
#define nvshmem_sync nvshmem_team_sync
NVSHMEMI_HOSTDEV int nvshmem_broadcastmem(nvshmem_team_t team, void *dest, const void *src, size_t nelems,
                                          int PE_root) {
    return rshmem_broadcastmem(team, dest, src, nelems, PE_root);
}
NVSHMEMI_HOSTDEV int nvshmem_fcollectmem(nvshmem_team_t team, void *dest, const void *src, size_t nelems) {
    return rshmem_fcollectmem(team, dest, src, nelems);
}
NVSHMEMI_HOSTDEV int nvshmem_alltoallmem(nvshmem_team_t team, void *dest, const void *src, size_t nelems) {
    return rshmem_alltoallmem(team, dest, src, nelems);
}
#define NVSHMEMI_TYPED_COLL(NAME, TYPE, BITS)                                                           \
    NVSHMEMI_HOSTDEV int nvshmem_##NAME##_broadcast(nvshmem_team_t team, TYPE *dest, const TYPE *src,   \
                                                    size_t nelems, int PE_root) {                       \
        return rshmem_broadcastmem(team, dest, src, nelems * sizeof(TYPE), PE_root);                    \
    }                                                                                                   \
    NVSHMEMI_HOSTDEV int nvshmem_##NAME##_fcollect(nvshmem_team_t team, TYPE *dest, const TYPE *src,    \
                                                   size_t nelems) {                                     \
        return rshmem_fcollectmem(team, dest, src, nelems * sizeof(TYPE));                              \
    }                                                                                                   \
    NVSHMEMI_HOSTDEV int nvshmem_##NAME##_alltoall(nvshmem_team_t team, TYPE *dest, const TYPE *src,    \
                                                   size_t nelems) {                                     \
        return rshmem_alltoallmem(team, dest, src, nelems * sizeof(TYPE));                              \
    }
NVSHMEMI_FOR_STANDARD_RMA_TYPES(NVSHMEMI_TYPED_COLL)
#undef NVSHMEMI_TYPED_COLL
#define NVSHMEMI_TYPED_REDUCE(NAME, TYPE, KIND, OP)                                                      \
    NVSHMEMI_HOSTDEV int nvshmem_##NAME##_##OP##_reduce(nvshmem_team_t team, TYPE *dest, const TYPE *src, \
                                                        size_t nreduce) {                                \
        return rshmem_reduce(team, dest, src, nreduce, NVSHMEMI_DT_##KIND(TYPE), NVSHMEMI_OP_##OP);      \
    }                                                                                                    \
    NVSHMEMI_HOSTDEV int nvshmem_##NAME##_##OP##_reducescatter(nvshmem_team_t team, TYPE *dest,          \
                                                               const TYPE *src, size_t nreduce) {        \
        return rshmem_reducescatter(team, dest, src, nreduce, NVSHMEMI_DT_##KIND(TYPE), NVSHMEMI_OP_##OP); \
    }
NVSHMEMI_FOR_REDUCTIONS(NVSHMEMI_TYPED_REDUCE)
#undef NVSHMEMI_TYPED_REDUCE
#if defined(NVSHMEMI_HAVE_CUDA_TYPES)
/* maxloc over (value, location) pairs: the largest value, on ties the smallest location. */
NVSHMEMI_HOSTDEV int nvshmem_double2_maxloc_reduce(nvshmem_team_t team, double2 *dest, const double2 *src,
                                                   size_t nreduce) {
    return rshmem_reduce(team, dest, src, nreduce, RSHMEM_DTYPE_DOUBLE2, RSHMEM_OP_MAXLOC);
}
#endif

/* ------------------------------------------------------------------ RMA (host and device)
 * Device side: the device library. Host side: the host library's copies; the nbi forms complete by the
 * next quiet (on GPUs, to PEs of this node, queued on the runtime's host-RMA stream). */
NVSHMEMI_HOSTDEV void nvshmem_putmem(void *dest, const void *source, size_t bytes, int pe) {
    rshmem_putmem(dest, source, bytes, pe);
}
NVSHMEMI_HOSTDEV void nvshmem_getmem(void *dest, const void *source, size_t bytes, int pe) {
    rshmem_getmem(dest, source, bytes, pe);
}
NVSHMEMI_HOSTDEV void nvshmem_putmem_nbi(void *dest, const void *source, size_t bytes, int pe) {
#if defined(__CUDA_ARCH__)
    rshmem_putmem_nbi(dest, source, bytes, pe);
#else
    rshmem_host_putmem_nbi(dest, source, bytes, pe);
#endif
}
NVSHMEMI_HOSTDEV void nvshmem_getmem_nbi(void *dest, const void *source, size_t bytes, int pe) {
#if defined(__CUDA_ARCH__)
    rshmem_getmem_nbi(dest, source, bytes, pe);
#else
    rshmem_host_getmem_nbi(dest, source, bytes, pe);
#endif
}

/* Single elements by width: rshmem_pN / rshmem_gN on the device, a copy through a local on the host. */
#if defined(__CUDA_ARCH__)
#define NVSHMEMI_PG_BY_WIDTH(BITS)                                                        \
    NVSHMEMI_HOSTDEV void nvshmemi_p##BITS(void *dest, uint##BITS##_t value, int pe) {    \
        rshmem_p##BITS(dest, value, pe);                                                  \
    }                                                                                     \
    NVSHMEMI_HOSTDEV uint##BITS##_t nvshmemi_g##BITS(const void *source, int pe) {        \
        return rshmem_g##BITS(source, pe);                                                \
    }
#else
#define NVSHMEMI_PG_BY_WIDTH(BITS)                                                        \
    NVSHMEMI_HOSTDEV void nvshmemi_p##BITS(void *dest, uint##BITS##_t value, int pe) {    \
        rshmem_putmem(dest, &value, sizeof(value), pe);                                   \
    }                                                                                     \
    NVSHMEMI_HOSTDEV uint##BITS##_t nvshmemi_g##BITS(const void *source, int pe) {        \
        uint##BITS##_t value;                                                             \
        rshmem_getmem(&value, source, sizeof(value), pe);                                 \
        return value;                                                                     \
    }
#endif
NVSHMEMI_PG_BY_WIDTH(8)
NVSHMEMI_PG_BY_WIDTH(16)
NVSHMEMI_PG_BY_WIDTH(32)
NVSHMEMI_PG_BY_WIDTH(64)
#undef NVSHMEMI_PG_BY_WIDTH

/* Typed p / g / put / get / put_nbi / get_nbi (host and device). The union carries the value's bits to
 * the unsigned type of the same width (float, double and signed types alike). */
#define NVSHMEMI_TYPED_RMA(NAME, TYPE, BITS)                                                               \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_p(TYPE *dest, const TYPE value, int pe) {                       \
        union {                                                                                            \
            TYPE t;                                                                                        \
            uint##BITS##_t u;                                                                              \
        } c;                                                                                               \
        c.t = value;                                                                                       \
        nvshmemi_p##BITS(dest, c.u, pe);                                                                   \
    }                                                                                                      \
    NVSHMEMI_HOSTDEV TYPE nvshmem_##NAME##_g(const TYPE *source, int pe) {                                 \
        union {                                                                                            \
            TYPE t;                                                                                        \
            uint##BITS##_t u;                                                                              \
        } c;                                                                                               \
        c.u = nvshmemi_g##BITS(source, pe);                                                                \
        return c.t;                                                                                        \
    }                                                                                                      \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_put(TYPE *dest, const TYPE *source, size_t nelems, int pe) {    \
        nvshmem_putmem(dest, source, nelems * sizeof(TYPE), pe);                                           \
    }                                                                                                      \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_get(TYPE *dest, const TYPE *source, size_t nelems, int pe) {    \
        nvshmem_getmem(dest, source, nelems * sizeof(TYPE), pe);                                           \
    }                                                                                                      \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_put_nbi(TYPE *dest, const TYPE *source, size_t nelems,          \
                                                   int pe) {                                               \
        nvshmem_putmem_nbi(dest, source, nelems * sizeof(TYPE), pe);                                       \
    }                                                                                                      \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_get_nbi(TYPE *dest, const TYPE *source, size_t nelems,          \
                                                   int pe) {                                               \
        nvshmem_getmem_nbi(dest, source, nelems * sizeof(TYPE), pe);                                       \
    }
NVSHMEMI_FOR_STANDARD_RMA_TYPES(NVSHMEMI_TYPED_RMA)
#undef NVSHMEMI_TYPED_RMA

/* Sized put / get: nelems elements of BITS bits each. */
#define NVSHMEMI_SIZED_RMA(BITS)                                                                          \
    NVSHMEMI_HOSTDEV void nvshmem_put##BITS(void *dest, const void *source, size_t nelems, int pe) {      \
        nvshmem_putmem(dest, source, nelems * ((BITS) / 8), pe);                                          \
    }                                                                                                     \
    NVSHMEMI_HOSTDEV void nvshmem_get##BITS(void *dest, const void *source, size_t nelems, int pe) {      \
        nvshmem_getmem(dest, source, nelems * ((BITS) / 8), pe);                                          \
    }                                                                                                     \
    NVSHMEMI_HOSTDEV void nvshmem_put##BITS##_nbi(void *dest, const void *source, size_t nelems, int pe) { \
        nvshmem_putmem_nbi(dest, source, nelems * ((BITS) / 8), pe);                                      \
    }                                                                                                     \
    NVSHMEMI_HOSTDEV void nvshmem_get##BITS##_nbi(void *dest, const void *source, size_t nelems, int pe) { \
        nvshmem_getmem_nbi(dest, source, nelems * ((BITS) / 8), pe);                                      \
    }
NVSHMEMI_FOR_SIZES(NVSHMEMI_SIZED_RMA)
#undef NVSHMEMI_SIZED_RMA

/* Strided put / get (host and device; to any PE, mapped or remote): element i of the source at stride
 * `sst` to element i of the destination at stride `dst` (strides in elements, at least 1). NVSHMEM's
 * device forms reach only PEs it maps; rshmem's reach every PE. */
#define NVSHMEMI_TYPED_STRIDED(NAME, TYPE, BITS)                                                           \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_iput(TYPE *dest, const TYPE *source, ptrdiff_t dst, ptrdiff_t sst, \
                                               size_t nelems, int pe) {                                   \
        rshmem_iputmem(dest, source, dst, sst, nelems, sizeof(TYPE), pe);                                 \
    }                                                                                                      \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_iget(TYPE *dest, const TYPE *source, ptrdiff_t dst, ptrdiff_t sst, \
                                               size_t nelems, int pe) {                                   \
        rshmem_igetmem(dest, source, dst, sst, nelems, sizeof(TYPE), pe);                                 \
    }
NVSHMEMI_FOR_STANDARD_RMA_TYPES(NVSHMEMI_TYPED_STRIDED)
#undef NVSHMEMI_TYPED_STRIDED
#define NVSHMEMI_SIZED_STRIDED(BITS)                                                                       \
    NVSHMEMI_HOSTDEV void nvshmem_iput##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,  \
                                             size_t nelems, int pe) {                                     \
        rshmem_iputmem(dest, source, dst, sst, nelems, (BITS) / 8, pe);                                   \
    }                                                                                                      \
    NVSHMEMI_HOSTDEV void nvshmem_iget##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,  \
                                             size_t nelems, int pe) {                                     \
        rshmem_igetmem(dest, source, dst, sst, nelems, (BITS) / 8, pe);                                   \
    }
NVSHMEMI_FOR_SIZES(NVSHMEMI_SIZED_STRIDED)
#undef NVSHMEMI_SIZED_STRIDED

/* alltoalls (host and device, one thread on the device): block j of `source` (nelems elements at stride
 * `sst`, from element j * nelems * sst) goes to member j, into its block i (from element
 * i * nelems * dst, at stride `dst`), i being this PE's number in `team`; then a barrier of the team. 0 on
 * success; 1 for a PE outside the team or a team barrier that failed. */
NVSHMEMI_HOSTDEV int nvshmemi_alltoalls(nvshmem_team_t team, void *dest, const void *source, ptrdiff_t dst,
                                         ptrdiff_t sst, size_t nelems, size_t width) {
    int me = rshmem_team_my_pe(team), n = rshmem_team_n_pes(team), j;
    if (me < 0 || n <= 0) return 1;
    for (j = 0; j < n; j++) {
        rshmem_iputmem((char *)dest + (size_t)me * nelems * (size_t)dst * width,
                       (const char *)source + (size_t)j * nelems * (size_t)sst * width, dst, sst, nelems,
                       (unsigned)width, rshmem_team_translate_pe(team, j, NVSHMEM_TEAM_WORLD));
    }
    return rshmem_barrier(team) == 0 ? 0 : 1;
}
#define NVSHMEMI_TYPED_ALLTOALLS(NAME, TYPE, BITS)                                                        \
    NVSHMEMI_HOSTDEV int nvshmem_##NAME##_alltoalls(nvshmem_team_t team, TYPE *dest, const TYPE *source,  \
                                                    ptrdiff_t dst, ptrdiff_t sst, size_t nelems) {       \
        return nvshmemi_alltoalls(team, dest, source, dst, sst, nelems, sizeof(TYPE));                  \
    }
NVSHMEMI_FOR_STANDARD_RMA_TYPES(NVSHMEMI_TYPED_ALLTOALLS)
#undef NVSHMEMI_TYPED_ALLTOALLS

/* ------------------------------------------------------------------ AMOs (host and device) */
/* From device code, the device library's AMOs; from host code, the same operations run for the host by
 * the runtime (rshmem_host_amo: a one-thread kernel on a GPU), atomic with the device AMOs on the same
 * word. Codes as rshmem_host_amo's. */
#if defined(__CUDA_ARCH__)
#define NVSHMEMI_AMO_BY_WIDTH(BITS)                                                                    \
    NVSHMEMI_HOSTDEV uint##BITS##_t nvshmemi_amo##BITS(int code, void *d, uint##BITS##_t v,             \
                                                       uint##BITS##_t c, int pe) {                     \
        switch (code) {                                                                                \
        case 1: return rshmem_atomic_fetch##BITS(d, pe);                                               \
        case 2: rshmem_atomic_set##BITS(d, v, pe); return 0;                                           \
        case 3: return rshmem_atomic_swap##BITS(d, v, pe);                                             \
        case 4: return rshmem_atomic_compare_swap##BITS(d, c, v, pe);                                  \
        case 5: return rshmem_atomic_fetch_add##BITS(d, v, pe);                                        \
        case 6: rshmem_atomic_add##BITS(d, v, pe); return 0;                                           \
        case 7: return rshmem_atomic_fetch_and##BITS(d, v, pe);                                        \
        case 8: rshmem_atomic_and##BITS(d, v, pe); return 0;                                           \
        case 9: return rshmem_atomic_fetch_or##BITS(d, v, pe);                                         \
        case 10: rshmem_atomic_or##BITS(d, v, pe); return 0;                                           \
        case 11: return rshmem_atomic_fetch_xor##BITS(d, v, pe);                                       \
        default: rshmem_atomic_xor##BITS(d, v, pe); return 0;                                          \
        }                                                                                              \
    }
#else
#define NVSHMEMI_AMO_BY_WIDTH(BITS)                                                                    \
    NVSHMEMI_HOSTDEV uint##BITS##_t nvshmemi_amo##BITS(int code, void *d, uint##BITS##_t v,             \
                                                       uint##BITS##_t c, int pe) {                     \
        return (uint##BITS##_t)rshmem_host_amo(code, (BITS) / 8, d, v, c, pe);                         \
    }
#endif
NVSHMEMI_AMO_BY_WIDTH(32)
NVSHMEMI_AMO_BY_WIDTH(64)
#undef NVSHMEMI_AMO_BY_WIDTH

#define NVSHMEMI_FOR_STANDARD_AMO_TYPES(X)                                                            \
    X(int, int, 32) X(long, long, 64) X(longlong, long long, 64) X(uint, unsigned int, 32)            \
    X(ulong, unsigned long, 64) X(ulonglong, unsigned long long, 64) X(int32, int32_t, 32)            \
    X(int64, int64_t, 64) X(uint32, uint32_t, 32) X(uint64, uint64_t, 64) X(size, size_t, 64)         \
    X(ptrdiff, ptrdiff_t, 64)
#define NVSHMEMI_FOR_EXTENDED_ONLY_AMO_TYPES(X) X(float, float, 32) X(double, double, 64)
#define NVSHMEMI_FOR_BITWISE_AMO_TYPES(X)                                                             \
    X(uint, unsigned int, 32) X(ulong, unsigned long, 64) X(ulonglong, unsigned long long, 64)        \
    X(int32, int32_t, 32) X(int64, int64_t, 64) X(uint32, uint32_t, 32) X(uint64, uint64_t, 64)

/* One AMO of `code` on a TYPE through the unsigned type of its width (bits carried by a union, so float
 * and double travel unchanged). */
#define NVSHMEMI_AMO_CALL(TYPE, BITS, code, dest, value, cond, pe, out)                               \
    do {                                                                                              \
        union { TYPE t; uint##BITS##_t u; } a_, c_, r_;                                               \
        a_.t = (value);                                                                               \
        c_.t = (cond);                                                                                \
        r_.u = nvshmemi_amo##BITS((code), (void *)(dest), a_.u, c_.u, (pe));                          \
        out = r_.t;                                                                                   \
    } while (0)
/* The same for the AMOs that return nothing. */
#define NVSHMEMI_AMO_DO(TYPE, BITS, code, dest, value, pe)                                            \
    do {                                                                                              \
        union { TYPE t; uint##BITS##_t u; } a_;                                                       \
        a_.t = (value);                                                                               \
        (void)nvshmemi_amo##BITS((code), (void *)(dest), a_.u, a_.u, (pe));                           \
    } while (0)
/* swap, set, fetch, compare_swap: every AMO type, float and double included. */
#define NVSHMEMI_AMO_EXTENDED(NAME, TYPE, BITS)                                                       \
    NVSHMEMI_HOSTDEV TYPE nvshmem_##NAME##_atomic_swap(TYPE *dest, TYPE value, int pe) {             \
        TYPE r; NVSHMEMI_AMO_CALL(TYPE, BITS, 3, dest, value, value, pe, r); return r;                \
    }                                                                                                 \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_atomic_set(TYPE *dest, TYPE value, int pe) {              \
        NVSHMEMI_AMO_DO(TYPE, BITS, 2, dest, value, pe);                                              \
    }                                                                                                 \
    NVSHMEMI_HOSTDEV TYPE nvshmem_##NAME##_atomic_fetch(const TYPE *source, int pe) {                \
        TYPE r, z = 0; NVSHMEMI_AMO_CALL(TYPE, BITS, 1, source, z, z, pe, r); return r;               \
    }                                                                                                 \
    NVSHMEMI_HOSTDEV TYPE nvshmem_##NAME##_atomic_compare_swap(TYPE *dest, TYPE cond, TYPE value, int pe) { \
        TYPE r; NVSHMEMI_AMO_CALL(TYPE, BITS, 4, dest, value, cond, pe, r); return r;                 \
    }
/* add, fetch_add, inc, fetch_inc: the standard (integer) AMO types. */
#define NVSHMEMI_AMO_STANDARD(NAME, TYPE, BITS)                                                       \
    NVSHMEMI_AMO_EXTENDED(NAME, TYPE, BITS)                                                           \
    NVSHMEMI_HOSTDEV TYPE nvshmem_##NAME##_atomic_fetch_add(TYPE *dest, TYPE value, int pe) {        \
        TYPE r; NVSHMEMI_AMO_CALL(TYPE, BITS, 5, dest, value, value, pe, r); return r;                \
    }                                                                                                 \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_atomic_add(TYPE *dest, TYPE value, int pe) {              \
        NVSHMEMI_AMO_DO(TYPE, BITS, 6, dest, value, pe);                                              \
    }                                                                                                 \
    NVSHMEMI_HOSTDEV TYPE nvshmem_##NAME##_atomic_fetch_inc(TYPE *dest, int pe) {                    \
        TYPE r, one = 1; NVSHMEMI_AMO_CALL(TYPE, BITS, 5, dest, one, one, pe, r); return r;           \
    }                                                                                                 \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_atomic_inc(TYPE *dest, int pe) {                          \
        TYPE one = 1; NVSHMEMI_AMO_DO(TYPE, BITS, 6, dest, one, pe);                                  \
    }
/* and, or, xor and their fetch forms: the bitwise AMO types. */
#define NVSHMEMI_AMO_BITWISE(NAME, TYPE, BITS)                                                        \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_atomic_and(TYPE *dest, TYPE value, int pe) {              \
        NVSHMEMI_AMO_DO(TYPE, BITS, 8, dest, value, pe);                                              \
    }                                                                                                 \
    NVSHMEMI_HOSTDEV TYPE nvshmem_##NAME##_atomic_fetch_and(TYPE *dest, TYPE value, int pe) {        \
        TYPE r; NVSHMEMI_AMO_CALL(TYPE, BITS, 7, dest, value, value, pe, r); return r;                \
    }                                                                                                 \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_atomic_or(TYPE *dest, TYPE value, int pe) {               \
        NVSHMEMI_AMO_DO(TYPE, BITS, 10, dest, value, pe);                                             \
    }                                                                                                 \
    NVSHMEMI_HOSTDEV TYPE nvshmem_##NAME##_atomic_fetch_or(TYPE *dest, TYPE value, int pe) {         \
        TYPE r; NVSHMEMI_AMO_CALL(TYPE, BITS, 9, dest, value, value, pe, r); return r;                \
    }                                                                                                 \
    NVSHMEMI_HOSTDEV void nvshmem_##NAME##_atomic_xor(TYPE *dest, TYPE value, int pe) {              \
        NVSHMEMI_AMO_DO(TYPE, BITS, 12, dest, value, pe);                                             \
    }                                                                                                 \
    NVSHMEMI_HOSTDEV TYPE nvshmem_##NAME##_atomic_fetch_xor(TYPE *dest, TYPE value, int pe) {        \
        TYPE r; NVSHMEMI_AMO_CALL(TYPE, BITS, 11, dest, value, value, pe, r); return r;               \
    }
NVSHMEMI_FOR_STANDARD_AMO_TYPES(NVSHMEMI_AMO_STANDARD)
NVSHMEMI_FOR_EXTENDED_ONLY_AMO_TYPES(NVSHMEMI_AMO_EXTENDED)
NVSHMEMI_FOR_BITWISE_AMO_TYPES(NVSHMEMI_AMO_BITWISE)
#undef NVSHMEMI_AMO_EXTENDED
#undef NVSHMEMI_AMO_STANDARD
#undef NVSHMEMI_AMO_BITWISE

/* The types of the point-to-point waits, X(NAME, TYPE, SUFFIX, CTYPE) with the signed/unsigned
 * rshmem_wait_until_SUFFIX of the right width (device; the on-stream forms read the sign from SUFFIX). */
#define NVSHMEMI_FOR_WAIT_TYPES(X)                                                                    \
    X(short, short, i16, int16_t) X(int, int, i32, int32_t) X(long, long, i64, int64_t)               \
    X(longlong, long long, i64, int64_t) X(ushort, unsigned short, u16, uint16_t)                     \
    X(uint, unsigned int, u32, uint32_t) X(ulong, unsigned long, u64, uint64_t)                       \
    X(ulonglong, unsigned long long, u64, uint64_t) X(int32, int32_t, i32, int32_t)                   \
    X(int64, int64_t, i64, int64_t) X(uint32, uint32_t, u32, uint32_t) X(uint64, uint64_t, u64, uint64_t) \
    X(size, size_t, u64, uint64_t) X(ptrdiff, ptrdiff_t, i64, int64_t)

/* ------------------------------------------------------------------ device only */
#if defined(__CUDACC__)

/* Type tables of the device-only operations: X(NAME, TYPE, BITS) and, for waits, X(NAME, TYPE, SUFFIX,
 * CTYPE) with the signed/unsigned rshmem_wait_until_SUFFIX of the right width. */
/* Bits of a value as another type of the same size. */
template <typename To, typename From>
static __device__ __forceinline__ To nvshmemi_bits(From v) {
    static_assert(sizeof(To) == sizeof(From), "nvshmemi_bits: sizes differ");
    union {
        From f;
        To t;
    } c;
    c.f = v;
    return c.t;
}
#define NVSHMEMI_U(BITS, v) nvshmemi_bits<uint##BITS##_t>(v)

/* -------------------------------------------------- point-to-point synchronization */
/* wait_until / test on one variable; the _all/_any/_some (and _vector) forms poll those. `status`
 * (may be NULL) excludes element i when status[i] != 0; _any/test_any return SIZE_MAX when nothing
 * (eligible) satisfies. */
#define NVSHMEMI_WAIT(NAME, TYPE, SUF, CT)                                                                 \
    NVSHMEMI_DEV void nvshmem_##NAME##_wait_until(TYPE *ivar, int cmp, TYPE cmp_value) {                  \
        rshmem_wait_until_##SUF(ivar, cmp, (CT)cmp_value);                                                 \
    }                                                                                                      \
    NVSHMEMI_DEV int nvshmem_##NAME##_test(TYPE *ivar, int cmp, TYPE cmp_value) {                         \
        return rshmem_test_##SUF(ivar, cmp, (CT)cmp_value) != 0;                                           \
    }                                                                                                      \
    NVSHMEMI_DEV void nvshmem_##NAME##_wait(TYPE *ivar, TYPE cmp_value) {                                 \
        rshmem_wait_until_##SUF(ivar, NVSHMEM_CMP_NE, (CT)cmp_value);                                      \
    }                                                                                                      \
    NVSHMEMI_DEV void nvshmem_##NAME##_wait_until_all_vector(TYPE *ivars, size_t nelems,                  \
                                                             const int *status, int cmp,                  \
                                                             TYPE *cmp_values) {                          \
        for (size_t i = 0; i < nelems; i++)                                                                \
            if (!status || !status[i]) rshmem_wait_until_##SUF(&ivars[i], cmp, (CT)cmp_values[i]);         \
    }                                                                                                      \
    NVSHMEMI_DEV int nvshmem_##NAME##_test_all_vector(TYPE *ivars, size_t nelems, const int *status,      \
                                                      int cmp, TYPE *cmp_values) {                        \
        for (size_t i = 0; i < nelems; i++)                                                                \
            if ((!status || !status[i]) && !rshmem_test_##SUF(&ivars[i], cmp, (CT)cmp_values[i])) return 0; \
        return 1;                                                                                          \
    }                                                                                                      \
    NVSHMEMI_DEV size_t nvshmem_##NAME##_test_any_vector(TYPE *ivars, size_t nelems, const int *status,   \
                                                         int cmp, TYPE *cmp_values) {                     \
        for (size_t i = 0; i < nelems; i++)                                                                \
            if ((!status || !status[i]) && rshmem_test_##SUF(&ivars[i], cmp, (CT)cmp_values[i])) return i; \
        return SIZE_MAX;                                                                                   \
    }                                                                                                      \
    NVSHMEMI_DEV size_t nvshmem_##NAME##_test_some_vector(TYPE *ivars, size_t nelems, size_t *indices,    \
                                                          const int *status, int cmp,                     \
                                                          TYPE *cmp_values) {                             \
        size_t n = 0;                                                                                      \
        for (size_t i = 0; i < nelems; i++)                                                                \
            if ((!status || !status[i]) && rshmem_test_##SUF(&ivars[i], cmp, (CT)cmp_values[i]))           \
                indices[n++] = i;                                                                          \
        return n;                                                                                          \
    }                                                                                                      \
    NVSHMEMI_DEV size_t nvshmem_##NAME##_wait_until_any_vector(TYPE *ivars, size_t nelems,                \
                                                               const int *status, int cmp,                \
                                                               TYPE *cmp_values) {                        \
        size_t eligible = 0;                                                                               \
        for (size_t i = 0; i < nelems; i++) eligible += (!status || !status[i]);                           \
        if (!eligible) return SIZE_MAX;                                                                    \
        for (;;) {                                                                                         \
            size_t i = nvshmem_##NAME##_test_any_vector(ivars, nelems, status, cmp, cmp_values);           \
            if (i != SIZE_MAX) return i;                                                                   \
        }                                                                                                  \
    }                                                                                                      \
    NVSHMEMI_DEV size_t nvshmem_##NAME##_wait_until_some_vector(TYPE *ivars, size_t nelems,               \
                                                                size_t *indices, const int *status,       \
                                                                int cmp, TYPE *cmp_values) {              \
        if (nvshmem_##NAME##_wait_until_any_vector(ivars, nelems, status, cmp, cmp_values) == SIZE_MAX)   \
            return 0;                                                                                      \
        return nvshmem_##NAME##_test_some_vector(ivars, nelems, indices, status, cmp, cmp_values);        \
    }                                                                                                      \
    NVSHMEMI_DEV void nvshmem_##NAME##_wait_until_all(TYPE *ivars, size_t nelems, const int *status,      \
                                                      int cmp, TYPE cmp_value) {                          \
        for (size_t i = 0; i < nelems; i++)                                                                \
            if (!status || !status[i]) rshmem_wait_until_##SUF(&ivars[i], cmp, (CT)cmp_value);             \
    }                                                                                                      \
    NVSHMEMI_DEV int nvshmem_##NAME##_test_all(TYPE *ivars, size_t nelems, const int *status, int cmp,    \
                                               TYPE cmp_value) {                                          \
        for (size_t i = 0; i < nelems; i++)                                                                \
            if ((!status || !status[i]) && !rshmem_test_##SUF(&ivars[i], cmp, (CT)cmp_value)) return 0;    \
        return 1;                                                                                          \
    }                                                                                                      \
    NVSHMEMI_DEV size_t nvshmem_##NAME##_test_any(TYPE *ivars, size_t nelems, const int *status, int cmp, \
                                                  TYPE cmp_value) {                                       \
        for (size_t i = 0; i < nelems; i++)                                                                \
            if ((!status || !status[i]) && rshmem_test_##SUF(&ivars[i], cmp, (CT)cmp_value)) return i;     \
        return SIZE_MAX;                                                                                   \
    }                                                                                                      \
    NVSHMEMI_DEV size_t nvshmem_##NAME##_test_some(TYPE *ivars, size_t nelems, size_t *indices,           \
                                                   const int *status, int cmp, TYPE cmp_value) {          \
        size_t n = 0;                                                                                      \
        for (size_t i = 0; i < nelems; i++)                                                                \
            if ((!status || !status[i]) && rshmem_test_##SUF(&ivars[i], cmp, (CT)cmp_value)) indices[n++] = i; \
        return n;                                                                                          \
    }                                                                                                      \
    NVSHMEMI_DEV size_t nvshmem_##NAME##_wait_until_any(TYPE *ivars, size_t nelems, const int *status,    \
                                                        int cmp, TYPE cmp_value) {                        \
        size_t eligible = 0;                                                                               \
        for (size_t i = 0; i < nelems; i++) eligible += (!status || !status[i]);                           \
        if (!eligible) return SIZE_MAX;                                                                    \
        for (;;) {                                                                                         \
            size_t i = nvshmem_##NAME##_test_any(ivars, nelems, status, cmp, cmp_value);                   \
            if (i != SIZE_MAX) return i;                                                                   \
        }                                                                                                  \
    }                                                                                                      \
    NVSHMEMI_DEV size_t nvshmem_##NAME##_wait_until_some(TYPE *ivars, size_t nelems, size_t *indices,     \
                                                         const int *status, int cmp, TYPE cmp_value) {    \
        if (nvshmem_##NAME##_wait_until_any(ivars, nelems, status, cmp, cmp_value) == SIZE_MAX) return 0; \
        return nvshmem_##NAME##_test_some(ivars, nelems, indices, status, cmp, cmp_value);                \
    }
NVSHMEMI_FOR_WAIT_TYPES(NVSHMEMI_WAIT)
#undef NVSHMEMI_WAIT

/* OpenSHMEM's untyped (long) forms. */
NVSHMEMI_DEV void nvshmem_wait_until(long *ivar, int cmp, long cmp_value) {
    rshmem_wait_until_i64(ivar, cmp, (int64_t)cmp_value);
}
NVSHMEMI_DEV void nvshmem_wait(long *ivar, long cmp_value) {
    rshmem_wait_until_i64(ivar, NVSHMEM_CMP_NE, (int64_t)cmp_value);
}

/* -------------------------------------------------- signals */
NVSHMEMI_DEV uint64_t nvshmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value) {
    return rshmem_signal_wait_until(sig_addr, cmp, cmp_value);
}

NVSHMEMI_DEV void nvshmem_putmem_signal(void *dest, const void *source, size_t bytes, uint64_t *sig_addr,
                                        uint64_t signal, int sig_op, int pe) {
    rshmem_putmem_signal(dest, source, bytes, sig_addr, signal, sig_op, pe);
}
NVSHMEMI_DEV void nvshmem_putmem_signal_nbi(void *dest, const void *source, size_t bytes,
                                            uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {
    rshmem_putmem_signal_nbi(dest, source, bytes, sig_addr, signal, sig_op, pe);
}
#define NVSHMEMI_TYPED_PUT_SIGNAL(NAME, TYPE, BITS)                                                      \
    NVSHMEMI_DEV void nvshmem_##NAME##_put_signal(TYPE *dest, const TYPE *source, size_t nelems,        \
                                                  uint64_t *sig_addr, uint64_t signal, int sig_op,      \
                                                  int pe) {                                             \
        rshmem_putmem_signal(dest, source, nelems * sizeof(TYPE), sig_addr, signal, sig_op, pe);         \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmem_##NAME##_put_signal_nbi(TYPE *dest, const TYPE *source, size_t nelems,    \
                                                      uint64_t *sig_addr, uint64_t signal, int sig_op,  \
                                                      int pe) {                                         \
        rshmem_putmem_signal_nbi(dest, source, nelems * sizeof(TYPE), sig_addr, signal, sig_op, pe);     \
    }
NVSHMEMI_FOR_STANDARD_RMA_TYPES(NVSHMEMI_TYPED_PUT_SIGNAL)
#undef NVSHMEMI_TYPED_PUT_SIGNAL
#define NVSHMEMI_SIZED_PUT_SIGNAL(BITS)                                                                  \
    NVSHMEMI_DEV void nvshmem_put##BITS##_signal(void *dest, const void *source, size_t nelems,         \
                                                 uint64_t *sig_addr, uint64_t signal, int sig_op,       \
                                                 int pe) {                                              \
        rshmem_putmem_signal(dest, source, nelems * ((BITS) / 8), sig_addr, signal, sig_op, pe);         \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmem_put##BITS##_signal_nbi(void *dest, const void *source, size_t nelems,     \
                                                     uint64_t *sig_addr, uint64_t signal, int sig_op,   \
                                                     int pe) {                                          \
        rshmem_putmem_signal_nbi(dest, source, nelems * ((BITS) / 8), sig_addr, signal, sig_op, pe);     \
    }
NVSHMEMI_FOR_SIZES(NVSHMEMI_SIZED_PUT_SIGNAL)
#undef NVSHMEMI_SIZED_PUT_SIGNAL

#endif /* __CUDACC__ */

/* NVSHMEM's headers make the nvshmemx_ extensions visible from either header. */
#include "nvshmemx.h"

#endif /* RSHMEM_NVSHMEM_H */
