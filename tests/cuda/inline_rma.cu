// The CUDA C++ header's inline put and get (device/include/rshmem_inline.h) at every alignment: thread,
// warp and block scope, put and get, sizes from 1 byte to 4 KiB + 4, pointers at offsets that allow
// 16-, 8-, 4-, 2- and 1-byte units. Each PE puts into the next PE and gets from it; every byte of every
// transfer is checked, and the byte before and after it must still hold the poison (nothing written
// outside the range). Built by scripts/check-cuda-examples.sh (MODE=full links it into carry/ for the
// GPU machine) and run there with `rshmrun -np 2 inline_rma`; prints "PE n: inline_rma ok" when every
// check holds.
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdio.h>

#define REGION 8192                // bytes of the destination per case
#define SRC_BYTES 8192             // bytes of each PE's source pattern
#define POISON 0xA5
#define THREADS 128

__constant__ int kSizes[] = {1, 2, 3, 4, 6, 8, 12, 20, 36, 100, 1000, 4100};
// (destination offset, source offset) within their buffers
__constant__ int kOffsets[][2] = {{0, 0}, {1, 3}, {2, 2}, {4, 0}, {6, 2}, {8, 12}, {16, 16}, {3, 3}};
#define NSIZES 12
#define NOFFS 8
#define NCASES (NSIZES * NOFFS)

__host__ __device__ inline unsigned char pattern(int pe, int i) { return (unsigned char)(pe * 37 + i * 7 + 1); }

struct Bufs {
    unsigned char *src;  // symmetric: SRC_BYTES of this PE's pattern
    unsigned char *put;  // symmetric: 3 scopes x NCASES regions, written by the previous PE
    unsigned char *got;  // symmetric: 3 scopes x NCASES regions, filled here by gets from the next PE
    int *errs;           // device memory: failures seen by this PE
};

__device__ void check_range(const Bufs &a, const unsigned char *base, int off, int n, int from, int src_off, int what) {
    for (int i = (int)threadIdx.x - 1; i <= n; i += (int)blockDim.x) {
        unsigned char want = (i < 0 || i == n) ? POISON : pattern(from, src_off + i);
        unsigned char got = base[off + i];
        if (got != want) {
            if (atomicAdd(a.errs, 1) < 8)
                printf("inline_rma: case %d (scope %d, %s): byte %d of %d is %d, expected %d\n", what % NCASES,
                       what / NCASES % 3, what / (3 * NCASES) ? "get" : "put", i, n, got, want);
        }
    }
}

__global__ void rma(Bufs a, int me, int npes) {
    const int next = (me + 1) % npes, prev = (me + npes - 1) % npes, t = threadIdx.x;
    for (int scope = 0; scope < 3; scope++) {
        for (int c = 0; c < NCASES; c++) {
            const int n = kSizes[c % NSIZES], doff = kOffsets[c / NSIZES][0], soff = kOffsets[c / NSIZES][1];
            unsigned char *pd = a.put + (size_t)(scope * NCASES + c) * REGION + 8 + doff;
            unsigned char *gd = a.got + (size_t)(scope * NCASES + c) * REGION + 8 + doff;
            const unsigned char *ps = a.src + soff;
            if (scope == 0 && t == 0) {
                nvshmem_putmem(pd, ps, n, next);
                nvshmem_getmem(gd, ps, n, next);
            } else if (scope == 1 && t < 32) {
                nvshmemx_putmem_warp(pd, ps, n, next);
                nvshmemx_getmem_warp(gd, ps, n, next);
            } else if (scope == 2) {
                nvshmemx_putmem_block(pd, ps, n, next);
                nvshmemx_getmem_block(gd, ps, n, next);
            }
            __syncthreads();
        }
    }
    // Every PE's puts are complete and visible before anyone checks its put regions.
    nvshmemx_barrier_all_block();
    for (int scope = 0; scope < 3; scope++) {
        for (int c = 0; c < NCASES; c++) {
            const int n = kSizes[c % NSIZES], doff = kOffsets[c / NSIZES][0], soff = kOffsets[c / NSIZES][1];
            const size_t region = (size_t)(scope * NCASES + c) * REGION + 8;
            check_range(a, a.put + region, doff, n, prev, soff, scope * NCASES + c);
            check_range(a, a.got + region, doff, n, next, soff, 3 * NCASES + scope * NCASES + c);
        }
    }
}

#define CK(x)                                                                            \
    do {                                                                                 \
        cudaError_t e = (x);                                                             \
        if (e != cudaSuccess) {                                                          \
            fprintf(stderr, "inline_rma: %s: %s\n", #x, cudaGetErrorString(e));          \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

int main() {
    nvshmem_init();
    const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
    const size_t regions = (size_t)3 * NCASES * REGION;
    Bufs a;
    a.src = (unsigned char *)nvshmem_malloc(SRC_BYTES);
    a.put = (unsigned char *)nvshmem_malloc(regions);
    a.got = (unsigned char *)nvshmem_malloc(regions);
    if (!a.src || !a.put || !a.got) {
        fprintf(stderr, "inline_rma: nvshmem_malloc failed\n");
        return 1;
    }
    unsigned char host[SRC_BYTES];
    for (int i = 0; i < SRC_BYTES; i++) host[i] = pattern(me, i);
    CK(cudaMemcpy(a.src, host, SRC_BYTES, cudaMemcpyHostToDevice));
    CK(cudaMemset(a.put, POISON, regions));
    CK(cudaMemset(a.got, POISON, regions));
    CK(cudaMalloc(&a.errs, sizeof(int)));
    CK(cudaMemset(a.errs, 0, sizeof(int)));
    CK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    rma<<<1, THREADS>>>(a, me, npes);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    int errs = 0;
    CK(cudaMemcpy(&errs, a.errs, sizeof(int), cudaMemcpyDeviceToHost));
    nvshmem_barrier_all();
    if (errs) {
        printf("PE %d: inline_rma FAILED: %d bytes wrong\n", me, errs);
    } else {
        printf("PE %d: inline_rma ok (%d transfers of 1 B to 4 KiB at 8 alignments, put and get, 3 scopes)\n", me,
               2 * 3 * NCASES);
    }
    nvshmem_free(a.got);
    nvshmem_free(a.put);
    nvshmem_free(a.src);
    CK(cudaFree(a.errs));
    nvshmem_finalize();
    return errs ? 1 : 0;
}
