#include "graph/autodiff/autodiff.h"

#include "graph/autodiff/vjp.h"

namespace lj {

Status vjp_none(VjpCtx& c) {
  return unimplemented(std::string("op ") + op_name(c.node.op) + " is not differentiable",
                       "stop the gradient before it, or give the op a VJP rule");
}

StatusOr<std::vector<ValueId>> append_gradients(Graph* g, ValueId loss,
                                                std::span<const ValueId> wrt) {
  const size_t num_values = g->values().size();
  if (loss < 0 || static_cast<size_t>(loss) >= num_values)
    return invalid_argument("autodiff: bad loss value id");
  if (!is_float(g->type(loss).dtype))
    return invalid_argument("autodiff: the loss must be a float value");

  // Forward reachability: values that depend on some wrt value (only those carry gradients).
  std::vector<bool> depends(num_values, false);
  for (ValueId v : wrt) {
    if (is_float(g->type(v).dtype)) depends[static_cast<size_t>(v)] = true;
  }
  const size_t num_fwd_nodes = g->nodes().size();
  for (size_t i = 0; i < num_fwd_nodes; ++i) {
    const Node& n = g->nodes()[i];
    bool any = false;
    for (ValueId v : n.inputs) any = any || depends[static_cast<size_t>(v)];
    if (!any) continue;
    for (ValueId v : n.outputs) depends[static_cast<size_t>(v)] = is_float(g->type(v).dtype);
  }

  Builder b(g);
  b.set_phase(Phase::backward);
  // Gradient contributions per value, summed when first read.
  std::vector<std::vector<ValueId>> contrib(num_values);
  auto grad_of = [&](ValueId v) -> Val {
    auto& parts = contrib[static_cast<size_t>(v)];
    if (parts.empty()) return {};
    Val acc = b.val(parts[0]);
    for (size_t k = 1; k < parts.size(); ++k) acc = acc + b.val(parts[k]);
    parts.assign(1, acc.id);
    return acc;
  };

  {
    const TypedShape& lt = g->type(loss);
    Val seed = constant(b, 1.0, lt.dtype, lt.shape);
    if (!b.ok()) return b.status();
    contrib[static_cast<size_t>(loss)].push_back(seed.id);
  }

  for (size_t i = num_fwd_nodes; i-- > 0;) {
    const Node node = g->nodes()[i];  // copy: the graph grows below
    bool has_grad = false;
    for (ValueId v : node.outputs) has_grad = has_grad || !contrib[static_cast<size_t>(v)].empty();
    if (!has_grad) continue;
    std::vector<bool> needs(node.inputs.size());
    bool any_needs = false;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      needs[k] = depends[static_cast<size_t>(node.inputs[k])];
      any_needs = any_needs || needs[k];
    }
    if (!any_needs) continue;

    b.set_scope(node.scope);
    VjpCtx ctx{b, node, {}, {}, {}, needs, {}};
    for (ValueId v : node.inputs) ctx.in.push_back(b.val(v));
    for (ValueId v : node.outputs) {
      ctx.out.push_back(b.val(v));
      ctx.dout.push_back(grad_of(v));
    }
    ctx.din.resize(node.inputs.size());
    const OpDef& def = op_def(node.op);
    Status s = def.vjp(ctx);
    if (!s.ok())
      return s.with_context("autodiff of " + std::string(def.name) +
                            (node.scope.empty() ? "" : " at " + node.scope));
    if (!b.ok()) return b.status().with_context(std::string("autodiff of ") + def.name);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (!needs[k] || !ctx.din[k].valid()) continue;
      const TypedShape& want = g->type(node.inputs[k]);
      if (!(ctx.din[k].type() == want)) {
        return internal_error(std::string("VJP of ") + def.name + " gave " +
                              ctx.din[k].type().to_string() + " for an input of type " +
                              want.to_string());
      }
      contrib[static_cast<size_t>(node.inputs[k])].push_back(ctx.din[k].id);
    }
  }

  b.set_scope("");
  std::vector<ValueId> grads;
  for (ValueId v : wrt) {
    Val gv = grad_of(v);
    if (!gv.valid()) {
      const TypedShape& t = g->type(v);
      gv = constant(b, 0.0, t.dtype, t.shape);
    }
    if (!b.ok()) return b.status();
    grads.push_back(gv.id);
  }
  return grads;
}

}  // namespace lj
