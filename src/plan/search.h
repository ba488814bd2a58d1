// The recompute search: every policy {none, selective, full} × recomputed layers 1..L (block
// method: the first k layers) [× micro-batch], each priced by a cost function, ranked by
// predicted throughput; the first candidate that fits the budget is the plan.
//
// Pricing every (policy, k) with a graph dry run would build 2·L joint graphs. Instead, for L
// above kExactLayers, [1, L] is priced exactly at its ends and bisected: where the middle's exact
// price lies on the chord of its interval's ends (within kInterpolationTolerance, memory and
// time), the interval is interpolated linearly, otherwise both halves are refined. Time is linear
// in k (each recomputed layer adds the same nodes); the peak is piecewise linear with a few kinks
// (where the phase holding the peak changes), which the bisection locates. Against dry runs of
// every k: 0 difference on llama3-8b (B2, T8192), at most 0.31% on llama3.1-70b (B1, T8192, 28
// dry runs instead of 161), 0.33% on a 12-layer tiny model (unit test).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/status.h"
#include "passes/remat/remat.h"
#include "plan/budget.h"
#include "plan/memory_model.h"
#include "plan/time_model.h"

namespace lj {

// One priced choice.
struct Candidate {
  RecomputeConfig recompute;  // block method, `layers` recomputed (policy none: 0)
  int64_t layers = 0;         // recomputed layers
  int64_t micro_batch = 0;
  MemoryPrediction memory;
  double step_seconds = 0;  // one micro-batch step (forward, backward, optimizer, comm)
  double tokens_per_s = 0;
  bool fits = false;
  bool exact = true;                    // priced by a dry run (false: interpolated)
  std::optional<StepTimes> times;       // Pricing::times of an exact candidate
  std::optional<GpuStepWork> gpu_work;  // Pricing::gpu_work of an exact candidate
};

// What a (policy, layers, micro-batch) costs: memory and step time.
struct Pricing {
  MemoryPrediction memory;
  double step_seconds = 0;
  std::optional<StepTimes> times;       // the step by category (CPU: from host rates; GPU: always)
  std::optional<GpuStepWork> gpu_work;  // GPU: what the step's kernels do
};
using CostFn = std::function<StatusOr<Pricing>(const RecomputeConfig&, int64_t micro_batch)>;

struct SearchSpace {
  int64_t num_layers = 0;
  int64_t seq_len = 0;
  std::vector<int64_t> micro_batches;  // usually one
  std::vector<RecomputePolicy> policies{RecomputePolicy::none, RecomputePolicy::selective,
                                        RecomputePolicy::full};
  int64_t pinned_layers = -1;  // >= 1: only this many recomputed layers
  double budget_bytes = 0;
  // A candidate fits when fits(peak, budget_bytes, safety_margin) (plan/budget.h: the one rule).
  SafetyMargin safety_margin = kBudgetSafetyMargin;
  bool exhaustive = false;  // price every k exactly
};

inline constexpr int64_t kExactLayers = 8;
inline constexpr double kInterpolationTolerance = 0.002;

// All candidates, ranked: those that fit first, by tokens/s (fastest first; ties: less memory),
// then those that do not, by memory. Errors of the cost function are returned.
StatusOr<std::vector<Candidate>> search_recompute(const SearchSpace& space, const CostFn& cost);

// Linear interpolation of a prediction between two priced points (t in [0, 1]).
MemoryPrediction lerp(const MemoryPrediction& a, const MemoryPrediction& b, double t);

}  // namespace lj
