/* Teams of arbitrary members from a unique id (nvshmemx_team_get_uniqueid / nvshmemx_team_init) through
 * rshmem's nvshmem.h, from C. With N PEs (N >= 4; with 2 or 3, one team of all PEs numbered in reverse):
 *  - "odd" team: the odd PEs, numbered in reverse (the highest odd PE is member 0), and at the same time
 *    "even" team: the even PEs except PE 0, numbered in reverse too; PE 0 stays out of both, busy in
 *    none of their calls (it makes no team collective);
 *  - each team: my_pe / n_pes, translate_pe to and from the world, a sum reduction, an fcollect in
 *    member order, a broadcast from member 0, barrier and sync, a strided split of it (whose members
 *    come from its table), and destroy;
 *  - an id made by PE 1 and handed over in symmetric memory; errors returned, not fatal: no config,
 *    an unset id, a version-1 config, npes and indexes out of range.
 * With the argument "lonely": PE 1 alone makes a team of 2 and, with RSHMEM_WAIT_TIMEOUT set to 1 s in its
 * own environment, gets an error naming the member that never came (the other PEs wait in a barrier
 * meanwhile, under the job's longer timeout).
 * Symmetric memory is read and written on the host through nvshmem_getmem / nvshmem_putmem to this PE
 * (on GPUs it is device memory, which host code cannot dereference).
 * Built and run under rshmrun by tests/tests/c_api.rs; prints "PE n: ok" and exits 0 when every check
 * holds. */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Members of the team this PE joins: PEs with my parity, but PE 0 never (all PEs when there are fewer
 * than 4); numbered from the highest. */
static int members(int n, int parity, int *list) {
    int k = 0, p;
    for (p = n - 1; p >= (n < 4 ? 0 : 1); p--)
        if (n < 4 || p % 2 == parity) list[k++] = p;
    return k;
}

/* This PE's copy of symmetric `sym` (n longs) into `out`, and `in` into it. */
static void get_local(long *out, const long *sym, int n) { nvshmem_getmem(out, sym, n * sizeof(long), nvshmem_my_pe()); }
static void put_local(long *sym, const long *in, int n) { nvshmem_putmem(sym, in, n * sizeof(long), nvshmem_my_pe()); }

