// Learning-rate schedule: linear warmup to max_lr over warmup_steps (step s gets
// max_lr * (s + 1) / warmup_steps), then cosine or linear decay to min_lr at total_steps, then
// min_lr. Steps count from 0. tools/ref/make_fixtures.py implements the same formula.
#pragma once

#include <cstdint>

namespace lj {

struct LrSchedule {
  enum class Decay { cosine, linear, constant };
  double max_lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  Decay decay = Decay::cosine;

  double at(int64_t step) const;
};

}  // namespace lj
