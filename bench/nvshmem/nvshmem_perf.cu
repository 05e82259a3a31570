// nvshmem_perf: the NVSHMEM side of rshmem's benchmark comparison. It measures the same cases as
// rshmem-bench (examples/src/bench/) with the same parameters and prints the same lines:
//
//   RESULT lib=nvshmem case=<case> scope=<scope> bytes=<n> grid=<G> threads=<T> value=<x> unit=<unit>
//
// (PE 0 prints them; grid/threads are the run's --grid/--threads; bench/compare.py pairs them with
// rshmem's). Everything is measured between PE 0 and PE 1, except the barriers and all_pairs_put_bw,
// which involve all PEs; further PEs otherwise only take part in the collectives (barriers, malloc) and
// wait in host barriers.
//
// Build (as ../shared/anchor/run.sh does, NV = the image's nvidia.nvshmem package directory):
//   nvcc -O2 -rdc=true -arch=sm_90 -I$NV/include nvshmem_perf.cu -o nvshmem_perf
//        -L$NV/lib -l:libnvshmem_host.so.3 -lnvshmem_device -lcuda
// Run: one process per PE with PE_RANK, PE_SIZE and UID_FILE set (PE 0 writes NVSHMEM's unique id
// to UID_FILE, the others read it), NVSHMEM_SYMMETRIC_SIZE >= 2 x max-bytes + min(max-bytes,
// PEs x 64 MiB) (the all-pairs receive buffer) + a few MiB, NVSHMEM_DISABLE_NVLS=1.
// bench/run-compare.sh does all of this.
//
// With PE_SIZE=1 (self mode) every one-sided case goes from PE 0 to itself, without ping-pongs: the
// libraries' call paths on one GPU, without the link.
//
// Options: --grid G (132) --threads T (512, a multiple of 32) --max-bytes N (256 MiB; k/m/g suffixes)
//          --quick (sizes x16 apart instead of x4, 3 repeats instead of 5)
//          --repeats R, --lat-iters N (10000): extras, not passed by run-compare.sh.
//          --sizes LIST: the bandwidth sweeps' sizes instead of the default series (comma-separated, k/m/g
//            suffixes, each <= max-bytes), e.g. --sizes 2k,8k,64k,512k.
//          --offset B: source and destination of the put_bw / get_bw sweeps start B bytes into their
//            buffers (a multiple of 8 below 4096): --offset 8 makes every transfer 8-byte but not 16-byte
//            aligned wherever the chunk is a multiple of 16. Its cases are named put_bw_off<B> / get_bw_off<B>.
//          --bw-only: the put_bw / get_bw sweeps (and their data checks) only; no other case.
//
// Method: every timed case runs once untimed (warm-up), then R times, timed with CUDA events
// (host cases: std::chrono); the value is the median. Source buffers hold hashed words written from
// the host, destinations are poisoned with 0xA5; after the put sweep PE 1 checks every word of the
// largest block put against what PE 0 wrote, after the get sweep PE 0 checks the largest block get.
//
// Cases (scope "-" and the bytes shown where no sweep applies):
//   put_bw / get_bw   GBps  scope thread|warp|block, bytes 8 x4 ... 128 MiB, 256 MiB, plus 64 KiB.
//                     G x T threads; units = G*T threads | G*ceil(T/32) warps | G blocks;
//                     chunk = bytes/units rounded down to a multiple of 8, or 8 on the first bytes/8
//                     units when that is < 8. Each unit puts (gets) its chunk at offset unit*chunk
//                     `iters` times (200 if bytes < 1 MiB, 50 if < 16 MiB, else 10) with
//                     nvshmem[x]_{put,get}mem_nbi[_warp|_block], then every thread calls
//                     nvshmem_quiet. value = bytes * iters / time.
//   p_lat      us  bytes=4  nvshmem_int_p + nvshmem_quiet, one thread, N iterations; time / N.
//   g_lat      us  bytes=4  acc += nvshmem_int_g(buf + ((i ^ (acc & 1)) & 4095)): the address
//                           changes every iteration and depends on the previous value.
//   put_lat    us  bytes=8  nvshmem_putmem(8 B from the thread's own memory) + nvshmem_quiet.
//   get_lat    us  bytes=8  nvshmem_getmem(8 B from buf + ((i + acc) & 1023) * 8), acc += value.
//   amo_fetch_add_lat  us bytes=4  acc += nvshmem_int_atomic_fetch_add(ctr, 1).
//   amo_cswap_lat      us bytes=4  acc += nvshmem_int_atomic_compare_swap(ctr, i, i + 1).
//   amo_rate   Mops bytes=8  G x T threads, 100 nvshmem_uint64_atomic_add each on their own word,
//                            nvshmem_quiet; value = G*T*100 / time.
//   pingpong   us  bytes=4  PE 0: int_p(flag, i) then int_wait_until(flag, EQ, i); PE 1 the other
//                           way round; value = time / N / 2 (half round trip).
//   put_signal_pingpong us bytes=8  the same with nvshmem_putmem_signal(8 B, sig, i, SIGNAL_SET)
//                           and nvshmem_signal_wait_until(sig, EQ, i).
//   barrier_all / sync_all  us bytes=0  all PEs, one thread, N device barriers; time / N.
//   all_pairs_put_bw / all_pairs_put_bw_total  GBps  scope block, bytes 64 KiB, 1 MiB, 16 MiB, 64 MiB
//                 (those <= max-bytes / PEs): every PE puts `bytes` to each of the other PEs at once
//                 (skipped when G < PEs - 1). Block b serves peer index pi = b % (PEs-1), peer
//                 (me + 1 + pi) % PEs, shared by ceil((G - pi) / (PEs-1)) blocks; block rank b / (PEs-1)
//                 puts chunk = bytes / blocks-of-its-peer rounded down to 16 bytes at rank * chunk of
//                 the source into the peer's receive buffer at me * bytes + rank * chunk,
//                 `iters` times (10 from 16 MiB on, else 20) with nvshmemx_putmem_nbi_block, then
//                 nvshmem_quiet. Each PE times its own launches (host barrier before each);
//                 per-PE value = (PEs-1) * bytes * iters / median time; PE 0 collects them and
//                 prints the minimum (all_pairs_put_bw) and the sum (all_pairs_put_bw_total).
//   host_barrier_all        us bytes=0  1000 host nvshmem_barrier_all per timed loop (50 warm-up).
//   host_put_bw   GBps bytes 256 KiB, 4 MiB, 64 MiB, 256 MiB: host nvshmem_putmem of device memory,
//                 iters 20 (5 from 64 MiB on), then nvshmem_quiet, wall clock.
//   stream_put_bw GBps same sizes: nvshmemx_putmem_on_stream x iters on a created stream between
//                 two events (nvshmemx_quiet_on_stream after the timed part).
//   init_s     s   bytes=0  wall clock of nvshmemx_init_attr on PE 0 (CUDA context made before).
//   malloc_us  us  bytes=1048576  median of 20 x (nvshmem_malloc(1 MiB), timed; nvshmem_free).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