int main(int argc, char **argv) {
    int n, i, k, idx = -1, list[64];
    long *src, *dst, want, v[128];
    nvshmemx_team_uniqueid_t id[2];
    nvshmemx_team_uniqueid_t *ids;
    nvshmem_team_config_t config = NVSHMEM_TEAM_CONFIG_INITIALIZER, bad = NVSHMEM_TEAM_CONFIG_INITIALIZER, got;
    nvshmem_team_t team = 99, half = 99;

    nvshmem_init();
    me = nvshmem_my_pe();
    n = nvshmem_n_pes();
    if (n < 2 || n > 64) {
        printf("PE %d: needs 2 to 64 PEs\n", me);
        return 1;
    }
    src = (long *)nvshmem_malloc(64 * sizeof(long));
    dst = (long *)nvshmem_malloc(64 * sizeof(long));
    ids = (nvshmemx_team_uniqueid_t *)nvshmem_malloc(2 * sizeof(nvshmemx_team_uniqueid_t));

    if (argc > 1 && strcmp(argv[1], "lonely") == 0) {
        if (me == 1) {
            CHECK(setenv("RSHMEM_WAIT_TIMEOUT", "1", 1) == 0);
            CHECK(nvshmemx_team_get_uniqueid(&config.uniqueid) == 0);
            CHECK(nvshmemx_team_init(&team, &config, NVSHMEM_TEAM_CONFIG_MASK_UNIQUEID, 2, 0) != 0);
            CHECK(team == NVSHMEM_TEAM_INVALID);
        }
        nvshmem_barrier_all();
        nvshmem_finalize();
        if (fails == 0) printf("PE %d: ok\n", me);
        return fails != 0;
    }

    /* Errors are returned, with TEAM_INVALID. */
    CHECK(nvshmemx_team_get_uniqueid(NULL) != 0);
    CHECK(nvshmemx_team_init(&team, NULL, 0, 1, 0) != 0 && team == NVSHMEM_TEAM_INVALID);
    team = 99;
    CHECK(nvshmemx_team_init(&team, &config, NVSHMEM_TEAM_CONFIG_MASK_UNIQUEID, 1, 0) != 0 && team == NVSHMEM_TEAM_INVALID);
    CHECK(nvshmemx_team_get_uniqueid(&bad.uniqueid) == 0 && bad.uniqueid != ~0ULL);
    CHECK(nvshmemx_team_init(&team, &bad, 0, 0, 0) != 0);
    CHECK(nvshmemx_team_init(&team, &bad, 0, n + 1, 0) != 0);
    CHECK(nvshmemx_team_init(&team, &bad, 0, 2, 2) != 0);
    CHECK(nvshmemx_team_init(&team, &bad, 0, 2, -1) != 0);
    bad.version = (1 << 16) + 48;
    CHECK(nvshmemx_team_init(&team, &bad, 0, 1, 0) != 0);

    /* A team of one: no other PE is asked. */
    CHECK(nvshmemx_team_get_uniqueid(&config.uniqueid) == 0);
    CHECK(nvshmemx_team_init(&team, &config, NVSHMEM_TEAM_CONFIG_MASK_UNIQUEID, 1, 0) == 0);
    CHECK(nvshmem_team_my_pe(team) == 0 && nvshmem_team_n_pes(team) == 1);
    CHECK(nvshmem_team_translate_pe(team, 0, NVSHMEM_TEAM_WORLD) == me);
    nvshmem_team_destroy(team);

    /* PE 1 makes both ids and puts them on every PE. */
    if (me == 1) {
        nvshmemx_team_uniqueid_t mine[2];
        CHECK(nvshmemx_team_get_uniqueid(&mine[0]) == 0 && nvshmemx_team_get_uniqueid(&mine[1]) == 0);
        CHECK(mine[0] != mine[1]);
        for (i = 0; i < n; i++) nvshmem_putmem(ids, mine, sizeof mine, i);
    }
    nvshmem_barrier_all();

    if (me != 0 || n < 4) {
        int parity = n < 4 ? 0 : me % 2;
        k = members(n, parity, list);
        for (i = 0; i < k; i++)
            if (list[i] == me) idx = i;
        config = (nvshmem_team_config_t)NVSHMEM_TEAM_CONFIG_INITIALIZER;
        nvshmem_getmem(id, ids, sizeof id, me);
        config.uniqueid = id[parity];
        config.num_contexts = 3 + parity;
        CHECK(nvshmemx_team_init(&team, &config, NVSHMEM_TEAM_CONFIG_MASK_UNIQUEID | NVSHMEM_TEAM_CONFIG_MASK_NUM_CONTEXTS, k, idx) == 0);
        CHECK(team != NVSHMEM_TEAM_INVALID);
        CHECK(nvshmem_team_my_pe(team) == idx && nvshmem_team_n_pes(team) == k);
        nvshmem_team_get_config(team, &got);
        CHECK(got.uniqueid == id[parity] && got.num_contexts == 3 + parity);
        for (i = 0; i < k; i++) {
            CHECK(nvshmem_team_translate_pe(team, i, NVSHMEM_TEAM_WORLD) == list[i]);
            CHECK(nvshmem_team_translate_pe(NVSHMEM_TEAM_WORLD, list[i], team) == i);
        }
        if (n >= 4) CHECK(nvshmem_team_translate_pe(NVSHMEM_TEAM_WORLD, 0, team) == -1);

        for (i = 0; i < 4; i++) v[i] = me * 10 + i;
        put_local(src, v, 4);
        CHECK(nvshmem_team_sync(team) == 0);
        CHECK(nvshmem_long_sum_reduce(team, dst, src, 4) == 0);
        want = 0;
        for (i = 0; i < k; i++) want += list[i] * 10;
        get_local(v, dst, 4);
        CHECK(v[0] == want && v[3] == want + 3 * k);
        CHECK(nvshmem_barrier(team) == 0);
        CHECK(nvshmem_long_fcollect(team, dst, src, 2) == 0);
        get_local(v, dst, 2 * k);
        for (i = 0; i < k; i++) CHECK(v[2 * i] == list[i] * 10 && v[2 * i + 1] == list[i] * 10 + 1);
        CHECK(nvshmem_barrier(team) == 0);
        CHECK(nvshmem_long_broadcast(team, dst, src, 3, 0) == 0);
        get_local(v, dst, 3);
        CHECK(v[0] == list[0] * 10 && v[2] == list[0] * 10 + 2);
        CHECK(nvshmem_barrier(team) == 0);

        /* A split of the listed team: its members 0, 2, 4, ... (job PEs from its table). */
        CHECK(nvshmem_team_split_strided(team, 0, 2, (k + 1) / 2, NULL, 0, &half) == 0);
        if (idx % 2 == 0) {
            CHECK(half != NVSHMEM_TEAM_INVALID && nvshmem_team_my_pe(half) == idx / 2);
            for (i = 0; i < (k + 1) / 2; i++) CHECK(nvshmem_team_translate_pe(half, i, NVSHMEM_TEAM_WORLD) == list[2 * i]);
            CHECK(nvshmem_long_max_reduce(half, dst, src, 1) == 0);
            get_local(v, dst, 1);
            CHECK(v[0] == list[0] * 10);
            nvshmem_team_destroy(half);
        } else {
            CHECK(half == NVSHMEM_TEAM_INVALID);
        }
        nvshmem_team_destroy(team);
    }
    nvshmem_barrier_all();
    /* The slots are free again: a world split still works on every PE. */
    CHECK(nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &team) == 0);
    CHECK(nvshmem_team_n_pes(team) == n);
    nvshmem_team_destroy(team);

    nvshmem_free(ids);
    nvshmem_free(dst);
    nvshmem_free(src);
    nvshmem_finalize();
    if (fails == 0) printf("PE %d: ok\n", me);
    return fails != 0;
}
