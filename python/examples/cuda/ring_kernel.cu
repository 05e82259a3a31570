// A CUDA C++ kernel that calls NVSHMEM's device API on rshmem tensors, for Python (ring_cuda.py).
//
// It is a plain shared library: nvcc compiles it against rshmem's nvshmem.h and device-links it with
// rshmem's device library (librshmem_device.a), and Python loads it with ctypes after `import rshmem`.
// Its host calls into the runtime (binding its device state) resolve to the runtime inside the rshmem
// Python module, which `import rshmem` makes global; nothing links librshmem.so. build.sh builds it.
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

// One block: this PE's `src` (n ints) into `dst` on the next PE of the ring.
__global__ void ring_put_kernel(int *dst, const int *src, size_t n) {
    int me = nvshmem_my_pe();
    int next = (me + 1) % nvshmem_n_pes();
    nvshmemx_putmem_block(dst, src, n * sizeof(int), next);
}

extern "C" {

// Binds this library's copy of the device state to the running runtime (what nvshmem_init does for a
// program): call once after rshmem.init(), before the first launch. 0 on success.
int ring_bind(void) { return nvshmemi_bind_device_library(); }

// Enqueues the ring put of `n` ints on `stream` (a cudaStream_t; 0: the legacy default stream).
// Returns the launch's CUDA error code (0: cudaSuccess).
int ring_launch(void *dst, const void *src, size_t n, void *stream) {
    ring_put_kernel<<<1, 128, 0, (cudaStream_t)stream>>>((int *)dst, (const int *)src, n);
    return (int)cudaGetLastError();
}

}  // extern "C"
