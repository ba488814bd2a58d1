// CUDA kernels of the fused RMSNorm ops (f32 and bf16 storage, f32 math):
//   rms_norm(x (N, C), w (C)) -> y (N, C), rstd (N, 1)          one block per row
//   add_rms_norm(x, r, w) -> s = x + r, y = rms_norm(s, w), rstd
//   rms_norm_backward(dy, x, w, rstd [, dres]) -> dx (N, C), dw (C)
//       dx = rstd * w * dy - x * (rstd^3 / C) * sum_c(dy * w * x) (+ dres)   one block per row
//       dw = sum over rows of dy * x * rstd    one block per 32 columns, 8 warps over the rows,
//                                              their partials added in a fixed order
// Same formulas as backends/cpu/norm.cc; sums are f32 block reductions (the CPU's are f64), so
// results agree to f32 rounding, not bitwise.
#pragma once

#include "backends/cuda/kernels.h"

namespace lj::cuda {

Status rms_norm_forward(KernelContext& c, const KernelEnv& env);
Status add_rms_norm_forward(KernelContext& c, const KernelEnv& env);
Status rms_norm_backward(KernelContext& c, const KernelEnv& env);

}  // namespace lj::cuda
