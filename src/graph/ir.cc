#include "graph/ir.h"

#include <cstdio>

#include "core/check.h"
#include "graph/moe_rows.h"

namespace lj {

const char* phase_name(Phase p) {
  static constexpr const char* kNames[] = {"fwd", "bwd", "opt"};
  return kNames[static_cast<int>(p)];
}

NodeId Graph::add_node(Op op, std::vector<ValueId> inputs, Attrs attrs,
                       std::vector<TypedShape> out_types, std::string scope, Phase phase) {
  const auto id = static_cast<NodeId>(nodes_.size());
  Node n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.scope = std::move(scope);
  n.phase = phase;
  for (size_t i = 0; i < out_types.size(); ++i) {
    const auto v = static_cast<ValueId>(values_.size());
    values_.push_back(Value{std::move(out_types[i]), id, static_cast<int>(i)});
    n.outputs.push_back(v);
  }
  if (op == Op::input) inputs_.push_back(n.outputs[0]);
  nodes_.push_back(std::move(n));
  return id;
}

const std::string& Graph::input_name(ValueId id) const {
  const Node& n = producer(id);
  LJ_CHECK(n.op == Op::input) << "value %" << id << " is not an input";
  return n.attrs.s("name");
}

Role Graph::input_role(ValueId id) const {
  const Node& n = producer(id);
  LJ_CHECK(n.op == Op::input) << "value %" << id << " is not an input";
  return static_cast<Role>(n.attrs.i("role"));
}

std::vector<ValueId> Graph::params() const {
  std::vector<ValueId> out;
  for (ValueId v : inputs_) {
    if (input_role(v) == Role::param) out.push_back(v);
  }
  return out;
}

ValueId Graph::find_input(const std::string& name) const {
  for (ValueId v : inputs_) {
    if (input_name(v) == name) return v;
  }
  return kNoValue;
}

ValueId Graph::find_output(const std::string& name) const {
  for (const auto& o : outputs_) {
    if (o.name == name) return o.value;
  }
  return kNoValue;
}

void Graph::set_nodes(std::vector<Node> nodes) {
  nodes_ = std::move(nodes);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      Value& v = values_[static_cast<size_t>(n.outputs[k])];
      v.node = static_cast<NodeId>(i);
      v.index = static_cast<int>(k);
    }
  }
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> uses(values_.size(), 0);
  for (const Node& n : nodes_) {
    for (ValueId v : n.inputs) ++uses[static_cast<size_t>(v)];
  }
  return uses;
}

Status verify(const Graph& g) {
  std::vector<bool> defined(g.values().size(), false);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    const OpDef& def = op_def(n.op);
    const std::string where = "node " + std::to_string(i) + " (" + def.name + ")";
    if (def.num_inputs >= 0 && static_cast<int>(n.inputs.size()) != def.num_inputs) {
      return internal_error(where + ": has " + std::to_string(n.inputs.size()) +
                            " inputs, op takes " + std::to_string(def.num_inputs));
    }
    if (def.num_outputs >= 0 && static_cast<int>(n.outputs.size()) != def.num_outputs) {
      return internal_error(where + ": wrong number of outputs");
    }
    std::vector<TypedShape> in;
    for (ValueId v : n.inputs) {
      if (v < 0 || static_cast<size_t>(v) >= defined.size() || !defined[static_cast<size_t>(v)]) {
        return internal_error(where + ": input %" + std::to_string(v) +
                              " is not defined before use");
      }
      in.push_back(g.type(v));
    }
    std::vector<TypedShape> out;
    const InferCtx ctx{def, in, n.attrs};
    LJ_RETURN_IF_ERROR(def.infer(ctx, &out).with_context(where));
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const ValueId v = n.outputs[k];
      if (!(g.type(v) == out[k])) {
        return internal_error(where + ": output " + std::to_string(k) + " is " +
                              g.type(v).to_string() + " but the op infers " + out[k].to_string());
      }
      if (g.value(v).node != static_cast<NodeId>(i)) {
        return internal_error(where + ": output %" + std::to_string(v) + " names another producer");
      }
      defined[static_cast<size_t>(v)] = true;
    }
  }
  for (const auto& o : g.outputs()) {
    if (o.value < 0 || !defined[static_cast<size_t>(o.value)]) {
      return internal_error("graph output '" + o.name + "' is not defined");
    }
  }
  return ok_status();
}

std::string print_graph(const Graph& g) {
  std::string s;
  for (const Node& n : g.nodes()) {
    std::string line;
    for (size_t k = 0; k < n.outputs.size(); ++k)
      line += (k ? ", %" : "%") + std::to_string(n.outputs[k]);
    line += std::string(" = ") + op_name(n.op) + "(";
    for (size_t k = 0; k < n.inputs.size(); ++k)
      line += (k ? ", %" : "%") + std::to_string(n.inputs[k]);
    line += ")";
    const std::string attrs = n.attrs.to_string();
    if (!attrs.empty()) line += " " + attrs;
    line += " :";
    for (size_t k = 0; k < n.outputs.size(); ++k)
      line += (k ? ", " : " ") + g.type(n.outputs[k]).to_string();
    if (!n.scope.empty()) line += "  @" + n.scope;
    line += std::string(" [") + phase_name(n.phase) + "]\n";
    s += line;
  }
  for (const auto& o : g.outputs())
    s += "output " + o.name + " = %" + std::to_string(o.value) + "\n";
  return s;
}

Cost node_cost(const Graph& g, const Node& n, const SymEnv& env) {
  std::vector<std::vector<int64_t>> in(n.inputs.size()), out(n.outputs.size());
  Cost c;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const TypedShape& t = g.type(n.inputs[k]);
    LJ_CHECK(t.shape.eval(env, &in[k])) << "unbound symbol in " << t.to_string();
    c.bytes += static_cast<double>(numel_of(in[k])) * dtype_size(t.dtype);
  }
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const TypedShape& t = g.type(n.outputs[k]);
    LJ_CHECK(t.shape.eval(env, &out[k])) << "unbound symbol in " << t.to_string();
    c.bytes += static_cast<double>(numel_of(out[k])) * dtype_size(t.dtype);
  }
  const OpDef& def = op_def(n.op);
  if (def.has(kAlias)) c.bytes = 0;
  // A grouped GEMM's rows operand can be a receive buffer larger than the rows it multiplies.
  c.flops = def.flops(CostCtx{in, out, n.attrs}) * grouped_rows_fraction(g, n);
  return c;
}

}  // namespace lj
