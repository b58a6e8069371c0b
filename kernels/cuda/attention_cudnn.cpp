// Causal softmax attention on the GPU through cuDNN's fused SDPA (flash attention), built with the
// cuDNN frontend's graph API. Reference: kernels/cpu/attention.h.
//   s_ij = scale q_i . k_j (j <= i),  lse_i = log sum_j exp(s_ij),  o_i = sum_j exp(s_ij - lse_i) v_j
//   torch: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=True)
// Our layout [B, T, heads, D] is handed to cuDNN as dims (B, heads, T, D) with strides
// (T*heads*D, D, heads*D, 1): no transposes. lse [B, H, T] fp32 is cuDNN's Stats output, the natural-log
// log-sum-exp of the scaled, masked scores, which is what the CPU reference saves (the GPU tests compare
// it). GQA: K, V carry Hkv heads; cuDNN maps query head h to KV head h / (H / Hkv) and sums dK, dV over
// each group. Dqk and Dv may differ (MLA: 192/128, 96/64).
//
// Each graph (key: B, T, H, Hkv, Dqk, Dv, the scale's bits, direction) is built once with heuristic
// mode A and kept in the context with its execution plan: a shape always runs the same engine. The
// backward asks for cuDNN's deterministic algorithm; on Hopper with cuDNN 9.19 the frontend serves it
// with the "dP workspace" decomposition (no atomics; by the frontend's formula its workspace is about
// B*H*ceil64(T)*ceil128(T)*2 bytes, 400 MB at B 16, H 12, T 1024). Where cuDNN cannot give a deterministic backward for a shape it falls
// back to the default and says so once on stderr (not seen for any tested shape). Workspace: the
// context's attention buffer, grown at the first call of a graph that needs more.
// Measured on an H200 (cuDNN 9.19): forward any T >= 1; backward T >= 2 (cuDNN refuses s_q = s_kv = 1,
// so T = 1 is a clear error here).
#include "kernels/cuda/dense_mm_state.h"
#include "kernels/cuda_ops.h"

#ifdef DELTATRON_HAVE_CUDNN
#include <cudnn.h>
#include <cudnn_frontend.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>
#endif

namespace dt::cuda {

#ifndef DELTATRON_HAVE_CUDNN

struct AttentionCache {};
void destroy_attention_cache(AttentionCache* cache) { delete cache; }

namespace {
[[noreturn]] void no_cudnn(const char* op) {
  DT_FAIL(
      "{}: this build has no cuDNN, which attention on the GPU needs: install it with "
      "`python3 -m pip install \"nvidia-cudnn-cu13==9.19.*\" \"nvidia-cudnn-frontend==1.32.*\"` "
      "(scripts/install_deps.sh does) and reconfigure, or pass -DCUDNN_ROOT=... -DCUDNN_FRONTEND_INCLUDE_DIR=... "
      "to cmake",
      op);
}
}  // namespace

void attention_forward(Context&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double) {
  no_cudnn("attention_forward");
}
void attention_backward(Context&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&, const Tensor&, const Tensor&, const Tensor&, double) {
  no_cudnn("attention_backward");
}

#else  // DELTATRON_HAVE_CUDNN

namespace fe = cudnn_frontend;

namespace {

struct AttnDims {
  int64_t B = 0, T = 0, H = 0, Hkv = 0, Dqk = 0, Dv = 0;
};

struct AttentionKey {
  AttnDims d;
  uint32_t scale_bits = 0;
  bool backward = false;
  auto tie() const { return std::tie(d.B, d.T, d.H, d.Hkv, d.Dqk, d.Dv, scale_bits, backward); }
  bool operator<(const AttentionKey& o) const { return tie() < o.tie(); }
};

struct AttentionGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace_bytes = 0;
};

// Tensor uids of the variant packs.
enum : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

}  // namespace

struct AttentionCache {
  std::map<AttentionKey, AttentionGraph> graphs;
};

void destroy_attention_cache(AttentionCache* cache) { delete cache; }

namespace {

// dims (B, heads, T, D) of a [B, T, heads, D] buffer.
std::vector<int64_t> bhtd_dims(const AttnDims& d, int64_t heads, int64_t D) { return {d.B, heads, d.T, D}; }
std::vector<int64_t> bthd_strides(const AttnDims& d, int64_t heads, int64_t D) {
  return {d.T * heads * D, D, heads * D, 1};
}

std::shared_ptr<fe::graph::Tensor_attributes> add_tensor(fe::graph::Graph& g, const char* name, int64_t uid,
                                                         const AttnDims& d, int64_t heads, int64_t D) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(bhtd_dims(d, heads, D))
                      .set_stride(bthd_strides(d, heads, D)));
}

void set_output(fe::graph::Tensor_attributes& t, int64_t uid, const AttnDims& d, int64_t heads, int64_t D) {
  t.set_output(true).set_uid(uid).set_dim(bhtd_dims(d, heads, D)).set_stride(bthd_strides(d, heads, D));
}

