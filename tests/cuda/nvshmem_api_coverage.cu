// Header coverage test for rshmem's NVSHMEM compatibility headers (device/include/nvshmem.h, nvshmemx.h)
// and the rshmem device C API (rshmem.h). Compile + device-link only (scripts/check-cuda-examples.sh):
// one kernel calls every NVSHMEM function/type combination the headers provide, and every rshmem_*
// device function, so a missing or mistyped wrapper fails to compile and a device function missing
// from the device library fails the device link. Signatures are checked against NVSHMEM's with
// static_assert. The type tables below are written out independently of the headers' own, on purpose.
//
// Running the program does nothing (it only prints); its kernels are never launched.
#include <cstdio>
#include <type_traits>
#include <nvshmem.h>
#include <nvshmemx.h>

// ------------------------------------------------------------------ NVSHMEM's type tables
#define RMA_TYPES(X)                                                                                       \
    X(float, float) X(double, double) X(char, char) X(schar, signed char) X(short, short) X(int, int)      \
    X(long, long) X(longlong, long long) X(uchar, unsigned char) X(ushort, unsigned short)                \
    X(uint, unsigned int) X(ulong, unsigned long) X(ulonglong, unsigned long long) X(int8, int8_t)        \
    X(int16, int16_t) X(int32, int32_t) X(int64, int64_t) X(uint8, uint8_t) X(uint16, uint16_t)           \
    X(uint32, uint32_t) X(uint64, uint64_t) X(size, size_t) X(ptrdiff, ptrdiff_t)
#define STANDARD_AMO_TYPES(X)                                                                              \
    X(int, int) X(long, long) X(longlong, long long) X(uint, unsigned int) X(ulong, unsigned long)         \
    X(ulonglong, unsigned long long) X(int32, int32_t) X(int64, int64_t) X(uint32, uint32_t)              \
    X(uint64, uint64_t) X(size, size_t) X(ptrdiff, ptrdiff_t)
#define EXTENDED_AMO_TYPES(X) STANDARD_AMO_TYPES(X) X(float, float) X(double, double)
#define BITWISE_AMO_TYPES(X)                                                                               \
    X(uint, unsigned int) X(ulong, unsigned long) X(ulonglong, unsigned long long) X(int32, int32_t)       \
    X(int64, int64_t) X(uint32, uint32_t) X(uint64, uint64_t)
#define WAIT_TYPES(X)                                                                                      \
    X(short, short) X(int, int) X(long, long) X(longlong, long long) X(ushort, unsigned short)             \
    X(uint, unsigned int) X(ulong, unsigned long) X(ulonglong, unsigned long long) X(int32, int32_t)      \
    X(int64, int64_t) X(uint32, uint32_t) X(uint64, uint64_t) X(size, size_t) X(ptrdiff, ptrdiff_t)
#define SIZES(X) X(8) X(16) X(32) X(64) X(128)

// f has exactly the function type `T` (parameter top-level const does not count, as in C).
#define SIG(f, T) static_assert(std::is_same<decltype(f), T>::value, #f " does not have NVSHMEM's signature: " #T);

// Everything the kernel touches, so the calls cannot be folded away.
struct Args {
    void *sym;    // symmetric buffer
    void *local;  // local buffer
    uint64_t *sig;
    int *status;
    size_t *indices;
    int pe;
    size_t n;
    unsigned long long *sink;
};

