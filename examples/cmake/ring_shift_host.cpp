// Ring shift from the host, NVSHMEM's host API: every PE puts its PE number into a symmetric int on the
// next PE, a barrier completes the puts, and each PE reads what it received (a get from itself) and
// checks it holds the previous PE's number. Exit status 0 only when it does.
#include <cstdio>
#include <nvshmem.h>
#include <nvshmemx.h>

int main() {
    nvshmem_init();
    int me = nvshmem_my_pe();
    int npes = nvshmem_n_pes();
    int *inbox = static_cast<int *>(nvshmem_malloc(sizeof(int)));
    if (inbox == nullptr) {
        std::fprintf(stderr, "%d: nvshmem_malloc failed\n", me);
        return 1;
    }
    nvshmem_int_p(inbox, -1, me); // -1: nothing arrived yet
    nvshmem_barrier_all();        // every inbox is cleared before anyone writes to it
    nvshmem_int_p(inbox, me, (me + 1) % npes);
    nvshmem_barrier_all(); // every put has landed
    int received = nvshmem_int_g(inbox, me);
    int expected = (me + npes - 1) % npes;
    std::printf("%d: received message %d\n", me, received);
    int rc = 0;
    if (received != expected) {
        std::fprintf(stderr, "%d: wrong message: received %d, expected %d\n", me, received, expected);
        rc = 1;
    }
    nvshmem_barrier_all();
    nvshmem_free(inbox);
    nvshmem_finalize();
    return rc;
}
