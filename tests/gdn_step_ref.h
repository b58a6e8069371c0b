// The fused GDN decode token (infer/cuda/decode_fused.cu, gdn_step) in double, with the kernel's
// bf16 roundings: gdn_decode_step_ref (infer/cpu/decode_ref.h) with q^, k^ and o rounded to bf16
// where the unfused kernels write them (gdn_l2norm_forward's outputs, the recurrent kernel's o).
// Without them a bf16 ulp of k^_i moves S_ij by up to 2^-9 |k^_i| |d_j|, and the gated norm of a
// head whose o is small amplifies that past any fixed floor for an occasional seed. One reference
// for both tests of the kernel: the GPU's (tests/gpu/test_infer_cuda.cpp) and the emulator's
// (tools/gdn_emu/decode_main.cpp).
//
// Plain C++ (no CUDA, no GoogleTest): the emulator's build has neither a GPU nor nvcc.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "infer/cpu/decode_ref.h"

namespace dt {

// qkv [N, ld] (q, k, v at 0, Hk dk, 2 Hk dk), z [N, Hv dv], a and b [N, Hv], A_log and dt_bias [Hv],
// the norm weight w [dv]; state [N, Hv, dk, dv] updated in place, y [N, Hv dv].
inline void gdn_step_ref_rounded(std::vector<double>& y, std::vector<double>& state, const std::vector<double>& qkv,
                                 const std::vector<double>& z, const std::vector<double>& a,
                                 const std::vector<double>& b, const std::vector<double>& A_log,
                                 const std::vector<double>& dt_bias, const std::vector<double>& w, int64_t N,
                                 int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, int64_t ld, double q_scale,
                                 double eps) {
  auto rounded = [](std::vector<double>& x) {
    for (double& v : x) v = round_bf16(static_cast<float>(v));
  };
  std::vector<double> q(static_cast<size_t>(N * Hk * dk)), k(q.size()), g(static_cast<size_t>(N * Hv)), beta(g.size());
  std::vector<double> o(static_cast<size_t>(N * Hv * dv)), S(state.size());
  gdn_l2norm_forward_ref<double>({q.data(), Hk * dk}, {qkv.data(), ld}, N, Hk, dk, q_scale);
  gdn_l2norm_forward_ref<double>({k.data(), Hk * dk}, {qkv.data() + Hk * dk, ld}, N, Hk, dk, 1.0);
  rounded(q), rounded(k);
  gdn_gates_forward_ref<double>(g.data(), beta.data(), a.data(), b.data(), A_log.data(), dt_bias.data(), N, Hv);
  GdnForwardArgs<double> args;
  args.dims = {N, 1, Hk, Hv, dk, dv};
  args.q = {q.data(), Hk * dk}, args.k = {k.data(), Hk * dk}, args.v = {qkv.data() + 2 * Hk * dk, ld};
  args.g = g.data(), args.beta = beta.data(), args.S0 = state.data(), args.o = {o.data(), Hv * dv};
  args.S_out = S.data();
  gdn_recurrent_forward_ref<double>(args);
  state = S;
  rounded(o);
  gdn_norm_forward_ref<double>(y.data(), o.data(), z.data(), w.data(), N, Hv, dv, eps);
}

}  // namespace dt