// ------------------------------------------------------------------ device: RMA
#define RMA_CALLS(N, T)                                                                                    \
    {                                                                                                      \
        SIG(nvshmem_##N##_p, void(T *, T, int))                                                            \
        SIG(nvshmem_##N##_g, T(const T *, int))                                                            \
        SIG(nvshmem_##N##_put, void(T *, const T *, size_t, int))                                          \
        SIG(nvshmem_##N##_get, void(T *, const T *, size_t, int))                                          \
        SIG(nvshmem_##N##_put_nbi, void(T *, const T *, size_t, int))                                      \
        SIG(nvshmem_##N##_get_nbi, void(T *, const T *, size_t, int))                                      \
        SIG(nvshmem_##N##_put_signal, void(T *, const T *, size_t, uint64_t *, uint64_t, int, int))        \
        SIG(nvshmem_##N##_put_signal_nbi, void(T *, const T *, size_t, uint64_t *, uint64_t, int, int))    \
        SIG(nvshmemx_##N##_put_warp, void(T *, const T *, size_t, int))                                    \
        SIG(nvshmemx_##N##_put_block, void(T *, const T *, size_t, int))                                   \
        SIG(nvshmemx_##N##_put_nbi_warp, void(T *, const T *, size_t, int))                                \
        SIG(nvshmemx_##N##_put_nbi_block, void(T *, const T *, size_t, int))                               \
        SIG(nvshmemx_##N##_get_warp, void(T *, const T *, size_t, int))                                    \
        SIG(nvshmemx_##N##_get_block, void(T *, const T *, size_t, int))                                   \
        SIG(nvshmemx_##N##_get_nbi_warp, void(T *, const T *, size_t, int))                                \
        SIG(nvshmemx_##N##_get_nbi_block, void(T *, const T *, size_t, int))                               \
        SIG(nvshmemx_##N##_put_signal_warp, void(T *, const T *, size_t, uint64_t *, uint64_t, int, int))  \
        SIG(nvshmemx_##N##_put_signal_block, void(T *, const T *, size_t, uint64_t *, uint64_t, int, int)) \
        SIG(nvshmemx_##N##_put_signal_nbi_warp,                                                            \
            void(T *, const T *, size_t, uint64_t *, uint64_t, int, int))                                  \
        SIG(nvshmemx_##N##_put_signal_nbi_block,                                                           \
            void(T *, const T *, size_t, uint64_t *, uint64_t, int, int))                                  \
        T *d = (T *)a.sym;                                                                                 \
        T *s = (T *)a.local;                                                                               \
        nvshmem_##N##_p(d, (T)1, a.pe);                                                                    \
        s[0] = nvshmem_##N##_g(d, a.pe);                                                                   \
        nvshmem_##N##_put(d, s, a.n, a.pe);                                                                \
        nvshmem_##N##_get(s, d, a.n, a.pe);                                                                \
        nvshmem_##N##_put_nbi(d, s, a.n, a.pe);                                                            \
        nvshmem_##N##_get_nbi(s, d, a.n, a.pe);                                                            \
        nvshmem_##N##_put_signal(d, s, a.n, a.sig, 1, NVSHMEM_SIGNAL_SET, a.pe);                           \
        nvshmem_##N##_put_signal_nbi(d, s, a.n, a.sig, 1, NVSHMEM_SIGNAL_ADD, a.pe);                       \
        nvshmemx_##N##_put_warp(d, s, a.n, a.pe);                                                          \
        nvshmemx_##N##_put_block(d, s, a.n, a.pe);                                                         \
        nvshmemx_##N##_put_nbi_warp(d, s, a.n, a.pe);                                                      \
        nvshmemx_##N##_put_nbi_block(d, s, a.n, a.pe);                                                     \
        nvshmemx_##N##_get_warp(s, d, a.n, a.pe);                                                          \
        nvshmemx_##N##_get_block(s, d, a.n, a.pe);                                                         \
        nvshmemx_##N##_get_nbi_warp(s, d, a.n, a.pe);                                                      \
        nvshmemx_##N##_get_nbi_block(s, d, a.n, a.pe);                                                     \
        nvshmemx_##N##_put_signal_warp(d, s, a.n, a.sig, 1, NVSHMEM_SIGNAL_SET, a.pe);                     \
        nvshmemx_##N##_put_signal_block(d, s, a.n, a.sig, 1, NVSHMEM_SIGNAL_SET, a.pe);                    \
        nvshmemx_##N##_put_signal_nbi_warp(d, s, a.n, a.sig, 1, NVSHMEM_SIGNAL_ADD, a.pe);                 \
        nvshmemx_##N##_put_signal_nbi_block(d, s, a.n, a.sig, 1, NVSHMEM_SIGNAL_ADD, a.pe);                \
    }

#define SIZED_CALLS(B)                                                                                     \
    {                                                                                                      \
        SIG(nvshmem_put##B, void(void *, const void *, size_t, int))                                       \
        SIG(nvshmem_get##B, void(void *, const void *, size_t, int))                                       \
        SIG(nvshmem_put##B##_nbi, void(void *, const void *, size_t, int))                                 \
        SIG(nvshmem_get##B##_nbi, void(void *, const void *, size_t, int))                                 \
        SIG(nvshmem_put##B##_signal, void(void *, const void *, size_t, uint64_t *, uint64_t, int, int))   \
        SIG(nvshmem_put##B##_signal_nbi, void(void *, const void *, size_t, uint64_t *, uint64_t, int, int)) \
        SIG(nvshmemx_put##B##_warp, void(void *, const void *, size_t, int))                               \
        SIG(nvshmemx_put##B##_block, void(void *, const void *, size_t, int))                              \
        SIG(nvshmemx_put##B##_nbi_warp, void(void *, const void *, size_t, int))                           \
        SIG(nvshmemx_put##B##_nbi_block, void(void *, const void *, size_t, int))                          \
        SIG(nvshmemx_get##B##_warp, void(void *, const void *, size_t, int))                               \
        SIG(nvshmemx_get##B##_block, void(void *, const void *, size_t, int))                              \
        SIG(nvshmemx_get##B##_nbi_warp, void(void *, const void *, size_t, int))                           \
        SIG(nvshmemx_get##B##_nbi_block, void(void *, const void *, size_t, int))                          \
        SIG(nvshmemx_put##B##_signal_warp, void(void *, const void *, size_t, uint64_t *, uint64_t, int, int)) \
        SIG(nvshmemx_put##B##_signal_block, void(void *, const void *, size_t, uint64_t *, uint64_t, int, int)) \
        SIG(nvshmemx_put##B##_signal_nbi_warp,                                                             \
            void(void *, const void *, size_t, uint64_t *, uint64_t, int, int))                            \
        SIG(nvshmemx_put##B##_signal_nbi_block,                                                            \
            void(void *, const void *, size_t, uint64_t *, uint64_t, int, int))                            \
        nvshmem_put##B(a.sym, a.local, a.n, a.pe);                                                         \
        nvshmem_get##B(a.local, a.sym, a.n, a.pe);                                                         \
        nvshmem_put##B##_nbi(a.sym, a.local, a.n, a.pe);                                                   \
        nvshmem_get##B##_nbi(a.local, a.sym, a.n, a.pe);                                                   \
        nvshmem_put##B##_signal(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_SET, a.pe);                  \
        nvshmem_put##B##_signal_nbi(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_ADD, a.pe);              \
        nvshmemx_put##B##_warp(a.sym, a.local, a.n, a.pe);                                                 \
        nvshmemx_put##B##_block(a.sym, a.local, a.n, a.pe);                                                \
        nvshmemx_put##B##_nbi_warp(a.sym, a.local, a.n, a.pe);                                             \
        nvshmemx_put##B##_nbi_block(a.sym, a.local, a.n, a.pe);                                            \
        nvshmemx_get##B##_warp(a.local, a.sym, a.n, a.pe);                                                 \
        nvshmemx_get##B##_block(a.local, a.sym, a.n, a.pe);                                                \
        nvshmemx_get##B##_nbi_warp(a.local, a.sym, a.n, a.pe);                                             \
        nvshmemx_get##B##_nbi_block(a.local, a.sym, a.n, a.pe);                                            \
        nvshmemx_put##B##_signal_warp(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_SET, a.pe);            \
        nvshmemx_put##B##_signal_block(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_SET, a.pe);           \
        nvshmemx_put##B##_signal_nbi_warp(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_ADD, a.pe);        \
        nvshmemx_put##B##_signal_nbi_block(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_ADD, a.pe);       \
    }

__global__ void rma_coverage(Args a) {
    RMA_TYPES(RMA_CALLS)
    SIZES(SIZED_CALLS)

    SIG(nvshmem_putmem, void(void *, const void *, size_t, int))
    SIG(nvshmem_getmem, void(void *, const void *, size_t, int))
    SIG(nvshmem_putmem_nbi, void(void *, const void *, size_t, int))
    SIG(nvshmem_getmem_nbi, void(void *, const void *, size_t, int))
    SIG(nvshmemx_putmem_warp, void(void *, const void *, size_t, int))
    SIG(nvshmemx_putmem_block, void(void *, const void *, size_t, int))
    SIG(nvshmemx_putmem_nbi_warp, void(void *, const void *, size_t, int))
    SIG(nvshmemx_putmem_nbi_block, void(void *, const void *, size_t, int))
    SIG(nvshmemx_getmem_warp, void(void *, const void *, size_t, int))
    SIG(nvshmemx_getmem_block, void(void *, const void *, size_t, int))
    SIG(nvshmemx_getmem_nbi_warp, void(void *, const void *, size_t, int))
    SIG(nvshmemx_getmem_nbi_block, void(void *, const void *, size_t, int))
    SIG(nvshmem_putmem_signal, void(void *, const void *, size_t, uint64_t *, uint64_t, int, int))
    SIG(nvshmem_putmem_signal_nbi, void(void *, const void *, size_t, uint64_t *, uint64_t, int, int))
    SIG(nvshmemx_putmem_signal_warp, void(void *, const void *, size_t, uint64_t *, uint64_t, int, int))
    SIG(nvshmemx_putmem_signal_block, void(void *, const void *, size_t, uint64_t *, uint64_t, int, int))
    SIG(nvshmemx_putmem_signal_nbi_warp, void(void *, const void *, size_t, uint64_t *, uint64_t, int, int))
    SIG(nvshmemx_putmem_signal_nbi_block, void(void *, const void *, size_t, uint64_t *, uint64_t, int, int))
    nvshmem_putmem(a.sym, a.local, a.n, a.pe);
    nvshmem_getmem(a.local, a.sym, a.n, a.pe);
    nvshmem_putmem_nbi(a.sym, a.local, a.n, a.pe);
    nvshmem_getmem_nbi(a.local, a.sym, a.n, a.pe);
    nvshmemx_putmem_warp(a.sym, a.local, a.n, a.pe);
    nvshmemx_putmem_block(a.sym, a.local, a.n, a.pe);
    nvshmemx_putmem_nbi_warp(a.sym, a.local, a.n, a.pe);
    nvshmemx_putmem_nbi_block(a.sym, a.local, a.n, a.pe);
    nvshmemx_getmem_warp(a.local, a.sym, a.n, a.pe);
    nvshmemx_getmem_block(a.local, a.sym, a.n, a.pe);
    nvshmemx_getmem_nbi_warp(a.local, a.sym, a.n, a.pe);
    nvshmemx_getmem_nbi_block(a.local, a.sym, a.n, a.pe);
    nvshmem_putmem_signal(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_SET, a.pe);
    nvshmem_putmem_signal_nbi(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_ADD, a.pe);
    nvshmemx_putmem_signal_warp(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_SET, a.pe);
    nvshmemx_putmem_signal_block(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_SET, a.pe);
    nvshmemx_putmem_signal_nbi_warp(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_ADD, a.pe);
    nvshmemx_putmem_signal_nbi_block(a.sym, a.local, a.n, a.sig, 1, NVSHMEM_SIGNAL_ADD, a.pe);
}

// ------------------------------------------------------------------ device: AMOs
#define EXTENDED_AMO_CALLS(N, T)                                                                           \
    {                                                                                                      \
        SIG(nvshmem_##N##_atomic_swap, T(T *, T, int))                                                     \
        SIG(nvshmem_##N##_atomic_set, void(T *, T, int))                                                   \
        SIG(nvshmem_##N##_atomic_fetch, T(const T *, int))                                                 \
        SIG(nvshmem_##N##_atomic_compare_swap, T(T *, T, T, int))                                          \
        T *d = (T *)a.sym;                                                                                 \
        T v = nvshmem_##N##_atomic_swap(d, (T)1, a.pe);                                                    \
        nvshmem_##N##_atomic_set(d, v, a.pe);                                                              \
        v = nvshmem_##N##_atomic_fetch(d, a.pe);                                                           \
        v = nvshmem_##N##_atomic_compare_swap(d, v, (T)2, a.pe);                                           \
        *a.sink += (unsigned long long)v;                                                                  \
    }
#define STANDARD_AMO_CALLS(N, T)                                                                           \
    {                                                                                                      \
        SIG(nvshmem_##N##_atomic_fetch_add, T(T *, T, int))                                                \
        SIG(nvshmem_##N##_atomic_add, void(T *, T, int))                                                   \
        SIG(nvshmem_##N##_atomic_fetch_inc, T(T *, int))                                                   \
        SIG(nvshmem_##N##_atomic_inc, void(T *, int))                                                      \
        T *d = (T *)a.sym;                                                                                 \
        T v = nvshmem_##N##_atomic_fetch_add(d, (T)3, a.pe);                                               \
        nvshmem_##N##_atomic_add(d, v, a.pe);                                                              \
        v += nvshmem_##N##_atomic_fetch_inc(d, a.pe);                                                      \
        nvshmem_##N##_atomic_inc(d, a.pe);                                                                 \
        *a.sink += (unsigned long long)v;                                                                  \
    }
#define BITWISE_AMO_CALLS(N, T)                                                                            \
    {                                                                                                      \
        SIG(nvshmem_##N##_atomic_and, void(T *, T, int))                                                   \
        SIG(nvshmem_##N##_atomic_or, void(T *, T, int))                                                    \
        SIG(nvshmem_##N##_atomic_xor, void(T *, T, int))                                                   \
        SIG(nvshmem_##N##_atomic_fetch_and, T(T *, T, int))                                                \
        SIG(nvshmem_##N##_atomic_fetch_or, T(T *, T, int))                                                 \
        SIG(nvshmem_##N##_atomic_fetch_xor, T(T *, T, int))                                                \
        T *d = (T *)a.sym;                                                                                 \
        nvshmem_##N##_atomic_and(d, (T)1, a.pe);                                                           \
        nvshmem_##N##_atomic_or(d, (T)2, a.pe);                                                            \
        nvshmem_##N##_atomic_xor(d, (T)4, a.pe);                                                           \
        T v = nvshmem_##N##_atomic_fetch_and(d, (T)1, a.pe);                                               \
        v |= nvshmem_##N##_atomic_fetch_or(d, (T)2, a.pe);                                                 \
        v ^= nvshmem_##N##_atomic_fetch_xor(d, (T)4, a.pe);                                                \
        *a.sink += (unsigned long long)v;                                                                  \
    }

__global__ void amo_coverage(Args a) {
    EXTENDED_AMO_TYPES(EXTENDED_AMO_CALLS)
    STANDARD_AMO_TYPES(STANDARD_AMO_CALLS)
    BITWISE_AMO_TYPES(BITWISE_AMO_CALLS)
}

// ------------------------------------------------------------------ device: synchronization
#define WAIT_CALLS(N, T)                                                                                   \
    {                                                                                                      \
        SIG(nvshmem_##N##_wait_until, void(T *, int, T))                                                   \
        SIG(nvshmem_##N##_test, int(T *, int, T))                                                          \
        SIG(nvshmem_##N##_wait, void(T *, T))                                                              \
        SIG(nvshmem_##N##_wait_until_all, void(T *, size_t, const int *, int, T))                          \
        SIG(nvshmem_##N##_wait_until_any, size_t(T *, size_t, const int *, int, T))                        \
        SIG(nvshmem_##N##_wait_until_some, size_t(T *, size_t, size_t *, const int *, int, T))             \
        SIG(nvshmem_##N##_test_all, int(T *, size_t, const int *, int, T))                                 \
        SIG(nvshmem_##N##_test_any, size_t(T *, size_t, const int *, int, T))                              \
        SIG(nvshmem_##N##_test_some, size_t(T *, size_t, size_t *, const int *, int, T))                   \
        SIG(nvshmem_##N##_wait_until_all_vector, void(T *, size_t, const int *, int, T *))                 \
        SIG(nvshmem_##N##_wait_until_any_vector, size_t(T *, size_t, const int *, int, T *))               \
        SIG(nvshmem_##N##_wait_until_some_vector, size_t(T *, size_t, size_t *, const int *, int, T *))    \
        SIG(nvshmem_##N##_test_all_vector, int(T *, size_t, const int *, int, T *))                        \
        SIG(nvshmem_##N##_test_any_vector, size_t(T *, size_t, const int *, int, T *))                     \
        SIG(nvshmem_##N##_test_some_vector, size_t(T *, size_t, size_t *, const int *, int, T *))          \
        T *iv = (T *)a.sym;                                                                                \
        T *cmpv = (T *)a.local;                                                                            \
        size_t r = 0;                                                                                      \
        nvshmem_##N##_wait_until(iv, NVSHMEM_CMP_EQ, (T)1);                                                \
        r += nvshmem_##N##_test(iv, NVSHMEM_CMP_NE, (T)1);                                                 \
        nvshmem_##N##_wait(iv, (T)0);                                                                      \
        nvshmem_##N##_wait_until_all(iv, a.n, a.status, NVSHMEM_CMP_GT, (T)1);                             \
        r += nvshmem_##N##_wait_until_any(iv, a.n, a.status, NVSHMEM_CMP_LE, (T)1);                        \
        r += nvshmem_##N##_wait_until_some(iv, a.n, a.indices, a.status, NVSHMEM_CMP_LT, (T)1);            \
        r += nvshmem_##N##_test_all(iv, a.n, a.status, NVSHMEM_CMP_GE, (T)1);                              \
        r += nvshmem_##N##_test_any(iv, a.n, NULL, NVSHMEM_CMP_EQ, (T)1);                                  \
        r += nvshmem_##N##_test_some(iv, a.n, a.indices, NULL, NVSHMEM_CMP_EQ, (T)1);                      \
        nvshmem_##N##_wait_until_all_vector(iv, a.n, a.status, NVSHMEM_CMP_EQ, cmpv);                      \
        r += nvshmem_##N##_wait_until_any_vector(iv, a.n, a.status, NVSHMEM_CMP_EQ, cmpv);                 \
        r += nvshmem_##N##_wait_until_some_vector(iv, a.n, a.indices, a.status, NVSHMEM_CMP_EQ, cmpv);     \
        r += nvshmem_##N##_test_all_vector(iv, a.n, a.status, NVSHMEM_CMP_EQ, cmpv);                       \
        r += nvshmem_##N##_test_any_vector(iv, a.n, a.status, NVSHMEM_CMP_EQ, cmpv);                       \
        r += nvshmem_##N##_test_some_vector(iv, a.n, a.indices, a.status, NVSHMEM_CMP_EQ, cmpv);           \
        *a.sink += r;                                                                                      \
    }

__global__ void sync_coverage(Args a) {
    WAIT_TYPES(WAIT_CALLS)

    SIG(nvshmem_wait_until, void(long *, int, long))
    SIG(nvshmem_wait, void(long *, long))
    nvshmem_wait_until((long *)a.sym, NVSHMEM_CMP_EQ, 1L);
    nvshmem_wait((long *)a.sym, 0L);

    SIG(nvshmemx_signal_op, void(uint64_t *, uint64_t, int, int))
    SIG(nvshmem_signal_wait_until, uint64_t(uint64_t *, int, uint64_t))
    SIG(nvshmem_signal_fetch, uint64_t(uint64_t *))
    nvshmemx_signal_op(a.sig, 1, NVSHMEM_SIGNAL_ADD, a.pe);
    *a.sink += nvshmem_signal_wait_until(a.sig, NVSHMEM_CMP_GE, 1);
    *a.sink += nvshmem_signal_fetch(a.sig);

    SIG(nvshmem_fence, void(void))
    SIG(nvshmem_quiet, void(void))
    SIG(nvshmem_barrier_all, void(void))
    SIG(nvshmem_sync_all, void(void))
    SIG(nvshmemx_barrier_all_block, void(void))
    SIG(nvshmemx_barrier_all_warp, void(void))
    SIG(nvshmemx_sync_all_block, void(void))
    SIG(nvshmemx_sync_all_warp, void(void))
    nvshmem_fence();
    nvshmem_quiet();
    nvshmem_barrier_all();
    nvshmem_sync_all();
    nvshmemx_barrier_all_block();
    nvshmemx_barrier_all_warp();
    nvshmemx_sync_all_block();
    nvshmemx_sync_all_warp();

    SIG(nvshmem_my_pe, int(void))
    SIG(nvshmem_n_pes, int(void))
    SIG(nvshmem_team_my_pe, int(nvshmem_team_t))
    SIG(nvshmem_team_n_pes, int(nvshmem_team_t))
    SIG(nvshmem_ptr, void *(const void *, int))
    static_assert(std::is_same<nvshmem_team_t, int32_t>::value, "nvshmem_team_t must be int32_t");
    // NVSHMEM's own values of the operator constants (nvshmemx_signal_op_t, nvshmemi_cmp_type).
    static_assert(NVSHMEM_SIGNAL_SET == 9 && NVSHMEM_SIGNAL_ADD == 10, "NVSHMEM_SIGNAL_SET/ADD must be 9/10");
    static_assert(NVSHMEM_CMP_EQ == 0 && NVSHMEM_CMP_NE == 1 && NVSHMEM_CMP_GT == 2 && NVSHMEM_CMP_LE == 3 &&
                      NVSHMEM_CMP_LT == 4 && NVSHMEM_CMP_GE == 5,
                  "NVSHMEM_CMP_* must have NVSHMEM's values");
    static_assert(NVSHMEMX_SUCCESS == 0 && NVSHMEMX_ERROR_INVALID_VALUE == 1 && NVSHMEMX_ERROR_OUT_OF_MEMORY == 2 &&
                      NVSHMEMX_ERROR_NOT_SUPPORTED == 3 && NVSHMEMX_ERROR_SYMMETRY == 4 &&
                      NVSHMEMX_ERROR_GPU_NOT_SELECTED == 5 && NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED == 6 &&
                      NVSHMEMX_ERROR_INTERNAL == 7,
                  "nvshmemx_status must have NVSHMEM's values");
    // Brought in by nvshmem.h, as by NVSHMEM's (this file includes no CUDA header itself).
    static_assert(sizeof(half) == 2 && sizeof(__nv_bfloat16) == 2 && sizeof(CUdeviceptr) == 8,
                  "half, __nv_bfloat16 and CUdeviceptr come with nvshmem.h");
    const nvshmem_team_t teams[] = {NVSHMEM_TEAM_WORLD, NVSHMEM_TEAM_SHARED, NVSHMEMX_TEAM_NODE};
    int acc = nvshmem_my_pe() + nvshmem_n_pes();
    for (nvshmem_team_t t : teams) acc += nvshmem_team_my_pe(t) + nvshmem_team_n_pes(t);
    *a.sink += acc + (unsigned long long)nvshmem_ptr(a.sym, a.pe);
    const int cmps[] = {NVSHMEM_CMP_EQ, NVSHMEM_CMP_NE, NVSHMEM_CMP_GT, NVSHMEM_CMP_LE, NVSHMEM_CMP_LT,
                        NVSHMEM_CMP_GE};
    for (int c : cmps) *a.sink += c;
}

// ------------------------------------------------------------------ device: the rshmem C API itself
// Every device function of device/src/capi.rs, called directly (the device link resolves each one).
#define RSHMEM_PG(B)                                                                                       \
    rshmem_p##B(a.sym, (uint##B##_t)1, a.pe);                                                             \
    *a.sink += rshmem_g##B(a.sym, a.pe);
#define RSHMEM_AMO(B)                                                                                      \
    {                                                                                                      \
        uint##B##_t v = rshmem_atomic_fetch_add##B(a.sym, 1, a.pe);                                        \
        rshmem_atomic_add##B(a.sym, v, a.pe);                                                              \
        v += rshmem_atomic_fetch_and##B(a.sym, v, a.pe);                                                   \
        rshmem_atomic_and##B(a.sym, v, a.pe);                                                              \
        v += rshmem_atomic_fetch_or##B(a.sym, v, a.pe);                                                    \
        rshmem_atomic_or##B(a.sym, v, a.pe);                                                               \
        v += rshmem_atomic_fetch_xor##B(a.sym, v, a.pe);                                                   \
        rshmem_atomic_xor##B(a.sym, v, a.pe);                                                              \
        v += rshmem_atomic_fetch_inc##B(a.sym, a.pe);                                                      \
        rshmem_atomic_inc##B(a.sym, a.pe);                                                                 \
        v += rshmem_atomic_swap##B(a.sym, v, a.pe);                                                        \
        v += rshmem_atomic_compare_swap##B(a.sym, v, 1, a.pe);                                             \
        v += rshmem_atomic_fetch##B(a.sym, a.pe);                                                          \
        rshmem_atomic_set##B(a.sym, v, a.pe);                                                              \
    }
#define RSHMEM_WAIT(S, CT)                                                                                 \
    rshmem_wait_until_##S(a.sym, RSHMEM_CMP_EQ, (CT)1);                                                    \
    *a.sink += rshmem_test_##S(a.sym, RSHMEM_CMP_NE, (CT)1);

__global__ void rshmem_api_coverage(Args a) {
    *a.sink += rshmem_my_pe() + rshmem_n_pes() + rshmem_team_my_pe(RSHMEM_TEAM_WORLD) +
               rshmem_team_n_pes(RSHMEM_TEAM_SHARED) + rshmem_team_my_pe(RSHMEM_TEAM_NODE);
    *a.sink += (unsigned long long)rshmem_ptr(a.sym, a.pe);
    RSHMEM_PG(8)
    RSHMEM_PG(16)
    RSHMEM_PG(32)
    RSHMEM_PG(64)
    rshmem_putmem(a.sym, a.local, a.n, a.pe);
    rshmem_putmem_nbi(a.sym, a.local, a.n, a.pe);
    rshmem_putmem_warp(a.sym, a.local, a.n, a.pe);
    rshmem_putmem_nbi_warp(a.sym, a.local, a.n, a.pe);
    rshmem_putmem_block(a.sym, a.local, a.n, a.pe);
    rshmem_putmem_nbi_block(a.sym, a.local, a.n, a.pe);
    rshmem_getmem(a.local, a.sym, a.n, a.pe);
    rshmem_getmem_nbi(a.local, a.sym, a.n, a.pe);
    rshmem_getmem_warp(a.local, a.sym, a.n, a.pe);
    rshmem_getmem_nbi_warp(a.local, a.sym, a.n, a.pe);
    rshmem_getmem_block(a.local, a.sym, a.n, a.pe);
    rshmem_getmem_nbi_block(a.local, a.sym, a.n, a.pe);
    RSHMEM_AMO(32)
    RSHMEM_AMO(64)
    RSHMEM_WAIT(i16, int16_t)
    RSHMEM_WAIT(u16, uint16_t)
    RSHMEM_WAIT(i32, int32_t)
    RSHMEM_WAIT(u32, uint32_t)
    RSHMEM_WAIT(i64, int64_t)
    RSHMEM_WAIT(u64, uint64_t)
    rshmem_putmem_signal(a.sym, a.local, a.n, a.sig, 1, RSHMEM_SIGNAL_SET, a.pe);
    rshmem_putmem_signal_nbi(a.sym, a.local, a.n, a.sig, 1, RSHMEM_SIGNAL_ADD, a.pe);
    rshmem_putmem_signal_warp(a.sym, a.local, a.n, a.sig, 1, RSHMEM_SIGNAL_SET, a.pe);
    rshmem_putmem_signal_nbi_warp(a.sym, a.local, a.n, a.sig, 1, RSHMEM_SIGNAL_ADD, a.pe);
    rshmem_putmem_signal_block(a.sym, a.local, a.n, a.sig, 1, RSHMEM_SIGNAL_SET, a.pe);
    rshmem_putmem_signal_nbi_block(a.sym, a.local, a.n, a.sig, 1, RSHMEM_SIGNAL_ADD, a.pe);
    rshmem_signal_op(a.sig, 1, RSHMEM_SIGNAL_ADD, a.pe);
    *a.sink += rshmem_signal_wait_until(a.sig, RSHMEM_CMP_GE, 1);
    *a.sink += rshmem_signal_fetch(a.sig);
    rshmem_fence();
    rshmem_quiet();
    rshmem_barrier_all();
    rshmem_sync_all();
    rshmem_barrier_all_block();
    rshmem_barrier_all_warp();
    rshmem_sync_all_block();
    rshmem_sync_all_warp();
}

// ------------------------------------------------------------------ host API
#define HOST_RMA_CALLS(N, T)                                                                               \
    {                                                                                                      \
        T *d = (T *)sym;                                                                                   \
        T *s = (T *)local;                                                                                 \
        nvshmem_##N##_p(d, (T)1, pe);                                                                      \
        s[0] = nvshmem_##N##_g(d, pe);                                                                     \
        nvshmem_##N##_put(d, s, 1, pe);                                                                    \
        nvshmem_##N##_get(s, d, 1, pe);                                                                    \
        nvshmem_##N##_put_nbi(d, s, 1, pe);                                                                \
        nvshmem_##N##_get_nbi(s, d, 1, pe);                                                                \
        nvshmemx_##N##_put_on_stream(d, s, 1, pe, st);                                                     \
        nvshmemx_##N##_get_on_stream(s, d, 1, pe, st);                                                     \
        nvshmemx_##N##_put_nbi_on_stream(d, s, 1, pe, st);                                                 \
        nvshmemx_##N##_get_nbi_on_stream(s, d, 1, pe, st);                                                 \
    }
#define HOST_SIZED_CALLS(B)                                                                                \
    nvshmem_put##B(sym, local, 1, pe);                                                                     \
    nvshmem_get##B(local, sym, 1, pe);                                                                     \
    nvshmem_put##B##_nbi(sym, local, 1, pe);                                                               \
    nvshmem_get##B##_nbi(local, sym, 1, pe);                                                               \
    nvshmemx_put##B##_on_stream(sym, local, 1, pe, st);                                                    \
    nvshmemx_get##B##_on_stream(local, sym, 1, pe, st);                                                    \
    nvshmemx_put##B##_nbi_on_stream(sym, local, 1, pe, st);                                                \
    nvshmemx_get##B##_nbi_on_stream(local, sym, 1, pe, st);

static void host_coverage(int rank, int nranks) {
    // Unique-id initialization exactly as NVSHMEM programs write it.
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    nvshmemx_uniqueid_args_t uid_args = NVSHMEMX_UNIQUEID_ARGS_INITIALIZER;
    if (uid_args.id != NULL || uid_args.myrank != -1 || uid_args.nranks != -1) return;
    if (rank == 0) nvshmemx_get_uniqueid(&id);
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    nvshmemx_set_attr_uniqueid_args(rank, nranks, &id, &attr);
    int rc = nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
    if (rc != NVSHMEMX_SUCCESS) {
        NVSHMEMI_ERROR_PRINT("nvshmemx_init_attr: %s\n", nvshmemx_status_string(rc));
        if (rank < 0) NVSHMEMI_ERROR_EXIT("unreachable: %d\n", rank);
        return;
    }
    if (rank < 0) nvshmem_init();
    if (rank < 0 && nvshmemx_cumodule_init((CUmodule)0) == NVSHMEMX_SUCCESS) nvshmemx_cumodule_finalize((CUmodule)0);
    if (rank < 0) rshmem_init_cuda();

    int pe = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
    int node = nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE) + nvshmem_team_n_pes(NVSHMEM_TEAM_SHARED) +
               nvshmem_team_my_pe(NVSHMEM_TEAM_WORLD);
    (void)node;
    void *sym = nvshmem_malloc(4096);
    void *zeroed = nvshmem_calloc(16, 8);
    void *aligned = nvshmem_align(256, 4096);
    static unsigned char local[4096];
    cudaStream_t st = 0;
    (void)nvshmem_ptr(sym, pe);

    RMA_TYPES(HOST_RMA_CALLS)
    SIZES(HOST_SIZED_CALLS)
    nvshmem_putmem(sym, local, 8, pe);
    nvshmem_getmem(local, sym, 8, pe);
    nvshmem_putmem_nbi(sym, local, 8, pe);
    nvshmem_getmem_nbi(local, sym, 8, pe);
    nvshmemx_putmem_on_stream(sym, local, 8, pe, st);
    nvshmemx_getmem_on_stream(local, sym, 8, pe, st);
    nvshmemx_putmem_nbi_on_stream(sym, local, 8, pe, st);
    nvshmemx_getmem_nbi_on_stream(local, sym, 8, pe, st);
    nvshmemx_quiet_on_stream(st);
    nvshmemx_barrier_all_on_stream(st);
    nvshmemx_sync_all_on_stream(st);
    nvshmem_quiet();
    nvshmem_barrier_all();
    nvshmem_sync_all();

    // Collective launch of the kernels above (never reached: see main).
    Args a = {sym, local, (uint64_t *)zeroed, nullptr, nullptr, pe, 1, nullptr};
    void *args[] = {&a};
    int grid = 0;
    if (nvshmemx_collective_launch_query_gridsize((const void *)rma_coverage, dim3(32), args, 0, &grid) == 0)
        nvshmemx_collective_launch((const void *)rma_coverage, dim3(grid), dim3(32), args, 0, st);
    amo_coverage<<<1, 1, 0, st>>>(a);
    sync_coverage<<<1, 1, 0, st>>>(a);
    rshmem_api_coverage<<<1, 1, 0, st>>>(a);

    nvshmem_free(aligned);
    nvshmem_free(zeroed);
    nvshmem_free(sym);
    nvshmem_finalize();
}

int main(int argc, char **argv) {
    (void)argv;
    // The calls above are for the compiler and linker only; running them would need a job of PEs.
    if (argc > 1000) host_coverage(argc, argc);
    printf("nvshmem_api_coverage: compile/link coverage test; nothing to run\n");
    return 0;
}