static int g_pe = -1;  // PE_RANK before init, nvshmem_my_pe() after

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fflush(stdout);
  fprintf(stderr, "nvshmem_perf: PE %d: ", g_pe);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  fflush(stderr);
  va_end(ap);
  exit(1);
}

#define CK(x)                                                                                     \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) die("%s failed: %s (%s:%d)", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
  } while (0)
// After every kernel launch: launch errors (bad configuration, too many resources) show here.
#define CKL(what) CK_LAUNCH_(what, __LINE__)
#define CK_LAUNCH_(what, line)                                                                    \
  do {                                                                                            \
    cudaError_t e_ = cudaGetLastError();                                                          \
    if (e_ != cudaSuccess) die("launch of %s failed: %s (line %d)", what, cudaGetErrorString(e_), line); \
  } while (0)

enum { SC_THREAD = 0, SC_WARP = 1, SC_BLOCK = 2 };
static const char *const kScopeName[] = {"thread", "warp", "block"};

// Work split of a bandwidth case: `active` units move `chunk` bytes each, at offset unit * chunk.
struct Split {
  size_t chunk, active;
};
__host__ __device__ inline size_t units_of(int scope, size_t grid, size_t block) {
  return scope == SC_THREAD ? grid * block : scope == SC_WARP ? grid * ((block + 31) / 32) : grid;
}
__host__ __device__ inline Split split_of(size_t bytes, size_t units) {
  Split s{(bytes / units) & ~(size_t)7, units};
  if (s.chunk < 8) {
    s.chunk = 8;
    s.active = bytes / 8;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Kernels
template <int SCOPE, bool PUT>
__global__ void bw_kernel(char *dst, const char *src, size_t bytes, int iters, int peer) {
  size_t unit;
  if (SCOPE == SC_THREAD) unit = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  else if (SCOPE == SC_WARP) unit = (size_t)blockIdx.x * ((blockDim.x + 31) / 32) + threadIdx.x / 32;
  else unit = blockIdx.x;
  const Split s = split_of(bytes, units_of(SCOPE, gridDim.x, blockDim.x));
  if (unit < s.active) {  // uniform across a warp (warp scope) and a block (block scope)
    char *d = dst + unit * s.chunk;
    const char *sp = src + unit * s.chunk;
    for (int i = 0; i < iters; i++) {
      if (PUT) {
        if (SCOPE == SC_THREAD) nvshmem_putmem_nbi(d, sp, s.chunk, peer);
        else if (SCOPE == SC_WARP) nvshmemx_putmem_nbi_warp(d, sp, s.chunk, peer);
        else nvshmemx_putmem_nbi_block(d, sp, s.chunk, peer);
      } else {
        if (SCOPE == SC_THREAD) nvshmem_getmem_nbi(d, sp, s.chunk, peer);
        else if (SCOPE == SC_WARP) nvshmemx_getmem_nbi_warp(d, sp, s.chunk, peer);
        else nvshmemx_getmem_nbi_block(d, sp, s.chunk, peer);
      }
    }
  }
  nvshmem_quiet();
}

enum { L_P, L_G, L_PUT, L_GET, L_FADD, L_CSWAP };
// One-thread latency loops over `buf` (a zeroed symmetric buffer of at least 64 KiB + 8 bytes).
template <int KIND>
__global__ void lat_kernel(char *buf, int iters, int peer, unsigned long long *out) {
  int *ints = (int *)buf;
  unsigned long long acc = 0, local = 0;
  for (int i = 0; i < iters; i++) {
    if (KIND == L_P) {
      nvshmem_int_p(ints, i, peer);
      nvshmem_quiet();
    } else if (KIND == L_G) {
      acc += (unsigned long long)(long long)nvshmem_int_g(ints + (((unsigned long long)i ^ (acc & 1)) & 4095), peer);
    } else if (KIND == L_PUT) {
      nvshmem_putmem(buf + 65536, &local, 8, peer);
      nvshmem_quiet();
    } else if (KIND == L_GET) {
      nvshmem_getmem(&local, buf + (((unsigned long long)i + acc) & 1023) * 8, 8, peer);
      acc += local;
    } else if (KIND == L_FADD) {
      acc += (unsigned long long)(long long)nvshmem_int_atomic_fetch_add(ints + 8192, 1, peer);
    } else {
      acc += (unsigned long long)(long long)nvshmem_int_atomic_compare_swap(ints + 8192, i, i + 1, peer);
    }
  }
  *out = acc;
}

// Ping-pong between PE 0 and PE 1 (`me` is 0 or 1, `peer` the other); values 1 .. iters.
template <bool SIGNAL>
__device__ inline void pp_send(int *flag, char *data, uint64_t *sig, int i, int peer) {
  unsigned long long local = 0;
  if (SIGNAL) nvshmem_putmem_signal(data, &local, 8, sig, (uint64_t)i, NVSHMEM_SIGNAL_SET, peer);
  else nvshmem_int_p(flag, i, peer);
}
template <bool SIGNAL>
__device__ inline void pp_recv(int *flag, uint64_t *sig, int i) {
  if (SIGNAL) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, (uint64_t)i);
  else nvshmem_int_wait_until(flag, NVSHMEM_CMP_EQ, i);
}
template <bool SIGNAL>
__global__ void pingpong_kernel(int *flag, char *data, uint64_t *sig, int iters, int me, int peer) {
  for (int i = 1; i <= iters; i++) {
    if (me == 0) {
      pp_send<SIGNAL>(flag, data, sig, i, peer);
      pp_recv<SIGNAL>(flag, sig, i);
    } else {
      pp_recv<SIGNAL>(flag, sig, i);
      pp_send<SIGNAL>(flag, data, sig, i, peer);
    }
  }
}

__global__ void amo_rate_kernel(uint64_t *ctrs, int per, int peer) {
  const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = 0; i < per; i++) nvshmem_uint64_atomic_add(ctrs + t, 1, peer);
  nvshmem_quiet();
}

