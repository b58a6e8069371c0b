// The cases of the chunked gated delta rule's CUDA kernels, one list for both of their tests: the
// emulator runs them on the CPU (tools/gdn_emu/main.cpp, `ctest -L emu`) and the GPU tests on the
// device (tests/gpu/test_gdn_cuda.cpp, test_gdn_cuda_ops.cpp, `ctest -L gpu`), each as a
// parameterised GoogleTest over this list. Each case runs the forward and backward against the
// double CPU reference with every output poisoned with NaN first; a case added here runs on both.
// The GPU runs every case; `emu` says where the emulator does (it runs one host thread per CUDA
// thread: long sequences and many heads take it minutes).
//
// Plain C++ (no CUDA, no GoogleTest): the emulator's build has neither a GPU nor nvcc.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/gdn_cuda.h"

namespace dt::gdn_cases {

// Where the emulator runs a case: in CI (`emu_gdn --gtest_filter=Ci/*`, what ctest runs), by hand
// (`--gtest_filter=ByHand/*`), or not at all.
enum class Emu { kCi, kByHand, kNo };

// g and beta: logsigmoid and sigmoid of normal draws, or at their edges.
enum class Gates { kNormal, kNearZero, kVeryNegative, kBetaEdges };

struct GdnCase {
  int64_t B = 1, T = 64, Hk = 1, Hv = 1, D = 64;  // D: the key head dim dk
  int64_t Dv = 0;                                  // the value head dim dv; 0: = D
  bool S0 = true, dS = true;                       // an initial state, a final state's gradient
  Gates gates = Gates::kNormal;
  bool strided = false;  // q, k, v as column slices of one [B, T, C] buffer
  uint64_t seed = 1;
  GdnCudaImpl impl = GdnCudaImpl::kAuto;  // kAuto without forcing: the GPU tests go through kernels/ops.h
  int state_cols = 0;                     // GdnPlanForcing::state_cols (0: the plan's)
  int qk_persist = -1;                    // GdnPlanForcing::qk_persist (-1: the plan's)
  bool l2 = false;          // also the l2norms of q and k taken inside the chunk kernels
  bool misaligned = false;  // also o, dq, dk, dv 4 bytes past a 16-byte boundary: the same bits
  Emu emu = Emu::kByHand;

