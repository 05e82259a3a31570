/* NVSHMEM's host team and collective API through rshmem's nvshmem.h, from C: broadcast, reductions (with
 * signed char, unsigned and floating-point types), fcollect, alltoall, reducescatter, team splits and their
 * configs, on-stream forms (run at once on the CPU backend), host nbi RMA, init_thread / query_thread / init_status /
 * mc_ptr, and errors that are returned rather than fatal.
 * Built and run under rshmrun by tests/tests/c_api.rs; prints "PE n: ok" and exits 0 when every check holds. */
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
/* A collective writes into every member's dest: no PE may enter the next one on the same buffer before
 * all have read this result (OpenSHMEM's rule), hence a barrier after each check of dest. */
#define CHECK_THEN_BARRIER(c) \
    do {                      \
        CHECK(c);             \
        nvshmem_barrier_all(); \
    } while (0)

int main(void) {
    int n, i, p;
    long *src, *dst, want;
    nvshmem_team_config_t config = NVSHMEM_TEAM_CONFIG_INITIALIZER, got;
    nvshmem_team_t even = 99, x, y;

    int provided = -1, queried = -1;
    if (nvshmemx_init_status() != NVSHMEM_STATUS_NOT_INITIALIZED) {
        printf("FAILED: initialized before init\n");
        return 1;
    }
    if (nvshmem_init_thread(7, &provided) == 0 || provided != -1) {
        printf("FAILED: an unknown thread level was accepted\n");
        return 1;
    }
    if (nvshmem_init_thread(NVSHMEM_THREAD_MULTIPLE, &provided) != 0) {
        printf("FAILED: nvshmem_init_thread\n");
        return 1;
    }
    me = nvshmem_my_pe();
    nvshmem_query_thread(&queried);
    CHECK(provided == NVSHMEM_THREAD_SERIALIZED && queried == provided);
    CHECK(nvshmemx_init_status() == NVSHMEM_STATUS_IS_INITIALIZED);
    CHECK(nvshmemx_mc_ptr(NVSHMEM_TEAM_WORLD, &provided) == NULL);
    n = nvshmem_n_pes();
    src = (long *)nvshmem_malloc(64 * sizeof(long));
    dst = (long *)nvshmem_malloc(64 * sizeof(long));
    for (i = 0; i < 64; i++) src[i] = me * 100 + i;
    nvshmem_barrier_all();

    CHECK(nvshmem_long_broadcast(NVSHMEM_TEAM_WORLD, dst, src, 4, 1) == 0);
    CHECK_THEN_BARRIER(dst[0] == 100 && dst[3] == 103);
    CHECK(nvshmem_long_sum_reduce(NVSHMEM_TEAM_WORLD, dst, src, 2) == 0);
    CHECK_THEN_BARRIER(dst[0] == 100L * n * (n - 1) / 2 && dst[1] == 100L * n * (n - 1) / 2 + n);
    CHECK(nvshmem_long_fcollect(NVSHMEM_TEAM_WORLD, dst, src, 2) == 0);
    CHECK_THEN_BARRIER(dst[2 * (n - 1)] == (n - 1) * 100L && dst[2 * (n - 1) + 1] == (n - 1) * 100L + 1);
    CHECK(nvshmem_long_alltoall(NVSHMEM_TEAM_WORLD, dst, src, 1) == 0);
    CHECK_THEN_BARRIER(dst[0] == me && dst[n - 1] == (n - 1) * 100L + me);
    CHECK(nvshmem_long_max_reducescatter(NVSHMEM_TEAM_WORLD, dst, src, 2) == 0);
    CHECK_THEN_BARRIER(dst[0] == (n - 1) * 100L + 2 * me && dst[1] == (n - 1) * 100L + 2 * me + 1);

    /* char is signed: min of -me is -(n-1); unsigned char or; double prod. */
    ((signed char *)src)[0] = (signed char)-me;
    ((unsigned char *)src)[1] = (unsigned char)(1u << me);
    ((double *)src)[1] = me + 0.5;
    nvshmem_barrier_all();
    CHECK(nvshmem_char_min_reduce(NVSHMEM_TEAM_WORLD, (char *)dst, (char *)src, 1) == 0);
    CHECK_THEN_BARRIER(((char *)dst)[0] == (char)-(n - 1));
    CHECK(nvshmem_uchar_or_reduce(NVSHMEM_TEAM_WORLD, (unsigned char *)dst, (unsigned char *)src + 1, 1) == 0);
    CHECK_THEN_BARRIER(((unsigned char *)dst)[0] == (unsigned char)((1u << n) - 1));
    CHECK(nvshmem_double_prod_reduce(NVSHMEM_TEAM_WORLD, (double *)dst, (double *)src + 1, 1) == 0);
    {
        double w = 1;
        for (p = 0; p < n; p++) w *= p + 0.5;
        CHECK_THEN_BARRIER(((double *)dst)[0] == w);
    }

    /* Teams: the even PEs, with a config; rows and columns of two. */
    config.num_contexts = 7;
    CHECK(nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, &config,
                                     NVSHMEM_TEAM_CONFIG_MASK_NUM_CONTEXTS, &even) == 0);
    if (me % 2 == 0) {
        CHECK(even >= 6 && nvshmem_team_my_pe(even) == me / 2 && nvshmem_team_n_pes(even) == (n + 1) / 2);
        memset(&got, 0, sizeof got);
        nvshmem_team_get_config(even, &got);
        CHECK(got.num_contexts == 7);
        CHECK(n < 3 || nvshmem_team_translate_pe(even, 1, NVSHMEM_TEAM_WORLD) == 2);
        src[0] = me;
        CHECK(nvshmem_barrier(even) == 0);
        CHECK(nvshmem_long_sum_reduce(even, dst, src, 1) == 0);
        for (want = 0, p = 0; p < n; p += 2) want += p;
        CHECK(dst[0] == want);
        CHECK(nvshmem_sync(even) == 0);
        CHECK(nvshmemx_long_sum_reduce_on_stream(even, dst + 1, src, 1, 0) == 0);
        CHECK(nvshmemx_team_sync_on_stream(even, 0) == 0);
        CHECK(dst[1] == want);
    } else {
        CHECK(even == NVSHMEM_TEAM_INVALID);
        CHECK(nvshmem_team_translate_pe(NVSHMEM_TEAM_WORLD, me, even) == -1);
    }
    nvshmem_barrier_all();
    CHECK(nvshmem_team_split_2d(NVSHMEM_TEAM_WORLD, 2, NULL, 0, &x, NULL, 0, &y) == 0);
    CHECK(nvshmem_team_my_pe(x) == me % 2 && nvshmem_team_my_pe(y) == me / 2);
    CHECK(nvshmem_team_translate_pe(y, 0, NVSHMEM_TEAM_WORLD) == me % 2);
    CHECK(nvshmemx_barrier_on_stream(y, 0) == 0);
    CHECK(nvshmemx_int_broadcast_on_stream(x, (int *)dst, (int *)src, 1, 0, 0) == 0);
    nvshmem_team_destroy(y);
    nvshmem_team_destroy(x);
    nvshmem_team_destroy(even);

    /* Host nbi RMA (complete by quiet): every PE puts 8 longs into the next PE's dst and gets the
     * previous PE's src; after the quiet and a barrier both hold. Through the proxy too, across nodes. */
    {
        long mine[8], got_back[8];
        int next = (me + 1) % n, prev = (me + n - 1) % n;
        for (i = 0; i < 8; i++) mine[i] = 1000L * me + i;
        for (i = 0; i < 64; i++) src[i] = me * 100 + i;
        nvshmem_barrier_all();
        nvshmem_putmem_nbi(dst, mine, sizeof mine, next);
        nvshmem_long_get_nbi(got_back, src, 8, prev);
        nvshmem_quiet();
        CHECK(got_back[0] == prev * 100L && got_back[7] == prev * 100L + 7);
        nvshmem_barrier_all();
        CHECK_THEN_BARRIER(dst[0] == 1000L * prev && dst[7] == 1000L * prev + 7);
    }

    /* Host fence and signal_fetch: this PE's signal word set through the RMA path, fenced, read back. */
    {
        uint64_t *sig = (uint64_t *)nvshmem_malloc(sizeof(uint64_t));
        nvshmem_uint64_p(sig, 42u + (uint64_t)me, me);
        nvshmem_fence();
        CHECK(nvshmem_signal_fetch(sig) == 42u + (uint64_t)(unsigned)me);
        nvshmem_barrier_all();
        nvshmem_free(sig);
    }

    /* Buffer registration: two buffers, then all of them unregistered at once; unregistering one again
     * is an error. */
    {
        static char b1[4096], b2[4096];
        CHECK(nvshmemx_buffer_register(b1, sizeof b1) == 0 && nvshmemx_buffer_register(b2, sizeof b2) == 0);
        CHECK(nvshmemx_buffer_unregister_all() == 0);
        CHECK(nvshmemx_buffer_unregister(b1) != 0);
        CHECK(nvshmemx_buffer_register(b1, sizeof b1) == 0 && nvshmemx_buffer_unregister(b1) == 0);
    }

    /* Errors that every PE makes alike are returned (and printed), not fatal. */
    CHECK(nvshmem_long_broadcast(NVSHMEM_TEAM_WORLD, dst, src, 1, n) != 0);
    CHECK(nvshmem_barrier(42) != 0);
    CHECK(nvshmem_team_sync(x) != 0);
    nvshmem_barrier_all();
    printf("PE %d: %s\n", me, fails ? "FAILED" : "ok");
    nvshmem_free(dst);
    nvshmem_free(src);
    nvshmem_finalize();
    return fails != 0;
}
