// Ring shift on GPUs, NVSHMEM code: every PE writes its PE number into a symmetric int on the next PE
// from a kernel, a barrier on the stream completes the writes, and each PE checks that it received the
// previous PE's number. Exit status 0 only when it did.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#define CHECK_CUDA(call)                                                                          \
    do {                                                                                          \
        cudaError_t err_ = (call);                                                                \
        if (err_ != cudaSuccess) {                                                                \
            std::fprintf(stderr, "ring_shift: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                         cudaGetErrorString(err_));                                               \
            std::exit(1);                                                                         \
        }                                                                                         \
    } while (0)

__global__ void send_to_next(int *inbox) {
    int me = nvshmem_my_pe();
    nvshmem_int_p(inbox, me, (me + 1) % nvshmem_n_pes());
}

int main() {
    nvshmem_init();
    int me = nvshmem_my_pe();
    int npes = nvshmem_n_pes();
    CHECK_CUDA(cudaSetDevice(nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE)));
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));

    int *inbox = static_cast<int *>(nvshmem_malloc(sizeof(int)));
    if (inbox == nullptr) {
        std::fprintf(stderr, "%d: nvshmem_malloc failed\n", me);
        return 1;
    }
    CHECK_CUDA(cudaMemsetAsync(inbox, 0xff, sizeof(int), stream)); // -1: nothing arrived yet
    nvshmemx_barrier_all_on_stream(stream);
    send_to_next<<<1, 1, 0, stream>>>(inbox);
    CHECK_CUDA(cudaGetLastError());
    nvshmemx_barrier_all_on_stream(stream);

    int received = -1;
    CHECK_CUDA(cudaMemcpyAsync(&received, inbox, sizeof(int), cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    int expected = (me + npes - 1) % npes;
    std::printf("%d: received message %d\n", me, received);
    int rc = received == expected ? 0 : 1;
    if (rc != 0) std::fprintf(stderr, "%d: wrong message: received %d, expected %d\n", me, received, expected);

    nvshmem_barrier_all();
    nvshmem_free(inbox);
    CHECK_CUDA(cudaStreamDestroy(stream));
    nvshmem_finalize();
    return rc;
}
