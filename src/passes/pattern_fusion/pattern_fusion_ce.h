// Pattern fusion for the loss and the residual adds: rules that find what models/llama.cc builds
// in primitives and replace it with one fused op that brings its own fused VJP.
//
//   linear_cross_entropy_fusion:
//     cross_entropy(reshape(matmul(x (..., C), w (V, C), tb=true), (N, V)), labels (N))
//       -> linear_cross_entropy(reshape(x, (N, C)), w, labels)
//     so neither the (N, V) logits nor their gradient is ever made (the kernel goes by chunks).
//   matmul_add_fusion:
//     add(r, matmul(a, b)) or add(matmul(a, b), r), r of the product's type (no broadcast)
//       -> matmul_add(a, b, r): the residual add becomes the GEMM's epilogue (beta = 1).
//
// A rule fires only when every intermediate value (the product, the reshaped logits) has no
// use outside the pattern and is not a graph output: GraphOptions::output_logits keeps the
// logits, so the loss is then left alone. The fused node takes the position of the pattern's
// last node and keeps its output value ids, so the loss id and every later use stay valid.
//
// Before: the forward graph, before autodiff (the fused ops carry their own VJP rules; a
// backward graph has no cross_entropy to match and matmul_add there would need its gradient
// consumers rewritten). After: autodiff; nothing else is required (the rules leave no dead
// nodes: the replaced nodes are removed).
#pragma once

#include <memory>

#include "passes/pass.h"

namespace lj {

std::unique_ptr<Pass> make_linear_cross_entropy_fusion();
std::unique_ptr<Pass> make_matmul_add_fusion();

}  // namespace lj
