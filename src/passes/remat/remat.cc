// The recompute rewrite (see remat.h): per region, which forward values the backward may read as
// they are, which forward nodes to clone for the rest, and where the clones go.
#include "passes/remat/remat.h"

#include <charconv>
#include <numeric>

#include "core/check.h"

namespace lj {
namespace {

constexpr std::string_view kLayerPrefix = "model.layers.";

bool is_kept_op(Op op) {
  const OpCategory c = op_def(op).category;
  return c == OpCategory::contraction || c == OpCategory::attention;
}

}  // namespace

int64_t layer_of_scope(const std::string& scope) {
  if (!scope.starts_with(kLayerPrefix)) return -1;
  const char* first = scope.data() + kLayerPrefix.size();
  const char* last = scope.data() + scope.size();
  int64_t l = -1;
  auto [end, ec] = std::from_chars(first, last, l);
  if (ec != std::errc() || end == first || (end != last && *end != '.')) return -1;
  return l;
}

int64_t RematPass::nodes_cloned() const {
  return std::accumulate(cloned_per_region_.begin(), cloned_per_region_.end(), int64_t{0});
}

StatusOr<bool> RematPass::run(Graph& g) {
  LJ_RETURN_IF_ERROR(config_.validate(num_layers_));
  const std::vector<RecomputeConfig::Region> regions = config_.regions(num_layers_);
  cloned_per_region_.assign(regions.size(), 0);
  if (regions.empty()) return false;
  std::vector<int> region_of_layer(static_cast<size_t>(num_layers_), -1);
  for (size_t r = 0; r < regions.size(); ++r) {
    for (int64_t l = regions[r].first; l <= regions[r].last; ++l) {
      region_of_layer[static_cast<size_t>(l)] = static_cast<int>(r);
    }
  }

  const std::vector<Node> nodes = g.nodes();  // copy: add_node below appends to g's list
  const size_t num_values = g.values().size();
  // Region of each forward node and of the values it produces (-1: none).
  std::vector<int> node_region(nodes.size(), -1);
  std::vector<int> value_region(num_values, -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.phase != Phase::forward) continue;
    const int64_t l = layer_of_scope(n.scope);
    if (l < 0 || l >= num_layers_) continue;
    node_region[i] = region_of_layer[static_cast<size_t>(l)];
    for (ValueId v : n.outputs) value_region[static_cast<size_t>(v)] = node_region[i];
  }

  // Region values the backward may read as they are.
  std::vector<bool> kept(num_values, false);
  for (const NamedValue& o : g.outputs()) kept[static_cast<size_t>(o.value)] = true;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.phase == Phase::forward) {
      // A forward reader outside the value's region: the region's output.
      for (ValueId v : n.inputs) {
        const int r = value_region[static_cast<size_t>(v)];
        if (r >= 0 && r != node_region[i]) kept[static_cast<size_t>(v)] = true;
      }
      // A host callback may have side effects, and a collective talks to the other ranks
      // (expert parallelism's exchange): each runs once, whatever the policy.
      if (node_region[i] >= 0 &&
          (n.op == Op::opaque || op_def(n.op).category == OpCategory::collective ||
           (config_.policy == RecomputePolicy::selective && is_kept_op(n.op)))) {
        for (ValueId v : n.outputs) kept[static_cast<size_t>(v)] = true;
      }
    }
  }
  auto recomputed = [&](ValueId v) {
    return value_region[static_cast<size_t>(v)] >= 0 && !kept[static_cast<size_t>(v)];
  };

  // Values to recompute: read by a backward node, then (reverse sweep over the forward nodes)
  // the region values those are computed from. first_reader[r]: the first backward node that
  // reads a recomputed value of region r.
  std::vector<bool> needed(num_values, false);
  std::vector<size_t> first_reader(regions.size(), nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.phase == Phase::forward) continue;
    for (ValueId v : n.inputs) {
      if (!recomputed(v)) continue;
      needed[static_cast<size_t>(v)] = true;
      const auto r = static_cast<size_t>(value_region[static_cast<size_t>(v)]);
      first_reader[r] = std::min(first_reader[r], i);
    }
  }
  std::vector<bool> clone_node(nodes.size(), false);
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& n = nodes[i];
    if (node_region[i] < 0) continue;
    for (ValueId v : n.outputs) clone_node[i] = clone_node[i] || needed[static_cast<size_t>(v)];
    if (!clone_node[i]) continue;
    for (ValueId v : n.inputs) {
      // Inputs from another region are that region's outputs, hence kept.
      if (recomputed(v)) needed[static_cast<size_t>(v)] = true;
    }
  }

  // Clones, per region in forward order (a topological order): new backward-phase nodes.
  std::vector<ValueId> copy(num_values);
  std::iota(copy.begin(), copy.end(), ValueId{0});
  std::vector<std::vector<Node>> clones(regions.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!clone_node[i]) continue;
    const Node& n = nodes[i];
    std::vector<ValueId> inputs;
    for (ValueId v : n.inputs) inputs.push_back(copy[static_cast<size_t>(v)]);
    std::vector<TypedShape> types;
    for (ValueId v : n.outputs) types.push_back(g.type(v));
    Attrs attrs = n.attrs;
    attrs.set("recompute", true);
    const NodeId id = g.add_node(n.op, std::move(inputs), std::move(attrs), std::move(types),
                                 n.scope, Phase::backward);
    const Node& c = g.node(id);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (recomputed(n.outputs[k])) copy[static_cast<size_t>(n.outputs[k])] = c.outputs[k];
    }
    const auto r = static_cast<size_t>(node_region[i]);
    clones[r].push_back(c);
    ++cloned_per_region_[r];
  }
  if (nodes_cloned() == 0) return false;

  // The new order: each region's clones right before its first backward reader; backward
  // readers rewired to the clones.
  std::vector<Node> order;
  order.reserve(nodes.size() + static_cast<size_t>(nodes_cloned()));
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t r = 0; r < regions.size(); ++r) {
      if (first_reader[r] != i) continue;
      for (Node& c : clones[r]) order.push_back(std::move(c));
    }
    Node n = nodes[i];
    if (n.phase != Phase::forward) {
      for (ValueId& v : n.inputs) {
        if (recomputed(v)) v = copy[static_cast<size_t>(v)];
      }
    }
    order.push_back(std::move(n));
  }
  LJ_CHECK_EQ(order.size(), g.nodes().size());
  g.set_nodes(std::move(order));
  return true;
}

}  // namespace lj
