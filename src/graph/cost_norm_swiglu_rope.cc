// FLOP counts of the fused ops of pattern fusion (the op table's `flops` column; the conventions
// are cost.cc's). A fused forward op counts what the primitives it replaces count, so compile on
// or off reports the same useful arithmetic for the forward pass.
#include <cstdint>

#include "graph/op_rules.h"

namespace lj {
namespace {

double numel(const std::vector<int64_t>& dims) {
  return static_cast<double>(numel_of(dims));
}

}  // namespace

// square, mean (one add per element), mul by rstd, mul by w: 4 per element; add eps and rsqrt:
// 2 per row (rstd has one element per row).
double flops_rms_norm(const CostCtx& c) {
  return 4 * numel(c.in[0]) + 2 * numel(c.out[1]);
}

// The residual add, then rms_norm.
double flops_add_rms_norm(const CostCtx& c) {
  return 5 * numel(c.in[0]) + 2 * numel(c.out[2]);
}

// Per element: dy * w, * x, row sum (3); dx = rstd * (dy * w) - x * k (3); dw: dy * x * rstd
// and the sum over rows (3); the residual gradient add when given (1).
double flops_rms_norm_backward(const CostCtx& c) {
  return (c.in.size() == 5 ? 10 : 9) * numel(c.in[0]);
}

// silu and the product: 2 per element, as the primitives count them.
double flops_swiglu(const CostCtx& c) {
  return 2 * numel(c.out[0]);
}

// sigmoid, silu, dup = dout * silu, dgate = dout * up * s * (1 + g * (1 - s)): ~8 per element.
double flops_swiglu_backward(const CostCtx& c) {
  return 8 * numel(c.in[0]);
}

// x * cos, rotate_half(x) * sin and the add (1 each per element), the negation of half of x
// (0.5): 3.5 per element, as the primitives count. The inverse (rope's VJP) counts the same.
double flops_rope(const CostCtx& c) {
  return 3.5 * numel(c.out[0]);
}

}  // namespace lj
