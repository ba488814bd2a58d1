// Rendering of a plan (ljperf plan, CHECKPOINT_OPTIMIZATION in benchmark and train) and the
// checkpoint-optimization step itself.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "plan/plan.h"

namespace lj::cli {

// Header, memory per rank by category of the recommendation, a table of recompute choices
// (for each policy: every layer recomputed, and the fastest choice that fits), the
// recommendation and the two next-best alternatives.
std::string format_plan(const PlanRequest& req, const PlanResult& r);
nlohmann::ordered_json plan_to_json(const PlanRequest& req, const PlanResult& r);

// CHECKPOINT_OPTIMIZATION=true or --ckpt-opt.
bool checkpoint_optimization_requested(bool flag);

// Runs the search for this host (budget: `memory_limit` when set, else 90% of the available
// memory), prints the chosen plan — layers recomputed, predicted peak and step time, the two
// next-best alternatives — and returns the chosen recompute and its predicted peak RSS.
struct CkptChoice {
  RecomputeConfig recompute;
  double predicted_peak_bytes = 0;
};
StatusOr<CkptChoice> checkpoint_optimization(const LlamaConfig& model, int64_t micro_batch,
                                             int64_t seq_len, bool compile,
                                             const std::string& memory_limit);

// The host prediction of peak RSS for a fixed recompute choice (benchmark prints it beside the
// measured figure and writes its components to the results record).
StatusOr<Pricing> predict_host_run(const LlamaConfig& model, int64_t micro_batch, int64_t seq_len,
                                   const GraphOptions& graph, GraphFigures* figures = nullptr);

}  // namespace lj::cli
