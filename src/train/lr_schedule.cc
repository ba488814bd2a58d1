#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace lj {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps)
    return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (decay == Decay::constant) return max_lr;
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps) /
                        static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps)));
  if (decay == Decay::linear) return max_lr + (min_lr - max_lr) * progress;
  return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace lj