template <bool SYNC>
__global__ void barrier_kernel(int iters) {
  for (int i = 0; i < iters; i++) {
    if (SYNC) nvshmem_sync_all();
    else nvshmem_barrier_all();
  }
}

// All pairs: every PE puts `bytes` to every other PE at once. Blocks are dealt round-robin over the
// peers; sender `me` writes at offset me * bytes of the receiver's buffer (as rshmem's
// bench_all_pairs in examples/kernels/src/lib.rs). Needs gridDim.x >= n_pes - 1 >= 1.
__global__ void all_pairs_kernel(char *recv, const char *src, size_t bytes, int iters) {
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes();
  const unsigned peers = (unsigned)(n - 1);
  const unsigned b = blockIdx.x, g = gridDim.x;
  const unsigned pi = b % peers;
  const size_t count = (g - pi + peers - 1) / peers;  // blocks serving this peer
  const size_t rank = b / peers;                       // this block's index among them
  const size_t chunk = (bytes / count) & ~(size_t)15;
  const int peer = (me + 1 + (int)pi) % n;
  char *d = recv + (size_t)me * bytes + rank * chunk;
  const char *sp = src + rank * chunk;
  for (int i = 0; i < iters; i++) nvshmemx_putmem_nbi_block(d, sp, chunk, peer);
  nvshmem_quiet();
}

// Stores `v` at `dst` on PE `pe` (one thread).
__global__ void put_double_kernel(double *dst, double v, int pe) {
  nvshmem_double_p(dst, v, pe);
  nvshmem_quiet();
}

