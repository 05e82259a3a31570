/*
 * nvshmemx.h: NVSHMEM 3.x extensions (nvshmemx_*) for rshmem. See nvshmem.h for what is and is not
 * provided; either header gives the whole API.
 */
#ifndef RSHMEM_NVSHMEMX_H
#define RSHMEM_NVSHMEMX_H

#include "nvshmem.h"

#include <limits.h>

/* ------------------------------------------------------------------ status codes (NVSHMEM's values) */
enum nvshmemx_status {
    NVSHMEMX_SUCCESS = 0,
    NVSHMEMX_ERROR_INVALID_VALUE = 1,
    NVSHMEMX_ERROR_OUT_OF_MEMORY = 2,
    NVSHMEMX_ERROR_NOT_SUPPORTED = 3,
    NVSHMEMX_ERROR_SYMMETRY = 4,
    NVSHMEMX_ERROR_GPU_NOT_SELECTED = 5,
    NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED = 6,
    NVSHMEMX_ERROR_INTERNAL = 7,
    NVSHMEMX_ERROR_SENTINEL = INT_MAX
};

/* The name of a status code, for messages (host code). */
static inline const char *nvshmemx_status_string(int status) {
    switch (status) {
    case NVSHMEMX_SUCCESS: return "NVSHMEMX_SUCCESS";
    case NVSHMEMX_ERROR_INVALID_VALUE: return "NVSHMEMX_ERROR_INVALID_VALUE";
    case NVSHMEMX_ERROR_OUT_OF_MEMORY: return "NVSHMEMX_ERROR_OUT_OF_MEMORY";
    case NVSHMEMX_ERROR_NOT_SUPPORTED: return "NVSHMEMX_ERROR_NOT_SUPPORTED";
    case NVSHMEMX_ERROR_SYMMETRY: return "NVSHMEMX_ERROR_SYMMETRY";
    case NVSHMEMX_ERROR_GPU_NOT_SELECTED: return "NVSHMEMX_ERROR_GPU_NOT_SELECTED";
    case NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED: return "NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED";
    case NVSHMEMX_ERROR_INTERNAL: return "NVSHMEMX_ERROR_INTERNAL";
    default: return "NVSHMEMX_ERROR_<unknown>";
    }
}

/* The error-report macros public NVSHMEM programs use (its perftests among them): the source
 * location, then a printf-style message, on stderr; the _EXIT form then ends the process. */
#define NVSHMEMI_ERROR_PRINT(...)                                          \
    do {                                                                   \
        fprintf(stderr, "%s:%s:%d: ", __FILE__, __func__, __LINE__);       \
        fprintf(stderr, __VA_ARGS__);                                      \
    } while (0)
#define NVSHMEMI_ERROR_EXIT(...)                                           \
    do {                                                                   \
        NVSHMEMI_ERROR_PRINT(__VA_ARGS__);                                 \
        exit(-1);                                                          \
    } while (0)

/* ------------------------------------------------------------------ unique-id initialization (host) */
/* NVSHMEM's values. NVSHMEMX_INIT_THREAD_PES is accepted with the others and changes nothing (NVSHMEM
 * reserves it); NVSHMEMX_INIT_WITH_SHMEM (an OpenSHMEM library's bootstrap) is refused with a message:
 * rshmem has none (use rshmrun, a unique id, or an MPI communicator). */
enum {
    NVSHMEMX_INIT_THREAD_PES = 1,
    NVSHMEMX_INIT_WITH_MPI_COMM = 1 << 1,
    NVSHMEMX_INIT_WITH_SHMEM = 1 << 2,
    NVSHMEMX_INIT_WITH_UNIQUEID = 1 << 3,
    NVSHMEMX_INIT_MAX = (int)(1u << 31)
};
#define NVSHMEM_INIT_ATTR_VER 1

typedef struct {
    int version;
    char internal[124];
} nvshmemx_uniqueid_v1;
typedef nvshmemx_uniqueid_v1 nvshmemx_uniqueid_t;

typedef struct {
    int version;
    nvshmemx_uniqueid_v1 *id;
    int myrank;
    int nranks;
} nvshmemx_uniqueid_args_v1;
typedef nvshmemx_uniqueid_args_v1 nvshmemx_uniqueid_args_t;

typedef struct {
    int version;
    nvshmemx_uniqueid_args_t uid_args;
    char content[96];
} nvshmemx_init_args_v1;
typedef nvshmemx_init_args_v1 nvshmemx_init_args_t;

typedef struct {
    int version;
    void *mpi_comm; /* NVSHMEMX_INIT_WITH_MPI_COMM: the address of an MPI_Comm */
    nvshmemx_init_args_t args;
} nvshmemx_init_attr_v1;
typedef nvshmemx_init_attr_v1 nvshmemx_init_attr_t;

/* NVSHMEM's sizes, so ids and attributes can be exchanged as bytes the same way. */
typedef char nvshmemi_uniqueid_size_check[(sizeof(nvshmemx_uniqueid_t) == 128 &&
                                           sizeof(nvshmemx_uniqueid_t) == sizeof(rshmem_uniqueid_t))
                                              ? 1
                                              : -1];
typedef char nvshmemi_init_attr_size_check[(sizeof(nvshmemx_init_attr_t) == 144) ? 1 : -1];

#define NVSHMEMX_UNIQUEID_INITIALIZER {(1 << 16) + (int)sizeof(nvshmemx_uniqueid_t), {0}}
#define NVSHMEMX_UNIQUEID_ARGS_INITIALIZER {(1 << 16) + (int)sizeof(nvshmemx_uniqueid_args_t), NULL, -1, -1}
#define NVSHMEMX_INIT_ARGS_INITIALIZER \
    {(1 << 16) + (int)sizeof(nvshmemx_init_args_t), NVSHMEMX_UNIQUEID_ARGS_INITIALIZER, {0}}
#define NVSHMEMX_INIT_ATTR_INITIALIZER                                                  \
    {(1 << 16) + (int)sizeof(nvshmemx_init_attr_t), NULL,                               \
     {(1 << 16) + (int)sizeof(nvshmemx_init_args_t), NVSHMEMX_UNIQUEID_ARGS_INITIALIZER, {0}}}

/* Modules the program loads itself (see rshmem_cumodule_init). Declared when cuda.h is in (CUmodule). */
#if defined(CUDA_VERSION)
NVSHMEMI_HOST int nvshmemx_cumodule_init(CUmodule module) {
    return rshmem_cumodule_init((void *)module) == 0 ? NVSHMEMX_SUCCESS : NVSHMEMX_ERROR_INVALID_VALUE;
}
NVSHMEMI_HOST int nvshmemx_cumodule_finalize(CUmodule module) {
    return rshmem_cumodule_finalize((void *)module) == 0 ? NVSHMEMX_SUCCESS : NVSHMEMX_ERROR_INVALID_VALUE;
}
/* The same for a CUlibrary (CUDA 12's library API): its module (cuLibraryGetModule) is registered. */
NVSHMEMI_HOST int nvshmemx_culibrary_init(CUlibrary library) {
    return rshmem_culibrary_init((void *)library) == 0 ? NVSHMEMX_SUCCESS : NVSHMEMX_ERROR_INVALID_VALUE;
}
NVSHMEMI_HOST int nvshmemx_culibrary_finalize(CUlibrary library) {
    return rshmem_culibrary_finalize((void *)library) == 0 ? NVSHMEMX_SUCCESS : NVSHMEMX_ERROR_INVALID_VALUE;
}
#endif

