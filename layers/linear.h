// Linear layer without bias, y = x W^T, W [out, in] (Hugging Face nn.Linear layout).
// Parameter: `<prefix>.weight`. Works on any [B, T, in] -> [B, T, out] (not only d_model).
#pragma once

#include <string>

#include "layers/layer.h"
#include "layers/model_config.h"

namespace dt {

// Init std of the projections that write into the residual stream (o_proj, down_proj, out_proj):
// init_std / sqrt(2 * n_layers), as GPT-2 does, so that the residual stream's variance does not
// grow with depth (two residual adds per layer).
double residual_init_std(const ModelConfig& cfg);

class Linear : public Layer {
 public:
  // prefix "model.layers.0.mlp.up_proj"; init N(0, init_std^2); split as docs/parallel.md, "Tensor
  // parallelism in the layers", says.
  // in, out: full sizes. Under TP (tp.size > 1) the layer holds this rank's part: out / tp rows
  // (column-parallel) or in / tp columns (row-parallel), so x, y are the local features; the
  // caller adds the mappings around it (layers/tp.h).
  Linear(std::string prefix, int64_t in, int64_t out, double init_std, TpSplit split, TpLayout tp = {});

  void declare(ParamStore& params, Arena& acts, int B, int T) override;
  void forward(Context& ctx, const Tensor& x, const Tensor& y) override;
  // dx may be undefined (no input gradient wanted, e.g. the first layer's input).
  void backward(Context& ctx, const Tensor& dy, const Tensor& dx) override;
  // dx += dy W (the input gradient added to what dx holds; dW accumulated as always).
  void backward_accumulate(Context& ctx, const Tensor& dy, const Tensor& dx);

  const std::string& name() const { return name_; }  // "<prefix>.weight"
  int64_t in_features() const { return in_; }    // this rank's
  int64_t out_features() const { return out_; }  // this rank's

 private:
  std::string name_;
  int64_t in_, out_;            // local
  int64_t full_in_, full_out_;  // whole
  double init_std_;
  TpSplit split_;
  ParamStore* params_ = nullptr;
  int w_ = -1;
  Tensor x_;  // the forward input, kept as a view (Layer contract)
};

}  // namespace dt
