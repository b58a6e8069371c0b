// Layer: a module with explicit forward and backward (docs/architecture.md, "The Layer contract").
//
// Life cycle:
//   1. declare(params, acts, B, T): declare parameters (full Hugging Face names)
//      and the activation buffers this layer saves for a batch of B x T tokens.
//      Keep the returned slots and the two pointers.
//   2. params.allocate(), acts.allocate() (by the owner), params.init(seed).
//   3. forward(ctx, x, y) / backward(ctx, dy, dx), any number of times.
//
// Contracts:
//   - x, y, dx, dy are [B, T, d_model] (dtype of the ParamStore).
//   - forward writes y. The input x must stay unchanged until backward: layers
//     may keep the view of x rather than copy it.
//   - backward WRITES dx (=) and ACCUMULATES parameter gradients (+=), so that
//     gradient accumulation over micro-batches and tied weights work.
#pragma once

#include "core/arena.h"
#include "core/context.h"
#include "layers/params.h"

namespace dt {

class Layer {
 public:
  virtual ~Layer() = default;
  virtual void declare(ParamStore& params, Arena& acts, int B, int T) = 0;
  virtual void forward(Context& ctx, const Tensor& x, const Tensor& y) = 0;
  virtual void backward(Context& ctx, const Tensor& dy, const Tensor& dx) = 0;
};

}  // namespace dt
