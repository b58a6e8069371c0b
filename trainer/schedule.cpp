#include "trainer/schedule.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace dt {

double lr_at_step(int step, int steps, int warmup_steps, double lr, double min_lr) {
  DT_CHECK(step >= 1 && step <= steps, "lr_at_step: step {} outside 1..{}", step, steps);
  DT_CHECK(warmup_steps >= 0 && warmup_steps <= steps, "lr_at_step: warmup {} outside 0..{}", warmup_steps,
           steps);
  if (step <= warmup_steps) return lr * step / warmup_steps;
  double progress = static_cast<double>(step - warmup_steps) / (steps - warmup_steps);  // (0, 1]
  return min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace dt
