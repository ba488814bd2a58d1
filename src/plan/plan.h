// The planner: for a model, a device, a world size and ZeRO stage, predicts memory per rank and
// step time for every recompute choice and recommends the fastest that fits the budget
// (docs/architecture.md, "Memory and recompute"). Used by `ljperf plan` and by
// CHECKPOINT_OPTIMIZATION in benchmark and train.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/config.h"
#include "plan/budget.h"
#include "plan/coefficients.h"
#include "plan/device_catalog.h"
#include "plan/memory_model.h"
#include "plan/search.h"
#include "probe/comm_rates.h"
#include "probe/host_rates.h"

namespace lj {

struct PlanRequest {
  LlamaConfig model;
  DeviceProfile device;
  PredictorCoefficients coeffs;
  int64_t gpus = 1;  // data-parallel ranks
  int rank = 0;      // the rank priced on the host (MPI's temporaries differ by rank)
  ZeroConfig zero;   // stage and bucket sizes, over `gpus` ranks
  int64_t micro_batch = 1;
  // Micro-batches per optimizer step (gradient accumulation): GPU plans share the optimizer and
  // the once-per-step collectives over them (plan/gpu_collectives.h). The host prices one
  // micro-batch as it runs alone.
  int64_t grad_accum = 1;
  int64_t seq_len = 0;
  bool compile = false;
  double fabric_bandwidth = 0;            // GPUs: bytes/s per GPU across nodes; 0: the catalog's
  std::optional<RecomputePolicy> policy;  // restrict the search to one policy
  int64_t recompute_layers = -1;          // >= 1: pin the number of recomputed layers
  bool tune_batch = false;                // also try micro-batches 1, 2, 4, ... up to micro_batch
  double budget_bytes = 0;                // 0: default_budget of the device's memory (budget.h)
  bool exhaustive = false;                // price every layer count with a dry run
  // The host's precision: f32, or bf16 / f16 mixed (the autocast graph: f32 master weights,
  // gradients and AdamW states, 16-bit activations; f16 with the loss_scale input). GPU plans
  // price DeepSpeed's bf16 recipe whatever this says (memory_model.h ModelStates).
  DType precision = DType::f32;
  // The host's measured rates (probe/host_rates.h, device "host" only): the step time by
  // host_step_times instead of the roofline; GEMM classes the search meets are measured once
  // and added (shared by every priced choice). Null: the roofline with the file's efficiencies.
  std::shared_ptr<HostRates> rates;
  bool measure_gemm_classes = true;
  // With `rates` and gpus > 1: this host's MPI collectives measured for `gpus` ranks
  // (probe/comm_rates.h cached_comm_rates), which price the step's collectives; null: they cost
  // nothing (PlanResult::comm_measured false).
  std::shared_ptr<const CommRates> comm_rates;
  // The host: expert parallelism (--expert-parallel N), the priced rank's place in its group
  // (models/config.h ExpertShard): the graph runs E / N experts on the rows the group sends them
  // and exchanges them by all-to-all, priced with comm_rates. GPU plans: size 1 only.
  ExpertShard experts;
};

struct PlanResult {
  std::vector<Candidate> ranked;  // search_recompute's order
  double budget_bytes = 0;
  double comm_seconds = 0;  // ZeRO collectives per step (already in the step times)
  int64_t dry_runs = 0;     // joint graphs built and dry-run
  const Candidate* best() const {
    return !ranked.empty() && ranked.front().fits ? &ranked.front() : nullptr;
  }
};

// Checks the request (world size, stage, device kind) and runs the search.
StatusOr<PlanResult> make_plan(PlanRequest req);

// Exact price of one choice (one dry run): what the search's cost function returns.
StatusOr<Pricing> price_choice(const PlanRequest& req, const RecomputeConfig& rc,
                               int64_t micro_batch, double* comm_seconds = nullptr);

}  // namespace lj