std::string shape_str(const AttnDims& d) {
  return fmt::format("B={} T={} H={} Hkv={} Dqk={} Dv={}", d.B, d.T, d.H, d.Hkv, d.Dqk, d.Dv);
}

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

std::shared_ptr<fe::graph::Graph> forward_graph(const AttnDims& d, float scale) {
  auto g = new_graph();
  auto q = add_tensor(*g, "q", kQ, d, d.H, d.Dqk);
  auto k = add_tensor(*g, "k", kK, d, d.Hkv, d.Dqk);
  auto v = add_tensor(*g, "v", kV, d, d.Hkv, d.Dv);
  auto opts = fe::graph::SDPA_attributes()
                  .set_name("sdpa_forward")
                  .set_generate_stats(true)
                  .set_attn_scale(scale)
                  .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                  .set_diagonal_band_right_bound(0);  // causal: key j <= query i
  auto [o, stats] = g->sdpa(q, k, v, opts);
  set_output(*o, kO, d, d.H, d.Dv);
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({d.B, d.H, d.T, 1})
      .set_stride({d.H * d.T, d.T, 1, 1});
  return g;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const AttnDims& d, float scale, bool deterministic) {
  auto g = new_graph();
  auto q = add_tensor(*g, "q", kQ, d, d.H, d.Dqk);
  auto k = add_tensor(*g, "k", kK, d, d.Hkv, d.Dqk);
  auto v = add_tensor(*g, "v", kV, d, d.Hkv, d.Dv);
  auto o = add_tensor(*g, "o", kO, d, d.H, d.Dv);
  auto d_o = add_tensor(*g, "dO", kDO, d, d.H, d.Dv);
  auto stats = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("stats")
                             .set_uid(kStats)
                             .set_dim({d.B, d.H, d.T, 1})
                             .set_stride({d.H * d.T, d.T, 1, 1})
                             .set_data_type(fe::DataType_t::FLOAT));
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("sdpa_backward")
                  .set_attn_scale(scale)
                  .set_deterministic_algorithm(deterministic)
                  .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                  .set_diagonal_band_right_bound(0);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, opts);
  set_output(*dq, kDQ, d, d.H, d.Dqk);
  set_output(*dk, kDK, d, d.Hkv, d.Dqk);
  set_output(*dv, kDV, d, d.Hkv, d.Dv);
  return g;
}

// Validates, lowers and picks the heuristic's first plan; empty message on success.
std::string build(fe::graph::Graph& g, cudnnHandle_t handle) {
  auto st = g.build(handle, {fe::HeurMode_t::A});
  if (st.is_good()) return {};
  std::string msg = st.get_message().empty() ? std::string("unsupported") : st.get_message();
  while (!msg.empty() && (msg.back() == '.' || msg.back() == ' ')) msg.pop_back();
  return msg;
}

const AttentionGraph& attention_graph(CudaState& s, const AttentionKey& key, float scale, const char* op) {
  if (!s.attention) s.attention.reset(new AttentionCache);
  auto& graphs = s.attention->graphs;
  if (auto it = graphs.find(key); it != graphs.end()) return it->second;
  DT_CHECK(s.cudnn != nullptr, "{}: the context has no cuDNN handle", op);
  auto handle = static_cast<cudnnHandle_t>(s.cudnn);
  AttentionGraph ag;
  std::string err;
  if (!key.backward) {
    ag.graph = forward_graph(key.d, scale);
    err = build(*ag.graph, handle);
  } else {
    ag.graph = backward_graph(key.d, scale, true);
    err = build(*ag.graph, handle);
    if (!err.empty()) {
      const std::string det_err = err;
      ag.graph = backward_graph(key.d, scale, false);
      err = build(*ag.graph, handle);
      if (err.empty())
        std::fprintf(stderr,
                     "deltatron: warning: %s: cuDNN %zu has no deterministic SDPA backward for %s (%s); using the "
                     "default algorithm, whose dQ is not bitwise reproducible\n",
                     op, cudnnGetVersion(), shape_str(key.d).c_str(), det_err.c_str());
    }
  }
  DT_CHECK(err.empty(),
           "{}: cuDNN {} cannot run causal SDPA for {} (bf16, scale {}): {} (its fused attention needs head dims "
           "that are multiples of 8, at most 256 on Hopper)",
           op, cudnnGetVersion(), shape_str(key.d), scale, err);
  auto ws = ag.graph->get_workspace_size(ag.workspace_bytes);
  DT_CHECK(ws.is_good(), "{}: cuDNN workspace query failed for {}: {}", op, shape_str(key.d), ws.get_message());
  return graphs.emplace(key, std::move(ag)).first->second;
}

void check_tensor(const char* op, const char* name, const Tensor& t, DType dtype) {
  DT_CHECK(t.defined(), "{}: {} is missing", op, name);
  DT_CHECK(t.device == Device::kCUDA, "{}: {} {} must be on the GPU", op, name, t.str());
  DT_CHECK(t.dtype == dtype, "{}: {} is {}, expected {} on the GPU (q, k, v, o and their gradients bf16, lse fp32)",
           op, name, t.str(), dtype_name(dtype));
  DT_CHECK(t.is_contiguous(), "{}: {} {} must be contiguous", op, name, t.str());
}