/* Local buffers for RMA to other nodes: rshmem's transports need no registration, but the calls check as
 * NVSHMEM's do (overlaps, the symmetric heap, unknown buffers) and return non-zero with a message. */
/* Initialization state (NVSHMEM's values; rshmem is either not initialized or initialized). */
typedef enum {
    NVSHMEM_STATUS_NOT_INITIALIZED = 0,
    NVSHMEM_STATUS_IS_BOOTSTRAPPED = 1,
    NVSHMEM_STATUS_IS_INITIALIZED = 2,
    NVSHMEM_STATUS_LIMITED_MPG = 3,
    NVSHMEM_STATUS_FULL_MPG = 4,
    NVSHMEM_STATUS_INVALID = INT_MAX
} nvshmemx_init_status_t;
NVSHMEMI_HOST int nvshmemx_init_status(void) { return rshmem_init_status(); }
/* No NVLink multicast in rshmem (NVLS stays off): a team has no multicast address. */
NVSHMEMI_HOSTDEV void *nvshmemx_mc_ptr(nvshmem_team_t team, const void *ptr) {
    (void)team;
    (void)ptr;
    return NULL;
}
NVSHMEMI_HOST int nvshmemx_buffer_register(void *addr, size_t length) { return rshmem_buffer_register(addr, length); }
NVSHMEMI_HOST int nvshmemx_buffer_unregister(void *addr) { return rshmem_buffer_unregister(addr); }
NVSHMEMI_HOST int nvshmemx_buffer_unregister_all(void) { return rshmem_buffer_unregister_all(); }

NVSHMEMI_HOSTDEV void nvshmemx_vendor_get_version_info(int *major, int *minor, int *patch) {
    *major = NVSHMEM_VENDOR_MAJOR_VERSION;
    *minor = NVSHMEM_VENDOR_MINOR_VERSION;
    *patch = NVSHMEM_VENDOR_PATCH_VERSION;
}

/* On one PE (then pass the bytes to all). 0 on success. */
NVSHMEMI_HOST int nvshmemx_get_uniqueid(nvshmemx_uniqueid_t *uniqueid) {
    return rshmem_get_unique_id((rshmem_uniqueid_t *)(void *)uniqueid);
}
NVSHMEMI_HOST int nvshmemx_set_attr_uniqueid_args(const int myrank, const int nranks,
                                                  const nvshmemx_uniqueid_t *uniqueid,
                                                  nvshmemx_init_attr_t *attr) {
    attr->args.uid_args.id = (nvshmemx_uniqueid_t *)uniqueid;
    attr->args.uid_args.myrank = myrank;
    attr->args.uid_args.nranks = nranks;
    return 0;
}
/* flags 0: as nvshmem_init (the launcher's environment); NVSHMEMX_INIT_WITH_UNIQUEID: the id, rank and
 * size set by nvshmemx_set_attr_uniqueid_args; NVSHMEMX_INIT_WITH_MPI_COMM: the ranks of the MPI
 * communicator at attr->mpi_comm are the PEs (the program links MPI; rshmem finds it at run time).
 * Exits on failure, as NVSHMEM does. */
NVSHMEMI_HOST int nvshmemx_init_attr(unsigned int flags, nvshmemx_init_attr_t *attr) {
    int rc;
    flags &= ~(unsigned int)NVSHMEMX_INIT_THREAD_PES;
    if (flags & (unsigned int)NVSHMEMX_INIT_WITH_SHMEM) {
        fprintf(stderr, "nvshmemx_init_attr (rshmem): NVSHMEMX_INIT_WITH_SHMEM needs an OpenSHMEM library's bootstrap, "
                        "which rshmem does not have: start the job with rshmrun, or use NVSHMEMX_INIT_WITH_UNIQUEID or "
                        "NVSHMEMX_INIT_WITH_MPI_COMM\n");
        exit(1);
    }
    if (flags == 0) {
        nvshmem_init();
        return 0;
    }
    if (flags == (unsigned int)NVSHMEMX_INIT_WITH_MPI_COMM) {
        if (attr == NULL || rshmem_init_mpi_comm(attr->mpi_comm) != 0) {
            fprintf(stderr, "nvshmemx_init_attr (rshmem): NVSHMEMX_INIT_WITH_MPI_COMM initialization failed, aborting\n");
            exit(1);
        }
        if (nvshmemi_bind_device_library() != 0) {
            fprintf(stderr, "nvshmemx_init_attr (rshmem): binding the device library failed, aborting\n");
            exit(1);
        }
        return 0;
    }
    if (flags != (unsigned int)NVSHMEMX_INIT_WITH_UNIQUEID) {
        fprintf(stderr, "nvshmemx_init_attr (rshmem): unsupported flags 0x%x (NVSHMEMX_INIT_WITH_UNIQUEID or "
                        "NVSHMEMX_INIT_WITH_MPI_COMM)\n",
                flags);
        exit(1);
    }
    if (attr == NULL || attr->args.uid_args.id == NULL) {
        fprintf(stderr, "nvshmemx_init_attr (rshmem): NVSHMEMX_INIT_WITH_UNIQUEID without a unique id "
                        "(call nvshmemx_set_attr_uniqueid_args first)\n");
        exit(1);
    }
    rc = rshmem_init_unique_id((const rshmem_uniqueid_t *)(const void *)attr->args.uid_args.id,
                               attr->args.uid_args.myrank, attr->args.uid_args.nranks);
    if (rc != 0) {
        fprintf(stderr, "nvshmemx_init_attr (rshmem): initialization failed (rank %d of %d), aborting\n",
                attr->args.uid_args.myrank, attr->args.uid_args.nranks);
        exit(1);
    }
    if (nvshmemi_bind_device_library() != 0) {
        fprintf(stderr, "nvshmemx_init_attr (rshmem): binding the device library failed, aborting\n");
        exit(1);
    }
    return 0;
}

/* NVSHMEM's host-only library (programs without device code): rshmem's one library serves both, so
 * these are nvshmemx_init_attr and nvshmem_finalize. */
