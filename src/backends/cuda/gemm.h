// The row-major GEMM of gemm.cc for other kernels of the backend (linear_cross_entropy):
// out (M, N) = op(a) (M, K) x op(b) (K, N) [+ c (M, N), beta = 1; c may be out itself], a and b
// of `operands` (f32 or bf16), c and out of `result` (f32, or bf16 when operands are), f32
// accumulation, on env.stream.
#pragma once

#include "backends/cuda/kernels.h"

namespace lj::cuda {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
};

Status gemm(const GemmShape& s, DType operands, DType result, const void* a, const void* b,
            const void* c, void* out, const KernelEnv& env);

}  // namespace lj::cuda
