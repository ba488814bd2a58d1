// Peak memory per rank, by category, before anything is allocated:
//   the dry run of the joint graph (graph_figures.h: the caching allocator's exact replay)
// + model states by ZeRO stage and world size (DeepSpeed's bf16 mixed precision)
// + runtime overheads with coefficients from the coefficients file (calibrate fits them):
//   CPU host: the process itself (binary, libraries, OpenMP thread stacks), allocator slack;
//   GPU: CUDA context, allocator fragmentation, library workspaces, ZeRO buffers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/zero_config.h"
#include "models/config.h"
#include "plan/coefficients.h"
#include "plan/graph_figures.h"

namespace lj {

// Model states per rank in bytes with DeepSpeed's bf16 semantics (Ψ parameters, N ranks): bf16
// parameters 2Ψ, bf16 gradients 2Ψ, fp32 master weights + Adam m + v 12Ψ. Partitioned over N:
// stage 1 the optimizer states, stage 2 also the gradients, stage 3 also the parameters.
struct ModelStates {
  double params = 0, grads = 0, optimizer = 0;
  double total() const { return params + grads + optimizer; }
};
ModelStates zero_model_states(int64_t num_params, int stage, int64_t world);

struct MemoryItem {
  std::string name;
  double bytes = 0;
};
struct MemoryPrediction {
  std::vector<MemoryItem> items;  // the categories, summing to total
  double total = 0;               // predicted peak
  double get(const std::string& name) const;
};

// CPU, one process (plan/cpu_memory_model.cc): the dry run with f32 weights, gradients and
// AdamW states, and the process around it, each part from its cause (coefficients.h
// CpuMemoryCoefficients): the allocator's blocks at glibc's resident price, oneDNN's largest GEMM
// buffers, the process baseline measured on this host (coeffs.host.process_baseline_bytes), and
// the fitted residual.
MemoryPrediction predict_cpu_memory(const GraphFigures& f, const LlamaConfig& model,
                                    const PredictorCoefficients& coeffs);
// The features of that model, in order: allocator blocks' resident peak, 1, graph nodes,
// parameters, GEMM packing (0/1; only where the GEMM buffers are not modelled), the measured
// process baseline, oneDNN's GEMM buffer bytes. What calibrate --results fits the residual on.
inline constexpr size_t kCpuMemoryFeatures = 7;
std::vector<double> cpu_memory_features(const GraphFigures& f, const LlamaConfig& model,
                                        double process_baseline_bytes);

// GPU rank: `f` is the dry run of the bf16 graph with the parameters as inputs and no optimizer
// states. Stage 0/1 keep every gradient until the step (the dry run's peak has them); stage 2/3
// stream them out through the reduce bucket (the dry run's transient peak).
MemoryPrediction predict_gpu_memory(const GraphFigures& f, const LlamaConfig& model,
                                    const ZeroConfig& zero, int64_t world,
                                    const PredictorCoefficients& coeffs);

}  // namespace lj
