// The emulator's runtime: thread-per-CUDA-thread block execution, warp collectives, cp.async queue.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <kernels/cuda/gdn_mma.cuh>

#include <cstdio>
#include <array>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>

namespace emu {
thread_local uint3 tl_threadIdx, tl_blockIdx;
dim3 g_blockDim, g_gridDim;
size_t g_smem_limit = 48 * 1024;

struct Warp {
  explicit Warp(int n) : bar(n) {}
  std::barrier<> bar;
  uint32_t u[32][8];
  float f[32];
  const void* p[32];
};
// One emulated CTA: its barrier, warps, dynamic shared memory and named barriers. The CTAs of a
// cluster run at once (each thread knows its own through tl_cta), other grids one CTA at a time.
struct Cta {
  Cta(unsigned nt, size_t smem) : bar(nt), smem(smem + 16, 0xFF) {  // NaN poison
    for (unsigned w = 0; w < (nt + 31) / 32; ++w) warps.push_back(std::make_unique<Warp>(std::min(32u, nt - 32 * w)));
  }
  std::barrier<> bar;
  std::vector<std::unique_ptr<Warp>> warps;
  std::vector<unsigned char> smem;
  std::array<std::unique_ptr<std::barrier<>>, 16> named;  // bar.sync ids, made at first use
  std::mutex named_mutex;
};
// The CTAs of the running cluster, in rank order, and the barrier of all their threads.
struct Cluster {
  std::vector<std::unique_ptr<Cta>> ctas;
  std::unique_ptr<std::barrier<>> bar;
};
static thread_local Cta* tl_cta = nullptr;
static thread_local Cluster* tl_cluster = nullptr;
static thread_local unsigned tl_rank = 0;

static Warp& warp() { return *tl_cta->warps[tl_threadIdx.x / 32]; }
static int lane() { return tl_threadIdx.x % 32; }

void syncthreads() { tl_cta->bar.arrive_and_wait(); }
void syncwarp() { warp().bar.arrive_and_wait(); }
static float exchange(float v, int src) {
  Warp& w = warp();
  w.f[lane()] = v;
  w.bar.arrive_and_wait();
  float r = (src >= 0 && src < 32) ? w.f[src] : v;
  w.bar.arrive_and_wait();
  return r;
}
static uint32_t exchange_u32(uint32_t v, int src) {
  Warp& w = warp();
  w.u[lane()][0] = v;
  w.bar.arrive_and_wait();
  uint32_t r = (src >= 0 && src < 32) ? w.u[src][0] : v;
  w.bar.arrive_and_wait();
  return r;
}
float shfl_xor(float v, int m) { return exchange(v, lane() ^ m); }
float shfl_idx(float v, int src) { return exchange(v, src & 31); }
float shfl_up(float v, int d) { return exchange(v, lane() - d >= 0 ? lane() - d : lane()); }
float shfl_down(float v, int d) { return exchange(v, lane() + d < 32 ? lane() + d : lane()); }
int shfl_down_int(int v, int d) {
  return static_cast<int>(exchange_u32(static_cast<uint32_t>(v), lane() + d < 32 ? lane() + d : lane()));
}
unsigned char* dyn_smem() { return tl_cta->smem.data(); }

unsigned cluster_rank() { return tl_rank; }
void cluster_sync() { tl_cluster->bar->arrive_and_wait(); }
const void* cluster_map(const void* p, unsigned rank) {
  const auto* b = static_cast<const unsigned char*>(p);
  const std::vector<unsigned char>& mine = tl_cta->smem;
  if (b < mine.data() || b >= mine.data() + mine.size() || rank >= tl_cluster->ctas.size()) {
    std::fprintf(stderr, "emu: cluster_smem of %p (rank %u of %zu): not this CTA's dynamic shared memory\n", p, rank,
                 tl_cluster->ctas.size());
    std::abort();
  }
  return tl_cluster->ctas[rank]->smem.data() + (b - mine.data());
}

void run_grid(dim3 grid, dim3 block, size_t smem, const std::function<void()>& body, unsigned cluster_x) {
  const unsigned nt = block.x * block.y * block.z;
  if (block.y != 1 || block.z != 1) throw std::runtime_error("emu: 1-D blocks only");
  if (smem > 232448 || (smem > 48 * 1024 && smem > g_smem_limit)) {
    std::fprintf(stderr, "emu: dynamic smem %zu over the limit (%zu)\n", smem, g_smem_limit);
    std::abort();
  }
  if (cluster_x < 1 || cluster_x > 16 || grid.x % cluster_x) {
    std::fprintf(stderr, "emu: clusters of %u CTAs do not tile a grid of %u along x\n", cluster_x, grid.x);
    std::abort();
  }
  g_blockDim = block, g_gridDim = grid;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x0 = 0; x0 < grid.x; x0 += cluster_x) {
        Cluster cl;
        for (unsigned r = 0; r < cluster_x; ++r) cl.ctas.push_back(std::make_unique<Cta>(nt, smem));
        cl.bar = std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(nt) * cluster_x);
        std::vector<std::thread> ts;
        for (unsigned r = 0; r < cluster_x; ++r)
          for (unsigned t = 0; t < nt; ++t)
            ts.emplace_back([&, r, t, x = x0 + r] {
              tl_threadIdx = {t, 0, 0};
              tl_blockIdx = {x, y, z};
              tl_cta = cl.ctas[r].get(), tl_cluster = &cl, tl_rank = r;
              body();
              dt::cuda::cp_async_wait_n(0);
              warp().bar.arrive_and_drop();
              tl_cta->bar.arrive_and_drop();
              cl.bar->arrive_and_drop();
            });
        for (auto& th : ts) th.join();
      }
}

