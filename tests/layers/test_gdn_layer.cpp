// GatedDeltaNet (Qwen3.5 linear_attn): parameters as Hugging Face names them, the forward
// against the HF module written out here with plain loops, chunked vs recurrent, float vs
// double, and every gradient against finite differences in double.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>

#include "core/error.h"
#include "layers/gdn.h"
#include "parallel/process_grid.h"
#include "tests/layers/gdn_gradcheck.h"

namespace dt {
namespace {

using namespace gdn_test;  // the GDN tests' buffers, fills and gradient checks

const char* kPrefix = "model.layers.0.linear_attn";

ModelConfig small_config(int chunk) {
  ModelConfig cfg;
  cfg.d_model = 12;
  cfg.layers = {MixerKind::kGdn, MixerKind::kGdn, MixerKind::kAttn};
  cfg.init_std = 0.3;  // large enough that every nonlinearity is exercised
  cfg.norm_eps = 1e-6;
  cfg.gdn.n_k_heads = 2;
  cfg.gdn.n_v_heads = 4;
  cfg.gdn.head_k_dim = 5;
  cfg.gdn.head_v_dim = 3;
  cfg.gdn.conv_kernel = 4;
  cfg.gdn.chunk_size = chunk;
  return cfg;
}

// One layer with its parameters, activations and I/O buffers.
template <class T>
struct Rig {
  ModelConfig cfg;
  int B, Tn;
  ParamStore ps;
  Arena acts;
  GatedDeltaNet layer;
  Buf<T> x, y, dy, dx;
  Rig(const ModelConfig& c, int b, int t, uint64_t seed)
      : cfg(c),
        B(b),
        Tn(t),
        ps(dtype_of<T>(), Device::kCPU),
        acts("activations", Device::kCPU),
        layer(c, kPrefix),
        x({b, t, c.d_model}),
        y({b, t, c.d_model}),
        dy({b, t, c.d_model}),
        dx({b, t, c.d_model}) {
    layer.declare(ps, acts, b, t);
    ps.allocate();
    acts.allocate();
    ps.init(seed);
    std::mt19937_64 rng(seed);
    fill_normal(x, rng), fill_normal(dy, rng);
  }
  T* p(const std::string& name) { return ps.param(std::string(kPrefix) + "." + name).template ptr<T>(); }
  T* g(const std::string& name) { return ps.grad(std::string(kPrefix) + "." + name).template ptr<T>(); }
  int64_t numel(const std::string& name) { return ps.param(std::string(kPrefix) + "." + name).numel(); }
  void forward() {
    Context ctx;
    poison(y);
    layer.forward(ctx, x, y);
  }
  void backward() {
    Context ctx;
    poison(dx);
    layer.backward(ctx, dy, dx);
  }
};

const char* kParams[] = {"in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight",
                         "in_proj_a.weight",   "conv1d.weight",    "A_log",
                         "dt_bias",            "norm.weight",      "out_proj.weight"};

TEST(GdnLayer, DeclaresTheHuggingFaceParameters) {
  Rig<double> r(small_config(4), 1, 3, 1);
  const int64_t D = 12, Hk = 2, Hv = 4, dk = 5, dv = 3, K = 4, conv = 2 * Hk * dk + Hv * dv;
  struct Want {
    Shape shape;
    Init init;
    TpSplit split;
    bool decay;
  };
  std::map<std::string, Want> want = {
      {"in_proj_qkv.weight", {{conv, D}, Init::kNormal, TpSplit::kColumn, true}},
      {"in_proj_z.weight", {{Hv * dv, D}, Init::kNormal, TpSplit::kColumn, true}},
      {"in_proj_b.weight", {{Hv, D}, Init::kNormal, TpSplit::kColumn, true}},
      {"in_proj_a.weight", {{Hv, D}, Init::kNormal, TpSplit::kColumn, true}},
      {"conv1d.weight", {{conv, 1, K}, Init::kNormal, TpSplit::kColumn, true}},
      {"A_log", {{Hv}, Init::kALog, TpSplit::kColumn, false}},
      {"dt_bias", {{Hv}, Init::kDtBias, TpSplit::kColumn, false}},
      {"norm.weight", {{dv}, Init::kOnes, TpSplit::kReplicated, false}},
      {"out_proj.weight", {{D, Hv * dv}, Init::kNormal, TpSplit::kRow, true}},
  };
  ASSERT_EQ(r.ps.size(), static_cast<int>(want.size()));
  for (const ParamInfo& info : r.ps.infos()) {
    const std::string name = info.name.substr(std::string(kPrefix).size() + 1);
    ASSERT_TRUE(want.count(name)) << info.name;
    const Want& w = want[name];
    EXPECT_EQ(info.shape, w.shape) << info.name;
    EXPECT_EQ(info.init, w.init) << info.name;
    EXPECT_EQ(info.split, w.split) << info.name;
    EXPECT_EQ(info.decay, w.decay) << info.name;
    if (name == "out_proj.weight") {
      EXPECT_NEAR(info.std, 0.3 / std::sqrt(2.0 * 3), 1e-15);
    } else if (info.init == Init::kNormal) {
      EXPECT_EQ(info.std, 0.3) << info.name;
    }
  }
  for (int h = 0; h < Hv; ++h) {
    double A = std::exp(r.p("A_log")[h]);
    EXPECT_TRUE(A >= 1 && A <= 16) << A;
    double dt = std::log1p(std::exp(r.p("dt_bias")[h]));
    EXPECT_TRUE(dt >= 1e-3 * 0.999 && dt <= 0.1 * 1.001) << dt;
  }
  for (int i = 0; i < dv; ++i) EXPECT_EQ(r.p("norm.weight")[i], 1.0);
}

// Qwen3_5GatedDeltaNet.forward (torch_recurrent_gated_delta_rule path), written out.
Buf<double> hf_forward(Rig<double>& r) {
  const ModelConfig& c = r.cfg;
  const int B = r.B, T = r.Tn, D = c.d_model, Hk = c.gdn.n_k_heads, Hv = c.gdn.n_v_heads, dk = c.gdn.head_k_dim,
            dv = c.gdn.head_v_dim, K = c.gdn.conv_kernel, key_dim = Hk * dk, conv = 2 * key_dim + Hv * dv;
  auto linear = [&](const double* w, int b, int t, int o) {  // nn.Linear, no bias
    double s = 0;
    for (int i = 0; i < D; ++i) s += w[o * D + i] * r.x[(b * T + t) * D + i];
    return s;
  };
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  Buf<double> y({B, T, D});
  for (int b = 0; b < B; ++b) {
    std::vector<double> mixed(T * conv), z(T * Hv * dv), bb(T * Hv), aa(T * Hv);
    for (int t = 0; t < T; ++t) {
      for (int o = 0; o < conv; ++o) mixed[t * conv + o] = linear(r.p("in_proj_qkv.weight"), b, t, o);
      for (int o = 0; o < Hv * dv; ++o) z[t * Hv * dv + o] = linear(r.p("in_proj_z.weight"), b, t, o);
      for (int o = 0; o < Hv; ++o) bb[t * Hv + o] = linear(r.p("in_proj_b.weight"), b, t, o);
      for (int o = 0; o < Hv; ++o) aa[t * Hv + o] = linear(r.p("in_proj_a.weight"), b, t, o);
    }
    // F.silu(self.conv1d(mixed_qkv)[:, :, :seq_len]) with padding K-1
    std::vector<double> qkv(T * conv);
    for (int t = 0; t < T; ++t)
      for (int ch = 0; ch < conv; ++ch) {
        double s = 0;
        for (int j = 0; j < K; ++j) {
          int src = t - (K - 1) + j;
          if (src >= 0) s += r.p("conv1d.weight")[ch * K + j] * mixed[src * conv + ch];
        }
        qkv[t * conv + ch] = silu(s);
      }
    // l2norm(eps=1e-6) of q and k per head, q * dk^-0.5; repeat_interleave to value heads.
    auto unit = [&](int t, int off, int h, bool is_q, int i) {
      const double* x = &qkv[t * conv + off + h * dk];
      double ss = 0;
      for (int m = 0; m < dk; ++m) ss += x[m] * x[m];
      return x[i] / std::sqrt(ss + 1e-6) * (is_q ? 1 / std::sqrt(double(dk)) : 1.0);
    };
    std::vector<double> core(T * Hv * dv);
    for (int h = 0; h < Hv; ++h) {
      const int kh = h / (Hv / Hk);
      std::vector<double> S(dk * dv, 0.0);
      for (int t = 0; t < T; ++t) {
        double beta = 1 / (1 + std::exp(-bb[t * Hv + h]));
        double g = -std::exp(r.p("A_log")[h]) * std::log1p(std::exp(aa[t * Hv + h] + r.p("dt_bias")[h]));
        for (double& s : S) s *= std::exp(g);
        for (int j = 0; j < dv; ++j) {
          double kv_mem = 0;
          for (int i = 0; i < dk; ++i) kv_mem += S[i * dv + j] * unit(t, key_dim, kh, false, i);
          double delta = (qkv[t * conv + 2 * key_dim + h * dv + j] - kv_mem) * beta;
          for (int i = 0; i < dk; ++i) S[i * dv + j] += unit(t, key_dim, kh, false, i) * delta;
        }
        for (int j = 0; j < dv; ++j) {
          double o = 0;
          for (int i = 0; i < dk; ++i) o += S[i * dv + j] * unit(t, 0, kh, true, i);
          core[(t * Hv + h) * dv + j] = o;
        }
      }
    }
    // Qwen3_5RMSNormGated: norm, * weight, * silu(z); then out_proj.
    std::vector<double> hidden(T * Hv * dv);
    for (int row = 0; row < T * Hv; ++row) {
      double ms = 0;
      for (int j = 0; j < dv; ++j) ms += core[row * dv + j] * core[row * dv + j] / dv;
      for (int j = 0; j < dv; ++j)
        hidden[row * dv + j] = core[row * dv + j] / std::sqrt(ms + c.norm_eps) * r.p("norm.weight")[j] *
                               silu(z[row * dv + j]);
    }
    for (int t = 0; t < T; ++t)
      for (int o = 0; o < D; ++o) {
        double s = 0;
        for (int i = 0; i < Hv * dv; ++i) s += r.p("out_proj.weight")[o * Hv * dv + i] * hidden[t * Hv * dv + i];
        y[(b * T + t) * D + o] = s;
      }
  }
  return y;
}

TEST(GdnLayer, ForwardMatchesTheHuggingFaceModule) {
  for (int chunk : {0, 4, 64}) {
    Rig<double> r(small_config(chunk), 2, 11, 2);
    // Non-trivial norm weight and gates, so a wrong order or index shows.
    for (int i = 0; i < r.numel("norm.weight"); ++i) r.p("norm.weight")[i] = 1 + 0.3 * i;
    r.forward();
    Buf<double> want = hf_forward(r);
    EXPECT_LT(rel_diff(r.y, want), 1e-12) << "chunk " << chunk;
  }
}

TEST(GdnLayer, ChunkedMatchesRecurrentForwardAndBackward) {
  Rig<double> rec(small_config(0), 2, 23, 4), ch(small_config(8), 2, 23, 4);
  for (Rig<double>* r : {&rec, &ch}) {
    r->ps.zero_grads();
    r->forward();
    r->backward();
  }
  EXPECT_LT(rel_diff(ch.y, rec.y), 1e-11);
  EXPECT_LT(rel_diff(ch.dx, rec.dx), 1e-10);
  for (const char* name : kParams)
    EXPECT_LT(rel_diff(ch.g(name), rec.g(name), rec.numel(name)), 1e-10) << name;
}

void check_layer_fd(int chunk, int T, uint64_t seed) {
  Rig<double> r(small_config(chunk), 2, T, seed);
  r.ps.zero_grads();
  r.forward();
  r.backward();
  auto loss = [&] {
    r.forward();
    return dot(r.y, r.dy);
  };
  std::mt19937_64 rng(seed);
  const std::string form = chunk ? "chunk " + std::to_string(chunk) : "recurrent";
  expect_grad_matches(form + " dx", r.x, r.dx, loss, rng, 1e-6);
  for (const char* name : kParams) {
    // A copy of the gradient: the loss re-runs only the forward, but keep it independent.
    std::vector<double> grad(r.g(name), r.g(name) + r.numel(name));
    expect_grad_matches(form + " " + name, r.p(name), grad.data(), r.numel(name), loss, rng, 1e-6);
  }
}

TEST(GdnLayer, RecurrentBackwardMatchesFiniteDifferences) { check_layer_fd(0, 7, 5); }
TEST(GdnLayer, ChunkedBackwardMatchesFiniteDifferences) { check_layer_fd(3, 8, 6); }

TEST(GdnLayer, BackwardWritesDxAndAccumulatesParameterGradients) {
  Rig<double> r(small_config(4), 1, 6, 7);
  r.ps.zero_grads();
  r.forward();
  r.backward();
  Buf<double> dx1 = r.dx;
  std::map<std::string, std::vector<double>> once;
  for (const char* name : kParams) once[name].assign(r.g(name), r.g(name) + r.numel(name));
  r.backward();
  EXPECT_EQ(rel_diff(r.dx, dx1), 0.0);
  for (const char* name : kParams)
    for (int64_t i = 0; i < r.numel(name); ++i) EXPECT_NEAR(r.g(name)[i], 2 * once[name][i], 1e-12) << name;
}

TEST(GdnLayer, FloatForwardAgreesWithDouble) {
  for (int chunk : {0, 4}) {
    Rig<double> rd(small_config(chunk), 2, 13, 8);
    Rig<float> rf(small_config(chunk), 2, 13, 8);
    for (int64_t i = 0; i < rd.x.size(); ++i) rf.x[i] = static_cast<float>(rd.x[i]);
    rd.forward();
    rf.forward();
    EXPECT_LT(rel_diff(rf.y, rd.y), 1e-5) << "chunk " << chunk;
  }
}

TEST(GdnLayer, RejectsBadConfigAndShapes) {
  ModelConfig cfg = small_config(4);
  cfg.gdn.n_v_heads = 3;  // not a multiple of n_k_heads = 2
  EXPECT_THROW(GatedDeltaNet(cfg, kPrefix), Error);
  Rig<double> r(small_config(4), 1, 5, 9);
  Buf<double> wrong({1, 4, 12});
  Context ctx;
  EXPECT_THROW(r.layer.forward(ctx, wrong, r.y), Error);
  ProcessGrid grid(0, 2, 2);
  ctx.grid = &grid;
  EXPECT_THROW(r.layer.forward(ctx, r.x, r.y), Error);
}

// chunk_size 0 (the recurrence) has no GPU backward: the layer says so, naming the config key and the
// way out, before any op runs (trainer/config_validate.h refuses it earlier, for training runs).
TEST(GdnLayer, RecurrentBackwardOnTheGpuNamesTheConfigKey) {
  Rig<double> r(small_config(0), 1, 5, 10);
  r.forward();
  Context gpu;
  gpu.device = Device::kCUDA;
  try {
    r.layer.backward(gpu, r.dy, r.dx);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("model.gdn.chunk_size: 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--device cpu"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace dt
