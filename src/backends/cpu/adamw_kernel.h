// AdamW's update and the gradient norm's sum of squares: the CPU kernels of the optimizer step
// (train/adamw.h runs them over the parameters; probe/host_rates.h times the same code for the
// time model's optimizer rate).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace lj {

// The bits of f32_to_bf16 (core/dtype.h) without a branch, so an update loop stays vectorised.
inline uint16_t round_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// The constants of one AdamW update (torch's formulas for a step count and learning rate).
struct AdamWStepConstants {
  float step_size = 0;  // lr / (1 - beta1^t)
  float decay = 1;      // 1 - lr * weight_decay
  float beta1 = 0, beta2 = 0, eps = 0;
  float bc2_sqrt = 1;  // sqrt(1 - beta2^t)
  // Applied to each gradient element as it is read (clipping's max_norm / (norm + 1e-6)), so a
  // clipped step is still one pass: g * grad_scale rounds to f32 exactly as a separate scaling
  // pass would, and the update sees the same value.
  float grad_scale = 1;
};

// Updates n elements in place: parameters p, states m and v, from gradient g (all f32), in one
// vectorised pass that reads p, g, m, v and writes p, m, v once each (threads split [0, n) into
// static chunks; the update is elementwise, so the bits do not depend on the threads). The one
// copy of AdamW's arithmetic: AdamW::step and ZeRO's shard update (train/zero_optimizer.h) both
// call it, on whole parameters or on slices of them. p, g, m and v must not overlap.
//
// `low`, when set: the parameter's 16-bit copy (mixed precision, passes/master_weights), written
// in the same pass as the updated p, rounded to nearest even as the cast kernel rounds it, so
// the copy is bitwise the cast of the new master weight.
struct LowCopy {
  uint16_t* data = nullptr;   // n elements, or null: no copy
  DType dtype = DType::bf16;  // bf16 or f16
};
void adamw_update(const AdamWStepConstants& c, float* p, const float* g, float* m, float* v,
                  int64_t n, int threads, LowCopy low = {});
// Adds the squares of g[0, n) to *sum in f64, in fixed chunks (each as 32 interleaved partial
// sums combined pairwise) summed in order: the result depends on (g, n) only, not on the threads.
// train/adamw.h global_grad_norm is this over each gradient in turn.
void accumulate_squares(const float* g, int64_t n, int threads, double* sum);

}  // namespace lj
