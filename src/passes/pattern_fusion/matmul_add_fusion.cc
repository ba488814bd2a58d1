// matmul_add_fusion (see pattern_fusion_ce.h): a residual add whose other operand is a matmul
// used only there becomes matmul_add, at the add's position and with the add's output value.
#include <vector>

#include "core/log.h"
#include "passes/pattern_fusion/pattern_fusion_ce.h"

namespace lj {
namespace {

class MatmulAddFusion final : public Pass {
 public:
  const char* name() const override { return "matmul_add_fusion"; }
  StatusOr<bool> run(Graph& g) override;
};

StatusOr<bool> MatmulAddFusion::run(Graph& g) {
  const std::vector<int> uses = g.use_counts();
  std::vector<bool> is_output(g.values().size(), false);
  for (const NamedValue& o : g.outputs()) is_output[static_cast<size_t>(o.value)] = true;
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> drop(nodes.size(), false);
  int matches = 0;
  for (Node& add : nodes) {
    if (add.op != Op::add) continue;
    const TypedShape& out = g.type(add.outputs[0]);
    // The model writes x + linear(...): try the right operand first.
    for (int side : {1, 0}) {
      const ValueId p = add.inputs[static_cast<size_t>(side)];
      const ValueId r = add.inputs[static_cast<size_t>(1 - side)];
      const auto pk = static_cast<size_t>(p);
      if (uses[pk] != 1 || is_output[pk]) continue;
      const NodeId mm = g.value(p).node;
      if (mm < 0 || drop[static_cast<size_t>(mm)]) continue;
      const Node& matmul = nodes[static_cast<size_t>(mm)];
      if (matmul.op != Op::matmul || matmul.phase != add.phase) continue;
      // No broadcasting on either side: the addend has the output's type, and so does the product.
      if (!(g.type(p) == out) || !(g.type(r) == out)) continue;
      const bool ta = matmul.attrs.b("ta"), tb = matmul.attrs.b("tb");
      add.op = Op::matmul_add;
      add.inputs = {matmul.inputs[0], matmul.inputs[1], r};
      add.attrs = Attrs{{"ta", ta}, {"tb", tb}};
      add.scope = matmul.scope;
      drop[static_cast<size_t>(mm)] = true;
      ++matches;
      break;
    }
  }
  if (matches == 0) return false;
  std::vector<Node> kept;
  kept.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!drop[i]) kept.push_back(std::move(nodes[i]));
  }
  g.set_nodes(std::move(kept));
  LJ_LOG(debug) << "matmul_add_fusion: " << matches << " match(es)";
  return true;
}

}  // namespace

std::unique_ptr<Pass> make_matmul_add_fusion() {
  return std::make_unique<MatmulAddFusion>();
}

}  // namespace lj
