// predict_cpu_memory (memory_model.h): one CPU process's peak RSS, each part from its cause.
#include "plan/memory_model.h"

namespace lj {

std::vector<double> cpu_memory_features(const GraphFigures& f, const LlamaConfig& model,
                                        double process_baseline_bytes) {
  const bool modelled = f.gemm_buffer_bytes >= 0;
  return {static_cast<double>(f.stats.bytes_resident_peak),
          1.0,
          static_cast<double>(f.nodes),
          static_cast<double>(model.num_params()),
          !modelled && f.gemm_packing ? 1.0 : 0.0,
          process_baseline_bytes,
          modelled ? static_cast<double>(f.gemm_buffer_bytes) : 0.0};
}

MemoryPrediction predict_cpu_memory(const GraphFigures& f, const LlamaConfig& model,
                                    const PredictorCoefficients& coeffs) {
  const MemoryStats& s = f.stats;
  const auto at = [&](MemCategory c) { return static_cast<double>(s.at_peak(c)); };
  const std::vector<double> x = cpu_memory_features(f, model, coeffs.host.process_baseline_bytes);
  const CpuMemoryCoefficients& c = coeffs.cpu_memory;
  const double blocks = c.reserved_factor * x[0];
  const double gemm = c.gemm_pack_bytes * x[4] + c.gemm_buffer_factor * x[6];
  const double residual =
      coeffs.host.baseline_rss_bytes * x[1] + c.per_node_bytes * x[2] + c.per_param_bytes * x[3];
  const double reserved = static_cast<double>(s.bytes_reserved_peak);
  MemoryPrediction p;
  p.items = {{"weights", at(MemCategory::weights)},
             {"grads", at(MemCategory::grads)},
             {"optimizer", at(MemCategory::optimizer)},
             {"activations", at(MemCategory::activations)},
             {"temporaries", at(MemCategory::temporaries) + at(MemCategory::workspace)},
             {"allocator cache", reserved - static_cast<double>(s.bytes_total_peak)},
             {"malloc headers and pages", blocks - reserved},
             {"GEMM packing buffers (oneDNN)", gemm},
             {"process baseline (measured)", x[5]},
             {"residual (fitted)", residual}};
  double total = 0;
  for (const auto& i : p.items) total += i.bytes;
  p.total = total;
  return p;
}

}  // namespace lj
