// The planner on this host, for a run that is about to train (benchmark, train): checkpoint
// optimization (CHECKPOINT_OPTIMIZATION=true / --ckpt-opt picks the recompute choice), and the
// prediction of the chosen run's peak RSS from its one joint graph. cli/ prints what these return.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "graph/ir.h"
#include "models/config.h"
#include "passes/pipeline/train_graph.h"
#include "plan/budget.h"
#include "plan/graph_figures.h"
#include "plan/plan.h"
#include "probe/host_rates.h"

namespace lj {

// The data parallelism of a run on this host: its ranks (the launcher's world size) and ZeRO
// stage and buckets as the run resolved them (dist/zero.h), and each rank's threads. {}: one
// process on all the cores.
struct HostParallel {
  int world_size = 1;
  ZeroConfig zero = {};
  int rank = 0;     // the rank the figures are for (stage 2's shard part of each bucket)
  int threads = 0;  // CPU threads per rank (0: all): the time model's rates are those threads'
  ExpertShard experts = {};  // --expert-parallel: the rank's place in its group (PlanRequest's)
};

// A PlanRequest for this host: the predictor coefficients (load_coefficients) with this host's
// measured process baseline (probe/host_baseline.h: cached, else probed once), the time model's
// host rates from their cache (probe/host_rates.h; never measured here: the run's peak RSS would
// include the measurement), device "host", `parallel`'s ranks, stage and bucket sizes (figures per
// rank).
StatusOr<PlanRequest> host_plan_request(const LlamaConfig& model, int64_t micro_batch,
                                        int64_t seq_len, bool compile,
                                        const HostParallel& parallel = {});

// The budget of a run on this host: --memory-limit when given (parse_bytes), else the default
// share of the host's available memory (budget.h).
StatusOr<MemoryBudget> host_budget(const std::string& memory_limit);

// What checkpoint optimization chose: the fastest recompute choice that fits `budget`.
struct CkptChoice {
  RecomputeConfig recompute;
  double predicted_peak_bytes = 0;
  MemoryBudget budget;
  PlanResult plan;  // every priced choice, ranked (plan.best() is the chosen one)
};
// Runs the search on this host; resource_exhausted when no choice fits the budget. `precision`:
// the run's (PlanRequest::precision: bf16 / fp16 price the autocast graph).
StatusOr<CkptChoice> checkpoint_optimization(const LlamaConfig& model, int64_t micro_batch,
                                             int64_t seq_len, bool compile,
                                             const MemoryBudget& budget,
                                             const HostParallel& parallel = {},
                                             DType precision = DType::f32);

// One run's configuration, prepared once: its joint graph (built once, then handed to
// TrainStep::create), the graph's dry run and the planner's host prediction of its peak RSS.
struct PreparedRun {
  TrainGraph graph;
  double build_seconds = 0;  // building the joint graph (the compile passes included)
  GraphFigures figures;      // the dry run (f32, AdamW states), timed on the host profile
  Pricing predicted;         // predict_cpu_memory and the compute time of `figures`: per rank
  double process_baseline_bytes =
      0;  // the measured baseline in `predicted` (probe/host_baseline.h)
  // The time model's cached rates were measured contended: probe/host_rates.h contention_note, or
  // "".
  std::string rates_note;
  std::shared_ptr<const HostRates> rates;  // the time model's cached rates; null: none
};
// With several ranks the prediction is one rank's: its ZeRO shard of the optimizer states and
// the step's collective buffers (graph_figures.h DryRunOptions::world_size).
StatusOr<PreparedRun> prepare_host_run(const LlamaConfig& model, int64_t micro_batch,
                                       int64_t seq_len, const GraphOptions& graph,
                                       const HostParallel& parallel = {});

}  // namespace lj
