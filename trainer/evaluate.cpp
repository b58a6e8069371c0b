#include "trainer/evaluate.h"

namespace dt {

double evaluate(Model& model, Context& ctx, DataLoader& loader, int64_t batches) {
  DT_CHECK(batches >= 1, "evaluate: needs at least one batch, got {}", batches);
  const size_t n = static_cast<size_t>(model.batch()) * model.seq_len();
  std::vector<int32_t> inputs(n), targets(n);
  loader.reset();
  double sum = 0;
  for (int64_t b = 0; b < batches; ++b) {
    loader.next(inputs.data(), targets.data());
    sum += model.forward(ctx, inputs.data(), targets.data());
  }
  return sum / static_cast<double>(batches);
}

}  // namespace dt
