/*
 * rshmem_inline.h: inline fast paths of the device calls that are dominated by their call overhead, for
 * CUDA C++ programs (included by rshmem.h in nvcc's device pass; not a public API of its own).
 *
 * Why: the device library is separately compiled code (the Rust device crate's PTX in
 * librshmem_device.a), so every call from a user's kernel is an out-of-line call (arguments, return
 * address and callee-saved registers through local memory), and the library's functions are assembled
 * under a 64-register cap (a kernel calling them must still launch 1024-thread blocks), which makes the
 * copy routines spill. Measured on one H100 (bench/results/2026-11-23-h100-cpp-self.md): block put/get at
 * 2-64 KiB ran at 0.16-0.22 x NVSHMEM, whose device functions are inlined into the user's kernel, and g
 * at 4.3 x its latency.
 *
 * What: for a PE whose heap is mapped here (NVLink/PCIe peers, and this PE itself) these calls run
 * inline, in the user's kernel, with the kernel's own registers:
 *   - put/get (putmem/getmem and the typed forms; thread, warp and block scope; blocking and nbi), in
 *     16- or 8-byte units where both pointers and the size allow, else in 4-, 2- or 1-byte units;
 *   - p/g of 1, 2, 4 and 8 bytes;
 *   - the 32- and 64-bit atomics: fetch_add/add, fetch_and/and, fetch_or/or, fetch_xor/xor,
 *     fetch_inc/inc, swap, compare_swap, fetch, set (every NVSHMEM AMO type: nvshmem.h bit-casts).
 * Everything else - PEs on other nodes, calls whose PE or address fail the checks, calls before init -
 * goes to the library function of the same name, which is the one implementation
 * of the semantics and of the error messages. The fast path only decides "mapped and simple" (the same
 * decision as route::locate, from the same device state) and then moves the bytes or does the one memory
 * operation that the library's mapped arm does (device/src/ops.rs): the same instruction, ordering and
 * scope, so a program cannot tell which path ran.
 *
 * Shape (read from the SASS of bench/nvshmem/nvshmem_perf.cu's loops, sm_90, nvcc 13.0):
 *   - Everything that depends on the PE alone (initialized, mapped, PE in range, checks on or off) folds
 *     into one bound without branches, which a loop over one PE computes once; a call then costs one
 *     64-bit compare of `sym - heap_base` against it, an add for the mapped address, one branch. (The
 *     form with && and early returns left five branches and two reconvergence points between a g's
 *     address and its load: 35 instructions per g against 20 now, NVSHMEM 15.)
 *   - Copies: 16-byte units where both pointers sit at the same position within 16 bytes (an 8-byte
 *     head and tail by the group's first thread where they are 8 but not 16-byte aligned), else 8-byte
 *     units; two loads in flight per thread. The library's arch::copy16 keeps four; here that took the
 *     benchmark's block put kernel from 56 to 74 registers, too many for 1024-thread blocks.
 *
 * Written by hand, not generated: the logic is the ~40 lines of rshmemi_fast and rshmemi_inline_copy;
 * the rest is one macro line per call. The memory instructions are spelled as in
 * device/src/arch/nvptx.rs (width_ops!): a change of ordering there must be made here too (grep for
 * "atom.relaxed.sys", "ld.relaxed.sys", "st.relaxed.sys"). The device-state offsets below are checked by
 * a Rust test (device/src/state.rs, inline_header_matches_the_device_state).
 *
 * RSHMEM_NO_INLINE_FASTPATH: define it to call the library for everything (for comparisons).
 */
#ifndef RSHMEM_INLINE_H
#define RSHMEM_INLINE_H

#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && !defined(RSHMEM_NO_INLINE_FASTPATH)

/* Layout of the device state (device/src/state.rs, DeviceState), checked by the Rust test
 * `inline_header_matches_the_device_state`. */
#define RSHMEMI_STATE_MAGIC 0x5253484d454d0004ULL
#define RSHMEMI_OFF_MAGIC 0
#define RSHMEMI_OFF_N_PES 12
#define RSHMEMI_OFF_HEAP_BASE 16
#define RSHMEMI_OFF_HEAP_SIZE 24
#define RSHMEMI_OFF_CHECKS 32
#define RSHMEMI_OFF_PEER_BASE 592
#define RSHMEMI_MAX_PES 512

