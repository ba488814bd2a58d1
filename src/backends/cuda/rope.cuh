// CUDA kernel of the fused rotary embedding (f32 and bf16 storage, f32 math), one thread per
// output element, grid-stride; h = D / 2, row i of x uses row (i mod T) of cos and sin:
//   forward:  y[j] = x[j] cos[j] - x[j + h] sin[j]        j <  h
//             y[j] = x[j] cos[j] + x[j - h] sin[j]        j >= h
//   inverse:  y[j] = x[j] cos[j] + x[j + h] sin[j + h]    j <  h
//             y[j] = x[j] cos[j] - x[j - h] sin[j - h]    j >= h
// (backends/cpu/rope.cc's formulas.)
#pragma once

#include "backends/cuda/kernels.h"

namespace lj::cuda {

Status rope_forward(KernelContext& c, const KernelEnv& env);

}  // namespace lj::cuda
