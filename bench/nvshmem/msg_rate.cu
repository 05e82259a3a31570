// msg_rate: issue 19's message-rate and every-thread-quiet measurements through the NVSHMEM API only,
// so that the same source builds against rshmem's nvshmem.h and against NVSHMEM 3.4.5. The Rust
// twins are `rshmem-bench --cases rate,quiet` (examples/src/bench/); the cases and lines are the same:
//
//   RESULT lib=<rshmem|nvshmem> case=<case> scope=<scope> bytes=<n> grid=<G> threads=<T> value=<x> unit=<u> route=<p2p|remote>
//
// Cases (PE 0 towards its peer; every other PE only poisons, checks and meets in barriers):
//   msg_rate_put  Mops  thread 0 of each of G blocks (launched with one thread per block; G in
//                 --rate-grids, default 1,32,132) issues `per` = --rate-ops / G nvshmem_putmem_nbi of
//                 `bytes` (--rate-sizes, default 8,64,512,4k) back to back, then one nvshmem_quiet.
//                 Put i of block b writes at offset (b * slots + i % slots) * bytes from the same
//                 offset of the source (slots = min(64, max-bytes / (G * bytes))).
//                 value = G * per / time (10^6 operations per second), the quiet included.
//   msg_rate_p    Mops  the same with nvshmem_longlong_p of the 8 bytes at that offset (bytes=8).
//   quiet_bw_all / quiet_bw_block / quiet_bw_one  GBps  bytes = 1 MiB, 16 MiB, 256 MiB (--quiet-sizes)
//                 in all: --quiet-grid (32) blocks of --quiet-threads (1024); each block makes
//                 --quiet-calls (100) nvshmemx_putmem_nbi_block calls of bytes / (grid * calls) rounded
//                 down to 8 (block b's call c at offset (b * calls + c) * chunk), then
//                 _all:   every thread calls nvshmem_quiet (legal, and common in ported code);
//                 _block: thread 0 of every block quiets after __syncthreads;
//                 _one:   thread 0 of the block that arrives last (an atomic counter, as NVSHMEM's own
//                         shmem_put_bw does) quiets: one quiet for the grid.
//                 value = the bytes moved / time.
// Method: one untimed launch (warm-up), then --reps (5) launches timed with CUDA events; the median.
// Source buffers hold hashed 8-byte words (hash of PE and word index, written by a kernel); before
// every case each PE poisons its destination (0xA5) and after it the peer checks every word the case
// wrote against PE 0's hash, on the GPU, and stops the run on the first difference.
//
// Build: against rshmem (scripts/gpu.sh prepare does this; D = the device library's directory)
//   nvcc -rdc=true -arch=sm_90 -O2 -I device/include bench/nvshmem/msg_rate.cu D/librshmem_device.a
//        -L D -lrshmem -o msg_rate
// and against NVSHMEM (NV = the nvidia.nvshmem package directory)
//   nvcc -rdc=true -arch=sm_90 -O2 -I$NV/include bench/nvshmem/msg_rate.cu -o msg_rate_nvshmem
//        -L$NV/lib -l:libnvshmem_host.so.3 -lnvshmem_device -lcuda
// Run: `rshmrun [--nodes 2] -np 2 msg_rate [options]` (nvshmem_init), or, without a launcher, one
// process per PE with PE_RANK, PE_SIZE and UID_FILE set (PE 0 writes the unique id to UID_FILE, the
// others read it: nvshmemx_init_attr with a unique id, as bench/nvshmem/nvshmem_perf.cu does).
// The symmetric heap needs 2 x max-bytes + 1 MiB (max-bytes: the largest quiet size, at least 34 MiB).
// Options: --cases rate,quiet  --rate-grids LIST  --rate-sizes LIST  --rate-ops N  --quiet-sizes LIST
//          --quiet-grid G  --quiet-threads T  --quiet-calls N  --reps R  --peer P
//          (sizes take k/m/g suffixes; lists are comma-separated).
#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

static int g_pe = -1;

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fflush(stdout);
  fprintf(stderr, "msg_rate: PE %d: ", g_pe);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  fflush(stderr);
  va_end(ap);
  exit(1);
}