/* Defined by the device library archive (device/cuda/rshmem_device_init.cu), in the constant bank. The
 * runtime writes it between kernels only; nvcc treats the loads as invariant and hoists them out of
 * loops (also across fences and library calls). */
extern "C" __constant__ unsigned char rshmemi_device_state[];

template <typename T>
static __device__ __forceinline__ T rshmemi_state(unsigned off) {
    return *(const T *)(rshmemi_device_state + off);
}

/* Whether the fast path may take an access of `bytes` at symmetric address `sym` on PE `pe`, and (*r)
 * where that is mapped here. True iff route::locate would pass its checks and find the PE mapped:
 * initialized, peer_base[pe] != 0, and with checks on, pe < n_pes and [sym, sym + bytes) in the heap.
 * False: the library takes the call (and reports what fails). Bitwise & and |, and selects: no branch. */
static __device__ __forceinline__ bool rshmemi_fast(const void *sym, size_t bytes, int pe, char **r) {
    typedef unsigned long long u64;
    const u64 magic = rshmemi_state<u64>(RSHMEMI_OFF_MAGIC);
    const u64 base = rshmemi_state<u64>(RSHMEMI_OFF_PEER_BASE + 8 * ((unsigned)pe & (RSHMEMI_MAX_PES - 1)));
    const u64 heap = rshmemi_state<u64>(RSHMEMI_OFF_HEAP_BASE);
    const u64 size = rshmemi_state<u64>(RSHMEMI_OFF_HEAP_SIZE);
    const unsigned npes = rshmemi_state<unsigned>(RSHMEMI_OFF_N_PES);
    const unsigned checks = rshmemi_state<unsigned>(RSHMEMI_OFF_CHECKS);
    const bool usable = (magic == RSHMEMI_STATE_MAGIC) & (base != 0) & (!checks | ((unsigned)pe < npes));
    /* sym - heap < lim  <=>  usable and (checks on) sym - heap + bytes <= size, without overflow. */
    const u64 lim = (checks ? (bytes <= size ? size - bytes + 1 : 0) : ~0ULL) & (0ULL - (u64)usable);
    *r = (char *)sym + (base - heap);
    return (u64)sym - heap < lim;
}

/* ------------------------------------------------------------------ put / get */

/* Copies `units` units of T, unit i by group member i mod `nthreads` (this is member `rank`), two loads
 * in flight per thread. The buffers do not overlap (the API's contract, as for the library's
 * arch::copy), so the loads may go before the stores. */
template <typename T>
static __device__ __forceinline__ void rshmemi_copy_units(T *__restrict__ d, const T *__restrict__ s, size_t units,
                                                          unsigned rank, unsigned nthreads) {
    const size_t n = nthreads;
    size_t i = rank;
#pragma unroll 1
    for (; i + n < units; i += 2 * n) {
        const T a = s[i], b = s[i + n];
        d[i] = a;
        d[i + n] = b;
    }
    if (i < units) d[i] = s[i];
}

/* Moves `n` bytes as member `rank` of a group of `nthreads` (the tests are uniform across the group).
 * Both pointers and `n` multiples of 8: with the same 16-byte phase, an 8-byte head and tail (0 or 8
 * bytes each) by the first member and the rest in 16-byte units; else 8-byte units. Otherwise units of
 * the widest of 4, 2 and 1 bytes that divides both pointers and `n` (an int or short array, a few
 * bytes): such transfers are small or rare, and calling the library for them cost a block put of 4
 * bytes 1.5 us against NVSHMEM's inlined one (bench/results/2026-11-27-h100x2.md, call Z). */