void* alloc(size_t n) {
  void* p = std::aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  std::memset(p, 0xFF, (n + 255) / 256 * 256 + 256);
  return p;
}
void release(void* p) { std::free(p); }
}  // namespace emu

namespace dt::cuda {
void named_barrier(int id, int n_threads) {
  std::barrier<>* b = nullptr;
  {
    emu::Cta& c = *emu::tl_cta;
    std::lock_guard<std::mutex> lock(c.named_mutex);
    if (!c.named.at(id)) c.named[id] = std::make_unique<std::barrier<>>(n_threads);
    b = c.named[id].get();
  }
  b->arrive_and_wait();
}
void named_arrive(int id, int n_threads) {
  std::barrier<>* b = nullptr;
  {
    emu::Cta& c = *emu::tl_cta;
    std::lock_guard<std::mutex> lock(c.named_mutex);
    if (!c.named.at(id)) c.named[id] = std::make_unique<std::barrier<>>(n_threads);
    b = c.named[id].get();
  }
  (void)b->arrive();
}
}  // namespace dt::cuda

namespace dt {
namespace cuda {
using emu::lane;
using emu::warp;

static float lo(uint32_t u) { return __bfloat162float(__ushort_as_bfloat16(uint16_t(u & 0xffff))); }
static float hi(uint32_t u) { return __bfloat162float(__ushort_as_bfloat16(uint16_t(u >> 16))); }

void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  emu::Warp& w = warp();
  const int L = lane();
  for (int i = 0; i < 4; ++i) w.u[L][i] = a[i];
  w.u[L][4] = b[0], w.u[L][5] = b[1];
  w.bar.arrive_and_wait();
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l & 3;
    A[g][2 * t] = lo(w.u[l][0]), A[g][2 * t + 1] = hi(w.u[l][0]);
    A[g + 8][2 * t] = lo(w.u[l][1]), A[g + 8][2 * t + 1] = hi(w.u[l][1]);
    A[g][2 * t + 8] = lo(w.u[l][2]), A[g][2 * t + 9] = hi(w.u[l][2]);
    A[g + 8][2 * t + 8] = lo(w.u[l][3]), A[g + 8][2 * t + 9] = hi(w.u[l][3]);
    B[2 * t][g] = lo(w.u[l][4]), B[2 * t + 1][g] = hi(w.u[l][4]);
    B[2 * t + 8][g] = lo(w.u[l][5]), B[2 * t + 9][g] = hi(w.u[l][5]);
  }
  w.bar.arrive_and_wait();
  const int g = L >> 2, t = L & 3;
  for (int e = 0; e < 4; ++e) {
    const int r = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    float s = 0.f;
    for (int k = 0; k < 16; ++k) s += A[r][k] * B[k][col];
    c[e] += s;
  }
}