// Sets `flag` on every PE when this PE saw a failure (used so that all PEs stop together).
__global__ void raise_kernel(int *flag, int npes) {
  for (int pe = 0; pe < npes; pe++) nvshmem_int_p(flag, 1, pe);
  nvshmem_quiet();
}

// ---------------------------------------------------------------------------------------------
// Host side
struct Opt {
  int grid = 132, threads = 512, reps = 5, lat_iters = 10000;
  bool quick = false, bw_only = false;
  size_t max_bytes = 256ull << 20, offset = 0;
  std::vector<size_t> sizes;  // --sizes (empty: the default series)
};
static Opt g_o;
static cudaStream_t g_st;
static cudaEvent_t g_ev0, g_ev1;

static void usage_exit(const char *msg, const char *arg) {
  fprintf(stderr,
          "nvshmem_perf: %s%s%s\nusage: nvshmem_perf [--grid G] [--threads T] [--quick] [--max-bytes N]"
          " [--repeats R] [--lat-iters N] [--sizes N,N,...] [--offset B] [--bw-only]\n"
          "  (env: PE_RANK, PE_SIZE, UID_FILE)\n",
          msg, arg ? " " : "", arg ? arg : "");
  exit(2);
}

static unsigned long long parse_num(const char *opt, const char *s) {
  if (!s) usage_exit("missing value after", opt);
  char *end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) usage_exit("not a number:", s);
  std::string suf(end);
  if (suf == "k" || suf == "K" || suf == "KiB") v <<= 10;
  else if (suf == "m" || suf == "M" || suf == "MiB") v <<= 20;
  else if (suf == "g" || suf == "G" || suf == "GiB") v <<= 30;
  else if (!suf.empty()) usage_exit("bad number:", s);
  return v;
}

static void parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--grid") g_o.grid = (int)parse_num(argv[i], v), i++;
    else if (a == "--threads") g_o.threads = (int)parse_num(argv[i], v), i++;
    else if (a == "--max-bytes") g_o.max_bytes = parse_num(argv[i], v), i++;
    else if (a == "--repeats") g_o.reps = (int)parse_num(argv[i], v), i++;
    else if (a == "--lat-iters") g_o.lat_iters = (int)parse_num(argv[i], v), i++;
    else if (a == "--quick") g_o.quick = true, g_o.reps = 3;
    else if (a == "--offset") g_o.offset = parse_num(argv[i], v), i++;
    else if (a == "--bw-only") g_o.bw_only = true;
    else if (a == "--sizes") {
      if (!v) usage_exit("missing value after", argv[i]);
      std::string list = v, item;
      for (size_t at = 0; at <= list.size(); at++) {
        if (at == list.size() || list[at] == ',') {
          g_o.sizes.push_back(parse_num("--sizes", item.c_str()));
          item.clear();
        } else {
          item += list[at];
        }
      }
      i++;
    }
    else if (a == "-h" || a == "--help") usage_exit("", nullptr);
    else usage_exit("unknown option", argv[i]);
  }
  if (g_o.grid < 1 || g_o.grid > 65535) usage_exit("--grid must be 1..65535", nullptr);
  if (g_o.threads < 32 || g_o.threads > 1024 || g_o.threads % 32)
    usage_exit("--threads must be a multiple of 32 in 32..1024", nullptr);
  if (g_o.max_bytes < 8 || g_o.max_bytes % 8) usage_exit("--max-bytes must be a multiple of 8, >= 8", nullptr);
  if (g_o.reps < 1 || g_o.lat_iters < 1) usage_exit("--repeats and --lat-iters must be >= 1", nullptr);
  if (g_o.offset % 8 || g_o.offset >= 4096) usage_exit("--offset must be a multiple of 8 below 4096", nullptr);
  for (size_t b : g_o.sizes)
    if (b < 8 || b > g_o.max_bytes) usage_exit("--sizes: every size must be in 8 .. max-bytes", nullptr);
}

static void result(const char *cas, const char *scope, size_t bytes, double value, const char *unit) {
  if (g_pe != 0) return;
  printf("RESULT lib=nvshmem case=%s scope=%s bytes=%zu grid=%d threads=%d value=%.4f unit=%s\n", cas, scope,
         bytes, g_o.grid, g_o.threads, value, unit);
  fflush(stdout);
}

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Host barrier; this PE's stream is drained first (nvshmem_barrier_all does not wait for it).
static void hbar() {
  CK(cudaStreamSynchronize(g_st));
  nvshmem_barrier_all();
  CK(cudaGetLastError());
}

// One launch between two events on g_st; milliseconds.
template <class F>
static double timed_ms(F launch) {
  CK(cudaEventRecord(g_ev0, g_st));
  launch();
  CK(cudaEventRecord(g_ev1, g_st));
  CK(cudaEventSynchronize(g_ev1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, g_ev0, g_ev1));
  return ms;
}