static __device__ __forceinline__ void rshmemi_inline_copy(char *dst, const char *src, size_t n, unsigned rank,
                                                           unsigned nthreads) {
    typedef unsigned long long u64;
    const u64 d = (u64)dst, s = (u64)src;
    if ((d | s | n) & 7) {
        if (((d | s | n) & 3) == 0) {
            rshmemi_copy_units((unsigned *)dst, (const unsigned *)src, n / 4, rank, nthreads);
        } else if (((d | s | n) & 1) == 0) {
            rshmemi_copy_units((unsigned short *)dst, (const unsigned short *)src, n / 2, rank, nthreads);
        } else {
            rshmemi_copy_units((unsigned char *)dst, (const unsigned char *)src, n, rank, nthreads);
        }
        return;
    }
    if ((d ^ s) & 15) {
        rshmemi_copy_units((u64 *)dst, (const u64 *)src, n / 8, rank, nthreads);
    } else {
        const size_t head = (d & 8) <= n ? d & 8 : 0, body = (n - head) / 16, tail = n - head - 16 * body;
        if (rank == 0) {
            if (head) *(u64 *)dst = *(const u64 *)src;
            if (tail) *(u64 *)(dst + n - 8) = *(const u64 *)(src + n - 8);
        }
        rshmemi_copy_units((int4 *)(dst + head), (const int4 *)(src + head), body, rank, nthreads);
    }
}