NVSHMEMI_HOST int nvshmemx_hostlib_init_attr(unsigned int flags, nvshmemx_init_attr_t *attr) {
    return nvshmemx_init_attr(flags, attr);
}
NVSHMEMI_HOST void nvshmemx_hostlib_finalize(void) { nvshmem_finalize(); }
/* Records the MPI communicator for NVSHMEMX_INIT_WITH_MPI_COMM (the address of an MPI_Comm). */
NVSHMEMI_HOST int nvshmemx_set_attr_mpi_comm_args(void *mpi_comm, nvshmemx_init_attr_t *nvshmem_attr) {
    if (nvshmem_attr == NULL) return NVSHMEMX_ERROR_INVALID_VALUE;
    nvshmem_attr->mpi_comm = mpi_comm;
    return 0;
}

/* ------------------------------------------------------------------ on-stream operations (host) */
NVSHMEMI_HOST void nvshmemx_barrier_all_on_stream(RSHMEM_STREAM_T stream) { rshmem_barrier_all_on_stream(stream); }
NVSHMEMI_HOST void nvshmemx_sync_all_on_stream(RSHMEM_STREAM_T stream) { rshmem_sync_all_on_stream(stream); }
NVSHMEMI_HOST void nvshmemx_quiet_on_stream(RSHMEM_STREAM_T stream) { rshmem_quiet_on_stream(stream); }
NVSHMEMI_HOST void nvshmemx_putmem_on_stream(void *dest, const void *source, size_t bytes, int pe,
                                             RSHMEM_STREAM_T stream) {
    rshmem_putmem_on_stream(dest, source, bytes, pe, stream);
}
NVSHMEMI_HOST void nvshmemx_getmem_on_stream(void *dest, const void *source, size_t bytes, int pe,
                                             RSHMEM_STREAM_T stream) {
    rshmem_getmem_on_stream(dest, source, bytes, pe, stream);
}
/* nbi on a stream: the stream-ordered copy (completes no later than the blocking form would). */
NVSHMEMI_HOST void nvshmemx_putmem_nbi_on_stream(void *dest, const void *source, size_t bytes, int pe,
                                                 RSHMEM_STREAM_T stream) {
    rshmem_putmem_on_stream(dest, source, bytes, pe, stream);
}
NVSHMEMI_HOST void nvshmemx_getmem_nbi_on_stream(void *dest, const void *source, size_t bytes, int pe,
                                                 RSHMEM_STREAM_T stream) {
    rshmem_getmem_on_stream(dest, source, bytes, pe, stream);
}
#define NVSHMEMXI_TYPED_ON_STREAM(NAME, TYPE, BITS)                                                      \
    NVSHMEMI_HOST void nvshmemx_##NAME##_put_on_stream(TYPE *dest, const TYPE *source, size_t nelems,  \
                                                       int pe, RSHMEM_STREAM_T stream) {               \
        rshmem_putmem_on_stream(dest, source, nelems * sizeof(TYPE), pe, stream);                      \
    }                                                                                                  \
    NVSHMEMI_HOST void nvshmemx_##NAME##_get_on_stream(TYPE *dest, const TYPE *source, size_t nelems,  \
                                                       int pe, RSHMEM_STREAM_T stream) {               \
        rshmem_getmem_on_stream(dest, source, nelems * sizeof(TYPE), pe, stream);                      \
    }                                                                                                  \
    NVSHMEMI_HOST void nvshmemx_##NAME##_put_nbi_on_stream(TYPE *dest, const TYPE *source,             \
                                                           size_t nelems, int pe,                      \
                                                           RSHMEM_STREAM_T stream) {                   \
        rshmem_putmem_on_stream(dest, source, nelems * sizeof(TYPE), pe, stream);                      \
    }                                                                                                  \
    NVSHMEMI_HOST void nvshmemx_##NAME##_get_nbi_on_stream(TYPE *dest, const TYPE *source,             \
                                                           size_t nelems, int pe,                      \
                                                           RSHMEM_STREAM_T stream) {                   \
        rshmem_getmem_on_stream(dest, source, nelems * sizeof(TYPE), pe, stream);                      \
    }
NVSHMEMI_FOR_STANDARD_RMA_TYPES(NVSHMEMXI_TYPED_ON_STREAM)
#undef NVSHMEMXI_TYPED_ON_STREAM
#define NVSHMEMXI_SIZED_ON_STREAM(BITS)                                                                  \
    NVSHMEMI_HOST void nvshmemx_put##BITS##_on_stream(void *dest, const void *source, size_t nelems,   \
                                                      int pe, RSHMEM_STREAM_T stream) {                \
        rshmem_putmem_on_stream(dest, source, nelems * ((BITS) / 8), pe, stream);                      \
    }                                                                                                  \
    NVSHMEMI_HOST void nvshmemx_get##BITS##_on_stream(void *dest, const void *source, size_t nelems,   \
                                                      int pe, RSHMEM_STREAM_T stream) {                \
        rshmem_getmem_on_stream(dest, source, nelems * ((BITS) / 8), pe, stream);                      \
    }                                                                                                  \
    NVSHMEMI_HOST void nvshmemx_put##BITS##_nbi_on_stream(void *dest, const void *source,              \
                                                          size_t nelems, int pe,                       \
                                                          RSHMEM_STREAM_T stream) {                    \
        rshmem_putmem_on_stream(dest, source, nelems * ((BITS) / 8), pe, stream);                      \
    }                                                                                                  \
    NVSHMEMI_HOST void nvshmemx_get##BITS##_nbi_on_stream(void *dest, const void *source,              \
                                                          size_t nelems, int pe,                       \
                                                          RSHMEM_STREAM_T stream) {                    \
        rshmem_getmem_on_stream(dest, source, nelems * ((BITS) / 8), pe, stream);                      \
    }
NVSHMEMI_FOR_SIZES(NVSHMEMXI_SIZED_ON_STREAM)
#undef NVSHMEMXI_SIZED_ON_STREAM

/* On-stream p / g, strided put / get, put_signal, signal_op and waits (runtime/src/api/point.rs). `g` waits
 * for the stream up to it and returns the value; the others are enqueued. put_signal on a stream is the
 * put then the signal in stream order, so the signal is seen after the data. */
