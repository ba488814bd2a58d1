// Loss scaling for fp16 mixed precision, with DeepSpeed's meaning (its `fp16` block and
// runtime/fp16/loss_scaler.py's dynamic scaler and its defaults):
//   - the backward starts from loss x scale (the joint graph's `loss_scale` input), so small
//     f16 activation gradients do not flush to zero; the f32 parameter gradients are divided by
//     the scale again before clipping and AdamW;
//   - a step whose gradients hold inf or NaN overflowed: its update is skipped and counted;
//   - dynamic scaling (loss_scale 0): the scale starts at 2^initial_scale_power. An overflow
//     spends one unit of hysteresis; when none is left beyond the last (hysteresis 1, or the
//     count already down to 1) the scale halves instead, never below min_loss_scale; an overflow
//     at min_loss_scale is an error (the run diverged). After loss_scale_window steps in a row
//     without overflow the scale doubles and the hysteresis is refilled. With
//     consecutive_hysteresis, every overflow-free step refills it.
//   - static scaling (loss_scale > 0): the scale never changes; overflowing steps are skipped.
// The state is part of a checkpoint (TrainerState), so a resumed fp16 run is bit-exact.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace lj {

struct LossScaleConfig {
  bool enabled = false;              // fp16 runs; bf16 and f32 need no scaling
  double loss_scale = 0;             // 0: dynamic; > 0: this static scale
  int64_t initial_scale_power = 16;  // dynamic: the scale starts at 2^this
  int64_t loss_scale_window = 1000;  // overflow-free steps before the scale doubles
  int64_t hysteresis = 2;            // overflows absorbed before the scale halves
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1;
  Status validate() const;
};

// What a checkpoint keeps of a scaler.
struct LossScaleState {
  double scale = 1;
  int64_t iter = 0;                 // steps seen
  int64_t last_overflow_iter = -1;  // -1: none yet
  int64_t hysteresis_left = 0;
  int64_t overflows = 0;  // steps skipped for overflow, in total
};

class LossScaler {
 public:
  explicit LossScaler(const LossScaleConfig& config);
  // The scale of the next step's backward.
  double scale() const { return state_.scale; }
  // After a step whose gradients overflowed (inf or NaN) or not. An overflow at
  // min_loss_scale (dynamic) is an error: lowering the scale cannot help any more.
  Status update(bool overflow);

  const LossScaleState& state() const { return state_; }
  void restore(const LossScaleState& s) { state_ = s; }
  const LossScaleConfig& config() const { return config_; }

 private:
  LossScaleConfig config_;
  LossScaleState state_;
};

}  // namespace lj
