// Gradient accumulation (train.grad_accum): A micro-batches of B sequences make the same update as
// one batch of A*B sequences over the same windows.
//
// Not bit for bit: the mean loss over A*B*T tokens is computed as the mean of A means, and each
// weight gradient (a sum over the batch's rows, dW = X^T dY) is summed in A parts that are then
// added, where one GEMM over all rows sums in another order (and blocks differently). The float32
// rounding differs by a few ulps of each sum, ~1e-7 relative; we allow 1e-6, as ||a - b|| / ||a||
// per tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "core/error.h"
#include "layers/model.h"
#include "trainer/adamw.h"
#include "trainer/train.h"
#include "trainer/train_checkpoint.h"
#include "trainer_test_util.h"

namespace dt {
namespace {

using namespace trainer_testing;

// The model and optimizer state of a checkpoint.
struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<AdamW> opt;
  Loaded(const Config& cfg, const std::string& path)
      : model(std::make_unique<Model>(cfg.model, 1, 1)), opt(std::make_unique<AdamW>(model->params(), AdamWConfig{})) {
    load_train_checkpoint(path, model->params(), opt.get());
  }
};

// ||f(a) - f(b)|| / ||f(a)|| over one tensor (2-norms, in double); f = sqrt for AdamW's second
// moment v = (1 - beta2) g^2, whose relative rounding is twice g's, so that every comparison is on
// the scale of the gradient.
double rel_diff(const Tensor& a, const Tensor& b, bool take_sqrt = false) {
  double diff = 0, norm = 0;
  const float *pa = a.ptr<float>(), *pb = b.ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = pa[i], y = pb[i];
    if (take_sqrt) x = std::sqrt(x), y = std::sqrt(y);
    diff += (x - y) * (x - y);
    norm += x * x;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// The largest rel_diff over every parameter and both moments, and where it is.
std::pair<double, std::string> state_rel_diff(const Loaded& a, const Loaded& b) {
  std::pair<double, std::string> worst{0.0, ""};
  ParamStore &pa = a.model->params(), &pb = b.model->params();
  auto consider = [&](const Tensor& x, const Tensor& y, const std::string& what, bool take_sqrt = false) {
    double d = rel_diff(x, y, take_sqrt);
    if (d > worst.first) worst = {d, what};
  };
  for (int s = 0; s < pa.size(); ++s) {
    const std::string& name = pa.infos()[s].name;
    consider(pa.param(s), pb.param(s), name);
    consider(a.opt->m(s), b.opt->m(s), "m of " + name);
    consider(a.opt->v(s), b.opt->v(s), "sqrt(v) of " + name, /*take_sqrt=*/true);
  }
  return worst;
}

std::string run(const ScratchDir& dir, Config cfg, int batch, int accum, const std::string& name) {
  cfg.train.batch_size = batch;
  cfg.train.grad_accum = accum;
  TrainOptions o;
  o.run_dir = dir / name;
  o.console = nullptr;
  train(cfg, o);
  return o.run_dir;
}

TEST(GradAccum, TwoMicroBatchesMakeTheUpdateOfOneDoubleBatch) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  Config cfg = tiny_config(dir.str());
  cfg.train.steps = 3;
  cfg.train.warmup_steps = 1;
  cfg.train.eval_batches = 0;
  cfg.train.checkpoint_every = 1;
  cfg.train.keep_last = 3;
  // No clipping: AdamW's moments then hold the raw gradient, whose scale a wrong accumulation (a
  // sum instead of a mean) would change; AdamW's update itself hardly depends on that scale.
  cfg.train.grad_clip = 0;
  // AdamW's first update is lr * g / (|g| + eps): for a gradient value near eps its derivative in g
  // is up to 1 / (4 eps), so with the default eps = 1e-8 a rounding difference of 1e-10 in a tiny
  // gradient moves the weight by ~1e-5 of its scale. That is AdamW's conditioning, not accumulation;
  // a larger eps keeps the update well-conditioned so that what is compared is the gradient.
  cfg.train.eps = 1e-3;
  std::string one = run(dir, cfg, 6, 1, "one_batch_of_6");
  std::string two = run(dir, cfg, 3, 2, "two_batches_of_3");
  std::string half = run(dir, cfg, 3, 1, "one_batch_of_3");  // the control: half the data

  std::vector<nlohmann::json> m1 = read_metrics(one), m2 = read_metrics(two);
  ASSERT_EQ(m1.size(), 3u);
  ASSERT_EQ(m2.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    for (const char* key : {"loss", "grad_norm"}) {
      double a = m1[i][key], b = m2[i][key];
      EXPECT_NEAR(a, b, 1e-6 * std::fabs(a)) << key << " at step " << i + 1;
    }
    EXPECT_EQ(m1[i]["lr"], m2[i]["lr"]);
    EXPECT_EQ(m2[i]["tokens"].get<int64_t>(), static_cast<int64_t>(i + 1) * 2 * 3 * 20);  // every micro-batch counts
    EXPECT_EQ(m1[i]["tokens"], m2[i]["tokens"]);
  }
  EXPECT_NE(read_text(two + "/log.txt").find("3 steps of 2 x 3 x 20 tokens"), std::string::npos);

  // The state after the first step. (Later steps are compared through their losses above: two
  // slightly different weights drift apart a little more with every AdamW step.)
  std::string f = "/checkpoints/" + checkpoint_file_name(1);
  Loaded a(cfg, one + f), b(cfg, two + f), c(cfg, half + f);
  auto [diff, where] = state_rel_diff(a, b);
  EXPECT_LE(diff, 1e-6) << where;
  EXPECT_GT(state_rel_diff(a, c).first, 1e-3) << "the comparison cannot tell other data apart";
  for (int step = 1; step <= 3; ++step)
    EXPECT_EQ(checkpoint_read_state(two + "/checkpoints/" + checkpoint_file_name(step)).loader_position,
              static_cast<uint64_t>(step) * 6);
}

TEST(GradAccum, BadValuesAreClearErrors) {
  ScratchDir dir;
  write_tiny_shards(dir.str());
  std::string c = write_config(dir / "c.yaml", tiny_config(dir.str()));
  for (const char* v : {"0", "-2"})
    expect_cli_error(run_deltatron("train --config '" + c + "' --set train.grad_accum=" + v, dir.str()),
                     std::string("train.grad_accum = ") + v + " must be > 0");
  expect_cli_error(run_deltatron("train --config '" + c + "' --set train.grad_accum=1.5", dir.str()),
                   "train.grad_accum must be an integer, got '1.5'");
}

}  // namespace
}  // namespace dt
