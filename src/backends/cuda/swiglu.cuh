// CUDA kernels of the fused SwiGLU (f32 and bf16 storage, f32 math), elementwise over equal
// shapes, grid-stride:
//   swiglu(gate, up) -> silu(gate) * up,  silu(g) = g / (1 + exp(-g))
//   swiglu_backward(dout, gate, up) -> dgate = (dout * up) * (s * (1 + g * (1 - s))),
//                                      dup = dout * silu(g),  s = 1 / (1 + exp(-g))
// The formulas of backends/cpu/swiglu.cc in the same order (expf: CUDA's, within 2 ulp).
#pragma once

#include "backends/cuda/kernels.h"

namespace lj::cuda {

Status swiglu_forward(KernelContext& c, const KernelEnv& env);
Status swiglu_backward(KernelContext& c, const KernelEnv& env);

}  // namespace lj::cuda
