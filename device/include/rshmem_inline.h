/*
 * rshmem_inline.h: inline fast paths of the device calls that are dominated by their call overhead, for
 * CUDA C++ programs (included by rshmem.h in nvcc's device pass; not a public API of its own).
 *
 * Why: the device library is separately compiled code (the Rust device crate's PTX in
 * librshmem_device.a), so every call from a user's kernel is an out-of-line call, and the library's
 * functions are assembled under a 64-register cap (a kernel calling them must still launch 1024-thread
 * blocks), which makes the copy routines spill. Measured on one H100 (bench/results/
 * 2026-11-23-h100-cpp-self.md): block put/get at 2-64 KiB ran at 0.16-0.22 x NVSHMEM, whose device
 * functions are inlined into the user's kernel, and g at 4.3 x its latency.
 *
 * What: for a PE whose heap is mapped here (NVLink/PCIe peers, and this PE itself) and a transfer the
 * fast path handles (16-byte aligned put/get, naturally sized p/g), the call is done inline, in the
 * user's kernel, with the kernel's own registers. Everything else - PEs on other nodes, unaligned
 * transfers, calls whose PE or address fail the checks, calls before init - goes to the library
 * function of the same name, which is the one implementation of the semantics and of the error
 * messages. The fast path only decides "mapped and simple" and moves the bytes; the decision reads the
 * same device state, at offsets that a Rust test (device/src/state.rs) checks against the layout.
 *
 * RSHMEM_NO_INLINE_FASTPATH: define it to call the library for everything (for comparisons).
 */
#ifndef RSHMEM_INLINE_H
#define RSHMEM_INLINE_H

#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && !defined(RSHMEM_NO_INLINE_FASTPATH)

/* Layout of the device state (device/src/state.rs, DeviceState), checked by the Rust test
 * `inline_header_matches_the_device_state`. */
#define RSHMEMI_STATE_MAGIC 0x5253484d454d0003ULL
#define RSHMEMI_OFF_MAGIC 0
#define RSHMEMI_OFF_N_PES 12
#define RSHMEMI_OFF_HEAP_BASE 16
#define RSHMEMI_OFF_HEAP_SIZE 24
#define RSHMEMI_OFF_CHECKS 32
#define RSHMEMI_OFF_PEER_BASE 592
#define RSHMEMI_MAX_PES 512

/* Defined by the device library archive (device/cuda/rshmem_device_init.cu), in the constant bank. */
extern "C" __constant__ unsigned char rshmemi_device_state[];

/* The address of symmetric `sym` (of `bytes`) on `pe` in this process when the fast path may take the
 * call: initialized, the PE's heap mapped here, and (with checks on) the PE and the range valid.
 * NULL otherwise: the library then takes the call (and reports a bad PE or address). */
static __device__ __forceinline__ char *rshmemi_inline_peer(const void *sym, size_t bytes, int pe) {
    const unsigned char *st = rshmemi_device_state;
    const unsigned long long magic = *(const unsigned long long *)(st + RSHMEMI_OFF_MAGIC);
    const unsigned long long base =
        *(const unsigned long long *)(st + RSHMEMI_OFF_PEER_BASE + 8 * ((unsigned)pe & (RSHMEMI_MAX_PES - 1)));
    const unsigned long long heap = *(const unsigned long long *)(st + RSHMEMI_OFF_HEAP_BASE);
    const unsigned long long size = *(const unsigned long long *)(st + RSHMEMI_OFF_HEAP_SIZE);
    const int npes = *(const int *)(st + RSHMEMI_OFF_N_PES);
    const unsigned checks = *(const unsigned *)(st + RSHMEMI_OFF_CHECKS);
    const unsigned long long off = (unsigned long long)sym - heap;
    if (magic != RSHMEMI_STATE_MAGIC || base == 0) return 0;
    if (checks && ((unsigned)pe >= (unsigned)npes || off > size || bytes > size - off)) return 0;
    return (char *)(base + off);
}

/* 16-byte copy of `units` units by thread `rank` of `nthreads`. */
static __device__ __forceinline__ void rshmemi_inline_copy16(char *dst, const char *src, size_t units, unsigned rank,
                                                            unsigned nthreads) {
    int4 *d = (int4 *)dst;
    const int4 *s = (const int4 *)src;
    for (size_t i = rank; i < units; i += nthreads) d[i] = s[i];
}

