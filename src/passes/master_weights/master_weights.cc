#include "passes/master_weights/master_weights.h"

#include <map>
#include <utility>
#include <vector>

#include "core/log.h"

namespace lj {
namespace {

constexpr std::string_view kLowPrefix = "low:";

bool is_low(DType t) {
  return t == DType::bf16 || t == DType::f16;
}

}  // namespace

std::string low_weight_input_name(const std::string& param_name) {
  return std::string(kLowPrefix) + param_name;
}

std::string low_weight_param_name(const std::string& input_name) {
  if (input_name.rfind(kLowPrefix, 0) != 0) return "";
  return input_name.substr(kLowPrefix.size());
}

StatusOr<bool> MasterWeightsPass::run(Graph& g) {
  copies_ = 0;
  folded_ = 0;
  const std::vector<Node> nodes = g.nodes();  // a copy: add_node grows the list under us
  std::vector<bool> is_output(g.values().size(), false);
  for (const NamedValue& o : g.outputs()) is_output[static_cast<size_t>(o.value)] = true;
  const std::vector<int> uses = g.use_counts();
  auto producer_of = [&](ValueId v) -> const Node* {
    const NodeId p = g.value(v).node;
    return p < 0 ? nullptr : &nodes[static_cast<size_t>(p)];
  };

  std::vector<ValueId> replace(g.values().size(), kNoValue);  // a cast's output -> the copy
  std::vector<bool> drop(nodes.size(), false);
  std::map<ValueId, size_t> folded_into;  // a folded cast's input -> the matmul's node index
  std::map<std::pair<ValueId, DType>, ValueId> copy_of;
  std::vector<Node> new_inputs;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.op != Op::cast) continue;
    const ValueId x = n.inputs[0];
    const DType to = n.attrs.dtype("dtype");
    const DType from = g.type(x).dtype;
    const Node* p = producer_of(x);
    if (p == nullptr) continue;
    if (is_low(to) && from == DType::f32 && p->op == Op::input && g.input_role(x) == Role::param &&
        !is_output[static_cast<size_t>(n.outputs[0])]) {
      // 1. A weight cast to 16 bits: the persistent copy, one per parameter and dtype.
      const auto key = std::make_pair(x, to);
      auto it = copy_of.find(key);
      if (it == copy_of.end()) {
        const Shape& shape = g.type(x).shape;
        const NodeId id = g.add_node(Op::input, {},
                                     Attrs{{"name", low_weight_input_name(g.input_name(x))},
                                           {"role", static_cast<int64_t>(Role::state)},
                                           {"dtype", to},
                                           {"shape", shape}},
                                     {TypedShape{to, shape}}, p->scope, Phase::forward);
        new_inputs.push_back(g.nodes()[static_cast<size_t>(id)]);
        it = copy_of.emplace(key, new_inputs.back().outputs[0]).first;
        ++copies_;
      }
      replace[static_cast<size_t>(n.outputs[0])] = it->second;
      drop[i] = true;
    } else if (to == DType::f32 && from == DType::bf16 && uses[static_cast<size_t>(x)] == 1 &&
               !is_output[static_cast<size_t>(x)] &&
               (((p->op == Op::matmul || p->op == Op::grouped_matmul_wgrad) &&
                 !p->attrs.has("dtype")) ||
                (p->op == Op::rms_norm_backward && g.value(x).index == 1 &&
                 !p->attrs.has("dw_dtype")))) {
      // 2. A 16-bit product (or norm weight gradient) read only by a cast up: the kernel writes
      // its f32 result.
      folded_into[x] = static_cast<size_t>(g.value(x).node);
      drop[i] = true;
      ++folded_;
    }
  }
  if (copies_ == 0 && folded_ == 0) return false;
  // Folded casts: their matmul makes the cast's output (the same value id, so nothing else is
  // rewired); the 16-bit product is left without a producer.
  std::map<size_t, std::pair<int, ValueId>> folded_out;  // node -> (output index, new value)
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!drop[i] || nodes[i].op != Op::cast) continue;
    const ValueId x = nodes[i].inputs[0];
    const auto it = folded_into.find(x);
    if (it != folded_into.end()) folded_out[it->second] = {g.value(x).index, nodes[i].outputs[0]};
  }
  std::vector<Node> out = std::move(new_inputs);
  out.reserve(out.size() + nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (drop[i]) continue;
    Node n = nodes[i];
    for (ValueId& v : n.inputs) {
      if (replace[static_cast<size_t>(v)] != kNoValue) v = replace[static_cast<size_t>(v)];
    }
    if (const auto it = folded_out.find(i); it != folded_out.end()) {
      n.attrs.set(n.op == Op::rms_norm_backward ? "dw_dtype" : "dtype", DType::f32);
      n.outputs[static_cast<size_t>(it->second.first)] = it->second.second;
    }
    out.push_back(std::move(n));
  }
  g.set_nodes(std::move(out));
  LJ_LOG(debug) << "master_weights: " << copies_ << " 16-bit weight copies, " << folded_
                << " cast(s) folded into GEMMs";
  return true;
}

}  // namespace lj
