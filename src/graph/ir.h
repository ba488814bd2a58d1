// The graph IR. A Graph is a list of Nodes in SSA form and topological order; each Node has an
// op (graph/ops.def), input value ids, attributes and one or more outputs. Every Value has a
// DType and a Shape, whose dims may be symbols, so one graph serves many shapes.
//
// Shape letters used in comments across the code base:
//   B  micro-batch size          T  sequence length          C  model (hidden) width
//   V  vocabulary size           H  query heads              G  key/value heads (Hq = H)
//   D  head dim (C / H unless set)   F  MLP (FFN) width       N  rows of a flattened (B*T)
//   L  transformer layers
// Layout: every tensor is dense and row-major (the last dim is contiguous). A weight of a linear
// layer is stored as HF stores it, (out, in), and applied as matmul(x, w, ta=false, tb=true).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op.h"

namespace lj {

using ValueId = int32_t;
using NodeId = int32_t;
inline constexpr ValueId kNoValue = -1;

enum class Phase : uint8_t { forward, backward, optimizer };
const char* phase_name(Phase p);

// What an `input` node feeds: data (tokens, labels), a trainable parameter, or state
// (optimizer moments and the like: persistent, not trained).
enum class Role : uint8_t { data, param, state };

struct Value {
  TypedShape type;
  NodeId node = -1;  // producer
  int index = 0;     // which output of the producer
};

struct Node {
  Op op;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attrs attrs;
  std::string scope;  // "model.layers.3.mlp", HF-style
  Phase phase = Phase::forward;
};

struct NamedValue {
  std::string name;
  ValueId value = kNoValue;
};

class Graph {
 public:
  // Appends a node whose output types are already known (the builder infers them). Returns the
  // node id; output value ids are in nodes()[id].outputs.
  NodeId add_node(Op op, std::vector<ValueId> inputs, Attrs attrs,
                  std::vector<TypedShape> out_types, std::string scope, Phase phase);

  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  const Node& node(NodeId id) const { return nodes_[static_cast<size_t>(id)]; }
  const std::vector<Value>& values() const { return values_; }
  const Value& value(ValueId id) const { return values_[static_cast<size_t>(id)]; }
  const TypedShape& type(ValueId id) const { return value(id).type; }
  const Node& producer(ValueId id) const { return node(value(id).node); }

  // Inputs in the order a caller feeds them: the `input` nodes' outputs, in creation order.
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::string& input_name(ValueId id) const;
  Role input_role(ValueId id) const;
  // Parameters only (Role::param), in creation order.
  std::vector<ValueId> params() const;
  // Finds an input by name; kNoValue when absent.
  ValueId find_input(const std::string& name) const;

  // Values the caller fetches after a run (loss, gradients, logits).
  const std::vector<NamedValue>& outputs() const { return outputs_; }
  void add_output(std::string name, ValueId v) { outputs_.push_back({std::move(name), v}); }
  ValueId find_output(const std::string& name) const;
  // Rewires or drops outputs (passes that replace what the caller fetches, e.g. collectives).
  std::vector<NamedValue>& mutable_outputs() { return outputs_; }
  // Drops or reorders what the caller feeds (ZeRO-3 feeds a shard instead of the parameters).
  std::vector<ValueId>& mutable_inputs() { return inputs_; }

  // Rebuilds the node list (used by passes that reorder or drop nodes); value ids stay valid.
  void set_nodes(std::vector<Node> nodes);
  // Number of uses of each value as a node input (graph outputs not counted).
  std::vector<int> use_counts() const;

 private:
  std::vector<Node> nodes_;
  std::vector<Value> values_;
  std::vector<ValueId> inputs_;
  std::vector<NamedValue> outputs_;
};

// Checks SSA order, arity, that each node's output types equal its op's shape inference, and
// that outputs exist. Returns the first problem found, naming the node.
Status verify(const Graph& g);

// One line per node: "%7 = matmul(%3, %5) {tb=true} : f32(B, T, 768)  @model.layers.0.mlp [fwd]".
std::string print_graph(const Graph& g);

// FLOPs and bytes moved by one node under concrete symbol values (reads the op table).
struct Cost {
  double flops = 0;
  double bytes = 0;
};
Cost node_cost(const Graph& g, const Node& n, const SymEnv& env);

}  // namespace lj