// Warm-up launch, then the median of R timed launches (ms). Only the calling PE launches.
template <class F>
static double median_ms(F launch) {
  launch();
  CK(cudaStreamSynchronize(g_st));
  std::vector<double> v;
  for (int r = 0; r < g_o.reps; r++) v.push_back(timed_ms(launch));
  return median(v);
}

// Deterministic source words: PE `pe`, word index `i`.
static inline uint64_t word_of(int pe, uint64_t i) {
  uint64_t x = ((uint64_t)pe << 48) ^ i ^ 0x5EED5EED00000000ull;
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Every word of buf[0, covered) on this PE against PE `src_pe`'s source words from word `w0` on (the
// source buffer's word w0 + i is word_of(src_pe, w0 + i)); number of mismatches.
static size_t check_words(const char *buf, size_t covered, int src_pe, size_t w0, const char *what) {
  std::vector<uint64_t> got(covered / 8);
  CK(cudaMemcpy(got.data(), buf, covered / 8 * 8, cudaMemcpyDeviceToHost));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); i++)
    if (got[i] != word_of(src_pe, w0 + i) && bad++ == 0) first = i;
  if (bad)
    fprintf(stderr, "nvshmem_perf: PE %d: %s: %zu of %zu words wrong, first at byte %zu (0x%016llx, want 0x%016llx)\n",
            g_pe, what, bad, got.size(), first * 8, (unsigned long long)got[first],
            (unsigned long long)word_of(src_pe, w0 + first));
  else
    printf("# %s: all %zu words verified on PE %d\n", what, got.size(), g_pe);
  fflush(stdout);
  return bad;
}

// Collective: true on every PE when any PE passes bad = true.
static bool any_pe(bool bad, int *flag, int npes) {
  CK(cudaMemsetAsync(flag, 0, sizeof(int), g_st));
  hbar();
  if (bad) {
    raise_kernel<<<1, 1, 0, g_st>>>(flag, npes);
    CKL("raise_kernel");
  }
  hbar();
  int v = 0;
  CK(cudaMemcpy(&v, flag, sizeof v, cudaMemcpyDeviceToHost));
  return v != 0;
}

template <int SCOPE, bool PUT>
static void launch_bw(char *dst, const char *src, size_t bytes, int iters, int peer) {
  bw_kernel<SCOPE, PUT><<<g_o.grid, g_o.threads, 0, g_st>>>(dst, src, bytes, iters, peer);
  CKL(PUT ? "put bandwidth kernel" : "get bandwidth kernel");
}
static void launch_bw(int scope, bool put, char *dst, const char *src, size_t bytes, int iters, int peer) {
  if (put) {
    if (scope == SC_THREAD) launch_bw<SC_THREAD, true>(dst, src, bytes, iters, peer);
    else if (scope == SC_WARP) launch_bw<SC_WARP, true>(dst, src, bytes, iters, peer);
    else launch_bw<SC_BLOCK, true>(dst, src, bytes, iters, peer);
  } else {
    if (scope == SC_THREAD) launch_bw<SC_THREAD, false>(dst, src, bytes, iters, peer);
    else if (scope == SC_WARP) launch_bw<SC_WARP, false>(dst, src, bytes, iters, peer);
    else launch_bw<SC_BLOCK, false>(dst, src, bytes, iters, peer);
  }
}

template <int KIND>
static double lat_us(char *buf, int peer, unsigned long long *out) {
  const int n = g_o.lat_iters;
  double ms = median_ms([&] {
    lat_kernel<KIND><<<1, 1, 0, g_st>>>(buf, n, peer, out);
    CKL("latency kernel");
  });
  return ms * 1e3 / n;
}

