// Host side of the device library archive (librshmem_device.a), compiled with
//   nvcc -arch=sm_90 -rdc=true -c device/cuda/rshmem_device_init.cu -I device/include
// next to the PTX of the Rust device crate (scripts/build-device-lib.sh).
//
// rshmemi_device_state: the device state of a program device-linked with the archive, defined here in
// the constant bank (the device library's PTX declares it .extern). Its size is the runtime's business:
// build-device-lib.sh reads it from that declaration and passes -DRSHMEMI_DEVICE_STATE_BYTES.
// rshmemi_bind_device_library: tells the runtime where this program's copy lives
// (rshmemi_register_device_state), and the runtime fills it in.
//
// (rshmemx_collective_launch, which was here, is inline in rshmem.h now: it needs only the CUDA runtime.)
#include <cstdio>
#include <cuda_runtime.h>
#include "rshmem.h"

#ifndef RSHMEMI_DEVICE_STATE_BYTES
#error "compile with -DRSHMEMI_DEVICE_STATE_BYTES=<size of the device state> (scripts/build-device-lib.sh does)"
#endif
// A definition (the braces keep `extern "C"` from making it a declaration); zero-filled, so device calls
// made before init fail with "called before rshmem init" (magic 0).
extern "C" {
__constant__ unsigned char rshmemi_device_state[RSHMEMI_DEVICE_STATE_BYTES];
}

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
    void *addr = nullptr;
    // Errors from earlier work would be reported by the call below as its own: name them here instead.
    cudaError_t pending = cudaGetLastError();
    if (pending != cudaSuccess) {
        fprintf(stderr, "rshmem: %s: a CUDA error was pending before it: %s (%s)\n", who,
                cudaGetErrorString(pending), cudaGetErrorName(pending));
    }
    if (!cuda_ok(cudaGetSymbolAddress(&addr, rshmemi_device_state), who,
                 "cudaGetSymbolAddress(rshmemi_device_state) (was the program built for this GPU's architecture, "
                 "with -rdc=true?)"))
        return 1;
    if (addr == nullptr) {
        fprintf(stderr, "rshmem: %s: the device state address is null\n", who);
        return 1;
    }
    if (rshmemi_register_device_state(addr, RSHMEMI_DEVICE_STATE_BYTES) != 0) {
        fprintf(stderr, "rshmem: %s: rshmemi_register_device_state(%p) failed (was rshmem_init called "
                        "first, with the CUDA backend?)\n", who, addr);
        return 1;
    }
    return 0;
}