#define NVSHMEMXI_TYPED_POINT_ON_STREAM(NAME, TYPE, BITS)                                                  \
    NVSHMEMI_HOST void nvshmemx_##NAME##_p_on_stream(TYPE *dest, const TYPE value, int pe,                \
                                                     RSHMEM_STREAM_T stream) {                            \
        union { TYPE t; uint##BITS##_t u; } c;                                                            \
        c.t = value;                                                                                      \
        rshmem_p_on_stream(dest, c.u, sizeof(TYPE), pe, stream);                                          \
    }                                                                                                     \
    NVSHMEMI_HOST TYPE nvshmemx_##NAME##_g_on_stream(const TYPE *source, int pe, RSHMEM_STREAM_T stream) { \
        union { TYPE t; uint##BITS##_t u; } c;                                                            \
        c.u = (uint##BITS##_t)rshmem_g_on_stream(source, sizeof(TYPE), pe, stream);                       \
        return c.t;                                                                                       \
    }                                                                                                     \
    NVSHMEMI_HOST void nvshmemx_##NAME##_iput_on_stream(TYPE *dest, const TYPE *source, ptrdiff_t dst,    \
                                                        ptrdiff_t sst, size_t nelems, int pe,             \
                                                        RSHMEM_STREAM_T stream) {                         \
        rshmem_iputmem_on_stream(dest, source, dst, sst, nelems, sizeof(TYPE), pe, stream);               \
    }                                                                                                     \
    NVSHMEMI_HOST void nvshmemx_##NAME##_iget_on_stream(TYPE *dest, const TYPE *source, ptrdiff_t dst,    \
                                                        ptrdiff_t sst, size_t nelems, int pe,             \
                                                        RSHMEM_STREAM_T stream) {                         \
        rshmem_igetmem_on_stream(dest, source, dst, sst, nelems, sizeof(TYPE), pe, stream);               \
    }                                                                                                     \
    NVSHMEMI_HOST void nvshmemx_##NAME##_put_signal_on_stream(TYPE *dest, const TYPE *source, size_t nelems, \
                                                              uint64_t *sig_addr, uint64_t signal,        \
                                                              int sig_op, int pe, RSHMEM_STREAM_T stream) { \
        nvshmemx_putmem_signal_on_stream(dest, source, nelems * sizeof(TYPE), sig_addr, signal, sig_op, pe, \
                                         stream);                                                         \
    }                                                                                                     \
    NVSHMEMI_HOST void nvshmemx_##NAME##_put_signal_nbi_on_stream(TYPE *dest, const TYPE *source,         \
                                                                  size_t nelems, uint64_t *sig_addr,      \
                                                                  uint64_t signal, int sig_op, int pe,    \
                                                                  RSHMEM_STREAM_T stream) {               \
        nvshmemx_putmem_signal_on_stream(dest, source, nelems * sizeof(TYPE), sig_addr, signal, sig_op, pe, \
                                         stream);                                                         \
    }
/* signal_op from host or device code (the host form is complete on return). */
NVSHMEMI_HOSTDEV void nvshmemx_signal_op(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {
    rshmem_signal_op(sig_addr, signal, sig_op, pe);
}
NVSHMEMI_HOST void nvshmemx_signal_op_on_stream(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe,
                                                RSHMEM_STREAM_T stream) {
    rshmem_signal_op_on_stream(sig_addr, signal, sig_op, pe, stream);
}
NVSHMEMI_HOST void nvshmemx_putmem_signal_on_stream(void *dest, const void *source, size_t bytes, uint64_t *sig_addr,
                                                    uint64_t signal, int sig_op, int pe, RSHMEM_STREAM_T stream) {
    rshmem_putmem_on_stream(dest, source, bytes, pe, stream);
    rshmem_signal_op_on_stream(sig_addr, signal, sig_op, pe, stream);
}
NVSHMEMI_HOST void nvshmemx_putmem_signal_nbi_on_stream(void *dest, const void *source, size_t bytes,
                                                        uint64_t *sig_addr, uint64_t signal, int sig_op, int pe,
                                                        RSHMEM_STREAM_T stream) {
    nvshmemx_putmem_signal_on_stream(dest, source, bytes, sig_addr, signal, sig_op, pe, stream);
}
NVSHMEMI_HOST void nvshmemx_signal_wait_until_on_stream(uint64_t *sig_addr, int cmp, uint64_t cmp_value,
                                                        RSHMEM_STREAM_T stream) {
    rshmem_wait_until_on_stream(sig_addr, cmp, cmp_value, 8, false, stream);
}
NVSHMEMI_FOR_STANDARD_RMA_TYPES(NVSHMEMXI_TYPED_POINT_ON_STREAM)
#undef NVSHMEMXI_TYPED_POINT_ON_STREAM
#define NVSHMEMXI_SIZED_POINT_ON_STREAM(BITS)                                                             \
    NVSHMEMI_HOST void nvshmemx_iput##BITS##_on_stream(void *dest, const void *source, ptrdiff_t dst,     \
                                                       ptrdiff_t sst, size_t nelems, int pe,              \
                                                       RSHMEM_STREAM_T stream) {                          \
        rshmem_iputmem_on_stream(dest, source, dst, sst, nelems, (BITS) / 8, pe, stream);                 \
    }                                                                                                     \
    NVSHMEMI_HOST void nvshmemx_iget##BITS##_on_stream(void *dest, const void *source, ptrdiff_t dst,     \
                                                       ptrdiff_t sst, size_t nelems, int pe,              \
                                                       RSHMEM_STREAM_T stream) {                          \
        rshmem_igetmem_on_stream(dest, source, dst, sst, nelems, (BITS) / 8, pe, stream);                 \
    }                                                                                                     \
    NVSHMEMI_HOST void nvshmemx_put##BITS##_signal_on_stream(void *dest, const void *source, size_t nelems, \
                                                             uint64_t *sig_addr, uint64_t signal,         \
                                                             int sig_op, int pe, RSHMEM_STREAM_T stream) { \
        nvshmemx_putmem_signal_on_stream(dest, source, nelems * ((BITS) / 8), sig_addr, signal, sig_op, pe, \
                                         stream);                                                         \
    }                                                                                                     \
    NVSHMEMI_HOST void nvshmemx_put##BITS##_signal_nbi_on_stream(void *dest, const void *source,          \
                                                                 size_t nelems, uint64_t *sig_addr,       \
                                                                 uint64_t signal, int sig_op, int pe,     \
                                                                 RSHMEM_STREAM_T stream) {                \
        nvshmemx_putmem_signal_on_stream(dest, source, nelems * ((BITS) / 8), sig_addr, signal, sig_op, pe, \
                                         stream);                                                         \
    }
