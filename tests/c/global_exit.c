/* nvshmem_global_exit and the init flags rshmem refuses, from C under rshmrun (tests/tests/c_api.rs):
 *   global_exit STATUS  the last PE calls nvshmem_global_exit(STATUS) while the others wait in a barrier
 *                       that it never enters: rshmrun must end every PE and exit with STATUS.
 *   init_shmem          nvshmemx_init_attr(NVSHMEMX_INIT_WITH_SHMEM) must exit 1 naming the flag.
 *   bad_amo             a host AMO with operation code -5 must exit 1 naming the code. */
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "init_shmem") == 0) {
        nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
        nvshmemx_init_attr(NVSHMEMX_INIT_WITH_SHMEM, &attr);
        printf("FAILED: NVSHMEMX_INIT_WITH_SHMEM was accepted\n");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "bad_amo") == 0) {
        nvshmem_init();
        long *x = (long *)nvshmem_malloc(sizeof(long));
        rshmem_host_amo(-5, 8, x, 1, 0, 0);
        printf("FAILED: a host AMO with code -5 was accepted\n");
        return 0;
    }
    if (argc < 3 || strcmp(argv[1], "global_exit") != 0) {
        fprintf(stderr, "usage: global_exit global_exit STATUS | init_shmem | bad_amo\n");
        return 2;
    }
    int status = atoi(argv[2]);
    nvshmem_init();
    int me = nvshmem_my_pe(), n = nvshmem_n_pes();
    printf("PE %d: before global_exit\n", me);
    fflush(stdout); /* the PEs that rshmrun ends keep no buffered output */
    if (me == n - 1) nvshmem_global_exit(status);
    nvshmem_barrier_all(); /* never completes: PE n-1 does not come */
    printf("PE %d: FAILED: passed a barrier that PE %d never entered\n", me, n - 1);
    nvshmem_finalize();
    return 3;
}
