// swiglu_fusion: mul(silu(gate), up), operands in either order -> swiglu(gate, up).
#include "core/log.h"
#include "passes/pattern_fusion/pattern_fusion.h"
#include "passes/pattern_fusion/rewrite.h"

namespace lj {

StatusOr<bool> SwigluFusion::run(Graph& g) {
  fusion::Rewriter rw(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& root = g.nodes()[i];
    if (root.op != Op::mul || rw.claimed(static_cast<NodeId>(i))) continue;
    for (int k = 0; k < 2; ++k) {
      const NodeId act = rw.match(root.inputs[static_cast<size_t>(k)], Op::silu);
      if (act < 0) continue;
      fusion::Fusion f;
      f.node = Node{.op = Op::swiglu,
                    .inputs = {g.node(act).inputs[0], root.inputs[static_cast<size_t>(1 - k)]},
                    .outputs = root.outputs,
                    .attrs = {},
                    .scope = root.scope,
                    .phase = root.phase};
      f.replaced = {act, static_cast<NodeId>(i)};
      if (rw.accept(std::move(f))) break;
    }
  }
  count_ = rw.accepted();
  LJ_LOG(debug) << "swiglu_fusion: " << count_ << " swiglu";
  return rw.apply(g);
}

}  // namespace lj
