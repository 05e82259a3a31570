// Ring shift on rshmem's own C API: every PE writes its PE number into a symmetric int on the next PE
// (from a kernel), a stream barrier completes the writes, and each PE checks that it received the number
// of the previous PE. Exit status 0 only when the value is right.
//
// Build (see scripts/check-cuda-examples.sh):
//   nvcc -rdc=true -arch=sm_90 -I device/include examples/cuda/ring_shift.cu librshmem_device.a \
//        -L target/release -lrshmem -lcuda -o ring_shift
// Run one process per GPU through rshmem's launcher.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <rshmem.h>

#define CHECK_CUDA(call)                                                                          \
    do {                                                                                          \
        cudaError_t err_ = (call);                                                                \
        if (err_ != cudaSuccess) {                                                                \
            fprintf(stderr, "ring_shift: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__,    \
                    cudaGetErrorString(err_));                                                    \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

// One thread sends this PE's number to the next PE of the ring.
__global__ void send_to_next(int *inbox) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    int me = rshmem_my_pe();
    int next = (me + 1) % rshmem_n_pes();
    rshmem_p32(inbox, (uint32_t)me, next);
}

int main() {
    if (rshmem_init_cuda() != 0) {
        fprintf(stderr, "ring_shift: rshmem_init_cuda failed\n");
        return 1;
    }
    int me = rshmem_my_pe();
    int npes = rshmem_n_pes();

    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));

    int *inbox = (int *)rshmem_malloc(sizeof(int));
    if (inbox == NULL) {
        fprintf(stderr, "%d: rshmem_malloc of the inbox failed\n", me);
        return 1;
    }
    // -1 marks "nothing arrived"; every PE clears its inbox before anyone may write to it.
    CHECK_CUDA(cudaMemsetAsync(inbox, 0xff, sizeof(int), stream));
    rshmem_barrier_all_on_stream(stream);

    send_to_next<<<1, 32, 0, stream>>>(inbox);
    CHECK_CUDA(cudaGetLastError());
    rshmem_barrier_all_on_stream(stream);

    int received = -1;
    CHECK_CUDA(cudaMemcpyAsync(&received, inbox, sizeof(int), cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));

    int expected = (me + npes - 1) % npes;
    printf("%d: received message %d\n", me, received);
    int rc = 0;
    if (received != expected) {
        fprintf(stderr, "%d: wrong message: received %d, expected %d (from PE %d)\n", me, received, expected,
                expected);
        rc = 1;
    }

    rshmem_barrier_all();
    rshmem_free(inbox);
    CHECK_CUDA(cudaStreamDestroy(stream));
    rshmem_finalize();
    return rc;
}
