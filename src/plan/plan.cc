#include "plan/plan.h"

#include <algorithm>

#include "plan/gpu_time_model.h"
#include "plan/graph_figures.h"
#include "plan/time_model.h"

namespace lj {

StatusOr<Pricing> price_choice(const PlanRequest& req, const RecomputeConfig& rc,
                               int64_t micro_batch, double* comm_seconds) {
  const bool gpu = req.device.kind == DeviceKind::gpu;
  GraphOptions o;
  o.compile = req.compile;
  o.recompute = rc;
  o.dtype = gpu ? DType::bf16 : DType::f32;
  if (!gpu && req.precision != DType::f32) {
    o.autocast = req.precision;
    o.loss_scaling = req.precision == DType::f16;
  }
  // The host's ranks run the gradient collectives (and stage 3's gathers) in the graph, as
  // TrainStep builds it: the dry run prices their buffers.
  if (!gpu)
    o.grad_sync = GradSyncOptions::for_world(req.zero, static_cast<int>(req.gpus), req.rank);
  o.experts = req.experts;
  const Efficiency& eff = gpu ? req.coeffs.gpu_eff : req.coeffs.cpu_eff;
  // The CPU's ranks hold f32 AdamW states, sharded by ZeRO stage (graph_figures.h).
  LJ_ASSIGN_OR_RETURN(GraphFigures f,
                      graph_figures(req.model, micro_batch, req.seq_len, o,
                                    DryRunOptions{.with_adam_states = !gpu,
                                                  .device = &req.device,
                                                  .eff = eff,
                                                  .world_size = static_cast<int>(req.gpus),
                                                  .rank = req.rank,
                                                  .zero = req.zero,
                                                  .rates = gpu ? nullptr : req.rates.get(),
                                                  .measure_gemm_classes = req.measure_gemm_classes,
                                                  .comm = gpu ? nullptr : req.comm_rates.get(),
                                                  .cuda_workspace = gpu}));
  Pricing p;
  const int64_t psi = req.model.num_params();
  const int64_t local =
      req.zero.shards(ZeroSharded::optimizer_states) ? (psi + req.gpus - 1) / req.gpus : psi;
  if (!gpu) {
    // The collectives are in f.times (measured MPI rates, req.comm_rates), or cost nothing.
    p.memory = predict_cpu_memory(f, req.model, req.coeffs);
    p.step_seconds =
        f.times ? f.times->total() : f.compute_seconds + optimizer_seconds(local, req.device, eff);
    p.times = f.times;
    return p;
  }
  p.memory = predict_gpu_memory(f, req.model, req.zero, req.gpus, req.coeffs);
  // The GPU time model fitted on published runs (plan/gpu_time_model.h).
  LJ_CHECK(f.gpu_work.has_value()) << "the GPU dry run did not count the step's work";
  const GpuStepPrice price = price_gpu_step(*f.gpu_work, req.device,
                                            GpuRun{.ranks = req.gpus,
                                                   .zero = req.zero,
                                                   .params = psi,
                                                   .local_params = local,
                                                   .fabric_bandwidth = req.fabric_bandwidth,
                                                   .micro_batches = req.grad_accum});
  if (comm_seconds) *comm_seconds = price.comm;
  p.step_seconds = price.total();
  p.times = price.step_times(*f.gpu_work, req.device, gpu_time_coefficients(req.device.id));
  p.gpu_work = f.gpu_work;
  return p;
}

StatusOr<PlanResult> make_plan(PlanRequest req) {
  LJ_RETURN_IF_ERROR(req.model.validate());
  if (req.gpus < 1)
    return invalid_argument("--np must be at least 1", "the data-parallel ranks: 1 or more");
  if (req.zero.stage < 0 || req.zero.stage > 3)
    return invalid_argument("--zero must be 0, 1, 2 or 3");
  if (req.rank < 0 || req.rank >= req.gpus)
    return invalid_argument("the rank priced is not a rank");
  if (req.micro_batch < 1 || req.seq_len < 1)
    return invalid_argument("--batch-size and --seq-len must be positive");
  if (req.grad_accum < 1) {
    return invalid_argument("--grad-accum must be at least 1",
                            "the micro-batches per optimizer step: 1 or more");
  }
  if (req.seq_len > req.model.max_position_embeddings) {
    return invalid_argument("--seq-len " + std::to_string(req.seq_len) + " is above " +
                                req.model.name + "'s max_position_embeddings " +
                                std::to_string(req.model.max_position_embeddings),
                            "use a shorter --seq-len");
  }
  if (req.recompute_layers > req.model.num_hidden_layers) {
    return invalid_argument("--recompute-layers " + std::to_string(req.recompute_layers) +
                            " is above the model's " + std::to_string(req.model.num_hidden_layers) +
                            " layers");
  }
  if (req.experts.size > 1) {
    if (req.device.kind == DeviceKind::gpu) {
      return unimplemented(
          "GPU plans price no expert parallelism: the GPU runs no "
          "mixture-of-experts layer",
          "plan it on the host (--device cpu), or drop --expert-parallel");
    }
    if (req.gpus % req.experts.size != 0 || req.experts.rank != req.rank % req.experts.size) {
      return invalid_argument("--expert-parallel " + std::to_string(req.experts.size) +
                                  " does not divide the " + std::to_string(req.gpus) + " ranks",
                              "the ranks (--np) are a multiple of the expert-parallel size");
    }
  }
  PlanResult r;
  r.budget_bytes =
      budget_or_default(req.budget_bytes, req.device.memory_bytes, "the device's memory").bytes;
  SearchSpace space;
  space.num_layers = req.model.num_hidden_layers;
  space.seq_len = req.seq_len;
  space.budget_bytes = r.budget_bytes;
  space.pinned_layers = req.recompute_layers;
  space.exhaustive = req.exhaustive;
  if (req.policy) {
    space.policies = {*req.policy};
    // The baseline is always shown beside a chosen policy.
    if (*req.policy != RecomputePolicy::none)
      space.policies.insert(space.policies.begin(), RecomputePolicy::none);
  }
  if (req.tune_batch) {
    for (int64_t b = 1; b <= req.micro_batch; b *= 2) space.micro_batches.push_back(b);
    if (space.micro_batches.back() != req.micro_batch)
      space.micro_batches.push_back(req.micro_batch);
  } else {
    space.micro_batches = {req.micro_batch};
  }
  auto cost = [&](const RecomputeConfig& rc, int64_t b) -> StatusOr<Pricing> {
    ++r.dry_runs;
    return price_choice(req, rc, b, &r.comm_seconds);
  };
  LJ_ASSIGN_OR_RETURN(r.ranked, search_recompute(space, cost));
  return r;
}

}  // namespace lj
