#include "plan/graph_figures.h"

#include "plan/time_model.h"
#include "runtime/executor.h"

namespace lj {

StatusOr<GraphFigures> graph_figures(const LlamaConfig& model, int64_t batch, int64_t seq_len,
                                     const GraphOptions& options, bool with_adam_states,
                                     const DeviceProfile& device, const Efficiency& eff) {
  Graph g;
  LJ_RETURN_IF_ERROR(build_train_graph(model, options, &g).status());
  Device dev(1, /*is_virtual=*/true);
  const auto specs = llama_param_specs(model);
  std::vector<Tensor> inputs;
  inputs.push_back(Tensor::empty(dev, DType::i32, {batch, seq_len}, MemCategory::temporaries));
  inputs.push_back(Tensor::empty(dev, DType::i32, {batch, seq_len}, MemCategory::temporaries));
  for (int k = 0; k < 2; ++k) {
    inputs.push_back(
        Tensor::empty(dev, options.dtype, {seq_len, model.head_dim}, MemCategory::workspace));
  }
  for (const ParamSpec& s : specs)
    inputs.push_back(Tensor::empty(dev, options.dtype, s.dims, MemCategory::weights));
  std::vector<Tensor> moments;
  if (with_adam_states) {
    for (int k = 0; k < 2; ++k) {
      for (const ParamSpec& s : specs)
        moments.push_back(Tensor::empty(dev, DType::f32, s.dims, MemCategory::optimizer));
    }
  }
  GraphFigures f;
  {
    // Compiled graphs run planned: the static memory plan's arena, as TrainStep runs them.
    Executor ex(g, dev, ExecutorOptions{.planned = options.compile});
    LJ_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ex.dry_run(inputs));
    f.stats = dev.memory();
    f.compute_seconds = graph_seconds(g, ex.env(), device, eff);
    for (const Node& n : g.nodes()) {
      if (n.op != Op::matmul || n.phase != Phase::forward || n.outputs.empty()) continue;
      std::vector<int64_t> dims;
      if (!g.type(n.outputs[0]).shape.eval(ex.env(), &dims) || dims.size() < 2) continue;
      const int64_t cols = dims.back();
      int64_t rows = 1;
      for (size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
      if (rows <= 0 || cols <= 0) continue;
      const double inner = node_cost(g, n, ex.env()).flops /
                           (2.0 * static_cast<double>(rows) * static_cast<double>(cols));
      if (rows > kGemmPackRows &&
          static_cast<double>(cols) * inner >= static_cast<double>(kGemmPackElements))
        f.gemm_packing = true;
    }
  }
  f.nodes = static_cast<int64_t>(g.nodes().size());
  return f;
}

}  // namespace lj