NVSHMEMI_FOR_SIZES(NVSHMEMXI_SIZED_POINT_ON_STREAM)
#undef NVSHMEMXI_SIZED_POINT_ON_STREAM
/* Waits on a stream, over nvshmem.h's wait types; the type's suffix says whether they compare signed. */
/* Whether rshmem_wait_until_SUFFIX compares signed (the suffix of nvshmem.h's wait-type table). */
#define NVSHMEMXI_SIGNED_i16 true
#define NVSHMEMXI_SIGNED_i32 true
#define NVSHMEMXI_SIGNED_i64 true
#define NVSHMEMXI_SIGNED_u16 false
#define NVSHMEMXI_SIGNED_u32 false
#define NVSHMEMXI_SIGNED_u64 false
#define NVSHMEMXI_WAIT_ON_STREAM(NAME, TYPE, SUF, CT)                                                       \
    NVSHMEMI_HOST void nvshmemx_##NAME##_wait_until_on_stream(TYPE *ivar, int cmp, TYPE cmp_value,         \
                                                              RSHMEM_STREAM_T stream) {                   \
        rshmem_wait_until_on_stream(ivar, cmp, (uint64_t)cmp_value, sizeof(TYPE), NVSHMEMXI_SIGNED_##SUF, stream);  \
    }                                                                                                     \
    NVSHMEMI_HOST void nvshmemx_##NAME##_wait_until_all_on_stream(TYPE *ivars, size_t nelems, const int *status, \
                                                                  int cmp, TYPE cmp_value,                \
                                                                  RSHMEM_STREAM_T stream) {               \
        rshmem_wait_until_all_on_stream(ivars, nelems, status, cmp, (uint64_t)cmp_value, NULL, sizeof(TYPE), \
                                        NVSHMEMXI_SIGNED_##SUF, stream);                                  \
    }                                                                                                     \
    NVSHMEMI_HOST void nvshmemx_##NAME##_wait_until_all_vector_on_stream(TYPE *ivars, size_t nelems,      \
                                                                         const int *status, int cmp,      \
                                                                         TYPE *cmp_values,                \
                                                                         RSHMEM_STREAM_T stream) {        \
        rshmem_wait_until_all_on_stream(ivars, nelems, status, cmp, 0, cmp_values, sizeof(TYPE),           \
                                        NVSHMEMXI_SIGNED_##SUF, stream);                                 \
    }
NVSHMEMI_FOR_WAIT_TYPES(NVSHMEMXI_WAIT_ON_STREAM)
#undef NVSHMEMXI_WAIT_ON_STREAM

/* ------------------------------------------------------------------ collective launch (host) */
#if defined(__CUDACC__) || defined(CUDART_VERSION)
/* Cooperative launch (all blocks resident at once), required when blocks synchronize with each other
 * through device-side rshmem calls; a grid of 0 x 0 x 0 launches the largest that fits. Inline with the
 * CUDA runtime (rshmemx_collective_launch in rshmem.h). NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED, with a
 * message, when the device or the grid does not allow it. */
NVSHMEMI_HOST int nvshmemx_collective_launch(const void *func, dim3 gridDims, dim3 blockDims, void **args,
                                             size_t sharedMem, cudaStream_t stream) {
    return rshmemx_collective_launch(func, gridDims, blockDims, args, sharedMem, stream) == 0
               ? NVSHMEMX_SUCCESS
               : NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED;
}
/* The largest grid nvshmemx_collective_launch accepts: blocks per SM (occupancy) x SMs. */
NVSHMEMI_HOST int nvshmemx_collective_launch_query_gridsize(const void *func, dim3 blockDims, void **args,
                                                            size_t sharedMem, int *gridsize) {
    return rshmemx_collective_launch_query_gridsize(func, blockDims, args, sharedMem, gridsize) == 0
               ? NVSHMEMX_SUCCESS
               : NVSHMEMX_ERROR_INTERNAL;
}
#endif

/* ------------------------------------------------------------------ not provided (run-time failure) */
/* Registering a user buffer into the symmetric address space is not provided by rshmem. Declared only
 * because NVSHMEM's perftest helper (common/utils.cu) references them behind its mmap option: a call
 * prints why and fails (NULL / NVSHMEMX_ERROR_NOT_SUPPORTED), NVSHMEM's own error returns. */
NVSHMEMI_HOST void *nvshmemx_buffer_register_symmetric(void *buf_ptr, size_t size, int flags) {
    (void)buf_ptr;
    (void)flags;
    fprintf(stderr, "nvshmemx_buffer_register_symmetric (rshmem): registering user buffers (%zu bytes) into "
                    "the symmetric heap is not supported; allocate with nvshmem_malloc instead\n", size);
    return NULL;
}
NVSHMEMI_HOST int nvshmemx_buffer_unregister_symmetric(void *mmap_ptr, size_t size) {
    (void)mmap_ptr;
    (void)size;
    fprintf(stderr, "nvshmemx_buffer_unregister_symmetric (rshmem): not supported (no buffer can be registered)\n");
    return NVSHMEMX_ERROR_NOT_SUPPORTED;
}

/* ------------------------------------------------------------------ collectives on a stream (host) */
/* Enqueued on `stream` (run there by one block, in stream order); 0 on success, else the error is
 * printed and nonzero returned. Counts as in nvshmem.h. */
NVSHMEMI_HOST int nvshmemx_barrier_on_stream(nvshmem_team_t team, RSHMEM_STREAM_T stream) {
    return rshmem_barrier_on_stream(team, stream);
}
NVSHMEMI_HOST int nvshmemx_team_sync_on_stream(nvshmem_team_t team, RSHMEM_STREAM_T stream) {
    return rshmem_team_sync_on_stream(team, stream);
}
NVSHMEMI_HOST int nvshmemx_broadcastmem_on_stream(nvshmem_team_t team, void *dest, const void *src, size_t nelems,
                                                  int PE_root, RSHMEM_STREAM_T stream) {
    return rshmem_broadcastmem_on_stream(team, dest, src, nelems, PE_root, stream);
}
NVSHMEMI_HOST int nvshmemx_fcollectmem_on_stream(nvshmem_team_t team, void *dest, const void *src, size_t nelems,
                                                 RSHMEM_STREAM_T stream) {
    return rshmem_fcollectmem_on_stream(team, dest, src, nelems, stream);
}
NVSHMEMI_HOST int nvshmemx_alltoallmem_on_stream(nvshmem_team_t team, void *dest, const void *src, size_t nelems,
                                                 RSHMEM_STREAM_T stream) {
    return rshmem_alltoallmem_on_stream(team, dest, src, nelems, stream);
}
#define NVSHMEMXI_TYPED_COLL_ON_STREAM(NAME, TYPE, BITS)                                                 \
    NVSHMEMI_HOST int nvshmemx_##NAME##_broadcast_on_stream(nvshmem_team_t team, TYPE *dest,            \
                                                            const TYPE *src, size_t nelems, int PE_root, \
                                                            RSHMEM_STREAM_T stream) {                   \
        return rshmem_broadcastmem_on_stream(team, dest, src, nelems * sizeof(TYPE), PE_root, stream);  \
    }                                                                                                   \
    NVSHMEMI_HOST int nvshmemx_##NAME##_fcollect_on_stream(nvshmem_team_t team, TYPE *dest,             \
                                                           const TYPE *src, size_t nelems,              \
                                                           RSHMEM_STREAM_T stream) {                    \
        return rshmem_fcollectmem_on_stream(team, dest, src, nelems * sizeof(TYPE), stream);            \
    }                                                                                                   \
    NVSHMEMI_HOST int nvshmemx_##NAME##_alltoall_on_stream(nvshmem_team_t team, TYPE *dest,             \
                                                           const TYPE *src, size_t nelems,              \
                                                           RSHMEM_STREAM_T stream) {                    \
        return rshmem_alltoallmem_on_stream(team, dest, src, nelems * sizeof(TYPE), stream);            \
    }
