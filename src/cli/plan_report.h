// Rendering of a plan (ljperf plan, CHECKPOINT_OPTIMIZATION in benchmark and train); the
// planning itself is plan/'s (plan.h, host_plan.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "plan/host_plan.h"
#include "plan/plan.h"

namespace lj::cli {

// Header, memory per rank by category of the recommendation, a table of recompute choices
// (for each policy: every layer recomputed, and the fastest choice that fits), the
// recommendation and the two next-best alternatives.
std::string format_plan(const PlanRequest& req, const PlanResult& r);
nlohmann::ordered_json plan_to_json(const PlanRequest& req, const PlanResult& r);

// The predicted step by category ({"contraction": s, ..., "optimizer": s, "overhead": s}); null
// without one.
nlohmann::ordered_json step_times_json(const std::optional<StepTimes>& t);
nlohmann::ordered_json gpu_work_json(const std::optional<GpuStepWork>& w);

// CHECKPOINT_OPTIMIZATION=true or --ckpt-opt.
bool checkpoint_optimization_requested(bool flag);

// What checkpoint optimization chose (plan/host_plan.h): the budget, the chosen recompute with
// its predicted peak and step time, and the two next-best alternatives.
void print_ckpt_choice(const CkptChoice& c, int64_t num_layers);

}  // namespace lj::cli