static void ldsm(uint32_t (&r)[4], const void* p, bool trans) {
  if (reinterpret_cast<uintptr_t>(p) % 16) { std::fprintf(stderr, "emu: misaligned ldmatrix row %p\n", p); std::abort(); }
  emu::Warp& w = warp();
  const int L = lane();
  w.p[L] = p;
  w.bar.arrive_and_wait();
  const int g = L >> 2, t = L & 3;
  for (int j = 0; j < 4; ++j) {
    uint16_t e0, e1;
    if (!trans) {
      const uint16_t* row = static_cast<const uint16_t*>(w.p[8 * j + g]);
      e0 = row[2 * t], e1 = row[2 * t + 1];
    } else {
      e0 = static_cast<const uint16_t*>(w.p[8 * j + 2 * t])[g];
      e1 = static_cast<const uint16_t*>(w.p[8 * j + 2 * t + 1])[g];
    }
    r[j] = uint32_t(e0) | (uint32_t(e1) << 16);
  }
  w.bar.arrive_and_wait();
}
// stmatrix.x4.trans: every lane's registers and row address gathered, then lane 0 writes the four
// transposed 8x8 matrices.
void stsm_x4_trans(void* p, const uint32_t (&r)[4]) {
  if (reinterpret_cast<uintptr_t>(p) % 16) { std::fprintf(stderr, "emu: misaligned stmatrix row %p\n", p); std::abort(); }
  emu::Warp& w = warp();
  const int L = lane();
  w.p[L] = p;
  for (int j = 0; j < 4; ++j) w.u[L][j] = r[j];
  w.bar.arrive_and_wait();
  if (L == 0)
    for (int l = 0; l < 32; ++l) {
      const int g = l >> 2, t = l & 3;
      for (int j = 0; j < 4; ++j) {
        static_cast<uint16_t*>(const_cast<void*>(w.p[8 * j + 2 * t]))[g] = static_cast<uint16_t>(w.u[l][j]);
        static_cast<uint16_t*>(const_cast<void*>(w.p[8 * j + 2 * t + 1]))[g] = static_cast<uint16_t>(w.u[l][j] >> 16);
      }
    }
  w.bar.arrive_and_wait();
}
void ldsm_x4(uint32_t (&r)[4], const void* p) { ldsm(r, p, false); }
void ldsm_x4_trans(uint32_t (&r)[4], const void* p) { ldsm(r, p, true); }

struct Copy { void* dst; unsigned char data[16]; };
static thread_local std::vector<Copy> tl_open;
static thread_local std::deque<std::vector<Copy>> tl_groups;

void flag_add_fenced(int* p, int v) { __atomic_add_fetch(p, v, __ATOMIC_SEQ_CST); }
int flag_peek(const int* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
int flag_fetch_add(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
// Emulated kernels run one after another, so a wait can only be on an earlier kernel's counts: a
// count not reached would spin forever on the GPU too, or wait on a kernel launched later.
void flag_wait_at_least(const int* p, int n) {
  if (__atomic_load_n(p, __ATOMIC_SEQ_CST) < n) {
    std::fprintf(stderr, "emu: flag %p at %d, waiting for %d\n", static_cast<const void*>(p), *p, n);
    std::abort();
  }
}

void cp_async_16(void* smem, const void* gmem, int src_bytes) {
  if ((reinterpret_cast<uintptr_t>(smem) % 16) || (reinterpret_cast<uintptr_t>(gmem) % 16)) {
    std::fprintf(stderr, "emu: misaligned cp.async %p <- %p\n", smem, gmem);
    std::abort();
  }
  Copy c;
  c.dst = smem;
  std::memset(c.data, 0, 16);
  std::memcpy(c.data, gmem, src_bytes);
  std::memset(smem, 0xFF, 16);  // poison until the wait
  tl_open.push_back(c);
}
void cp_async_commit() {
  tl_groups.push_back(std::move(tl_open));
  tl_open.clear();
}
void cp_async_wait_n(int n) {
  while (static_cast<int>(tl_groups.size()) > n) {
    for (auto& c : tl_groups.front()) std::memcpy(c.dst, c.data, 16);
    tl_groups.pop_front();
  }
  if (n == 0 && !tl_open.empty()) {  // uncommitted copies never complete on the GPU: flag them
    std::fprintf(stderr, "emu: cp.async without commit at wait\n");
    std::abort();
  }
}
}  // namespace cuda
}  // namespace dt