NVSHMEMI_FOR_STANDARD_RMA_TYPES(NVSHMEMXI_TYPED_COLL_ON_STREAM)
#undef NVSHMEMXI_TYPED_COLL_ON_STREAM
#define NVSHMEMXI_TYPED_REDUCE_ON_STREAM(NAME, TYPE, KIND, OP)                                            \
    NVSHMEMI_HOST int nvshmemx_##NAME##_##OP##_reduce_on_stream(nvshmem_team_t team, TYPE *dest,         \
                                                                const TYPE *src, size_t nreduce,         \
                                                                RSHMEM_STREAM_T stream) {                \
        return rshmem_reduce_on_stream(team, dest, src, nreduce, NVSHMEMI_DT_##KIND(TYPE),               \
                                       NVSHMEMI_OP_##OP, stream);                                        \
    }                                                                                                    \
    NVSHMEMI_HOST int nvshmemx_##NAME##_##OP##_reducescatter_on_stream(nvshmem_team_t team, TYPE *dest,  \
                                                                       const TYPE *src, size_t nreduce,  \
                                                                       RSHMEM_STREAM_T stream) {         \
        return rshmem_reducescatter_on_stream(team, dest, src, nreduce, NVSHMEMI_DT_##KIND(TYPE),        \
                                              NVSHMEMI_OP_##OP, stream);                                 \
    }
NVSHMEMI_FOR_REDUCTIONS(NVSHMEMXI_TYPED_REDUCE_ON_STREAM)
#undef NVSHMEMXI_TYPED_REDUCE_ON_STREAM
#if defined(NVSHMEMI_HAVE_CUDA_TYPES)
NVSHMEMI_HOST int nvshmemx_double2_maxloc_reduce_on_stream(nvshmem_team_t team, double2 *dest, const double2 *src,
                                                           size_t nreduce, RSHMEM_STREAM_T stream) {
    return rshmem_reduce_on_stream(team, dest, src, nreduce, RSHMEM_DTYPE_DOUBLE2, RSHMEM_OP_MAXLOC, stream);
}
#endif

/* ------------------------------------------------------------------ device-side extensions */
#if defined(__CUDACC__)

/* Warp- and block-scope put/get: every thread of the warp/block calls with the same arguments. */
NVSHMEMI_DEV void nvshmemx_putmem_warp(void *dest, const void *source, size_t bytes, int pe) {
    rshmem_putmem_warp(dest, source, bytes, pe);
}
NVSHMEMI_DEV void nvshmemx_putmem_block(void *dest, const void *source, size_t bytes, int pe) {
    rshmem_putmem_block(dest, source, bytes, pe);
}
NVSHMEMI_DEV void nvshmemx_putmem_nbi_warp(void *dest, const void *source, size_t bytes, int pe) {
    rshmem_putmem_nbi_warp(dest, source, bytes, pe);
}
NVSHMEMI_DEV void nvshmemx_putmem_nbi_block(void *dest, const void *source, size_t bytes, int pe) {
    rshmem_putmem_nbi_block(dest, source, bytes, pe);
}
NVSHMEMI_DEV void nvshmemx_getmem_warp(void *dest, const void *source, size_t bytes, int pe) {
    rshmem_getmem_warp(dest, source, bytes, pe);
}
NVSHMEMI_DEV void nvshmemx_getmem_block(void *dest, const void *source, size_t bytes, int pe) {
    rshmem_getmem_block(dest, source, bytes, pe);
}
NVSHMEMI_DEV void nvshmemx_getmem_nbi_warp(void *dest, const void *source, size_t bytes, int pe) {
    rshmem_getmem_nbi_warp(dest, source, bytes, pe);
}
NVSHMEMI_DEV void nvshmemx_getmem_nbi_block(void *dest, const void *source, size_t bytes, int pe) {
    rshmem_getmem_nbi_block(dest, source, bytes, pe);
}

/* Typed and sized forms of the warp / block scopes (put, get, their nbi forms, put_signal(_nbi)). */
#define NVSHMEMXI_SCOPED_RMA(NAME, TYPE, SCOPE)                                                           \
    NVSHMEMI_DEV void nvshmemx_##NAME##_put_##SCOPE(TYPE *dest, const TYPE *source, size_t nelems,       \
                                                    int pe) {                                           \
        rshmem_putmem_##SCOPE(dest, source, nelems * sizeof(TYPE), pe);                                  \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_##NAME##_put_nbi_##SCOPE(TYPE *dest, const TYPE *source, size_t nelems,   \
                                                        int pe) {                                       \
        rshmem_putmem_nbi_##SCOPE(dest, source, nelems * sizeof(TYPE), pe);                              \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_##NAME##_get_##SCOPE(TYPE *dest, const TYPE *source, size_t nelems,       \
                                                    int pe) {                                           \
        rshmem_getmem_##SCOPE(dest, source, nelems * sizeof(TYPE), pe);                                  \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_##NAME##_get_nbi_##SCOPE(TYPE *dest, const TYPE *source, size_t nelems,   \
                                                        int pe) {                                       \
        rshmem_getmem_nbi_##SCOPE(dest, source, nelems * sizeof(TYPE), pe);                              \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_##NAME##_put_signal_##SCOPE(TYPE *dest, const TYPE *source, size_t nelems, \
                                                           uint64_t *sig_addr, uint64_t signal,         \
                                                           int sig_op, int pe) {                        \
        rshmem_putmem_signal_##SCOPE(dest, source, nelems * sizeof(TYPE), sig_addr, signal, sig_op, pe); \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_##NAME##_put_signal_nbi_##SCOPE(TYPE *dest, const TYPE *source,           \
                                                               size_t nelems, uint64_t *sig_addr,       \
                                                               uint64_t signal, int sig_op, int pe) {   \
        rshmem_putmem_signal_nbi_##SCOPE(dest, source, nelems * sizeof(TYPE), sig_addr, signal, sig_op,  \
                                         pe);                                                           \
    }
#define NVSHMEMXI_TYPED_SCOPES(NAME, TYPE, BITS) \
    NVSHMEMXI_SCOPED_RMA(NAME, TYPE, warp)       \
    NVSHMEMXI_SCOPED_RMA(NAME, TYPE, block)
NVSHMEMI_FOR_STANDARD_RMA_TYPES(NVSHMEMXI_TYPED_SCOPES)
#undef NVSHMEMXI_TYPED_SCOPES