#define CK(x)                                                                                              \
  do {                                                                                                     \
    cudaError_t e_ = (x);                                                                                  \
    if (e_ != cudaSuccess) die("%s failed: %s (%s:%d)", #x, cudaGetErrorString(e_), __FILE__, __LINE__);  \
  } while (0)
#define CKL(what)                                                                                          \
  do {                                                                                                     \
    cudaError_t e_ = cudaGetLastError();                                                                   \
    if (e_ != cudaSuccess) die("launch of %s failed: %s (line %d)", what, cudaGetErrorString(e_), __LINE__); \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Data: word j of PE p's source is hash(p, j).
__host__ __device__ inline uint64_t word_of(int pe, uint64_t j) {
  uint64_t x = ((uint64_t)pe << 48) ^ j ^ 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void fill_kernel(uint64_t *buf, size_t words, int pe) {
  for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < words; j += (size_t)gridDim.x * blockDim.x)
    buf[j] = word_of(pe, j);
}

// Checks `used` slots of `n` bytes in each of `grid` regions of `slots` slots of `stride` bytes: every
// word must be PE 0's. bad[0] counts wrong words, bad[1] holds the smallest wrong byte offset.
__global__ void check_kernel(const uint64_t *buf, uint64_t grid, uint64_t slots, uint64_t used, uint64_t stride,
                             uint64_t n, unsigned long long *bad) {
  const uint64_t per_slot = n / 8, total = grid * used * per_slot;
  for (uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; t < total; t += (uint64_t)gridDim.x * blockDim.x) {
    const uint64_t w = t % per_slot, k = (t / per_slot) % used, b = t / per_slot / used;
    const uint64_t off = (b * slots + k) * stride + 8 * w;
    if (buf[off / 8] != word_of(0, off / 8)) {
      atomicAdd(&bad[0], 1ull);
      atomicMin(&bad[1], (unsigned long long)off);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The measured kernels.
// kind 0: nvshmem_putmem_nbi of `bytes`; kind 1: nvshmem_longlong_p of the 8 bytes at the offset.
__global__ void rate_kernel(char *dst, const char *src, size_t bytes, long per, int peer, int kind, long slots) {
  if (threadIdx.x != 0) return;
  const long base = (long)blockIdx.x * slots;
  long slot = 0;
  for (long i = 0; i < per; i++) {
    const size_t off = (size_t)(base + slot) * bytes;
    if (kind == 0)
      nvshmem_putmem_nbi(dst + off, src + off, bytes, peer);
    else
      nvshmem_longlong_p((long long *)(dst + off), *(const long long *)(src + off), peer);
    if (++slot == slots) slot = 0;
  }
  nvshmem_quiet();
}

// mode 0: every thread quiets; 1: thread 0 of each block; 2: thread 0 of the last block to arrive.
__global__ void quiet_kernel(char *dst, const char *src, size_t chunk, int calls, int peer, int mode,
                             unsigned int *arrivals) {
  for (int c = 0; c < calls; c++) {
    const size_t off = ((size_t)blockIdx.x * calls + c) * chunk;
    nvshmemx_putmem_nbi_block(dst + off, src + off, chunk, peer);
  }
  if (mode == 0) {
    nvshmem_quiet();
    return;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (mode == 1) {
    nvshmem_quiet();
    return;
  }
  __threadfence_system();
  const unsigned int before = atomicAdd(arrivals, 1u);
  if (before % gridDim.x == gridDim.x - 1) {
    __threadfence_system();
    nvshmem_quiet();
  }
}

// ---------------------------------------------------------------------------------------------
// Options.
static size_t parse_size(const char *s) {
  char *end = nullptr;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) die("%s is not a byte count", s);
  switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
  }
  if (*end) die("%s is not a byte count (e.g. 4096, 64k, 256m)", s);
  return (size_t)v;
}
static std::vector<size_t> parse_list(const char *s) {
  std::vector<size_t> v;
  std::string t(s);
  size_t i = 0;
  while (i <= t.size()) {
    size_t j = t.find(',', i);
    if (j == std::string::npos) j = t.size();
    if (j > i) v.push_back(parse_size(t.substr(i, j - i).c_str()));
    i = j + 1;
  }
  if (v.empty()) die("empty list '%s'", s);
  return v;
}

struct Opts {
  bool rate = true, quiet = true;
  std::vector<size_t> rate_grids{1, 32, 132}, rate_sizes{8, 64, 512, 4096}, quiet_sizes{1 << 20, 16 << 20, 256 << 20};
  long rate_ops = 20000;
  int quiet_grid = 32, quiet_threads = 1024, quiet_calls = 100, reps = 5, peer = -1;
};

static Opts parse_args(int argc, char **argv) {
  Opts o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> const char * {
      if (i + 1 >= argc) die("%s needs a value", a.c_str());
      return argv[++i];
    };
    if (a == "--cases") {
      std::string c = val();
      o.rate = c.find("rate") != std::string::npos;
      o.quiet = c.find("quiet") != std::string::npos;
      if (!o.rate && !o.quiet) die("--cases: rate, quiet or both, not '%s'", c.c_str());
    } else if (a == "--rate-grids") o.rate_grids = parse_list(val());
    else if (a == "--rate-sizes") o.rate_sizes = parse_list(val());
    else if (a == "--rate-ops") o.rate_ops = (long)parse_size(val());
    else if (a == "--quiet-sizes") o.quiet_sizes = parse_list(val());
    else if (a == "--quiet-grid") o.quiet_grid = (int)parse_size(val());
    else if (a == "--quiet-threads") o.quiet_threads = (int)parse_size(val());
    else if (a == "--quiet-calls") o.quiet_calls = (int)parse_size(val());
    else if (a == "--reps") o.reps = (int)parse_size(val());
    else if (a == "--peer") o.peer = (int)parse_size(val());
    else die("unknown option %s (see the head of bench/nvshmem/msg_rate.cu)", a.c_str());
  }
  for (size_t b : o.rate_sizes)
    if (b == 0 || b % 8) die("--rate-sizes: %zu is not a positive multiple of 8", b);
  if (o.quiet_grid < 1 || o.quiet_threads < 1 || o.quiet_threads > 1024 || o.quiet_calls < 1 || o.reps < 1 || o.rate_ops < 1)
    die("bad --quiet-grid/--quiet-threads/--quiet-calls/--reps/--rate-ops");
  return o;
}

// ---------------------------------------------------------------------------------------------
static const char *lib_name() { return strstr(NVSHMEM_VENDOR_STRING, "rshmem") ? "rshmem" : "nvshmem"; }

struct Run {
  Opts o;
  int me = 0, npes = 0, peer = 1;
  char *sbuf = nullptr, *rbuf = nullptr;
  size_t maxb = 0;
  const char *route = "p2p";
  unsigned long long *bad = nullptr;  // device: [count, first offset]
  unsigned int *arrivals = nullptr;   // device
  cudaEvent_t ev0, ev1;

  void poison(size_t len) {
    CK(cudaMemset(rbuf, 0xA5, len));
    CK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
  }
  // On the peer: the ranges the case wrote hold PE 0's words. Then all PEs meet.
  void check(const char *what, uint64_t grid, uint64_t slots, uint64_t used, uint64_t stride, uint64_t n) {
    if (me == peer) {
      unsigned long long init[2] = {0, ~0ull}, got[2];
      CK(cudaMemcpy(bad, init, sizeof init, cudaMemcpyHostToDevice));
      check_kernel<<<264, 256>>>((const uint64_t *)rbuf, grid, slots, used, stride, n, bad);
      CKL("check_kernel");
      CK(cudaMemcpy(got, bad, sizeof got, cudaMemcpyDeviceToHost));
      if (got[0]) die("%s: %llu words on PE %d differ from what PE 0 sent, the first at byte %llu", what, got[0], peer, got[1]);
    }
    nvshmem_barrier_all();
  }
  template <class F>
  double time_ms(F launch) {
    launch();  // warm-up
    CKL("warm-up");
    CK(cudaDeviceSynchronize());
    std::vector<float> v;
    for (int r = 0; r < o.reps; r++) {
      CK(cudaEventRecord(ev0));
      launch();
      CKL("timed launch");
      CK(cudaEventRecord(ev1));
      CK(cudaEventSynchronize(ev1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, ev0, ev1));
      v.push_back(ms);
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  void result(const char *c, const char *scope, size_t bytes, int grid, int threads, double value, const char *unit) {
    printf("RESULT lib=%s case=%s scope=%s bytes=%zu grid=%d threads=%d value=%.4f unit=%s route=%s\n", lib_name(), c, scope,
           bytes, grid, threads, value, unit, route);
    fflush(stdout);
  }

  void rate() {
    if (me == 0)
      printf("# message rate: thread 0 of each block, %ld operations per launch in all, then one quiet per block\n", o.rate_ops);
    for (size_t g : o.rate_grids) {
      std::vector<std::pair<int, size_t>> cases;
      for (size_t b : o.rate_sizes) cases.push_back({0, b});
      cases.push_back({1, 8});
      for (const auto &kb : cases) {
        const int kind = kb.first;
        const size_t bytes = kb.second;
        const char *c = kind == 0 ? "msg_rate_put" : "msg_rate_p";
        const long slots = (long)std::min<size_t>(64, maxb / (g * bytes));
        if (g == 0 || slots == 0) {
          if (me == 0) printf("# %s %zu B from %zu blocks left out: over the buffers\n", c, bytes, g);
          continue;
        }
        const long per = std::max<long>(1, o.rate_ops / (long)g);
        const long used = std::min(per, slots);
        poison(g * slots * bytes);
        if (me == 0) {
          double ms = time_ms([&] { rate_kernel<<<(unsigned)g, 1>>>(rbuf, sbuf, bytes, per, peer, kind, slots); });
          result(c, "thread", bytes, (int)g, 1, (double)per * g / ms / 1e3, "Mops");
        }
        nvshmem_barrier_all();
        char what[96];
        snprintf(what, sizeof what, "%s %zu B from %zu blocks", c, bytes, g);
        check(what, g, slots, used, bytes, kind == 0 ? bytes : 8);
      }
    }
  }

  void quiet() {
    static const char *names[] = {"quiet_bw_all", "quiet_bw_block", "quiet_bw_one"};
    for (size_t total : o.quiet_sizes) {
      const size_t chunk = (total / ((size_t)o.quiet_grid * o.quiet_calls)) & ~(size_t)7;
      const size_t covered = (size_t)o.quiet_grid * o.quiet_calls * chunk;
      if (total > maxb || chunk == 0) {
        if (me == 0) printf("# quiet_bw at %zu bytes left out: over the buffers or under 8 bytes per call\n", total);
        continue;
      }
      for (int mode = 0; mode < 3; mode++) {
        poison(covered);
        if (me == 0) {
          double ms = time_ms([&] {
            quiet_kernel<<<o.quiet_grid, o.quiet_threads>>>(rbuf, sbuf, chunk, o.quiet_calls, peer, mode, arrivals);
          });
          result(names[mode], "block", total, o.quiet_grid, o.quiet_threads, covered / ms / 1e6, "GBps");
        }
        nvshmem_barrier_all();
        char what[64];
        snprintf(what, sizeof what, "%s at %zu bytes", names[mode], total);
        check(what, 1, 1, 1, covered, covered);
      }
    }
  }
};

static void init(void) {
  const char *rank_s = getenv("PE_RANK"), *size_s = getenv("PE_SIZE"), *uidf = getenv("UID_FILE");
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (!rank_s || !size_s || !uidf) {
    nvshmem_init();  // under a launcher (rshmrun)
    CK(cudaSetDevice(nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE) % ndev));
    return;
  }
  const int rank = atoi(rank_s), size = atoi(size_s);
  g_pe = rank;
  CK(cudaSetDevice(rank % ndev));
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (rank == 0) {
    if (nvshmemx_get_uniqueid(&id) != 0) die("nvshmemx_get_uniqueid failed");
    std::string tmp = std::string(uidf) + ".tmp";
    FILE *f = fopen(tmp.c_str(), "wb");
    if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0) die("cannot write %s", tmp.c_str());
    if (rename(tmp.c_str(), uidf) != 0) die("cannot rename %s", tmp.c_str());
  } else {
    for (int i = 0;; i++) {
      FILE *f = fopen(uidf, "rb");
      if (f) {
        size_t n = fread(&id, sizeof id, 1, f);
        fclose(f);
        if (n == 1) break;
      }
      if (i > 60000) die("no unique id in %s after 60 s", uidf);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  if (nvshmemx_set_attr_uniqueid_args(rank, size, &id, &attr) != 0) die("nvshmemx_set_attr_uniqueid_args failed");
  if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) die("nvshmemx_init_attr failed");
}

int main(int argc, char **argv) {
  Run r;
  r.o = parse_args(argc, argv);
  init();
  r.me = nvshmem_my_pe();
  r.npes = nvshmem_n_pes();
  g_pe = r.me;
  if (r.npes < 2) die("needs at least 2 PEs");
  // Buffers: the largest quiet size, and room for 132 blocks x 64 slots of 4 KiB.
  r.maxb = (size_t)34 << 20;
  for (size_t q : r.o.quiet_sizes) r.maxb = std::max(r.maxb, q);
  for (size_t g : r.o.rate_grids)
    for (size_t b : r.o.rate_sizes) r.maxb = std::max(r.maxb, std::min<size_t>(g * b * 64, (size_t)256 << 20));
  r.sbuf = (char *)nvshmem_malloc(r.maxb);
  r.rbuf = (char *)nvshmem_malloc(r.maxb);
  if (!r.sbuf || !r.rbuf) die("nvshmem_malloc of 2 x %zu bytes failed (symmetric heap too small?)", r.maxb);
  // PE 0's partner: --peer, else the first PE whose heap PE 0 cannot map (another node), else PE 1.
  // Every PE computes PE 0's view the same way only on PE 0; PE 0 tells the others.
  int *choice = (int *)nvshmem_malloc(sizeof(int));
  if (!choice) die("nvshmem_malloc failed");
  if (r.me == 0) {
    int p = r.o.peer;
    if (p < 0) {
      p = 1;
      for (int q = 1; q < r.npes; q++)
        if (!nvshmem_ptr(r.rbuf, q)) { p = q; break; }
    }
    if (p < 1 || p >= r.npes) die("--peer %d: expected 1 to %d", p, r.npes - 1);
    for (int q = 0; q < r.npes; q++) nvshmem_int_p(choice, p, q);
    nvshmem_quiet();
  }
  nvshmem_barrier_all();
  CK(cudaMemcpy(&r.peer, choice, sizeof(int), cudaMemcpyDeviceToHost));
  nvshmem_barrier_all();
  nvshmem_free(choice);
  r.route = nvshmem_ptr(r.rbuf, r.me == 0 ? r.peer : 0) ? "p2p" : "remote";
  fill_kernel<<<264, 256>>>((uint64_t *)r.sbuf, r.maxb / 8, r.me);
  CKL("fill_kernel");
  CK(cudaMalloc(&r.bad, 2 * sizeof(unsigned long long)));
  CK(cudaMalloc(&r.arrivals, sizeof(unsigned int)));
  CK(cudaMemset(r.arrivals, 0, sizeof(unsigned int)));
  CK(cudaEventCreate(&r.ev0));
  CK(cudaEventCreate(&r.ev1));
  CK(cudaDeviceSynchronize());
  nvshmem_barrier_all();
  if (r.me == 0)
    printf("# msg_rate (%s): %d PEs, pair PE 0 and PE %d (route=%s), median of %d\n", NVSHMEM_VENDOR_STRING, r.npes, r.peer,
           r.route, r.o.reps);
  if (r.o.rate) r.rate();
  if (r.o.quiet) r.quiet();
  nvshmem_barrier_all();
  nvshmem_free(r.rbuf);
  nvshmem_free(r.sbuf);
  nvshmem_finalize();
  return 0;
}
