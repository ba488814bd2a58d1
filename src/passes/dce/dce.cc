// Dead-code elimination: one backward sweep marking live values from the graph outputs.
#include "passes/dce/dce.h"

#include <vector>

namespace lj {

StatusOr<bool> DcePass::run(Graph& g) {
  const std::vector<Node>& nodes = g.nodes();
  std::vector<bool> live_value(g.values().size(), false);
  for (const NamedValue& o : g.outputs()) live_value[static_cast<size_t>(o.value)] = true;
  std::vector<bool> keep(nodes.size(), false);
  // Nodes are in topological order, so every use of a value comes after its producer: a reverse
  // sweep sees all users of a node before the node itself.
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& n = nodes[i];
    bool live = n.op == Op::input;
    for (ValueId v : n.outputs) live = live || live_value[static_cast<size_t>(v)];
    if (!live) continue;
    keep[i] = true;
    for (ValueId v : n.inputs) live_value[static_cast<size_t>(v)] = true;
  }
  std::vector<Node> kept;
  kept.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (keep[i]) kept.push_back(nodes[i]);
  }
  if (kept.size() == nodes.size()) return false;
  g.set_nodes(std::move(kept));
  return true;
}

}  // namespace lj
