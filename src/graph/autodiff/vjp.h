// What a VJP rule sees. Rules live one file per op family (elementwise_vjp.cc, ...), are named
// vjp_<op>, and are listed in the op table (graph/ops.def). A rule builds backward nodes with the
// ordinary builder (phase and scope are already set) and writes din[i] for each input i with
// needs_grad[i]; it may leave din[i] invalid when that input gets no gradient.
// Ops that are not differentiable name vjp_none, which fails with a message naming the op.
#pragma once

#include <vector>

#include "graph/builder.h"

namespace lj {

struct VjpCtx {
  Builder& b;
  const Node& node;              // the forward node (a copy: the graph grows while rules run)
  std::vector<Val> in;           // its inputs
  std::vector<Val> out;          // its outputs
  std::vector<Val> dout;         // gradient of the loss w.r.t. each output; invalid = zero
  std::vector<bool> needs_grad;  // which inputs need a gradient
  std::vector<Val> din;          // filled by the rule, same length as `in`
};

// Rule declarations (the op table names them).
#define LJ_OP(name, cat, nin, nout, infer, flops, vjp, flags) Status vjp(VjpCtx& c);
#include "graph/ops.def"
#undef LJ_OP

}  // namespace lj
