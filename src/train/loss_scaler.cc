#include "train/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace lj {

Status LossScaleConfig::validate() const {
  if (loss_scale < 0 || !std::isfinite(loss_scale)) {
    return invalid_argument("fp16 loss_scale must be a finite number >= 0",
                            "0 means dynamic loss scaling");
  }
  if (initial_scale_power < 0 || initial_scale_power > 63) {
    return invalid_argument("fp16 initial_scale_power must be in [0, 63]", "default 16");
  }
  if (loss_scale_window < 1)
    return invalid_argument("fp16 loss_scale_window must be >= 1", "default 1000");
  if (hysteresis < 1) return invalid_argument("fp16 hysteresis must be >= 1", "default 2");
  if (!(min_loss_scale > 0))
    return invalid_argument("fp16 min_loss_scale must be > 0", "default 1");
  return ok_status();
}

LossScaler::LossScaler(const LossScaleConfig& config) : config_(config) {
  const bool dynamic = config.loss_scale == 0;
  state_.scale = !config.enabled ? 1.0
                 : dynamic       ? std::ldexp(1.0, static_cast<int>(config.initial_scale_power))
                                 : config.loss_scale;
  state_.hysteresis_left = config.hysteresis;
}

Status LossScaler::update(bool overflow) {
  const bool dynamic = config_.enabled && config_.loss_scale == 0;
  LossScaleState& s = state_;
  if (overflow) ++s.overflows;
  if (!dynamic) {
    ++s.iter;
    return ok_status();
  }
  if (overflow) {
    if (config_.hysteresis == 1 || s.hysteresis_left == 1) {
      if (s.scale <= config_.min_loss_scale) {
        return internal_error("the fp16 gradients overflow at the minimum loss scale (" +
                                  std::to_string(config_.min_loss_scale) + ", step " +
                                  std::to_string(s.iter + 1) + ")",
                              "the run diverged: lower --lr, or train in bf16");
      }
      s.scale = std::max(s.scale / 2, config_.min_loss_scale);
    } else {
      --s.hysteresis_left;
    }
    s.last_overflow_iter = s.iter;
  } else {
    if (config_.consecutive_hysteresis) s.hysteresis_left = config_.hysteresis;
    const int64_t stable = s.iter - s.last_overflow_iter - 1;
    if (stable > 0 && stable % config_.loss_scale_window == 0) {
      if (!config_.consecutive_hysteresis) s.hysteresis_left = config_.hysteresis;
      s.scale *= 2;
    }
  }
  ++s.iter;
  return ok_status();
}

}  // namespace lj