static __device__ __forceinline__ unsigned rshmemi_block_rank(void) {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static __device__ __forceinline__ unsigned rshmemi_block_threads(void) { return blockDim.x * blockDim.y * blockDim.z; }

/* Scopes: THREAD (one thread), WARP (the calling warp, lane order), BLOCK (the calling block). The
 * group's rank and size as the library computes them (device/src/arch/nvptx.rs). */
#define RSHMEMI_RANK_THREAD 0u
#define RSHMEMI_SIZE_THREAD 1u
#define RSHMEMI_SYNC_THREAD()
#define RSHMEMI_RANK_WARP (rshmemi_block_rank() & 31u)
#define RSHMEMI_SIZE_WARP \
    (rshmemi_block_threads() - (rshmemi_block_rank() & ~31u) < 32u ? rshmemi_block_threads() - (rshmemi_block_rank() & ~31u) : 32u)
#define RSHMEMI_SYNC_WARP() __syncwarp()
#define RSHMEMI_RANK_BLOCK rshmemi_block_rank()
#define RSHMEMI_SIZE_BLOCK rshmemi_block_threads()
#define RSHMEMI_SYNC_BLOCK() __syncthreads()

/* put/get fast paths: mapped PE and 16-byte aligned addresses and size (uniform across the group, as
 * the arguments are), then the group synchronizes as the library's call does. */
#define RSHMEMI_INLINE_RMA(NAME, SCOPE, PUT)                                                                   \
    static __device__ __forceinline__ void rshmemi_inline_##NAME(void *dst, const void *src, size_t bytes,   \
                                                                 int pe) {                                 \
        char *r = rshmemi_inline_peer(PUT ? dst : src, bytes, pe);                                          \
        if (r && ((((unsigned long long)dst | (unsigned long long)src | bytes) & 15) == 0)) {              \
            if (PUT)                                                                                        \
                rshmemi_inline_copy16(r, (const char *)src, bytes / 16, RSHMEMI_RANK_##SCOPE, RSHMEMI_SIZE_##SCOPE); \
            else                                                                                            \
                rshmemi_inline_copy16((char *)dst, r, bytes / 16, RSHMEMI_RANK_##SCOPE, RSHMEMI_SIZE_##SCOPE); \
            RSHMEMI_SYNC_##SCOPE();                                                                         \
            return;                                                                                         \
        }                                                                                                   \
        NAME(dst, src, bytes, pe);                                                                          \
    }
RSHMEMI_INLINE_RMA(rshmem_putmem, THREAD, 1)
RSHMEMI_INLINE_RMA(rshmem_putmem_nbi, THREAD, 1)
RSHMEMI_INLINE_RMA(rshmem_putmem_warp, WARP, 1)
RSHMEMI_INLINE_RMA(rshmem_putmem_nbi_warp, WARP, 1)
RSHMEMI_INLINE_RMA(rshmem_putmem_block, BLOCK, 1)
RSHMEMI_INLINE_RMA(rshmem_putmem_nbi_block, BLOCK, 1)
RSHMEMI_INLINE_RMA(rshmem_getmem, THREAD, 0)
RSHMEMI_INLINE_RMA(rshmem_getmem_nbi, THREAD, 0)
RSHMEMI_INLINE_RMA(rshmem_getmem_warp, WARP, 0)
RSHMEMI_INLINE_RMA(rshmem_getmem_nbi_warp, WARP, 0)
RSHMEMI_INLINE_RMA(rshmem_getmem_block, BLOCK, 0)
RSHMEMI_INLINE_RMA(rshmem_getmem_nbi_block, BLOCK, 0)
#undef RSHMEMI_INLINE_RMA

/* p/g fast paths (naturally aligned by the type; the library's semantics: p is a strong store, g a
 * load the compiler may not merge with an earlier one or hoist out of a loop). */
#define RSHMEMI_INLINE_PG(BITS)                                                                          \
    static __device__ __forceinline__ void rshmemi_inline_rshmem_p##BITS(void *dst, uint##BITS##_t v, int pe) { \
        char *r = rshmemi_inline_peer(dst, BITS / 8, pe);                                                 \
        if (r && ((unsigned long long)dst & (BITS / 8 - 1)) == 0) {                                      \
            *(volatile uint##BITS##_t *)r = v;                                                            \
            return;                                                                                       \
        }                                                                                                 \
        rshmem_p##BITS(dst, v, pe);                                                                       \
    }                                                                                                     \
    static __device__ __forceinline__ uint##BITS##_t rshmemi_inline_rshmem_g##BITS(const void *src, int pe) { \
        const char *r = rshmemi_inline_peer(src, BITS / 8, pe);                                           \
        if (r && ((unsigned long long)src & (BITS / 8 - 1)) == 0) {                                      \
            asm volatile("" ::: "memory");                                                                \
            return *(const uint##BITS##_t *)r;                                                            \
        }                                                                                                 \
        return rshmem_g##BITS(src, pe);                                                                   \
    }
RSHMEMI_INLINE_PG(8)
RSHMEMI_INLINE_PG(16)
RSHMEMI_INLINE_PG(32)
RSHMEMI_INLINE_PG(64)
#undef RSHMEMI_INLINE_PG

/* From here on, device code (nvshmem.h's wrappers and the program) calls the fast paths; each falls
 * back to the library function, named before these macros existed. */
#define rshmem_putmem rshmemi_inline_rshmem_putmem
#define rshmem_putmem_nbi rshmemi_inline_rshmem_putmem_nbi
#define rshmem_putmem_warp rshmemi_inline_rshmem_putmem_warp
#define rshmem_putmem_nbi_warp rshmemi_inline_rshmem_putmem_nbi_warp
#define rshmem_putmem_block rshmemi_inline_rshmem_putmem_block
#define rshmem_putmem_nbi_block rshmemi_inline_rshmem_putmem_nbi_block
#define rshmem_getmem rshmemi_inline_rshmem_getmem
#define rshmem_getmem_nbi rshmemi_inline_rshmem_getmem_nbi
#define rshmem_getmem_warp rshmemi_inline_rshmem_getmem_warp
#define rshmem_getmem_nbi_warp rshmemi_inline_rshmem_getmem_nbi_warp
#define rshmem_getmem_block rshmemi_inline_rshmem_getmem_block
#define rshmem_getmem_nbi_block rshmemi_inline_rshmem_getmem_nbi_block
#define rshmem_p8 rshmemi_inline_rshmem_p8
#define rshmem_p16 rshmemi_inline_rshmem_p16
#define rshmem_p32 rshmemi_inline_rshmem_p32
#define rshmem_p64 rshmemi_inline_rshmem_p64
#define rshmem_g8 rshmemi_inline_rshmem_g8
#define rshmem_g16 rshmemi_inline_rshmem_g16
#define rshmem_g32 rshmemi_inline_rshmem_g32
#define rshmem_g64 rshmemi_inline_rshmem_g64

#endif /* __CUDA_ARCH__ && !RSHMEM_NO_INLINE_FASTPATH */
#endif /* RSHMEM_INLINE_H */
