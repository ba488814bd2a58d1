// Declarations of the shape-inference and FLOP rules the op table (graph/ops.def) names.
// Inference rules live in infer_<family>.cc, FLOP rules in cost.cc.
#pragma once

#include "graph/op.h"

namespace lj {

#define LJ_OP(name, cat, nin, nout, infer, flops, vjp, flags)    \
  Status infer(const InferCtx& c, std::vector<TypedShape>* out); \
  double flops(const CostCtx& c);
#include "graph/ops.def"
#undef LJ_OP

// Shared by the rules: numpy broadcasting of two shapes; false when they do not broadcast.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);
// "add: cannot broadcast f32(4, 8) and f32(3, 8)"-style error naming the op and every input.
Status shape_error(const InferCtx& c, const std::string& what);

}  // namespace lj