static __device__ __forceinline__ unsigned rshmemi_block_rank(void) {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static __device__ __forceinline__ unsigned rshmemi_block_threads(void) { return blockDim.x * blockDim.y * blockDim.z; }

/* The library's arch::sync_warp: the whole warp, or the lanes of a block's partial last warp. */
static __device__ __forceinline__ void rshmemi_sync_warp(unsigned n) { __syncwarp(n >= 32 ? ~0u : (1u << n) - 1); }

/* Scopes: THREAD (one thread), WARP (the calling warp, lane order), BLOCK (the calling block). The
 * group's rank and size as the library computes them (device/src/arch/nvptx.rs). */
#define RSHMEMI_RANK_THREAD 0u
#define RSHMEMI_SIZE_THREAD 1u
#define RSHMEMI_SYNC_THREAD()
#define RSHMEMI_RANK_WARP (rshmemi_block_rank() & 31u)
#define RSHMEMI_SIZE_WARP \
    (rshmemi_block_threads() - (rshmemi_block_rank() & ~31u) < 32u ? rshmemi_block_threads() - (rshmemi_block_rank() & ~31u) : 32u)
#define RSHMEMI_SYNC_WARP() rshmemi_sync_warp(RSHMEMI_SIZE_WARP)
#define RSHMEMI_RANK_BLOCK rshmemi_block_rank()
#define RSHMEMI_SIZE_BLOCK rshmemi_block_threads()
#define RSHMEMI_SYNC_BLOCK() __syncthreads()

/* put/get (ops::put_scoped / get_scoped, mapped arm): the copy, then the group synchronizes. */
#define RSHMEMI_INLINE_RMA(NAME, SCOPE, PUT)                                                                   \
    static __device__ __forceinline__ void rshmemi_inline_##NAME(void *dst, const void *src, size_t bytes,   \
                                                                 int pe) {                                 \
        char *r;                                                                                            \
        if (rshmemi_fast(PUT ? dst : src, bytes, pe, &r)) {                                                 \
            rshmemi_inline_copy(PUT ? r : (char *)dst, PUT ? (const char *)src : r, bytes,                 \
                                RSHMEMI_RANK_##SCOPE, RSHMEMI_SIZE_##SCOPE);                                \
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

/* ------------------------------------------------------------------ p, g and the atomics */
/* One call whose mapped arm is one memory operation: RET NAME PARAMS does OP (an expression of the
 * mapped address `r`) when the fast path may take it, else calls the library's NAME ARGS. The first
 * parameter is the symmetric address `dst`, the last the PE `pe`. */
#define RSHMEMI_INLINE_OP(RET, NAME, BITS, PARAMS, ARGS, OP)                                                  \
    static __device__ __forceinline__ RET rshmemi_inline_##NAME PARAMS {                                     \
        char *r;                                                                                            \
        if (rshmemi_fast(dst, BITS / 8, pe, &r)) return (RET)(OP);                                          \
        return NAME ARGS;                                                                                   \
    }

/* p (ops::p): a volatile store, i.e. a strong relaxed system-scope store that a later fence orders.
 * g (ops::g): a weak load (served from L1, as NVSHMEM's) behind a compiler barrier, so that every call
 * loads: never hoisted out of a loop nor merged with an earlier call. Alignment is not tested: a
 * misaligned element faults in the library as it does here. */
template <typename T>
static __device__ __forceinline__ T rshmemi_load_g(const char *r) {
    asm volatile("" ::: "memory");
    return *(const T *)r;
}
#define RSHMEMI_INLINE_PG(B)                                                                                  \
    RSHMEMI_INLINE_OP(void, rshmem_p##B, B, (void *dst, uint##B##_t v, int pe), (dst, v, pe),                \
                      *(volatile uint##B##_t *)r = v)                                                       \
    RSHMEMI_INLINE_OP(uint##B##_t, rshmem_g##B, B, (const void *dst, int pe), (dst, pe),                     \
                      rshmemi_load_g<uint##B##_t>(r))
RSHMEMI_INLINE_PG(8)
RSHMEMI_INLINE_PG(16)
RSHMEMI_INLINE_PG(32)
RSHMEMI_INLINE_PG(64)
#undef RSHMEMI_INLINE_PG

/* Atomics (ops::atomic_*): the mapped arm of each is one relaxed system-scope operation
 * (arch::nvptx, width_ops!): atom.relaxed.sys for the read-modify-writes (the non-fetching forms too,
 * their result unused), ld/st.relaxed.sys for fetch/set; each is a compiler barrier there too (asm!
 * without nomem), hence volatile with "memory". Signed and floating-point types arrive bit-cast
 * (nvshmem.h). C: the register constraint of the width. */
#define RSHMEMI_ASM_OPS(B, C)                                                                                 \
    static __device__ __forceinline__ uint##B##_t rshmemi_atom##B(int op, char *p, uint##B##_t v, uint##B##_t c) { \
        uint##B##_t o;                                                                                      \
        switch (op) { /* a constant after inlining */                                                       \
        case 0: asm volatile("atom.relaxed.sys.add.u" #B " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); break; \
        case 1: asm volatile("atom.relaxed.sys.and.b" #B " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); break; \
        case 2: asm volatile("atom.relaxed.sys.or.b" #B " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); break; \
        case 3: asm volatile("atom.relaxed.sys.xor.b" #B " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); break; \
        case 4: asm volatile("atom.relaxed.sys.exch.b" #B " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); break; \
        default: asm volatile("atom.relaxed.sys.cas.b" #B " %0, [%1], %2, %3;" : "=" C(o) : "l"(p), C(c), C(v) : "memory"); \
        }                                                                                                   \
        return o;                                                                                           \
    }                                                                                                       \
    static __device__ __forceinline__ uint##B##_t rshmemi_ld##B(const char *p) {                             \
        uint##B##_t v;                                                                                      \
        asm volatile("ld.relaxed.sys.b" #B " %0, [%1];" : "=" C(v) : "l"(p) : "memory");                    \
        return v;                                                                                           \
    }                                                                                                       \
    static __device__ __forceinline__ void rshmemi_st##B(char *p, uint##B##_t v) {                           \
        asm volatile("st.relaxed.sys.b" #B " [%0], %1;" ::"l"(p), C(v) : "memory");                         \
    }
#define RSHMEMI_INLINE_RMW(B, NAME, OP)                                                                       \
    RSHMEMI_INLINE_OP(uint##B##_t, rshmem_atomic_fetch_##NAME##B, B, (void *dst, uint##B##_t v, int pe),     \
                      (dst, v, pe), rshmemi_atom##B(OP, r, v, 0))                                           \
    RSHMEMI_INLINE_OP(void, rshmem_atomic_##NAME##B, B, (void *dst, uint##B##_t v, int pe), (dst, v, pe),    \
                      rshmemi_atom##B(OP, r, v, 0))
#define RSHMEMI_INLINE_AMOS(B, C)                                                                             \
    RSHMEMI_ASM_OPS(B, C)                                                                                   \
    RSHMEMI_INLINE_RMW(B, add, 0)                                                                           \
    RSHMEMI_INLINE_RMW(B, and, 1)                                                                           \
    RSHMEMI_INLINE_RMW(B, or, 2)                                                                            \
    RSHMEMI_INLINE_RMW(B, xor, 3)                                                                           \
    RSHMEMI_INLINE_OP(uint##B##_t, rshmem_atomic_fetch_inc##B, B, (void *dst, int pe), (dst, pe),            \
                      rshmemi_atom##B(0, r, 1, 0))                                                          \
    RSHMEMI_INLINE_OP(void, rshmem_atomic_inc##B, B, (void *dst, int pe), (dst, pe), rshmemi_atom##B(0, r, 1, 0)) \
    RSHMEMI_INLINE_OP(uint##B##_t, rshmem_atomic_swap##B, B, (void *dst, uint##B##_t v, int pe), (dst, v, pe), \
                      rshmemi_atom##B(4, r, v, 0))                                                          \
    RSHMEMI_INLINE_OP(uint##B##_t, rshmem_atomic_compare_swap##B, B,                                         \
                      (void *dst, uint##B##_t cond, uint##B##_t v, int pe), (dst, cond, v, pe),             \
                      rshmemi_atom##B(5, r, v, cond))                                                       \
    RSHMEMI_INLINE_OP(uint##B##_t, rshmem_atomic_fetch##B, B, (const void *dst, int pe), (dst, pe),          \
                      rshmemi_ld##B(r))                                                                     \
    RSHMEMI_INLINE_OP(void, rshmem_atomic_set##B, B, (void *dst, uint##B##_t v, int pe), (dst, v, pe),       \
                      rshmemi_st##B(r, v))
RSHMEMI_INLINE_AMOS(32, "r")
RSHMEMI_INLINE_AMOS(64, "l")
#undef RSHMEMI_INLINE_AMOS
#undef RSHMEMI_INLINE_RMW
#undef RSHMEMI_ASM_OPS
#undef RSHMEMI_INLINE_OP

/* ------------------------------------------------------------------ names */
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
#define rshmem_atomic_fetch_add32 rshmemi_inline_rshmem_atomic_fetch_add32
#define rshmem_atomic_add32 rshmemi_inline_rshmem_atomic_add32
#define rshmem_atomic_fetch_and32 rshmemi_inline_rshmem_atomic_fetch_and32
#define rshmem_atomic_and32 rshmemi_inline_rshmem_atomic_and32
#define rshmem_atomic_fetch_or32 rshmemi_inline_rshmem_atomic_fetch_or32
#define rshmem_atomic_or32 rshmemi_inline_rshmem_atomic_or32
#define rshmem_atomic_fetch_xor32 rshmemi_inline_rshmem_atomic_fetch_xor32
#define rshmem_atomic_xor32 rshmemi_inline_rshmem_atomic_xor32
#define rshmem_atomic_fetch_inc32 rshmemi_inline_rshmem_atomic_fetch_inc32
#define rshmem_atomic_inc32 rshmemi_inline_rshmem_atomic_inc32
#define rshmem_atomic_swap32 rshmemi_inline_rshmem_atomic_swap32
#define rshmem_atomic_compare_swap32 rshmemi_inline_rshmem_atomic_compare_swap32
#define rshmem_atomic_fetch32 rshmemi_inline_rshmem_atomic_fetch32
#define rshmem_atomic_set32 rshmemi_inline_rshmem_atomic_set32
#define rshmem_atomic_fetch_add64 rshmemi_inline_rshmem_atomic_fetch_add64
#define rshmem_atomic_add64 rshmemi_inline_rshmem_atomic_add64
#define rshmem_atomic_fetch_and64 rshmemi_inline_rshmem_atomic_fetch_and64
#define rshmem_atomic_and64 rshmemi_inline_rshmem_atomic_and64
#define rshmem_atomic_fetch_or64 rshmemi_inline_rshmem_atomic_fetch_or64
#define rshmem_atomic_or64 rshmemi_inline_rshmem_atomic_or64
#define rshmem_atomic_fetch_xor64 rshmemi_inline_rshmem_atomic_fetch_xor64
#define rshmem_atomic_xor64 rshmemi_inline_rshmem_atomic_xor64
#define rshmem_atomic_fetch_inc64 rshmemi_inline_rshmem_atomic_fetch_inc64
#define rshmem_atomic_inc64 rshmemi_inline_rshmem_atomic_inc64
#define rshmem_atomic_swap64 rshmemi_inline_rshmem_atomic_swap64
#define rshmem_atomic_compare_swap64 rshmemi_inline_rshmem_atomic_compare_swap64
#define rshmem_atomic_fetch64 rshmemi_inline_rshmem_atomic_fetch64
#define rshmem_atomic_set64 rshmemi_inline_rshmem_atomic_set64

#endif /* __CUDA_ARCH__ && !RSHMEM_NO_INLINE_FASTPATH */
#endif /* RSHMEM_INLINE_H */
