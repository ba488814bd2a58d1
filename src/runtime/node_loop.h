// The executors' node loop, written once for every backend (ggml's split between one backend
// interface, ggml_backend_i, and one graph_compute over it). A backend (NodeBackend) says what a
// value is, whether it can run a node, how it makes a node's outputs and how it runs the node;
// run_node_loop walks the graph in order and does the rest, the same on every device:
//   - input nodes are skipped (their values are the fed inputs);
//   - kAlias nodes (reshape) give their input's storage other dims; a kAliasLaunch one (a
//     collective's wait) then runs its kernel on the input and the alias;
//   - every other node gets its outputs from the backend, then runs;
//   - after each node the backend sees the values so far (node_done), then each value whose last
//     reader this node was, and each output nobody reads, is dropped (graph outputs are kept).
// The CPU executor (runtime/executor.h) and the CUDA executor (runtime/cuda/cuda_executor.h)
// implement NodeBackend; what each supports is its kernel table (backends/cpu/cpu.h,
// backends/cuda/kernels.h), asked once per node in supports().
#pragma once

#include <span>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "core/check.h"
#include "graph/ir.h"

namespace lj {

// When each value dies: the last node that reads it, and whether the graph returns it.
struct ValueLifetimes {
  explicit ValueLifetimes(const Graph& g);
  std::vector<int> last_use;    // per value: index of the last node reading it, -1 none
  std::vector<bool> is_output;  // per value: a graph output
};

// One fed input as bind_inputs checks it.
struct FedInput {
  bool defined = true;  // false: the caller left it unset
  DType dtype = DType::f32;
  const std::vector<int64_t>* dims = nullptr;  // its dims (not null when defined)
};

// Binds symbols from the inputs' dims (an input declared (B, T) fed (4, 256) binds B=4, T=256)
// into *env, and checks every input against its declared dtype and shape. `fed` follows
// g.inputs().
Status bind_inputs(const Graph& g, std::span<const FedInput> fed, SymEnv* env);

// What a backend does for run_node_loop. Value: the backend's tensor (a shared handle: copies
// alias the same storage, the last one dropped frees it).
template <class Value>
class NodeBackend {
 public:
  virtual ~NodeBackend() = default;
  // An error when this backend cannot run node `ni` (no kernel for its op); asked before the
  // node's outputs exist.
  virtual Status supports(size_t ni, const Node& n) const = 0;
  virtual TensorView view(const Value& v) const = 0;
  // `in`'s storage with other dims.
  virtual Value alias(const Value& in, std::vector<int64_t> dims) const = 0;
  // A new output value `v` of the node about to run.
  virtual StatusOr<Value> output(ValueId v, DType dtype, std::vector<int64_t> dims) = 0;
  // Runs node `ni` (a dry run only accounts for it). An error ends the loop; the loop adds the
  // op and scope to it.
  virtual Status compute(size_t ni, const Node& n, std::span<const TensorView> in,
                         std::span<TensorView> out) = 0;
  // After node `n` ran, with every value so far (by ValueId; its outputs included).
  virtual Status node_done(const Node& n, std::span<const Value> vals) {
    (void)n;
    (void)vals;
    return ok_status();
  }
};

// Runs g's nodes in order on `backend` under the bound `env`; returns the graph outputs in order.
// `inputs` follow g.inputs().
template <class Value>
StatusOr<std::vector<Value>> run_node_loop(const Graph& g, const ValueLifetimes& life,
                                           const SymEnv& env, std::span<const Value> inputs,
                                           NodeBackend<Value>& backend) {
  std::vector<Value> vals(g.values().size());
  for (size_t i = 0; i < g.inputs().size(); ++i)
    vals[static_cast<size_t>(g.inputs()[i])] = inputs[i];
  std::vector<TensorView> in_views, out_views;
  std::vector<int64_t> dims;
  const auto run = [&](size_t ni, const Node& n) -> Status {
    Status s = backend.compute(ni, n, in_views, out_views);
    if (s.ok()) return s;
    return s.with_context(std::string(op_name(n.op)) + (n.scope.empty() ? "" : " at " + n.scope));
  };
  for (size_t ni = 0; ni < g.nodes().size(); ++ni) {
    const Node& n = g.nodes()[ni];
    if (n.op == Op::input) continue;
    const OpDef& def = op_def(n.op);
    if (def.has(kAlias)) {
      const auto in = static_cast<size_t>(n.inputs[0]), out = static_cast<size_t>(n.outputs[0]);
      LJ_CHECK(g.type(n.outputs[0]).shape.eval(env, &dims)) << "unbound symbol";
      vals[out] = backend.alias(vals[in], dims);
      if (def.has(kAliasLaunch)) {
        LJ_RETURN_IF_ERROR(backend.supports(ni, n));
        in_views.assign({backend.view(vals[in])});
        out_views.assign({backend.view(vals[out])});
        LJ_RETURN_IF_ERROR(run(ni, n));
      }
    } else {
      LJ_RETURN_IF_ERROR(backend.supports(ni, n));
      in_views.clear();
      out_views.clear();
      for (ValueId v : n.inputs) in_views.push_back(backend.view(vals[static_cast<size_t>(v)]));
      for (ValueId v : n.outputs) {
        const TypedShape& t = g.type(v);
        LJ_CHECK(t.shape.eval(env, &dims)) << "unbound symbol in " << t.to_string();
        LJ_ASSIGN_OR_RETURN(vals[static_cast<size_t>(v)], backend.output(v, t.dtype, dims));
        out_views.push_back(backend.view(vals[static_cast<size_t>(v)]));
      }
      LJ_RETURN_IF_ERROR(run(ni, n));
    }
    LJ_RETURN_IF_ERROR(backend.node_done(n, vals));
    // Drop what this node read for the last time, and outputs nobody reads.
    for (ValueId v : n.inputs) {
      const auto k = static_cast<size_t>(v);
      if (life.last_use[k] == static_cast<int>(ni) && !life.is_output[k]) vals[k] = Value();
    }
    for (ValueId v : n.outputs) {
      const auto k = static_cast<size_t>(v);
      if (life.last_use[k] < 0 && !life.is_output[k]) vals[k] = Value();
    }
  }
  std::vector<Value> outs;
  outs.reserve(g.outputs().size());
  for (const auto& o : g.outputs()) outs.push_back(vals[static_cast<size_t>(o.value)]);
  return outs;
}

}  // namespace lj
