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
    Executor ex(g, dev);
    LJ_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ex.dry_run(inputs));
    f.stats = dev.memory();
    f.compute_seconds = graph_seconds(g, ex.env(), device, eff);
  }
  f.nodes = static_cast<int64_t>(g.nodes().size());
  return f;
}

}  // namespace lj
