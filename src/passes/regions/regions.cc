#include "passes/regions/regions.h"

namespace lj {

RegionReport find_regions(const Graph& g) {
  RegionReport r;
  bool in_region = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::input) continue;  // fed by the caller, part of no region
    const OpDef& def = op_def(n.op);
    if (def.flags & kCapturable) {
      if (!in_region) ++r.regions;
      in_region = true;
      continue;
    }
    in_region = false;
    GraphBreak b{static_cast<NodeId>(i), def.name, n.scope, n.phase, ""};
    if (n.op == Op::opaque) {
      b.reason = std::string("host callback '") + n.attrs.s("callback") + "'" +
                 (n.attrs.b_or("backward", false) ? " (backward)" : "");
    } else {
      b.reason = std::string(category_name(def.category)) + " op that cannot be captured";
    }
    r.breaks.push_back(std::move(b));
  }
  return r;
}

std::string RegionReport::to_string() const {
  std::string s = "compiled regions " + std::to_string(regions) + ", graph breaks " +
                  std::to_string(breaks.size()) + "\n";
  for (const GraphBreak& b : breaks) {
    s += "  break at node " + std::to_string(b.node) + ": " + b.op + " @" + b.scope + " [" +
         phase_name(b.phase) + "]: " + b.reason + "\n";
  }
  return s;
}

}  // namespace lj