#define NVSHMEMXI_SIZED_SCOPED_RMA(BITS, SCOPE)                                                           \
    NVSHMEMI_DEV void nvshmemx_put##BITS##_##SCOPE(void *dest, const void *source, size_t nelems, int pe) { \
        rshmem_putmem_##SCOPE(dest, source, nelems * ((BITS) / 8), pe);                                  \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_put##BITS##_nbi_##SCOPE(void *dest, const void *source, size_t nelems,    \
                                                       int pe) {                                        \
        rshmem_putmem_nbi_##SCOPE(dest, source, nelems * ((BITS) / 8), pe);                              \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_get##BITS##_##SCOPE(void *dest, const void *source, size_t nelems, int pe) { \
        rshmem_getmem_##SCOPE(dest, source, nelems * ((BITS) / 8), pe);                                  \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_get##BITS##_nbi_##SCOPE(void *dest, const void *source, size_t nelems,    \
                                                       int pe) {                                        \
        rshmem_getmem_nbi_##SCOPE(dest, source, nelems * ((BITS) / 8), pe);                              \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_put##BITS##_signal_##SCOPE(void *dest, const void *source, size_t nelems, \
                                                          uint64_t *sig_addr, uint64_t signal,          \
                                                          int sig_op, int pe) {                         \
        rshmem_putmem_signal_##SCOPE(dest, source, nelems * ((BITS) / 8), sig_addr, signal, sig_op, pe); \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_put##BITS##_signal_nbi_##SCOPE(void *dest, const void *source,            \
                                                              size_t nelems, uint64_t *sig_addr,        \
                                                              uint64_t signal, int sig_op, int pe) {    \
        rshmem_putmem_signal_nbi_##SCOPE(dest, source, nelems * ((BITS) / 8), sig_addr, signal, sig_op,  \
                                         pe);                                                           \
    }
#define NVSHMEMXI_SIZED_SCOPES(BITS)          \
    NVSHMEMXI_SIZED_SCOPED_RMA(BITS, warp)    \
    NVSHMEMXI_SIZED_SCOPED_RMA(BITS, block)
NVSHMEMI_FOR_SIZES(NVSHMEMXI_SIZED_SCOPES)
#undef NVSHMEMXI_SIZED_SCOPES
#undef NVSHMEMXI_SIZED_SCOPED_RMA
#undef NVSHMEMXI_SCOPED_RMA

/* Strided put / get at warp and block scope (every thread of the group calls; the elements are split
 * over it). */
#define NVSHMEMXI_SCOPED_STRIDED(NAME, TYPE, SCOPE)                                                        \
    NVSHMEMI_DEV void nvshmemx_##NAME##_iput_##SCOPE(TYPE *dest, const TYPE *source, ptrdiff_t dst,       \
                                                     ptrdiff_t sst, size_t nelems, int pe) {             \
        rshmem_iputmem_##SCOPE(dest, source, dst, sst, nelems, sizeof(TYPE), pe);                        \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_##NAME##_iget_##SCOPE(TYPE *dest, const TYPE *source, ptrdiff_t dst,       \
                                                     ptrdiff_t sst, size_t nelems, int pe) {             \
        rshmem_igetmem_##SCOPE(dest, source, dst, sst, nelems, sizeof(TYPE), pe);                        \
    }
#define NVSHMEMXI_TYPED_STRIDED_SCOPES(NAME, TYPE, BITS) \
    NVSHMEMXI_SCOPED_STRIDED(NAME, TYPE, warp)           \
    NVSHMEMXI_SCOPED_STRIDED(NAME, TYPE, block)
NVSHMEMI_FOR_STANDARD_RMA_TYPES(NVSHMEMXI_TYPED_STRIDED_SCOPES)
#undef NVSHMEMXI_TYPED_STRIDED_SCOPES
#undef NVSHMEMXI_SCOPED_STRIDED
#define NVSHMEMXI_SIZED_STRIDED_SCOPED(BITS, SCOPE)                                                        \
    NVSHMEMI_DEV void nvshmemx_iput##BITS##_##SCOPE(void *dest, const void *source, ptrdiff_t dst,        \
                                                    ptrdiff_t sst, size_t nelems, int pe) {              \
        rshmem_iputmem_##SCOPE(dest, source, dst, sst, nelems, (BITS) / 8, pe);                          \
    }                                                                                                    \
    NVSHMEMI_DEV void nvshmemx_iget##BITS##_##SCOPE(void *dest, const void *source, ptrdiff_t dst,        \
                                                    ptrdiff_t sst, size_t nelems, int pe) {              \
        rshmem_igetmem_##SCOPE(dest, source, dst, sst, nelems, (BITS) / 8, pe);                          \
    }
#define NVSHMEMXI_SIZED_STRIDED_SCOPES(BITS)       \
    NVSHMEMXI_SIZED_STRIDED_SCOPED(BITS, warp)     \
    NVSHMEMXI_SIZED_STRIDED_SCOPED(BITS, block)
NVSHMEMI_FOR_SIZES(NVSHMEMXI_SIZED_STRIDED_SCOPES)
#undef NVSHMEMXI_SIZED_STRIDED_SCOPES
#undef NVSHMEMXI_SIZED_STRIDED_SCOPED

/* NVSHMEM 3.4.5's headers spell the 16-bit warp / block put_signal forms "put6" as well (a typo there);
 * declared for source compatibility, the same as the put16 forms. */
NVSHMEMI_DEV void nvshmemx_put6_signal_warp(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                                            uint64_t signal, int sig_op, int pe) {
    nvshmemx_put16_signal_warp(dest, source, nelems, sig_addr, signal, sig_op, pe);
}
NVSHMEMI_DEV void nvshmemx_put6_signal_block(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                                             uint64_t signal, int sig_op, int pe) {
    nvshmemx_put16_signal_block(dest, source, nelems, sig_addr, signal, sig_op, pe);
}
NVSHMEMI_DEV void nvshmemx_put6_signal_nbi_warp(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                                                uint64_t signal, int sig_op, int pe) {
    nvshmemx_put16_signal_nbi_warp(dest, source, nelems, sig_addr, signal, sig_op, pe);
}
NVSHMEMI_DEV void nvshmemx_put6_signal_nbi_block(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                                                 uint64_t signal, int sig_op, int pe) {
    nvshmemx_put16_signal_nbi_block(dest, source, nelems, sig_addr, signal, sig_op, pe);
}

