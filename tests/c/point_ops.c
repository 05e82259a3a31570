/* NVSHMEM's host AMOs, strided RMA and on-stream point operations through rshmem's nvshmem.h, from C:
 * - host AMOs of every class (fetch_add from every PE on one counter, compare_swap, swap of a double,
 *   fetch_and/or/xor, inc / fetch_inc, set / fetch) on the next PE;
 * - strided iput / iget with strides above 1 (int, 8-bit, 128-bit elements), one element, and none;
 * - the on-stream p, g, signal_op, put_signal, signal_wait_until, wait_until(_all, _all_vector) and
 *   iput / iget (the CPU backend runs on-stream calls at once, in program order: stream NULL);
 * - host signal_op.
 * Built and run under rshmrun by tests/tests/c_api.rs; prints "PE n: ok" and exits 0 when every check
 * holds. */
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
/* Symmetric memory is read and written through this PE's own g / p, so the program runs on GPUs too
 * (where the heap is device memory) as well as on the CPU backend. */
#define GET(T, p) nvshmem_##T##_g((p), me)
#define SET(T, p, v) nvshmem_##T##_p((p), (v), me)
/* After on-stream operations: a g in the stream's order, which waits for the stream's earlier work (on
 * a GPU the host's own g would not wait for a kernel still waiting on the stream). */
#define GETS(T, p) nvshmemx_##T##_g_on_stream((p), me, NULL)