  int64_t dv() const { return Dv ? Dv : D; }
  bool forced() const { return impl != GdnCudaImpl::kAuto || state_cols != 0 || qk_persist != -1; }
};

// The test's name: the sizes and what is not the default, then the seed.
inline std::string case_name(const GdnCase& c) {
  auto n = [](int64_t x) { return std::to_string(x); };
  std::string s = "B" + n(c.B) + "_T" + n(c.T) + "_H" + n(c.Hk) + "x" + n(c.Hv) + "_D" + n(c.D);
  if (c.Dv) s += "_Dv" + n(c.Dv);
  if (!c.S0) s += "_noS0";
  if (!c.dS) s += "_nodS";
  if (c.gates != Gates::kNormal) s += "_gates" + n(static_cast<int>(c.gates));
  if (c.strided) s += "_strided";
  if (c.impl == GdnCudaImpl::kSimt) s += "_simt";
  if (c.impl == GdnCudaImpl::kTensorCore) s += "_tc";
  if (c.state_cols) s += "_cols" + n(c.state_cols);
  if (c.qk_persist == 1) s += "_persist";
  if (c.l2) s += "_l2";
  if (c.misaligned) s += "_misaligned";
  return s + "_seed" + n(static_cast<int64_t>(c.seed));
}

inline void PrintTo(const GdnCase& c, std::ostream* os) { *os << case_name(c); }

// clang-format off
inline const std::vector<GdnCase>& all_cases() {
  using enum Emu;
  using enum Gates;
  constexpr GdnCudaImpl kSimt = GdnCudaImpl::kSimt;
  static const std::vector<GdnCase> list = {
      // One partial chunk at head dims 64 and 128 with the l2norms inside and outputs off 16 bytes,
      // one row with GQA, strided rows with the l2norms (after the chunk's, from y and r, with GQA).
      {.T = 65, .seed = 229, .l2 = true, .misaligned = true, .emu = kCi},
      {.T = 1, .Hv = 2, .seed = 165, .emu = kCi},
      {.T = 65, .Hk = 2, .Hv = 2, .D = 128, .seed = 293, .l2 = true, .misaligned = true, .emu = kCi},
      {.B = 2, .T = 65, .Hv = 2, .strided = true, .seed = 11, .l2 = true, .emu = kCi},
      // Each state tile width at head dim 128, the ring of 3 stages wrapping (T 300: 5 chunks).
      {.T = 300, .D = 128, .seed = 528, .state_cols = 16, .emu = kCi},
      {.T = 300, .D = 128, .seed = 528, .state_cols = 32, .emu = kCi},
      {.T = 300, .D = 128, .seed = 528, .state_cols = 64, .emu = kCi},
      {.T = 130, .D = 128, .seed = 358, .state_cols = 64, .emu = kCi},
      // The column-warp forward pass (64 columns): partial chunks, one row, GQA, edge gates, no S0 / dS_out.
      {.T = 200, .Hv = 2, .D = 128, .seed = 892, .state_cols = 64, .emu = kCi},
      {.T = 130, .D = 128, .S0 = false, .dS = false, .gates = kBetaEdges, .seed = 822, .state_cols = 64, .emu = kCi},
      {.T = 65, .Hv = 2, .D = 128, .gates = kNearZero, .seed = 757, .state_cols = 64, .emu = kCi},
      {.T = 1, .Hv = 2, .D = 128, .seed = 693, .state_cols = 64, .emu = kCi},
      // dv_local's work in the reverse pass (head dim 128) at each width, with the l2norms inside.
      {.T = 300, .D = 128, .seed = 1016, .state_cols = 16, .emu = kCi},
      {.T = 130, .Hv = 2, .D = 128, .gates = kVeryNegative, .seed = 864, .state_cols = 32, .emu = kCi},
      {.T = 1, .D = 128, .seed = 733, .state_cols = 32, .emu = kCi},
      {.T = 65, .Hk = 2, .Hv = 2, .D = 128, .gates = kNearZero, .seed = 798, .state_cols = 32, .l2 = true, .emu = kCi},
      {.T = 200, .D = 128, .S0 = false, .dS = false, .gates = kBetaEdges, .seed = 919, .state_cols = 16, .emu = kCi},
      {.T = 300, .D = 128, .seed = 1064, .state_cols = 64, .emu = kCi},
      {.T = 130, .Hv = 2, .D = 128, .gates = kVeryNegative, .seed = 896, .state_cols = 64, .l2 = true, .emu = kCi},
      // The persistent grad_qk at 16 and 32 columns: partial chunks, GQA, the l2norms inside.
      {.T = 300, .D = 128, .seed = 1116, .state_cols = 16, .qk_persist = 1, .emu = kCi},
      {.T = 130, .Hv = 2, .D = 128, .seed = 962, .state_cols = 32, .qk_persist = 1, .l2 = true, .emu = kCi},
      {.T = 65, .Hk = 2, .Hv = 2, .D = 128, .seed = 897, .state_cols = 32, .qk_persist = 1, .l2 = true, .emu = kCi},
      {.T = 33, .Hv = 2, .D = 128, .seed = 849, .state_cols = 16, .qk_persist = 1, .emu = kCi},

      // Lengths at head dim 64: one row, around the chunk, several chunks, long.
      {.B = 2, .T = 1, .Hv = 2, .seed = 101},
      {.B = 2, .T = 15, .Hv = 2, .seed = 115},
      {.B = 2, .T = 63, .Hv = 2, .seed = 163},
      {.B = 2, .T = 64, .Hv = 2, .seed = 164},
      {.B = 2, .T = 65, .Hv = 2, .seed = 165},
      {.B = 2, .T = 300, .Hv = 2, .seed = 400},
      {.B = 2, .T = 1024, .Hv = 2, .seed = 1124, .emu = kNo},
      {.B = 2, .T = 4096, .Hv = 2, .seed = 4196, .emu = kNo},
      {.T = 1024, .seed = 1188},
      // Head dim 128 by the sizes.
      {.T = 1, .Hk = 2, .Hv = 2, .D = 128, .seed = 8},
      {.T = 65, .Hk = 2, .Hv = 2, .D = 128, .seed = 72},
      {.T = 300, .Hk = 2, .Hv = 2, .D = 128, .seed = 307},
      {.T = 512, .D = 128, .seed = 740},
      // Many heads at head dim 128: 36 (64 columns filling the GPU, GQA 12 value heads a key head)
      // and 20 (64 columns beside grad_qk).
      {.B = 3, .T = 70, .Hv = 12, .D = 128, .seed = 17},
      {.B = 2, .T = 70, .Hv = 10, .D = 128, .seed = 298},
      // Few heads at head dim 128: 16 columns at 8 heads, 32 at 16, 64 at 32 (the column-warp pass).
      {.T = 300, .Hk = 8, .Hv = 8, .D = 128, .seed = 78},
      {.T = 300, .Hk = 4, .Hv = 16, .D = 128, .seed = 86},
      {.B = 2, .T = 300, .Hk = 8, .Hv = 16, .D = 128, .seed = 102},
      // Each state tile width, forced.
      {.T = 150, .Hv = 2, .seed = 190, .impl = GdnCudaImpl::kTensorCore, .state_cols = 64},
      {.T = 150, .Hv = 2, .D = 128, .seed = 378, .impl = GdnCudaImpl::kTensorCore, .state_cols = 32},
      {.T = 300, .Hv = 2, .D = 128, .seed = 207, .impl = GdnCudaImpl::kTensorCore, .state_cols = 16},
      {.T = 300, .Hv = 2, .D = 128, .seed = 223, .impl = GdnCudaImpl::kTensorCore, .state_cols = 32},
      {.T = 300, .Hv = 2, .D = 128, .seed = 255, .impl = GdnCudaImpl::kTensorCore, .state_cols = 64},
      // The column-warp forward pass, forced: more chunks than the ring's stages, one row, edge gates.
      {.T = 300, .Hk = 2, .Hv = 2, .D = 128, .seed = 140, .state_cols = 64},
      {.T = 4096, .D = 128, .gates = kNearZero, .seed = 141, .state_cols = 64, .emu = kNo},
      {.B = 2, .T = 63, .Hv = 2, .D = 128, .gates = kBetaEdges, .seed = 142, .state_cols = 64},
      {.B = 3, .T = 1, .D = 128, .seed = 143, .state_cols = 64},
      {.T = 200, .D = 128, .seed = 144, .state_cols = 64},
      // No S0 or dS_out with GQA; edge gates.
      {.T = 130, .Hk = 2, .Hv = 4, .S0 = false, .dS = false, .seed = 3},
      {.T = 150, .Hv = 2, .gates = kNearZero, .seed = 22},
      {.T = 150, .Hv = 2, .gates = kVeryNegative, .seed = 23},
      {.T = 150, .Hv = 2, .gates = kBetaEdges, .seed = 24},
      // The l2norms inside: Hv = Hk at head dims 128 and 64 (in the tensor-core kernels), GQA and the
      // SIMT kernels (before and after).
      {.B = 2, .T = 300, .Hk = 2, .Hv = 2, .D = 128, .seed = 340, .l2 = true},
      {.T = 65, .Hk = 3, .Hv = 3, .seed = 105, .l2 = true},
      {.T = 130, .Hv = 2, .seed = 170, .l2 = true},
      {.T = 100, .Hk = 2, .Hv = 2, .seed = 140, .impl = kSimt, .l2 = true},
      // The plain fp32 kernels (a second GPU reference) at head dims 64 and 128.
      {.T = 130, .Hv = 2, .seed = 114, .impl = kSimt},
      {.T = 130, .Hv = 2, .D = 128, .seed = 178, .impl = kSimt},
      // Small and unequal head dims (kAuto takes the SIMT kernels): 16 with 2 key and 4 value heads is
      // the golden Qwen3.5 GDN layer, 32 the quickstart model; strided rows with dk != dv.
      {.B = 2, .T = 1, .Hv = 2, .D = 16, .seed = 517},
      {.B = 2, .T = 1, .Hv = 2, .D = 32, .seed = 533},
      {.B = 2, .T = 1, .Hv = 2, .D = 48, .seed = 549},
      {.B = 2, .T = 1, .Hk = 2, .Hv = 4, .D = 16, .seed = 517},
      {.B = 2, .T = 1, .Hv = 2, .D = 32, .Dv = 64, .seed = 597},
      {.B = 2, .T = 1, .Hk = 2, .Hv = 2, .D = 64, .Dv = 32, .seed = 597},
      {.T = 1, .D = 8, .Dv = 40, .seed = 109},
      {.B = 2, .T = 65, .Hv = 2, .D = 16, .seed = 581},
      {.B = 2, .T = 65, .Hv = 2, .D = 32, .seed = 597},
      {.B = 2, .T = 65, .Hv = 2, .D = 48, .seed = 613},
      {.B = 2, .T = 65, .Hk = 2, .Hv = 4, .D = 16, .seed = 581},
      {.B = 2, .T = 65, .Hv = 2, .D = 32, .Dv = 64, .seed = 661},
      {.B = 2, .T = 65, .Hk = 2, .Hv = 2, .D = 64, .Dv = 32, .seed = 661},
      {.T = 65, .D = 8, .Dv = 40, .seed = 173},
      {.B = 2, .T = 130, .Hv = 2, .D = 16, .seed = 646},
      {.B = 2, .T = 130, .Hv = 2, .D = 32, .seed = 662},
      {.B = 2, .T = 130, .Hv = 2, .D = 48, .seed = 678},
      {.B = 2, .T = 130, .Hk = 2, .Hv = 4, .D = 16, .seed = 646},
      {.B = 2, .T = 130, .Hv = 2, .D = 32, .Dv = 64, .seed = 726},
      {.B = 2, .T = 130, .Hk = 2, .Hv = 2, .D = 64, .Dv = 32, .seed = 726},
      {.T = 130, .D = 8, .Dv = 40, .seed = 238},
      {.B = 2, .T = 70, .Hv = 2, .D = 32, .Dv = 48, .strided = true, .seed = 12},
  };
  return list;
}
// clang-format on

// The cases `emu` says the emulator runs there (kNo: none); the GPU tests take all_cases().
inline std::vector<GdnCase> emu_cases(Emu where) {
  std::vector<GdnCase> out;
  if (where == Emu::kNo) return out;
  for (const GdnCase& c : all_cases())
    if (c.emu == where) out.push_back(c);
  return out;
}

}  // namespace dt::gdn_cases
