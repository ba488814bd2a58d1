// Algebraic simplification: a node whose result is one of its inputs, bit for bit, is dropped and
// its readers read that input. One rule so far, the one autodiff leaves in every train graph:
//   mul(x, constant 1) and mul(constant 1, x), when the product's type is x's type
// (the loss's VJPs scale their gradients by the incoming dloss, which is the seed, a constant 1:
// on `small` that was two full passes over the LM head's dw and dx, 3.6 ms of a compiled step,
// and a second 35 MiB buffer for dw). x * 1 == x exactly for every f32, bf16 and f64 value
// (signed zeros, infinities and NaN included; nothing in ljperf flushes denormals).
//
// A graph output cannot be renamed, so where the dropped product is a graph output (a weight's
// gradient) x's producer takes over the product's value id, as cse does; where both x and the
// product are graph outputs, or x is a graph input, the node stays.
//
// Before: autodiff (the rule's targets are its VJPs). After: dce is not needed (the dropped node
// is removed here; the constant goes with the next dce).
#pragma once

#include "passes/pass.h"

namespace lj {

class SimplifyPass : public Pass {
 public:
  const char* name() const override { return "simplify"; }
  StatusOr<bool> run(Graph& g) override;
};

}  // namespace lj
