// Issue 22's device families on a GPU, through NVSHMEM's names: half and bfloat16 p / g / put / get,
// strided iput / iget at thread, warp and block scope, and a device AMO racing host AMOs on one word.
// Built by scripts/check-cuda-examples.sh (MODE=full links it into carry/ for the GPU machine) and run
// there with `rshmrun -np 2 device_families`; prints "PE n: device_families ok" when every check holds.
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdio.h>

#define N 64

struct Bufs {
    half *h;
    __nv_bfloat16 *b;
    int *s;
    int *t;
    long *ctr;
    int *errs;
};

__device__ void fail(int *errs, int line) {
    atomicAdd(errs, 1);
    printf("device_families: check at line %d failed\n", line);
}
#define DCHECK(c)                                \
    do {                                         \
        if (!(c)) fail(a.errs, __LINE__);        \
    } while (0)

// One block of 128 threads: puts to the next PE, then (after a barrier) checks what the previous PE put.
__global__ void families(Bufs a, int me, int n, int adds) {
    int next = (me + 1) % n, prev = (me + n - 1) % n, t = threadIdx.x;
    __shared__ int loc[N];
    __shared__ __nv_bfloat16 bl[4];
    if (t < N) loc[t] = me * 1000 + t;
    if (t < 4) bl[t] = __float2bfloat16(2.0f * t + me);
    __syncthreads();
    if (t == 0) {
        nvshmem_half_p(a.h, __float2half(1.5f + me), next);
        nvshmem_bfloat16_put(a.b, bl, 4, next);
        nvshmem_int_iput(a.s, loc, 3, 2, 8, next);  // thread scope: 8 elements, stride 2 -> stride 3
    }
    // warp scope: 10 elements at stride 1 -> stride 2 into t[0..]
    if (t < 32) nvshmemx_int_iput_warp(a.t, loc + 1, 2, 1, 10, next);
    // block scope: 16 elements at stride 3 -> stride 1 into t[32..]
    nvshmemx_int_iput_block(a.t + 32, loc, 1, 3, 16, next);
    // every thread adds to PE 0's counter while the host of every PE does too
    for (int i = 0; i < adds; i++) nvshmem_long_atomic_add(a.ctr, 1, 0);
    nvshmemx_barrier_all_block();
    if (t == 0) {
        DCHECK(__half2float(nvshmem_half_g(a.h, me)) == 1.5f + prev);
        DCHECK(__half2float(nvshmem_half_g(a.h, next)) == 1.5f + me);
        for (int i = 0; i < 4; i++) DCHECK(__bfloat162float(a.b[i]) == 2.0f * i + prev);
        __nv_bfloat16 back[4];
        nvshmem_bfloat16_get(back, a.b, 4, next);
        for (int i = 0; i < 4; i++) DCHECK(__bfloat162float(back[i]) == 2.0f * i + me);
        for (int i = 0; i < 8; i++) DCHECK(a.s[3 * i] == prev * 1000 + 2 * i);
        for (int i = 0; i < 10; i++) DCHECK(a.t[2 * i] == prev * 1000 + 1 + i);
        for (int i = 0; i < 16; i++) DCHECK(a.t[32 + i] == prev * 1000 + 3 * i);
    }
    // strided get at block scope: the next PE's s (my values) at stride 3 -> stride 1 here
    __shared__ int got[8];
    nvshmemx_int_iget_block(got, a.s, 1, 3, 8, next);
    if (t == 0)
        for (int i = 0; i < 8; i++) DCHECK(got[i] == me * 1000 + 2 * i);
}

int main() {
    nvshmem_init();
    int me = nvshmem_my_pe(), n = nvshmem_n_pes();
    const int threads = 128, adds = 20, host_adds = 500;
    Bufs a;
    a.h = (half *)nvshmem_calloc(1, sizeof(half) * 2);
    a.b = (__nv_bfloat16 *)nvshmem_calloc(4, sizeof(__nv_bfloat16));
    a.s = (int *)nvshmem_calloc(N, sizeof(int));
    a.t = (int *)nvshmem_calloc(N, sizeof(int));
    a.ctr = (long *)nvshmem_calloc(1, sizeof(long));
    a.errs = (int *)nvshmem_calloc(1, sizeof(int));
    nvshmem_barrier_all();
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    families<<<1, threads, 0, s>>>(a, me, n, adds);
    // host AMOs on the same word while the kernel's threads add to it
    long fetched_max = -1;
    for (int i = 0; i < host_adds; i++) {
        long old = nvshmem_long_atomic_fetch_add(a.ctr, 1, 0);
        if (old > fetched_max) fetched_max = old;
    }
    cudaError_t e = cudaStreamSynchronize(s);
    nvshmem_barrier_all();
    int errs = nvshmem_int_g(a.errs, me);
    long total = nvshmem_long_g(a.ctr, 0);
    long want = (long)n * (threads * adds + host_adds);
    int ok = e == cudaSuccess && errs == 0 && total == want && fetched_max < want;
    if (!ok)
        printf("PE %d: device_families FAILED (kernel %s, %d device check(s) failed, counter %ld of %ld)\n", me,
               cudaGetErrorString(e), errs, total, want);
    else
        printf("PE %d: device_families ok (half, bfloat16, iput/iget at 3 scopes, %ld AMOs host and device)\n", me,
               total);
    nvshmem_barrier_all();
    nvshmem_finalize();
    return ok ? 0 : 1;
}
