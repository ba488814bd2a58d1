// The pattern-fusion rules' shared machinery (rewrite.h): the use index and the exact rewrite.
#include "passes/pattern_fusion/rewrite.h"

#include <algorithm>

namespace lj::fusion {

UseIndex::UseIndex(const Graph& g)
    : users_(g.values().size()),
      is_output_(g.values().size(), false),
      producer_(g.values().size(), -1) {
  const std::vector<Node>& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (ValueId v : nodes[i].inputs)
      users_[static_cast<size_t>(v)].push_back(static_cast<NodeId>(i));
    for (ValueId v : nodes[i].outputs) producer_[static_cast<size_t>(v)] = static_cast<NodeId>(i);
  }
  for (const NamedValue& o : g.outputs()) is_output_[static_cast<size_t>(o.value)] = true;
}

NodeId Rewriter::match(ValueId v, Op op) const {
  const NodeId p = uses_.producer(v);
  if (p < 0 || claimed(p) || g_.node(p).op != op) return -1;
  return p;
}

bool Rewriter::accept(Fusion f) {
  std::vector<NodeId> removed = f.replaced;
  auto in_removed = [&](NodeId n) {
    return std::find(removed.begin(), removed.end(), n) != removed.end();
  };
  for (NodeId n : f.replaced) {
    if (claimed(n) || g_.node(n).phase != f.node.phase) return false;
  }
  // A shared leaf (read outside the fusion) stays; an unshared one goes with the rest.
  for (NodeId n : f.optional) {
    if (claimed(n) || in_removed(n) || g_.node(n).phase != f.node.phase) continue;
    bool inside = true;
    for (ValueId v : g_.node(n).outputs) {
      if (uses_.is_output(v)) inside = false;
      for (NodeId u : uses_.users(v)) inside = inside && in_removed(u);
    }
    if (inside) removed.push_back(n);
  }
  // The fused op must infer exactly the types of the values it takes over.
  const OpDef& def = op_def(f.node.op);
  if (static_cast<int>(f.node.outputs.size()) != def.num_outputs) return false;
  std::vector<TypedShape> in, out;
  for (ValueId v : f.node.inputs) in.push_back(g_.type(v));
  if (!def.infer(InferCtx{def, in, f.node.attrs}, &out).ok()) return false;
  NodeId at = static_cast<NodeId>(g_.nodes().size());
  for (size_t k = 0; k < out.size(); ++k) {
    const ValueId v = f.node.outputs[k];
    if (!(g_.type(v) == out[k]) || !in_removed(uses_.producer(v))) return false;
    if (std::count(f.node.outputs.begin(), f.node.outputs.end(), v) != 1) return false;
    at = std::min(at, uses_.producer(v));
  }
  // Every value of a removed node that is not taken over is read inside the fusion only.
  for (NodeId n : removed) {
    for (ValueId v : g_.node(n).outputs) {
      if (std::find(f.node.outputs.begin(), f.node.outputs.end(), v) != f.node.outputs.end()) {
        continue;
      }
      if (uses_.is_output(v)) return false;
      for (NodeId u : uses_.users(v)) {
        if (!in_removed(u)) return false;
      }
    }
  }
  // The fused node's inputs exist where it goes and are not removed with the subgraph.
  for (ValueId v : f.node.inputs) {
    const NodeId p = uses_.producer(v);
    if (p < 0 || p >= at || in_removed(p)) return false;
  }
  for (NodeId n : removed) claimed_[static_cast<size_t>(n)] = true;
  fusions_.push_back(Placed{std::move(f.node), at});
  return true;
}

bool Rewriter::apply(Graph& g) {
  if (fusions_.empty()) return false;
  const std::vector<Node>& nodes = g.nodes();
  std::vector<int> fused_at(nodes.size(), -1);
  for (size_t k = 0; k < fusions_.size(); ++k) {
    fused_at[static_cast<size_t>(fusions_[k].at)] = static_cast<int>(k);
  }
  std::vector<Node> out;
  out.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (fused_at[i] >= 0) {
      out.push_back(std::move(fusions_[static_cast<size_t>(fused_at[i])].node));
    } else if (!claimed_[i]) {
      out.push_back(nodes[i]);
    }
  }
  fusions_.clear();
  g.set_nodes(std::move(out));
  return true;
}

int norm_axis(int64_t axis, int rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  return a >= 0 && a < rank ? static_cast<int>(a) : -1;
}

}  // namespace lj::fusion
