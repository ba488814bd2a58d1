#include "runtime/node_loop.h"

namespace lj {

ValueLifetimes::ValueLifetimes(const Graph& g)
    : last_use(g.values().size(), -1), is_output(g.values().size(), false) {
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    for (ValueId v : g.nodes()[i].inputs) last_use[static_cast<size_t>(v)] = static_cast<int>(i);
  }
  for (const auto& o : g.outputs()) is_output[static_cast<size_t>(o.value)] = true;
}

Status bind_inputs(const Graph& g, std::span<const FedInput> fed, SymEnv* env) {
  const auto& ins = g.inputs();
  if (fed.size() != ins.size()) {
    return invalid_argument("graph takes " + std::to_string(ins.size()) + " inputs, got " +
                            std::to_string(fed.size()));
  }
  *env = SymEnv();
  // Pass 1 binds single symbols; pass 2 checks every dim under the bindings.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < ins.size(); ++i) {
      const TypedShape& want = g.type(ins[i]);
      const FedInput& t = fed[i];
      const std::string& name = g.input_name(ins[i]);
      if (!t.defined) return invalid_argument("input '" + name + "' is not set");
      const std::vector<int64_t>& dims = *t.dims;
      if (t.dtype != want.dtype || static_cast<int>(dims.size()) != want.shape.rank()) {
        return invalid_argument("input '" + name + "' is " + dtype_name(t.dtype) +
                                dims_to_string(dims) + ", the graph declares " + want.to_string());
      }
      for (int d = 0; d < want.shape.rank(); ++d) {
        const Dim& dim = want.shape[d];
        const int64_t got = dims[static_cast<size_t>(d)];
        if (pass == 0 && dim.coef() == 1 && dim.syms().size() == 1 &&
            env->get(dim.syms()[0]) == 0) {
          env->set(dim.syms()[0], got);
        }
        if (pass == 1 && dim.eval(*env) != got) {
          return invalid_argument("input '" + name + "' is " + dims_to_string(dims) +
                                  ", the graph declares " + want.shape.to_string() + " with " +
                                  env->to_string());
        }
      }
    }
  }
  return ok_status();
}

}  // namespace lj
