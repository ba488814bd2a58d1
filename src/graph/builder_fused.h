// Builder functions of the fused ops (graph/ops.def's pattern-fusion block). Models are written in
// primitives (models/llama.cc); these are what passes/pattern_fusion puts in their place, what the
// fused VJP rules build, and what the op tests call. Kept apart from builder.h so that a model's
// own helper named rms_norm or rope never becomes an ambiguous call.
#pragma once

#include "graph/builder.h"

namespace lj {

struct RmsNormResult {
  Val y;     // (..., C)
  Val rstd;  // (..., 1): rsqrt(mean(x^2, -1) + eps), saved for the backward
};
// x (..., C), w (C): y = x * rsqrt(mean(x^2, -1) + eps) * w, in x's dtype (HF LlamaRMSNorm).
RmsNormResult rms_norm(Val x, Val w, double eps);

struct AddRmsNormResult {
  Val sum;   // (..., C): x + r
  Val y;     // (..., C): rms_norm(sum, w)
  Val rstd;  // (..., 1)
};
// The residual add fused before the norm: s = x + r (equal shapes), y = rms_norm(s, w, eps).
AddRmsNormResult add_rms_norm(Val x, Val r, Val w, double eps);

struct RmsNormGrads {
  Val dx;  // (..., C), plus dres when given
  Val dw;  // (C)
};
// The gradients of y = rms_norm(x, w) given dy and the forward's rstd; dres (optional, invalid
// for none) is added to dx.
RmsNormGrads rms_norm_backward(Val dy, Val x, Val w, Val rstd, Val dres = {});

// silu(gate) * up, equal shapes.
Val swiglu(Val gate, Val up);
struct SwigluGrads {
  Val dgate, dup;
};
SwigluGrads swiglu_backward(Val dout, Val gate, Val up);
// x (..., 2F) -> silu(x[..., :F]) * x[..., F:] (..., F), and its gradient dx (..., 2F): swiglu
// over a tensor that holds gate and up side by side (the experts' fused gate-up GEMM's output).
Val swiglu_packed(Val x);
Val swiglu_packed_backward(Val dout, Val x);

// x (..., T, D), cos, sin (T, D): x * cos + rotate_half(x) * sin, HF's rotate_half = cat(-x2, x1)
// on the last dim; inverse applies the transpose rotation (rope's VJP).
Val rope(Val x, Val cos, Val sin, bool inverse = false);

}  // namespace lj
