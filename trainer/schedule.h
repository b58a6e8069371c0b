// Learning-rate schedule: linear warmup, then cosine decay to min_lr at the last step
// (nanoGPT / llm.c), with steps counted from 1:
//   s <= W:  lr(s) = lr * s / W                  (step 1 gets lr / W, never 0, as in llm.c)
//   s >  W:  lr(s) = min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * (s - W) / (N - W)))
// so lr(W) = lr and lr(N) = min_lr exactly. (llm.c's decay uses s - 1 in place of s and stops
// one step short of min_lr; we land on it.)
#pragma once

namespace dt {

// `step` in 1..steps. warmup_steps in 0..steps.
double lr_at_step(int step, int steps, int warmup_steps, double lr, double min_lr);

}  // namespace dt
