#include "plan/memory_model.h"

#include <algorithm>
#include <map>
#include <string>

#include "models/llama.h"

namespace lj {

ModelStates zero_model_states(int64_t num_params, int stage, int64_t world) {
  const auto psi = static_cast<double>(num_params);
  const auto n = static_cast<double>(std::max<int64_t>(world, 1));
  ModelStates s{2 * psi, 2 * psi, 12 * psi};
  if (zero_shards(stage, ZeroSharded::optimizer_states)) s.optimizer /= n;
  if (zero_shards(stage, ZeroSharded::gradients)) s.grads /= n;
  if (zero_shards(stage, ZeroSharded::parameters)) s.params /= n;
  return s;
}

double MemoryPrediction::get(const std::string& name) const {
  for (const auto& i : items) {
    if (i.name == name) return i.bytes;
  }
  return 0;
}

MemoryPrediction predict_gpu_memory(const GraphFigures& f, const LlamaConfig& model,
                                    const ZeroConfig& zero, int64_t world,
                                    const PredictorCoefficients& coeffs) {
  const MemoryStats& s = f.stats;
  const auto at = [&](MemCategory c) { return static_cast<double>(s.at_peak(c)); };
  const int64_t psi = model.num_params();
  const ModelStates st = zero_model_states(psi, zero.stage, world);
  const GpuMemoryCoefficients& c = coeffs.gpu_memory;
  MemoryPrediction p;
  double transient = 0, grads_live = 0, buckets = 0, gathered = 0;
  if (!zero.shards(ZeroSharded::gradients)) {
    // The dry run's peak holds the bf16 gradients produced so far (all of them at the end of
    // backward); at most the full set, which the model states already count.
    transient =
        static_cast<double>(s.bytes_total_peak) - at(MemCategory::weights) - at(MemCategory::grads);
    grads_live = 0;
    // Stage 0: the all-reduce runs in place on DeepSpeed's flat gradient buffer; stage 1 adds
    // the reduce bucket.
    if (zero.shards(ZeroSharded::optimizer_states))
      buckets = 2.0 * static_cast<double>(zero.reduce_bucket_size);
  } else {
    transient = static_cast<double>(s.bytes_transient_peak);
    buckets = 2.0 * static_cast<double>(zero.reduce_bucket_size);  // bf16 gradient bucket
    if (!zero.shards(ZeroSharded::parameters))
      buckets += 2.0 * static_cast<double>(zero.allgather_bucket_size);
  }
  if (zero.shards(ZeroSharded::parameters) && world > 1) {
    // Gathered parameters in flight: the largest layer being computed plus the prefetch
    // bucket, bounded by stage3_max_live_parameters; small tensors persist unpartitioned.
    const auto specs = llama_param_specs(model);
    int64_t largest = 0, persistent = 0, layer = 0;
    // One layer's weights (the largest layer: a Qwen3-MoE's sparse layers outweigh its dense
    // ones), summed from the layer's parameters ("model.layers.<l>." prefix).
    std::map<std::string, int64_t> per_layer;
    for (const auto& sp : specs) {
      int64_t n = 1;
      for (int64_t d : sp.dims) n *= d;
      largest = std::max(largest, n);
      if (n < zero.stage3_param_persistence_threshold) persistent += n;
      const std::string kLayers = "model.layers.";
      if (sp.name.rfind(kLayers, 0) == 0) {
        per_layer[sp.name.substr(0, sp.name.find('.', kLayers.size()))] += n;
      }
    }
    for (const auto& [name, n] : per_layer) layer = std::max(layer, n);
    const int64_t live = std::min(std::max(layer, largest) + zero.stage3_prefetch_bucket_size,
                                  zero.stage3_max_live_parameters);
    gathered = 2.0 * static_cast<double>(live + persistent);
  }
  const double cache = static_cast<double>(s.bytes_reserved_peak - s.bytes_total_peak);
  const double alloc = st.total() + grads_live + transient + gathered + buckets + cache;
  const double frag = (c.fragmentation - 1.0) * alloc;
  p.items = {{"weights", st.params},
             {"grads", st.grads},
             {"optimizer", st.optimizer},
             {"activations", std::min(at(MemCategory::activations), transient)},
             {"temporaries", transient - std::min(at(MemCategory::activations), transient)},
             {"zero-3 gathered params", gathered},
             {"comm buckets", buckets},
             {"allocator cache + fragmentation", cache + frag},
             {"cuda context + workspace", c.cuda_context_bytes + c.workspace_bytes}};
  p.total = alloc + frag + c.cuda_context_bytes + c.workspace_bytes;
  return p;
}

}  // namespace lj
