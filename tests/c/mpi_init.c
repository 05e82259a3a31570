/* rshmem initialized over MPI communicators (NVSHMEM's NVSHMEMX_INIT_WITH_MPI_COMM), host-only C.
 * Run under mpirun with an even number of ranks. With argument "world": one job of all ranks. With
 * "split": MPI_COMM_WORLD is split into even and odd ranks, and each half initializes a job of its own.
 * Each PE puts its world rank into the next PE's buffer and checks what it received. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <nvshmem.h>
#include <nvshmemx.h>

int main(int argc, char **argv) {
    int wrank, wsize;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    int split = argc > 1 && strcmp(argv[1], "split") == 0;
    MPI_Comm comm = MPI_COMM_WORLD;
    if (split) MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &comm);
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);

    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    attr.mpi_comm = &comm;
    nvshmemx_init_attr(NVSHMEMX_INIT_WITH_MPI_COMM, &attr);
    int me = nvshmem_my_pe(), n = nvshmem_n_pes();
    if (me != crank || n != csize) {
        printf("rank %d: FAILED: PE %d of %d, expected %d of %d\n", wrank, me, n, crank, csize);
        return 1;
    }
    int *buf = (int *)nvshmem_malloc(sizeof(int));
    /* nvshmemx_buffer_register: a local buffer registers once; the symmetric heap and a second
     * registration of the same buffer are refused; only a registered buffer unregisters. */
    static char local[256];
    if (nvshmemx_buffer_register(local, sizeof local) != 0 || nvshmemx_buffer_register(local + 8, 8) == 0 ||
        nvshmemx_buffer_register(buf, sizeof(int)) == 0 || nvshmemx_buffer_unregister(local) != 0 ||
        nvshmemx_buffer_unregister(local) == 0) {
        printf("rank %d: FAILED: nvshmemx_buffer_register/unregister\n", wrank);
        return 1;
    }
    nvshmem_int_p(buf, wrank, (me + 1) % n);
    nvshmem_barrier_all();
    int got = *buf; /* CPU backend: the heap is host memory */
    /* The PE before me in this communicator, as a world rank. */
    int prev_c = (crank + csize - 1) % csize;
    int expect = split ? prev_c * 2 + wrank % 2 : prev_c;
    if (got != expect) {
        printf("rank %d: FAILED: received %d, expected %d\n", wrank, got, expect);
        return 1;
    }
    printf("rank %d: PE %d of %d received %d ok\n", wrank, me, n, got);
    nvshmem_free(buf);
    nvshmem_finalize();
    if (split) MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