static char *sym_alloc(size_t bytes, const char *what) {
  void *p = nvshmem_malloc(bytes);
  if (!p) die("nvshmem_malloc(%zu) for %s returned NULL (NVSHMEM_SYMMETRIC_SIZE too small?)", bytes, what);
  return (char *)p;
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  const char *rank_s = getenv("PE_RANK"), *size_s = getenv("PE_SIZE"), *uidf = getenv("UID_FILE");
  if (!rank_s || !size_s || !uidf) usage_exit("PE_RANK, PE_SIZE and UID_FILE must be set", nullptr);
  const int rank = atoi(rank_s), size = atoi(size_s);
  g_pe = rank;
  if (size < 1 || rank < 0 || rank >= size) die("needs PE_SIZE >= 1 and 0 <= PE_RANK < PE_SIZE (got %d of %d)", rank, size);

  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 1) die("no CUDA device");
  const double tc0 = now_s();
  CK(cudaSetDevice(rank % ndev));
  CK(cudaFree(0));  // make the context now, so that init_s is NVSHMEM's own setup
  const double ctx_s = now_s() - tc0;

  // Unique-id bootstrap through a file, as the anchor does.
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (rank == 0) {
    if (nvshmemx_get_uniqueid(&id) != 0) die("nvshmemx_get_uniqueid failed");
    std::string tmp = std::string(uidf) + ".tmp";
    FILE *f = fopen(tmp.c_str(), "wb");
    if (!f) die("cannot write %s", tmp.c_str());
    if (fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0) die("cannot write %s", tmp.c_str());
    if (rename(tmp.c_str(), uidf) != 0) die("cannot rename %s to %s", tmp.c_str(), uidf);
  } else {
    FILE *f = nullptr;
    const double t_wait = now_s();
    while (!(f = fopen(uidf, "rb"))) {
      if (now_s() - t_wait > 120) die("no unique id in %s after 120 s", uidf);
      usleep(10000);
    }
    if (fread(&id, sizeof id, 1, f) != 1) die("short read of %s", uidf);
    fclose(f);
  }
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  if (nvshmemx_set_attr_uniqueid_args(rank, size, &id, &attr) != 0) die("nvshmemx_set_attr_uniqueid_args failed");
  const double t0 = now_s();
  const int st = nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
  const double init_s = now_s() - t0;
  if (st != 0) die("nvshmemx_init_attr failed with %d", st);
  const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
  g_pe = me;
  // One PE: the self mode, every one-sided case towards PE 0 itself (the library's call path without
  // the link: a single-GPU measurement of each library's per-call costs); no ping-pongs.
  const bool self = npes == 1;
  const int peer = self ? 0 : me == 0 ? 1 : me == 1 ? 0 : -1;  // PEs >= 2 only join collectives

  CK(cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking));
  CK(cudaEventCreate(&g_ev0));
  CK(cudaEventCreate(&g_ev1));
  if (me == 0) {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, rank % ndev));
    int ver = 0, vmaj = 0, vmin = 0, vpatch = 0;
    CK(cudaRuntimeGetVersion(&ver));
    nvshmemx_vendor_get_version_info(&vmaj, &vmin, &vpatch);
    printf("# nvshmem_perf: NVSHMEM %d.%d.%d, %d PEs, %s, CUDA runtime %d, grid %d x %d threads, median of %d%s,"
           " max %zu bytes, latency iterations %d, CUDA context %.3f s before init, bandwidth offset %zu%s%s\n",
           vmaj, vmin, vpatch, npes, prop.name, ver, g_o.grid, g_o.threads, g_o.reps, g_o.quick ? " (quick)" : "",
           g_o.max_bytes, g_o.lat_iters, ctx_s, g_o.offset, g_o.sizes.empty() ? "" : ", sizes given",
           g_o.bw_only ? ", bandwidth only" : "");
    fflush(stdout);
  }
  result("init_s", "-", 0, init_s, "s");

  // malloc_us: collective nvshmem_malloc(1 MiB) + nvshmem_free; the malloc is timed.
  {
    nvshmem_free(sym_alloc(1 << 20, "malloc warm-up"));
    std::vector<double> v;
    for (int i = 0; i < 20; i++) {
      const double t = now_s();
      char *p = sym_alloc(1 << 20, "malloc_us");
      v.push_back((now_s() - t) * 1e6);
      nvshmem_free(p);
    }
    result("malloc_us", "-", 1 << 20, median(v), "us");
  }

  const size_t maxb = g_o.max_bytes;
  const size_t lat_bytes = std::max<size_t>(1 << 20, (size_t)g_o.grid * g_o.threads * 8);
  const size_t off = g_o.offset;  // --offset: where the bandwidth sweeps' transfers start in sbuf / rbuf
  char *sbuf = sym_alloc(maxb + off, "source buffer");
  char *rbuf = sym_alloc(maxb + off, "destination buffer");
  char *lat = sym_alloc(lat_bytes, "latency buffer");
  int *flag = (int *)sym_alloc(sizeof(int), "status flag");
  unsigned long long *out = nullptr;
  CK(cudaMalloc(&out, sizeof *out));
  {
    std::vector<uint64_t> h((maxb + off) / 8);
    for (size_t i = 0; i < h.size(); i++) h[i] = word_of(me, i);
    CK(cudaMemcpy(sbuf, h.data(), maxb + off, cudaMemcpyHostToDevice));
  }
  CK(cudaMemset(rbuf, 0xA5, maxb + off));
  CK(cudaMemset(lat, 0, lat_bytes));
  CK(cudaDeviceSynchronize());
  hbar();

  // Bandwidth sweeps: 8 B x4 (x16 with --quick) up to 128 MiB, 256 MiB, and 64 KiB (a target size).
  // --sizes replaces the series.
  std::vector<size_t> sizes = g_o.sizes;
  if (sizes.empty()) {
    for (size_t b = 8; b <= maxb && b <= (128ull << 20); b *= g_o.quick ? 16 : 4) sizes.push_back(b);
    if (maxb >= (256ull << 20)) sizes.push_back(256ull << 20);
    if (maxb >= (64u << 10) && std::find(sizes.begin(), sizes.end(), (size_t)64 << 10) == sizes.end())
      sizes.push_back(64 << 10);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  const std::string suffix = off ? "_off" + std::to_string(off) : "";
  const std::string put_case = "put_bw" + suffix, get_case = "get_bw" + suffix;
  const size_t largest = sizes.back();
  for (int dir = 0; dir < 2; dir++) {
    const bool put = dir == 0;
    for (int scope = SC_THREAD; scope <= SC_BLOCK; scope++) {
      if (me == 0)
        for (size_t bytes : sizes) {
          const int iters = bytes < (1u << 20) ? 200 : bytes < (16u << 20) ? 50 : 10;
          const double ms = median_ms([&] { launch_bw(scope, put, rbuf + off, sbuf + off, bytes, iters, peer); });
          result((put ? put_case : get_case).c_str(), kScopeName[scope], bytes, (double)bytes * iters / ms / 1e6, "GBps");
        }
      hbar();
    }
    // The last launch was the block-scope transfer of `largest` bytes: check what arrived.
    const Split s = split_of(largest, units_of(SC_BLOCK, g_o.grid, g_o.threads));
    const size_t covered = s.chunk * s.active;
    char what[128];
    snprintf(what, sizeof what, "%s of %zu bytes (block scope, %zu bytes moved, offset %zu)", put ? "put" : "get", largest,
             covered, off);
    size_t bad = 0;
    if (put && me == peer && (self || me == 1)) bad = check_words(rbuf + off, covered, 0, off / 8, what);
    if (!put && me == 0) bad = check_words(rbuf + off, covered, peer, off / 8, what);
    if (any_pe(bad != 0, flag, npes)) die("%s: data check failed (see PE %d's message)", what, put ? 1 : 0);
  }

  // --bw-only: nothing after the sweeps (every PE has the same options, so the collectives below match).
  // One-thread latencies and the atomic rate (PE 0 towards PE 1).
  if (me == 0 && !g_o.bw_only) {
    result("p_lat", "-", 4, lat_us<L_P>(lat, peer, out), "us");
    result("g_lat", "-", 4, lat_us<L_G>(lat, peer, out), "us");
    result("put_lat", "-", 8, lat_us<L_PUT>(lat, peer, out), "us");
    result("get_lat", "-", 8, lat_us<L_GET>(lat, peer, out), "us");
    result("amo_fetch_add_lat", "-", 4, lat_us<L_FADD>(lat, peer, out), "us");
    result("amo_cswap_lat", "-", 4, lat_us<L_CSWAP>(lat, peer, out), "us");
    const int per = 100;
    const double ms = median_ms([&] {
      amo_rate_kernel<<<g_o.grid, g_o.threads, 0, g_st>>>((uint64_t *)lat, per, peer);
      CKL("amo_rate_kernel");
    });
    result("amo_rate", "-", 8, (double)g_o.grid * g_o.threads * per / ms / 1e3, "Mops");
  }
  hbar();

  // Ping-pongs between PE 0 and PE 1: flag at lat, data at lat + 1024, signal at lat + 2048.
  for (int kind = 0; kind < 2 && !self && !g_o.bw_only; kind++) {
    const int n = g_o.lat_iters;
    auto once = [&](int iters) {
      CK(cudaMemsetAsync(lat, 0, 4096, g_st));
      hbar();
      double ms = 0;
      if (me < 2)
        ms = timed_ms([&] {
          if (kind == 0) pingpong_kernel<false><<<1, 1, 0, g_st>>>((int *)lat, lat + 1024, (uint64_t *)(lat + 2048), iters, me, peer);
          else pingpong_kernel<true><<<1, 1, 0, g_st>>>((int *)lat, lat + 1024, (uint64_t *)(lat + 2048), iters, me, peer);
          CKL("pingpong_kernel");
        });
      hbar();
      return ms;
    };
    once(std::min(n, 1000));  // warm-up
    std::vector<double> v;
    for (int r = 0; r < g_o.reps; r++) v.push_back(once(n));
    result(kind == 0 ? "pingpong" : "put_signal_pingpong", "-", kind == 0 ? 4 : 8, median(v) * 1e3 / n / 2, "us");
  }

  // Device barriers, all PEs.
  for (int kind = 0; kind < 2 && !self && !g_o.bw_only; kind++) {
    const int n = g_o.lat_iters;
    auto launch = [&](int iters) {
      if (kind == 0) barrier_kernel<false><<<1, 1, 0, g_st>>>(iters);
      else barrier_kernel<true><<<1, 1, 0, g_st>>>(iters);
      CKL("barrier_kernel");
    };
    launch(10);  // warm-up
    std::vector<double> v;
    for (int r = 0; r < g_o.reps; r++) {
      hbar();
      v.push_back(timed_ms([&] { launch(n); }));
    }
    hbar();
    result(kind == 0 ? "barrier_all" : "sync_all", "-", 0, median(v) * 1e3 / n, "us");
  }

  // All pairs: every PE puts to every other PE at once (all PEs; 4+ PEs is where this matters).
  if (!g_o.bw_only) {
    const size_t np = (size_t)npes, top = (size_t)64 << 20;
    char *recv = sym_alloc(std::max<size_t>(np * std::min(top, maxb / np), 16), "all-pairs receive buffer");
    double *times = (double *)sym_alloc(np * sizeof(double), "all-pairs times");
    CK(cudaMemset(times, 0, np * sizeof(double)));
    CK(cudaDeviceSynchronize());
    for (size_t bytes : {(size_t)64 << 10, (size_t)1 << 20, (size_t)16 << 20, (size_t)64 << 20}) {
      if (bytes > maxb / np || bytes > top) continue;
      const int iters = bytes >= (16u << 20) ? 10 : 20;
      if (npes < 2 || g_o.grid < npes - 1) break;
      auto launch = [&] {
        all_pairs_kernel<<<g_o.grid, g_o.threads, 0, g_st>>>(recv, sbuf, bytes, iters);
        CKL("all_pairs_kernel");
      };
      hbar();
      launch();  // warm-up
      std::vector<double> v;
      for (int r = 0; r < g_o.reps; r++) {
        hbar();
        v.push_back(timed_ms(launch));
      }
      const double mine = median(v);  // ms
      put_double_kernel<<<1, 1, 0, g_st>>>(times + me, mine, 0);
      CKL("put_double_kernel");
      hbar();
      if (me == 0) {
        std::vector<double> t(np);
        CK(cudaMemcpy(t.data(), times, np * sizeof(double), cudaMemcpyDeviceToHost));
        double lo = 0, sum = 0;
        for (size_t i = 0; i < np; i++) {
          const double bw = (double)(np - 1) * bytes * iters / t[i] / 1e6;
          lo = i == 0 ? bw : std::min(lo, bw);
          sum += bw;
        }
        result("all_pairs_put_bw", "block", bytes, lo, "GBps");
        result("all_pairs_put_bw_total", "block", bytes, sum, "GBps");
      }
      hbar();
    }
    hbar();
    nvshmem_free(times);
    nvshmem_free(recv);
  }

  // Host barrier, all PEs.
  if (!g_o.bw_only) {
    for (int i = 0; i < 50; i++) nvshmem_barrier_all();
    const int n = 1000;
    std::vector<double> v;
    for (int r = 0; r < g_o.reps; r++) {
      const double t = now_s();
      for (int i = 0; i < n; i++) nvshmem_barrier_all();
      v.push_back((now_s() - t) * 1e6 / n);
    }
    CK(cudaGetLastError());
    result("host_barrier_all", "-", 0, median(v), "us");
  }

  // Host-initiated and on-stream puts from PE 0's symmetric source buffer.
  if (me == 0 && !g_o.bw_only) {
    for (size_t bytes : {(size_t)256 << 10, (size_t)4 << 20, (size_t)64 << 20, (size_t)256 << 20}) {
      if (bytes > maxb) continue;
      const int iters = bytes >= (64u << 20) ? 5 : 20;
      nvshmem_putmem(rbuf, sbuf, bytes, peer);  // warm-up
      nvshmem_quiet();
      std::vector<double> v;
      for (int r = 0; r < g_o.reps; r++) {
        const double t = now_s();
        for (int i = 0; i < iters; i++) nvshmem_putmem(rbuf, sbuf, bytes, peer);
        nvshmem_quiet();
        v.push_back(now_s() - t);
      }
      CK(cudaGetLastError());
      result("host_put_bw", "-", bytes, (double)bytes * iters / median(v) / 1e9, "GBps");

      const double ms = median_ms([&] {  // (median_ms runs one untimed round first)
        for (int i = 0; i < iters; i++) nvshmemx_putmem_on_stream(rbuf, sbuf, bytes, peer, g_st);
        CK(cudaGetLastError());
      });
      nvshmemx_quiet_on_stream(g_st);
      CK(cudaStreamSynchronize(g_st));
      result("stream_put_bw", "-", bytes, (double)bytes * iters / ms / 1e6, "GBps");
    }
  }
  hbar();

  CK(cudaFree(out));
  nvshmem_free(flag);
  nvshmem_free(lat);
  nvshmem_free(rbuf);
  nvshmem_free(sbuf);
  CK(cudaEventDestroy(g_ev0));
  CK(cudaEventDestroy(g_ev1));
  CK(cudaStreamDestroy(g_st));
  nvshmem_finalize();
  if (me == 0) printf("# nvshmem_perf: done\n");
  return 0;
}
