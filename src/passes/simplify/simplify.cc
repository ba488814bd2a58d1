#include "passes/simplify/simplify.h"

#include <vector>

namespace lj {
namespace {

// Follows the replacement chain to the value that survives.
ValueId canonical(const std::vector<ValueId>& repl, ValueId v) {
  while (repl[static_cast<size_t>(v)] != v) v = repl[static_cast<size_t>(v)];
  return v;
}

bool is_constant_one(const Graph& g, ValueId v) {
  const Node& p = g.producer(v);
  return p.op == Op::constant && p.attrs.f_or("value", 0.0) == 1.0;
}

// The input of `n` its output equals, or kNoValue.
ValueId identity_input(const Graph& g, const Node& n) {
  if (n.op != Op::mul || n.inputs.size() != 2 || n.outputs.size() != 1) return kNoValue;
  for (int k = 0; k < 2; ++k) {
    const ValueId x = n.inputs[static_cast<size_t>(k)];
    const ValueId one = n.inputs[static_cast<size_t>(1 - k)];
    if (is_constant_one(g, one) && g.type(x) == g.type(n.outputs[0])) return x;
  }
  return kNoValue;
}

}  // namespace

StatusOr<bool> SimplifyPass::run(Graph& g) {
  std::vector<bool> is_output(g.values().size(), false);
  for (const NamedValue& o : g.outputs()) is_output[static_cast<size_t>(o.value)] = true;
  std::vector<bool> is_input(g.values().size(), false);
  for (ValueId v : g.inputs()) is_input[static_cast<size_t>(v)] = true;
  std::vector<ValueId> repl(g.values().size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = static_cast<ValueId>(v);
  // Where a producer's output is renamed to a graph output's id: (value, new id).
  std::vector<ValueId> rename(g.values().size(), kNoValue);
  std::vector<bool> dropped(g.nodes().size(), false);
  bool changed = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    ValueId x = identity_input(g, n);
    if (x == kNoValue) continue;
    x = canonical(repl, x);
    const ValueId y = n.outputs[0];
    if (!is_output[static_cast<size_t>(y)]) {
      repl[static_cast<size_t>(y)] = x;
    } else if (!is_output[static_cast<size_t>(x)] && !is_input[static_cast<size_t>(x)]) {
      // x's producer makes y from now on; every reader of x reads y. (x is canonical, so it was
      // never renamed: a renamed value points at its new id in repl.)
      rename[static_cast<size_t>(x)] = y;
      repl[static_cast<size_t>(x)] = y;
    } else {
      continue;
    }
    dropped[i] = true;
    changed = true;
  }
  if (!changed) return false;
  std::vector<Node> kept;
  kept.reserve(g.nodes().size());
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (dropped[i]) continue;
    Node n = g.nodes()[i];
    for (ValueId& v : n.inputs) v = canonical(repl, v);
    for (ValueId& v : n.outputs) {
      if (rename[static_cast<size_t>(v)] != kNoValue) v = rename[static_cast<size_t>(v)];
    }
    kept.push_back(std::move(n));
  }
  g.set_nodes(std::move(kept));
  return true;
}

}  // namespace lj
