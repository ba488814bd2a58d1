// Common-subexpression elimination with a hash table keyed by (op, canonical inputs, attrs).
#include "passes/cse/cse.h"

#include <functional>
#include <unordered_map>
#include <vector>

#include "core/check.h"

namespace lj {
namespace {

// Follows the replacement chain to the value that survives.
ValueId canonical(std::vector<ValueId>& repl, ValueId v) {
  ValueId r = v;
  while (repl[static_cast<size_t>(r)] != r) r = repl[static_cast<size_t>(r)];
  // Path compression keeps later lookups O(1).
  while (repl[static_cast<size_t>(v)] != r) {
    const ValueId next = repl[static_cast<size_t>(v)];
    repl[static_cast<size_t>(v)] = r;
    v = next;
  }
  return r;
}

size_t node_hash(const Node& n) {
  size_t h = std::hash<int>()(static_cast<int>(n.op));
  auto mix = [&h](size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for (ValueId v : n.inputs) mix(std::hash<int32_t>()(v));
  // Source ops (constant, iota, random) have no inputs: the attributes tell them apart.
  mix(std::hash<std::string>()(n.attrs.to_string()));
  return h;
}

bool same_computation(const Node& a, const Node& b) {
  return a.op == b.op && a.inputs == b.inputs && a.attrs == b.attrs;
}

}  // namespace

StatusOr<bool> CsePass::run(Graph& g) {
  std::vector<Node> nodes = g.nodes();
  std::vector<ValueId> repl(g.values().size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = static_cast<ValueId>(v);
  std::vector<bool> is_output(g.values().size(), false);
  for (const NamedValue& o : g.outputs()) is_output[static_cast<size_t>(o.value)] = true;

  // hash -> indices (into `nodes`) of surviving nodes with that hash.
  std::unordered_map<size_t, std::vector<size_t>> table;
  std::vector<bool> dropped(nodes.size(), false);
  bool changed = false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    for (ValueId& v : n.inputs) v = canonical(repl, v);
    if (n.op == Op::input) continue;
    const size_t h = node_hash(n);
    std::vector<size_t>& bucket = table[h];
    size_t match = nodes.size();
    for (size_t j : bucket) {
      if (same_computation(nodes[j], n)) {
        match = j;
        break;
      }
    }
    if (match == nodes.size()) {
      bucket.push_back(i);
      continue;
    }
    Node& keep = nodes[match];
    LJ_CHECK_EQ(keep.outputs.size(), n.outputs.size());
    bool both_outputs = false;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      both_outputs = both_outputs || (is_output[static_cast<size_t>(keep.outputs[k])] &&
                                      is_output[static_cast<size_t>(n.outputs[k])]);
    }
    if (both_outputs) {
      bucket.push_back(i);
      continue;
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const ValueId a = keep.outputs[k];
      const ValueId b = n.outputs[k];
      if (is_output[static_cast<size_t>(b)]) {
        // The graph output's id survives; the earlier node produces it from now on. Nodes
        // between the two that read `a` are rewritten in the final sweep below.
        keep.outputs[k] = b;
        repl[static_cast<size_t>(a)] = b;
      } else {
        repl[static_cast<size_t>(b)] = a;
      }
    }
    dropped[i] = true;
    changed = true;
  }
  if (!changed) return false;
  std::vector<Node> kept;
  kept.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (dropped[i]) continue;
    for (ValueId& v : nodes[i].inputs) v = canonical(repl, v);
    kept.push_back(std::move(nodes[i]));
  }
  g.set_nodes(std::move(kept));
  return true;
}

}  // namespace lj
