// CUDA elementwise kernels (f32 and bf16 storage, f32 math; cast also i32 / i64 / u8):
//   unary: neg exp log sqrt rsqrt reciprocal square silu sigmoid tanh pow_scalar
//   binary with numpy broadcasting: add sub mul div
//   cast(x) -> dtype attr
// One thread per output element, grid-stride; broadcast inputs are read through per-input
// strides (0 on broadcast dims), rank <= kMaxRank. The formulas of backends/cpu/elementwise.cc.
#pragma once

#include "backends/cuda/kernels.h"

namespace lj::cuda {

inline constexpr int kMaxRank = 8;

Status unary_forward(KernelContext& c, const KernelEnv& env);
Status binary_forward(KernelContext& c, const KernelEnv& env);
Status cast_forward(KernelContext& c, const KernelEnv& env);

}  // namespace lj::cuda
