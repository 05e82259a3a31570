// Host side of the device library archive (librshmem_device.a), compiled with
//   nvcc -arch=sm_90 -rdc=true -c device/cuda/rshmem_device_init.cu -I device/include
// next to the PTX of the Rust device crate (scripts/build-device-lib.sh).
//
// rshmemi_bind_device_library: a program device-linked with the archive has its own copy of the device
// state (`rshmemi_device_state`, defined by the PTX), distinct from the one in the runtime's own module.
// A one-thread kernel reads its address (device linking makes the extern below that copy) and the
// runtime is told to fill it in (rshmemi_register_device_state).
//
// rshmemx_collective_launch: cudaLaunchCooperativeKernel with the checks that make a failure explicit.
#include <cstdio>
#include <cuda_runtime.h>
#include "rshmem.h"

// Defined by the device library's PTX (`.visible .global .align 8 .b8 rshmemi_device_state[...]`); its
// size is the runtime's business.
extern "C" __device__ unsigned char rshmemi_device_state[];

__global__ void rshmemi_device_state_address_kernel(void **out) { *out = (void *)rshmemi_device_state; }

namespace {

bool cuda_ok(cudaError_t e, const char *who, const char *call) {
    if (e == cudaSuccess) return true;
    int dev = -1;
    cudaGetDevice(&dev);
    fprintf(stderr, "rshmem: %s: %s failed on CUDA device %d: %s (%s)\n", who, call, dev, cudaGetErrorString(e),
            cudaGetErrorName(e));
    return false;
}

}  // namespace

extern "C" int rshmemi_bind_device_library(void) {
    const char *who = "rshmemi_bind_device_library (binding the device library at init)";
    void **slot = nullptr;
    void *addr = nullptr;
    // Errors from earlier work would be reported by the calls below as theirs: name them here instead.
    cudaError_t pending = cudaGetLastError();
    if (pending != cudaSuccess) {
        fprintf(stderr, "rshmem: %s: a CUDA error was pending before it: %s (%s)\n", who,
                cudaGetErrorString(pending), cudaGetErrorName(pending));
    }
    if (!cuda_ok(cudaMalloc((void **)&slot, sizeof(void *)), who, "cudaMalloc")) return 1;
    rshmemi_device_state_address_kernel<<<1, 1>>>(slot);
    bool ok = cuda_ok(cudaGetLastError(), who,
                      "launch of rshmemi_device_state_address_kernel (was the program built for this GPU's "
                      "architecture, with -rdc=true?)");
    ok = ok && cuda_ok(cudaMemcpy(&addr, slot, sizeof addr, cudaMemcpyDeviceToHost), who,
                       "cudaMemcpy of the device state address (the kernel failed?)");
    cudaError_t fe = cudaFree(slot);
    if (!ok) return 1;
    if (!cuda_ok(fe, who, "cudaFree")) return 1;
    if (addr == nullptr) {
        fprintf(stderr, "rshmem: %s: the device state address read back as null\n", who);
        return 1;
    }
    if (rshmemi_register_device_state(addr, 0) != 0) {
        fprintf(stderr, "rshmem: %s: rshmemi_register_device_state(%p) failed (was rshmem_init called "
                        "first, with the CUDA backend?)\n", who, addr);
        return 1;
    }
    return 0;
}

namespace {

// Blocks of `block` that can be resident at once on the current device, in *max_blocks.
bool cooperative_capacity(const char *who, const void *func, dim3 block, size_t shmem, long long *max_blocks,
                          int *per_sm_out, int *sms_out) {
    int dev = 0, coop = 0, sms = 0, per_sm = 0;
    if (!cuda_ok(cudaGetDevice(&dev), who, "cudaGetDevice")) return false;
    if (!cuda_ok(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev), who,
                 "cudaDeviceGetAttribute(cudaDevAttrCooperativeLaunch)"))
        return false;
    if (!coop) {
        fprintf(stderr, "rshmem: %s: CUDA device %d does not support cooperative launch\n", who, dev);
        return false;
    }
    if (!cuda_ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), who,
                 "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)"))
        return false;
    int threads = (int)(block.x * block.y * block.z);
    if (!cuda_ok(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, func, threads, shmem), who,
                 "cudaOccupancyMaxActiveBlocksPerMultiprocessor"))
        return false;
    *max_blocks = (long long)per_sm * sms;
    *per_sm_out = per_sm;
    *sms_out = sms;
    return true;
}

}  // namespace

extern "C" int rshmemx_collective_launch(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                         cudaStream_t stream) {
    const char *who = "rshmemx_collective_launch (nvshmemx_collective_launch)";
    long long max_blocks = 0;
    int per_sm = 0, sms = 0;
    if (!cooperative_capacity(who, func, block, shmem, &max_blocks, &per_sm, &sms)) return 1;
    long long blocks = (long long)grid.x * grid.y * grid.z;
    if (blocks > max_blocks) {
        fprintf(stderr,
                "rshmem: %s: grid of %lld blocks (%ux%ux%u) cannot be resident at once: at most %d blocks of "
                "%u threads and %zu bytes of dynamic shared memory per SM x %d SMs = %lld\n",
                who, blocks, grid.x, grid.y, grid.z, per_sm, block.x * block.y * block.z, shmem, sms, max_blocks);
        return 1;
    }
    if (!cuda_ok(cudaLaunchCooperativeKernel(func, grid, block, args, shmem, stream), who,
                 "cudaLaunchCooperativeKernel"))
        return 1;
    return 0;
}

extern "C" int rshmemx_collective_launch_query_gridsize(const void *func, dim3 block, void **args, size_t shmem,
                                                        int *gridsize) {
    (void)args;
    const char *who = "rshmemx_collective_launch_query_gridsize";
    long long max_blocks = 0;
    int per_sm = 0, sms = 0;
    if (gridsize == nullptr) {
        fprintf(stderr, "rshmem: %s: gridsize is null\n", who);
        return 1;
    }
    if (!cooperative_capacity(who, func, block, shmem, &max_blocks, &per_sm, &sms)) return 1;
    *gridsize = (int)max_blocks;
    return 0;
}