AttnDims attention_dims(const char* op, const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                        const Tensor& v) {
  DT_CHECK(q.ndim() == 4 && k.ndim() == 4 && v.ndim() == 4, "{}: q {}, k {}, v {} must be [B, T, heads, head_dim]",
           op, q.shape.str(), k.shape.str(), v.shape.str());
  AttnDims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3)};
  DT_CHECK(k.size(0) == d.B && k.size(1) == d.T && k.size(3) == d.Dqk, "{}: k {} does not match q {}", op,
           k.shape.str(), q.shape.str());
  DT_CHECK(v.size(0) == d.B && v.size(1) == d.T && v.size(2) == d.Hkv, "{}: v {} does not match k {}", op,
           v.shape.str(), k.shape.str());
  DT_CHECK(d.Hkv > 0 && d.H % d.Hkv == 0, "{}: {} KV heads must divide {} query heads", op, d.Hkv, d.H);
  DT_CHECK(d.Dqk % 8 == 0 && d.Dv % 8 == 0 && d.Dqk <= 256 && d.Dv <= 256,
           "{}: head dims Dqk={} Dv={}: cuDNN's fused attention needs multiples of 8, at most 256", op, d.Dqk, d.Dv);
  check_shape(o, Shape{d.B, d.T, d.H, d.Dv}, "attention output o");
  DT_CHECK(lse.numel() == d.B * d.H * d.T, "{}: lse {} must hold B*H*T = {} values", op, lse.shape.str(),
           d.B * d.H * d.T);
  check_tensor(op, "q", q, DType::kBF16);
  check_tensor(op, "k", k, DType::kBF16);
  check_tensor(op, "v", v, DType::kBF16);
  check_tensor(op, "o", o, DType::kBF16);
  check_tensor(op, "lse", lse, DType::kF32);
  return d;
}

AttentionKey make_key(const AttnDims& d, float scale, bool backward) {
  AttentionKey key;
  key.d = d;
  std::memcpy(&key.scale_bits, &scale, sizeof(scale));
  key.backward = backward;
  return key;
}

void execute(CudaState& s, const AttentionGraph& ag, std::unordered_map<int64_t, void*>& pack, const char* op,
             const AttnDims& d) {
  void* ws = attention_workspace(s, static_cast<size_t>(ag.workspace_bytes), op);
  auto st = ag.graph->execute(static_cast<cudnnHandle_t>(s.cudnn), pack, ws);
  DT_CHECK(st.is_good(), "{}: cuDNN SDPA failed for {}: {}", op, shape_str(d), st.get_message());
}

}  // namespace

void attention_forward(Context& ctx, const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, double scale) {
  const char* op = "attention_forward";
  CudaState& s = cuda_state(ctx, op);
  const AttnDims d = attention_dims(op, o, lse, q, k, v);
  if (d.B == 0 || d.T == 0 || d.H == 0) return;
  const float sc = static_cast<float>(scale);
  const AttentionGraph& ag = attention_graph(s, make_key(d, sc, false), sc, op);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, q.data}, {kK, k.data}, {kV, v.data}, {kO, o.data}, {kStats, lse.data}};
  execute(s, ag, pack, op, d);
}

void attention_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                        double scale) {
  const char* op = "attention_backward";
  CudaState& s = cuda_state(ctx, op);
  const AttnDims d = attention_dims(op, o, lse, q, k, v);
  check_shape(dq, q.shape, "attention_backward: dq");
  check_shape(dk, k.shape, "attention_backward: dk");
  check_shape(dv, v.shape, "attention_backward: dv");
  check_shape(dout, o.shape, "attention_backward: dout");
  check_tensor(op, "dq", dq, DType::kBF16);
  check_tensor(op, "dk", dk, DType::kBF16);
  check_tensor(op, "dv", dv, DType::kBF16);
  check_tensor(op, "dout", dout, DType::kBF16);
  if (d.B == 0 || d.T == 0 || d.H == 0) return;
  // Seen on cuDNN 9.19 (H200): the backward graph is refused for s_q = s_kv = 1. A one-token sequence
  // is no training input; the forward (decode) runs at T = 1.
  DT_CHECK(d.T >= 2,
           "{}: T = 1 (one token per sequence) has no backward on the GPU: cuDNN's SDPA backward does not take "
           "s_q = s_kv = 1; train on sequences of at least 2 tokens",
           op);
  const float sc = static_cast<float>(scale);
  const AttentionGraph& ag = attention_graph(s, make_key(d, sc, true), sc, op);
  std::unordered_map<int64_t, void*> pack = {{kQ, q.data},     {kK, k.data},   {kV, v.data},
                                             {kO, o.data},     {kDO, dout.data}, {kStats, lse.data},
                                             {kDQ, dq.data},   {kDK, dk.data}, {kDV, dv.data}};
  execute(s, ag, pack, op, d);
}

#endif  // DELTATRON_HAVE_CUDNN

}  // namespace dt::cuda