/* Signals. */
NVSHMEMI_DEV void nvshmemx_putmem_signal_warp(void *dest, const void *source, size_t bytes,
                                              uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {
    rshmem_putmem_signal_warp(dest, source, bytes, sig_addr, signal, sig_op, pe);
}
NVSHMEMI_DEV void nvshmemx_putmem_signal_block(void *dest, const void *source, size_t bytes,
                                               uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {
    rshmem_putmem_signal_block(dest, source, bytes, sig_addr, signal, sig_op, pe);
}
NVSHMEMI_DEV void nvshmemx_putmem_signal_nbi_warp(void *dest, const void *source, size_t bytes,
                                                  uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {
    rshmem_putmem_signal_nbi_warp(dest, source, bytes, sig_addr, signal, sig_op, pe);
}
NVSHMEMI_DEV void nvshmemx_putmem_signal_nbi_block(void *dest, const void *source, size_t bytes,
                                                   uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {
    rshmem_putmem_signal_nbi_block(dest, source, bytes, sig_addr, signal, sig_op, pe);
}

/* Barrier by a warpgroup (the 4 warps, 128 threads, of a block that share threadIdx.x / 128 in the
 * block's linear thread order; every thread of the warpgroup calls): the warpgroup meets on a named
 * hardware barrier (1 + its index: 1-8, which nothing else in rshmem uses), its first thread runs the
 * team barrier, and the warpgroup meets again. */
#if defined(__CUDACC__)
NVSHMEMI_DEV int nvshmemx_barrier_warpgroup(nvshmem_team_t team) {
    unsigned int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned int id = 1 + t / 128;
    int rc = 0;
    asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory");
    if (t % 128 == 0) rc = rshmem_barrier(team);
    asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory");
    return rc;
}
#endif

/* Barriers and syncs by warp / block (every thread of the warp/block calls). */
NVSHMEMI_DEV void nvshmemx_barrier_all_warp(void) { rshmem_barrier_all_warp(); }
NVSHMEMI_DEV void nvshmemx_barrier_all_block(void) { rshmem_barrier_all_block(); }
NVSHMEMI_DEV void nvshmemx_sync_all_warp(void) { rshmem_sync_all_warp(); }
NVSHMEMI_DEV void nvshmemx_sync_all_block(void) { rshmem_sync_all_block(); }

/* Team collectives by warp / block (every thread of the warp/block calls with the same arguments). */
#define NVSHMEMXI_SCOPED_COLL(SCOPE)                                                                     \
    NVSHMEMI_DEV int nvshmemx_barrier_##SCOPE(nvshmem_team_t team) { return rshmem_barrier_##SCOPE(team); } \
    NVSHMEMI_DEV int nvshmemx_team_sync_##SCOPE(nvshmem_team_t team) {                                  \
        return rshmem_team_sync_##SCOPE(team);                                                          \
    }                                                                                                   \
    NVSHMEMI_DEV int nvshmemx_broadcastmem_##SCOPE(nvshmem_team_t team, void *dest, const void *src,    \
                                                   size_t nelems, int PE_root) {                        \
        return rshmem_broadcastmem_##SCOPE(team, dest, src, nelems, PE_root);                           \
    }                                                                                                   \
    NVSHMEMI_DEV int nvshmemx_fcollectmem_##SCOPE(nvshmem_team_t team, void *dest, const void *src,     \
                                                  size_t nelems) {                                      \
        return rshmem_fcollectmem_##SCOPE(team, dest, src, nelems);                                     \
    }                                                                                                   \
    NVSHMEMI_DEV int nvshmemx_alltoallmem_##SCOPE(nvshmem_team_t team, void *dest, const void *src,     \
                                                  size_t nelems) {                                      \
        return rshmem_alltoallmem_##SCOPE(team, dest, src, nelems);                                     \
    }                                                                                                   \
    NVSHMEMI_DEV int nvshmemx_double2_maxloc_reduce_##SCOPE(nvshmem_team_t team, double2 *dest,         \
                                                            const double2 *src, size_t nreduce) {       \
        return rshmem_reduce_##SCOPE(team, dest, src, nreduce, RSHMEM_DTYPE_DOUBLE2, RSHMEM_OP_MAXLOC);  \
    }
NVSHMEMXI_SCOPED_COLL(warp)
NVSHMEMXI_SCOPED_COLL(block)
#undef NVSHMEMXI_SCOPED_COLL

#define NVSHMEMXI_TYPED_SCOPED_COLL(NAME, TYPE, SCOPE)                                                   \
    NVSHMEMI_DEV int nvshmemx_##NAME##_broadcast_##SCOPE(nvshmem_team_t team, TYPE *dest, const TYPE *src, \
                                                         size_t nelems, int PE_root) {                  \
        return rshmem_broadcastmem_##SCOPE(team, dest, src, nelems * sizeof(TYPE), PE_root);            \
    }                                                                                                   \
    NVSHMEMI_DEV int nvshmemx_##NAME##_fcollect_##SCOPE(nvshmem_team_t team, TYPE *dest, const TYPE *src, \
                                                        size_t nelems) {                                \
        return rshmem_fcollectmem_##SCOPE(team, dest, src, nelems * sizeof(TYPE));                     \
    }                                                                                                   \
    NVSHMEMI_DEV int nvshmemx_##NAME##_alltoall_##SCOPE(nvshmem_team_t team, TYPE *dest, const TYPE *src, \
                                                        size_t nelems) {                                \
        return rshmem_alltoallmem_##SCOPE(team, dest, src, nelems * sizeof(TYPE));                      \
    }
#define NVSHMEMXI_TYPED_COLL_SCOPES(NAME, TYPE, BITS) \
    NVSHMEMXI_TYPED_SCOPED_COLL(NAME, TYPE, warp)     \
    NVSHMEMXI_TYPED_SCOPED_COLL(NAME, TYPE, block)
NVSHMEMI_FOR_STANDARD_RMA_TYPES(NVSHMEMXI_TYPED_COLL_SCOPES)
#undef NVSHMEMXI_TYPED_COLL_SCOPES
#undef NVSHMEMXI_TYPED_SCOPED_COLL

#define NVSHMEMXI_TYPED_SCOPED_REDUCE(NAME, TYPE, KIND, OP, SCOPE)                                       \
    NVSHMEMI_DEV int nvshmemx_##NAME##_##OP##_reduce_##SCOPE(nvshmem_team_t team, TYPE *dest,           \
                                                             const TYPE *src, size_t nreduce) {         \
        return rshmem_reduce_##SCOPE(team, dest, src, nreduce, NVSHMEMI_DT_##KIND(TYPE), NVSHMEMI_OP_##OP); \
    }                                                                                                   \
    NVSHMEMI_DEV int nvshmemx_##NAME##_##OP##_reducescatter_##SCOPE(nvshmem_team_t team, TYPE *dest,    \
                                                                    const TYPE *src, size_t nreduce) {  \
        return rshmem_reducescatter_##SCOPE(team, dest, src, nreduce, NVSHMEMI_DT_##KIND(TYPE),          \
                                            NVSHMEMI_OP_##OP);                                          \
    }
#define NVSHMEMXI_TYPED_REDUCE_SCOPES(NAME, TYPE, KIND, OP)      \
    NVSHMEMXI_TYPED_SCOPED_REDUCE(NAME, TYPE, KIND, OP, warp)    \
    NVSHMEMXI_TYPED_SCOPED_REDUCE(NAME, TYPE, KIND, OP, block)
NVSHMEMI_FOR_REDUCTIONS(NVSHMEMXI_TYPED_REDUCE_SCOPES)
#undef NVSHMEMXI_TYPED_REDUCE_SCOPES
#undef NVSHMEMXI_TYPED_SCOPED_REDUCE

#endif /* __CUDACC__ */

#endif /* RSHMEM_NVSHMEMX_H */
