// The CPU training loop (DESIGN section 7). Each step:
//   zero grads; forward; backward; global grad norm and clipping; AdamW at the scheduled lr;
// validation every train.eval_every steps and after the last one. The run directory gets
// config.yaml (the resolved config), metrics.jsonl (one JSON object per step / evaluation)
// and log.txt (what was printed).
#pragma once

#include <cstdio>
#include <limits>
#include <string>

#include "trainer/config.h"

namespace dt {

struct TrainOptions {
  std::string run_dir;          // empty: run.dir / run.name
  bool overwrite = false;       // replace an earlier run's metrics in the run directory
  std::FILE* console = stderr;  // messages and the progress line; nullptr: log.txt only
};

struct TrainSummary {
  std::string run_dir;
  int steps = 0;
  double first_loss = std::numeric_limits<double>::quiet_NaN();
  double last_loss = std::numeric_limits<double>::quiet_NaN();
  double val_loss = std::numeric_limits<double>::quiet_NaN();  // the last evaluation; NaN without one
  double seconds = 0;
};

// run.dir / run.name, unless `override_dir` is given.
std::string run_dir_of(const Config& cfg, const std::string& override_dir);

TrainSummary train(const Config& cfg, const TrainOptions& options);

}  // namespace dt
