// Multi-tensor AdamW on the GPU: one launch updates many parameters (f32 parameters, gradients
// and states, in place), with torch.optim.AdamW's arithmetic in the order of
// train/adamw.cc's adamw_update:
//   g *= grad_scale (clipping);  p *= decay;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g²;
//   p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)
// Tensors are cut into chunks of kAdamWChunk elements; each launch carries up to kAdamWTensors
// tensors and kAdamWBlocks chunks in its parameter block (one block per chunk), as apex's
// multi_tensor_apply does, so a model's hundreds of parameters take a handful of launches.
#pragma once

#include <cstdint>
#include <span>

#include "backends/cuda/kernels.h"

namespace lj::cuda {

inline constexpr int kAdamWTensors = 36;
inline constexpr int kAdamWBlocks = 320;
inline constexpr int64_t kAdamWChunk = 65536;

// The constants of one step (train/adamw.h's AdamWStepConstants).
struct AdamWConstants {
  float step_size = 0, decay = 1, beta1 = 0, beta2 = 0, eps = 0, bc2_sqrt = 1;
  float grad_scale = 1;  // each gradient is read times this (clipping folded into the update)
};

struct AdamWTensor {
  float* p = nullptr;
  const float* g = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  int64_t n = 0;
};

// Device pointers; asynchronous on env.stream.
Status adamw_multi_tensor(const AdamWConstants& c, std::span<const AdamWTensor> tensors,
                          const KernelEnv& env);

}  // namespace lj::cuda
