#include "train/memory_estimate.h"

#include "runtime/executor.h"
#include "train/train_step.h"

namespace lj {

StatusOr<TrainMemoryEstimate> estimate_train_memory(const LlamaConfig& model, int64_t batch_size,
                                                    int64_t seq_len, const GraphOptions& options) {
  Graph g;
  LJ_RETURN_IF_ERROR(build_train_graph(model, options, &g).status());
  Device dev(1, /*is_virtual=*/true);
  const auto specs = llama_param_specs(model);
  // Persistent state first, in the order the trainer allocates it: weights, then AdamW's m, v.
  std::vector<Tensor> inputs;
  inputs.push_back(Tensor::empty(dev, DType::i32, {batch_size, seq_len}, MemCategory::temporaries));
  inputs.push_back(Tensor::empty(dev, DType::i32, {batch_size, seq_len}, MemCategory::temporaries));
  inputs.push_back(
      Tensor::empty(dev, options.dtype, {seq_len, model.head_dim}, MemCategory::workspace));
  inputs.push_back(
      Tensor::empty(dev, options.dtype, {seq_len, model.head_dim}, MemCategory::workspace));
  std::vector<Tensor> moments;
  for (const ParamSpec& s : specs)
    inputs.push_back(Tensor::empty(dev, options.dtype, s.dims, MemCategory::weights));
  for (int k = 0; k < 2; ++k) {
    for (const ParamSpec& s : specs)
      moments.push_back(Tensor::empty(dev, DType::f32, s.dims, MemCategory::optimizer));
  }
  // Compiled: the static memory plan's arena (runtime/planned_memory.h) instead of the
  // caching allocator.
  Executor ex(g, dev, ExecutorOptions{.planned = options.compile});
  LJ_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ex.dry_run(inputs));
  TrainMemoryEstimate e;
  e.stats = dev.memory();
  e.bytes_peak = e.stats.bytes_total_peak;
  e.bytes_reserved = e.stats.bytes_reserved_peak;
  if (const PlannedMemory* pm = ex.planned_memory()) e.plan = pm->plan();
  return e;
}

}  // namespace lj
