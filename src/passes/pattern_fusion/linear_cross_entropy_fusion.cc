// linear_cross_entropy_fusion (see pattern_fusion_ce.h): the lm_head projection and the
// cross-entropy become one chunked op.
#include <vector>

#include "core/log.h"
#include "graph/builder.h"
#include "passes/pattern_fusion/pattern_fusion_ce.h"

namespace lj {
namespace {

// One match: node indices of the three pattern nodes.
struct Match {
  size_t matmul = 0, reshape = 0, loss = 0;
};

class LinearCrossEntropyFusion final : public Pass {
 public:
  const char* name() const override { return "linear_cross_entropy_fusion"; }
  StatusOr<bool> run(Graph& g) override;
};

// The index of the node producing `v` when its op is `op`, that value has exactly one use and
// is not a graph output; -1 otherwise.
int64_t sole_use_producer(const Graph& g, ValueId v, Op op, const std::vector<int>& uses,
                          const std::vector<bool>& is_output) {
  const auto k = static_cast<size_t>(v);
  if (uses[k] != 1 || is_output[k]) return -1;
  const NodeId p = g.value(v).node;
  if (p < 0 || g.node(p).op != op) return -1;
  return p;
}

bool match_at(const Graph& g, size_t i, const std::vector<int>& uses,
              const std::vector<bool>& is_output, Match* m) {
  const Node& ce = g.nodes()[i];
  if (ce.op != Op::cross_entropy) return false;
  const int64_t r = sole_use_producer(g, ce.inputs[0], Op::reshape, uses, is_output);
  if (r < 0) return false;
  const Node& reshape = g.node(static_cast<NodeId>(r));
  const int64_t mm = sole_use_producer(g, reshape.inputs[0], Op::matmul, uses, is_output);
  if (mm < 0) return false;
  const Node& matmul = g.node(static_cast<NodeId>(mm));
  if (matmul.attrs.b("ta") || !matmul.attrs.b("tb")) return false;
  const Shape& x = g.type(matmul.inputs[0]).shape;
  const Shape& w = g.type(matmul.inputs[1]).shape;
  const Shape& logits = g.type(reshape.inputs[0]).shape;
  if (x.rank() < 2 || w.rank() != 2) return false;
  // The reshape must only flatten the leading dims: (..., V) -> (prod(...), V).
  Dim rows(1);
  for (int d = 0; d + 1 < logits.rank(); ++d) rows = rows * logits[d];
  if (g.type(ce.inputs[0]).shape != Shape{rows, logits[logits.rank() - 1]}) return false;
  m->matmul = static_cast<size_t>(mm);
  m->reshape = static_cast<size_t>(r);
  m->loss = i;
  return true;
}

StatusOr<bool> LinearCrossEntropyFusion::run(Graph& g) {
  const std::vector<int> uses = g.use_counts();
  std::vector<bool> is_output(g.values().size(), false);
  for (const NamedValue& o : g.outputs()) is_output[static_cast<size_t>(o.value)] = true;
  std::vector<Match> matches;
  const size_t num_nodes = g.nodes().size();
  for (size_t i = 0; i < num_nodes; ++i) {
    Match m;
    if (match_at(g, i, uses, is_output, &m)) matches.push_back(m);
  }
  if (matches.empty()) return false;

  // Build the replacements at the end of the node list, then splice them in where each loss was.
  std::vector<bool> drop(num_nodes, false);
  std::vector<std::vector<size_t>> insert_at(num_nodes);  // loss index -> new node indices
  Builder b(&g);
  for (const Match& m : matches) {
    const Node matmul = g.nodes()[m.matmul];  // copies: the node list grows below
    const Node ce = g.nodes()[m.loss];
    const Shape flat = g.type(ce.inputs[0]).shape;    // (N, V)
    const Shape xs = g.type(matmul.inputs[0]).shape;  // (..., C)
    b.set_scope(matmul.scope);
    const size_t first = g.nodes().size();
    Val x = b.val(matmul.inputs[0]);
    if (xs.rank() != 2) x = reshape(x, Shape{flat[0], xs[xs.rank() - 1]});  // (N, C)
    const LinearCrossEntropyResult r =
        linear_cross_entropy(x, b.val(matmul.inputs[1]), b.val(ce.inputs[1]),
                             ce.attrs.i_or("ignore_index", -100), /*chunk=*/0);
    if (!b.ok()) return b.status().with_context("linear_cross_entropy_fusion at " + ce.scope);
    // The fused node produces the old loss value, so the loss id (graph output, autodiff's
    // target) stays; the builder's fresh loss value is left without a producer.
    g.mutable_nodes()[static_cast<size_t>(g.value(r.loss.id).node)].outputs[0] = ce.outputs[0];
    for (size_t k = first; k < g.nodes().size(); ++k) insert_at[m.loss].push_back(k);
    drop[m.matmul] = drop[m.reshape] = drop[m.loss] = true;
  }
  std::vector<Node> nodes;
  nodes.reserve(g.nodes().size());
  for (size_t i = 0; i < num_nodes; ++i) {
    for (size_t k : insert_at[i]) nodes.push_back(g.nodes()[k]);
    if (!drop[i]) nodes.push_back(g.nodes()[i]);
  }
  g.set_nodes(std::move(nodes));
  LJ_LOG(debug) << "linear_cross_entropy_fusion: " << matches.size() << " match(es)";
  return true;
}

}  // namespace

std::unique_ptr<Pass> make_linear_cross_entropy_fusion() {
  return std::make_unique<LinearCrossEntropyFusion>();
}

}  // namespace lj