int main(void) {
    int n, i, next, prev, k, p;
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    /* NVSHMEMX_INIT_THREAD_PES is accepted and changes nothing. */
    if (nvshmemx_init_attr(NVSHMEMX_INIT_THREAD_PES, &attr) != 0) {
        printf("FAILED: nvshmemx_init_attr(NVSHMEMX_INIT_THREAD_PES)\n");
        return 1;
    }
    me = nvshmem_my_pe();
    n = nvshmem_n_pes();
    next = (me + 1) % n;
    prev = (me + n - 1) % n;

    /* ---- host AMOs */
    long *counter = (long *)nvshmem_calloc(1, sizeof(long));
    unsigned int *bits = (unsigned int *)nvshmem_calloc(1, sizeof(unsigned int));
    double *dbl = (double *)nvshmem_calloc(1, sizeof(double));
    int *word = (int *)nvshmem_calloc(1, sizeof(int));
    nvshmem_barrier_all();
    for (k = 0; k < 50; k++) {
        long old = nvshmem_long_atomic_fetch_add(counter, 2, 0);
        CHECK(old % 2 == 0 && old >= 0 && old < 100L * n);
    }
    nvshmem_barrier_all();
    if (me == 0) CHECK(GET(long, counter) == 100L * n);
    CHECK(nvshmem_long_atomic_fetch(counter, 0) == 100L * n);
    nvshmem_barrier_all();

    /* compare_swap: exactly one PE wins the swap from 0 to its number + 1 on PE 0's word. */
    int won = nvshmem_int_atomic_compare_swap(word, 0, me + 1, 0) == 0;
    nvshmem_barrier_all();
    nvshmem_long_atomic_add(counter, won, 0);
    nvshmem_barrier_all();
    if (me == 0) CHECK(GET(long, counter) == 100L * n + 1 && GET(int, word) >= 1 && GET(int, word) <= n);
    nvshmem_barrier_all();

    /* swap and set of a double on the next PE; fetch from the previous one's. */
    nvshmem_double_atomic_set(dbl, 0.25 + me, next);
    nvshmem_barrier_all();
    CHECK(GET(double, dbl) == 0.25 + prev);
    CHECK(nvshmem_double_atomic_fetch(dbl, next) == 0.25 + me);
    nvshmem_barrier_all();
    double was = nvshmem_double_atomic_swap(dbl, -1.5, next);
    CHECK(was == 0.25 + me);
    nvshmem_barrier_all();
    CHECK(GET(double, dbl) == -1.5);
    nvshmem_barrier_all();

    /* bitwise: each PE sets its own bit on PE 0's word with fetch_or, then xor clears them again. */
    nvshmem_uint_atomic_fetch_or(bits, 1u << me, 0);
    nvshmem_barrier_all();
    if (me == 0) CHECK(GET(uint, bits) == (1u << n) - 1);
    nvshmem_barrier_all();
    unsigned int before = nvshmem_uint_atomic_fetch_xor(bits, 1u << me, 0);
    CHECK(before & (1u << me));
    nvshmem_barrier_all();
    if (me == 0) CHECK(GET(uint, bits) == 0);
    nvshmem_barrier_all();
    nvshmem_uint_atomic_or(bits, 0xF0u, next);
    nvshmem_uint_atomic_and(bits, 0x30u, next);
    nvshmem_uint_atomic_xor(bits, 0x01u, next);
    CHECK(nvshmem_uint_atomic_fetch_and(bits, 0xFFu, next) == 0x31u);
    nvshmem_barrier_all();
    CHECK(GET(uint, bits) == 0x31u);
    nvshmem_barrier_all();
    nvshmem_int_atomic_set(word, 10, next);
    nvshmem_int_atomic_inc(word, next);
    CHECK(nvshmem_int_atomic_fetch_inc(word, next) == 11);
    nvshmem_int_atomic_add(word, -2, next);
    nvshmem_barrier_all();
    CHECK(GET(int, word) == 10);
    nvshmem_barrier_all();

    /* ---- strided RMA: 7 ints at stride 3 on the target from stride 2 here, and back. */
    int *sym = (int *)nvshmem_calloc(64, sizeof(int));
    int local[64], got[64];
    for (i = 0; i < 64; i++) local[i] = me * 1000 + i;
    nvshmem_barrier_all();
    nvshmem_int_iput(sym, local, 3, 2, 7, next);
    nvshmem_barrier_all();
    for (i = 0; i < 64; i++) {
        int want = (i % 3 == 0 && i / 3 < 7) ? prev * 1000 + 2 * (i / 3) : 0;
        CHECK(GET(int, sym + i) == want);
    }
    memset(got, 0xff, sizeof(got));
    nvshmem_int_iget(got, sym, 2, 3, 7, next); /* the next PE's sym holds my values */
    for (i = 0; i < 14; i++) CHECK(got[i] == (i % 2 == 0 ? me * 1000 + i : -1));
    nvshmem_barrier_all();
    /* one element, none, and other widths */
    nvshmem_int_iput(sym + 1, local + 5, 4, 9, 1, next);
    nvshmem_int_iput(sym + 2, local, 1, 1, 0, next);
    unsigned char b8[16];
    for (i = 0; i < 16; i++) b8[i] = (unsigned char)(me * 16 + i);
    nvshmem_iput8((char *)sym + 100, b8, 2, 1, 4, next);
    long long w128[8];
    for (i = 0; i < 8; i++) w128[i] = me * 100 + i;
    nvshmem_iput128(sym + 32, w128, 2, 1, 3, next); /* 3 x 16 bytes at 32-byte stride from contiguous */
    nvshmem_barrier_all();
    CHECK(GET(int, sym + 1) == prev * 1000 + 5 && GET(int, sym + 2) == 0);
    for (i = 0; i < 4; i++) CHECK(nvshmem_uint8_g((uint8_t *)sym + 100 + 2 * i, me) == (unsigned char)(prev * 16 + i));
    long long *t128 = (long long *)(sym + 32);
    for (i = 0; i < 3; i++)
        CHECK(GET(longlong, t128 + 4 * i) == prev * 100 + 2 * i && GET(longlong, t128 + 4 * i + 1) == prev * 100 + 2 * i + 1);
    nvshmem_barrier_all();

    /* ---- on-stream point operations (stream NULL; run at once on the CPU backend) */
    uint64_t *sig = (uint64_t *)nvshmem_calloc(4, sizeof(uint64_t));
    long *data = (long *)nvshmem_calloc(8, sizeof(long));
    nvshmem_barrier_all();
    nvshmemx_long_p_on_stream(data, 40 + me, next, NULL);
    nvshmemx_quiet_on_stream(NULL);
    nvshmemx_barrier_all_on_stream(NULL); /* after every PE's stream work, in stream order */
    CHECK(GETS(long, data) == 40 + prev);
    CHECK(nvshmemx_long_g_on_stream(data, next, NULL) == 40 + me);
    nvshmem_barrier_all();
    /* The local side of an on-stream transfer must be device-accessible: a symmetric buffer here. */
    long *payload = (long *)nvshmem_malloc(4 * sizeof(long));
    long *back = (long *)nvshmem_malloc(4 * sizeof(long));
    for (i = 0; i < 4; i++) SET(long, payload + i, me + i);
    for (i = 0; i < 4; i++) SET(long, back + i, -1);
    nvshmem_quiet();
    nvshmem_barrier_all();
    nvshmemx_long_put_signal_on_stream(data + 4, payload, 4, sig, 7, NVSHMEM_SIGNAL_SET, next, NULL);
    nvshmemx_signal_wait_until_on_stream(sig, NVSHMEM_CMP_EQ, 7, NULL);
    nvshmemx_quiet_on_stream(NULL);
    CHECK(GETS(long, data + 4) == prev && GETS(long, data + 7) == prev + 3);
    nvshmemx_signal_op_on_stream(sig + 1, 5, NVSHMEM_SIGNAL_ADD, next, NULL);
    nvshmemx_signal_op(sig + 1, 5, NVSHMEM_SIGNAL_ADD, next);
    nvshmemx_uint64_wait_until_on_stream(sig + 1, NVSHMEM_CMP_GE, 10, NULL);
    CHECK(GETS(uint64, sig + 1) == 10);
    nvshmem_barrier_all();
    nvshmemx_long_iput_on_stream(data, payload, 2, 1, 2, next, NULL);
    nvshmemx_quiet_on_stream(NULL);
    nvshmemx_barrier_all_on_stream(NULL); /* after every PE's stream work, in stream order */
    CHECK(GETS(long, data) == prev && GETS(long, data + 2) == prev + 1);
    nvshmemx_long_iget_on_stream(back, data, 2, 2, 2, next, NULL);
    nvshmemx_quiet_on_stream(NULL);
    CHECK(GETS(long, back) == me && GETS(long, back + 2) == me + 1 && GETS(long, back + 1) == -1);
    nvshmem_barrier_all();
    nvshmem_free(back);
    nvshmem_free(payload);
    nvshmem_barrier_all();
    /* wait_until_all: everyone sets its own slot of PE 0's array; PE 0 waits for all, skipping one by
     * status; the vector form waits for per-element values. */
    long *slots = (long *)nvshmem_calloc(8, sizeof(long));
    nvshmem_barrier_all();
    nvshmem_long_p(slots + me, 100 + me, 0);
    nvshmem_quiet();
    /* status and the values of the vector form are device-accessible arrays: symmetric here. */
    int *status = (int *)nvshmem_calloc(8, sizeof(int));
    long *want = (long *)nvshmem_malloc(8 * sizeof(long));
    if (me == 0) {
        SET(int, status + n - 1, 1);
        for (i = 0; i < n; i++) SET(long, want + i, 100 + i);
        nvshmem_quiet();
        nvshmemx_long_wait_until_all_on_stream(slots, n, status, NVSHMEM_CMP_GE, 100, NULL);
        nvshmemx_long_wait_until_all_vector_on_stream(slots, n, NULL, NVSHMEM_CMP_EQ, want, NULL);
        nvshmemx_quiet_on_stream(NULL);
        for (i = 0; i < n; i++) CHECK(GETS(long, slots + i) == 100 + i);
    }
    nvshmem_barrier_all();
    nvshmem_free(want);
    nvshmem_free(status);
    nvshmem_barrier_all();

    /* ---- alltoalls: block j of my source (3 elements at stride 2 from element 6j) goes to PE j, into its
     * block me (at stride 3 from element 9 me). */
    int *a_src = (int *)nvshmem_malloc(64 * sizeof(int));
    int *a_dst = (int *)nvshmem_calloc(96, sizeof(int));
    for (i = 0; i < 64; i++) SET(int, a_src + i, me * 1000 + i);
    nvshmem_quiet();
    nvshmem_barrier_all();
    CHECK(nvshmem_int_alltoalls(NVSHMEM_TEAM_WORLD, a_dst, a_src, 3, 2, 3) == 0);
    for (p = 0; p < n; p++)
        for (k = 0; k < 3; k++) CHECK(GET(int, a_dst + 9 * p + 3 * k) == p * 1000 + 6 * me + 2 * k);
    CHECK(GET(int, a_dst + 1) == 0 && GET(int, a_dst + 2) == 0);
    nvshmem_barrier_all();
    nvshmem_free(a_dst);
    nvshmem_free(a_src);

    /* ---- realloc: grows keeping this PE's contents, then shrinks; NULL is malloc, 0 frees. */
    long *r = (long *)nvshmem_realloc(NULL, 4 * sizeof(long));
    CHECK(r != NULL);
    for (i = 0; i < 4; i++) SET(long, r + i, me * 10 + i);
    nvshmem_quiet();
    long *blocker = (long *)nvshmem_malloc(sizeof(long)); /* so the grown block cannot stay in place */
    r = (long *)nvshmem_realloc(r, 4096 * sizeof(long));
    CHECK(r != NULL);
    for (i = 0; i < 4; i++) CHECK(GET(long, r + i) == me * 10 + i);
    SET(long, r + 4095, 7);
    nvshmem_quiet();
    nvshmem_barrier_all();
    CHECK(nvshmem_long_g(r + 4095, next) == 7 && nvshmem_long_g(r + 2, next) == next * 10 + 2);
    nvshmem_barrier_all();
    r = (long *)nvshmem_realloc(r, 2 * sizeof(long));
    CHECK(r != NULL && GET(long, r) == me * 10 && GET(long, r + 1) == me * 10 + 1);
    CHECK(nvshmem_realloc(r, 0) == NULL);
    nvshmem_free(blocker);

    nvshmem_free(slots);
    nvshmem_free(data);
    nvshmem_free(sig);
    nvshmem_free(sym);
    nvshmem_free(word);
    nvshmem_free(dbl);
    nvshmem_free(bits);
    nvshmem_free(counter);
    if (fails == 0) printf("PE %d: ok\n", me);
    nvshmem_finalize();
    return fails != 0;
}
