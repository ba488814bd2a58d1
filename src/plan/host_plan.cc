#include "plan/host_plan.h"

#include <chrono>

#include "core/units.h"
#include "plan/coefficients.h"
#include "plan/time_model.h"
#include "probe/comm_rates.h"
#include "probe/host_rates.h"
#include "runtime/host.h"

namespace lj {

StatusOr<PlanRequest> host_plan_request(const LlamaConfig& model, int64_t micro_batch,
                                        int64_t seq_len, bool compile,
                                        const HostParallel& parallel) {
  PlanRequest req;
  req.model = model;
  LJ_ASSIGN_OR_RETURN(req.coeffs, load_coefficients());
  LJ_RETURN_IF_ERROR(attach_host_baseline(&req.coeffs, /*threads=*/0,
                                          /*may_probe=*/parallel.world_size <= 1));
  LJ_ASSIGN_OR_RETURN(req.device, find_device("host", req.coeffs));
  // The time model's rates on the threads the run uses, from the cache only: this process is
  // about to train and report its own peak RSS, which the measurement's buffers (up to 256 MiB)
  // would raise. `ljperf plan` and `calibrate --measure` measure and cache them; GEMM classes the
  // cache lacks take the nearest measured class. No cache: the roofline (a warning says so).
  req.rates = plan_host_rates(parallel.threads, /*may_probe=*/false);
  req.measure_gemm_classes = false;
  // The collectives' measured rates (probe/comm_rates.h), from the cache only, as the rates above.
  if (parallel.world_size > 1) {
    if (auto c = cached_comm_rates(parallel.world_size))
      req.comm_rates = std::make_shared<const CommRates>(*c);
  }
  req.gpus = parallel.world_size;
  req.rank = parallel.rank;
  req.experts = parallel.experts;
  req.zero = parallel.zero;
  req.micro_batch = micro_batch;
  req.seq_len = seq_len;
  req.compile = compile;
  return req;
}

StatusOr<MemoryBudget> host_budget(const std::string& memory_limit) {
  double limit = 0;
  if (!memory_limit.empty()) {
    LJ_ASSIGN_OR_RETURN(limit, parse_bytes(memory_limit));
  }
  return budget_or_default(limit, static_cast<double>(host_info().mem_available_bytes),
                           "available memory");
}

StatusOr<CkptChoice> checkpoint_optimization(const LlamaConfig& model, int64_t micro_batch,
                                             int64_t seq_len, bool compile,
                                             const MemoryBudget& budget,
                                             const HostParallel& parallel, DType precision) {
  LJ_ASSIGN_OR_RETURN(PlanRequest req,
                      host_plan_request(model, micro_batch, seq_len, compile, parallel));
  req.budget_bytes = budget.bytes;
  req.precision = precision;
  CkptChoice c;
  c.budget = budget;
  LJ_ASSIGN_OR_RETURN(c.plan, make_plan(req));
  const Candidate* best = c.plan.best();
  if (best == nullptr) {
    return resource_exhausted("checkpoint optimization: no recompute choice fits " +
                                  format_bytes(c.plan.budget_bytes) +
                                  " (full recompute of every layer needs " +
                                  format_bytes(c.plan.ranked.front().memory.total) + ")",
                              "a smaller --batch-size or --seq-len, or a larger --memory-limit");
  }
  c.recompute = best->recompute;
  c.predicted_peak_bytes = best->memory.total;
  return c;
}

StatusOr<PreparedRun> prepare_host_run(const LlamaConfig& model, int64_t micro_batch,
                                       int64_t seq_len, const GraphOptions& graph,
                                       const HostParallel& parallel) {
  LJ_ASSIGN_OR_RETURN(PlanRequest req,
                      host_plan_request(model, micro_batch, seq_len, graph.compile, parallel));
  PreparedRun r;
  r.graph.options = graph;
  r.graph.options.dtype = DType::f32;  // the CPU trains in f32
  // The gradient collectives in the graph, as TrainStep builds it (train_step.h
  // grad_sync_options).
  r.graph.options.grad_sync =
      GradSyncOptions::for_world(parallel.zero, parallel.world_size, parallel.rank);
  const auto t0 = std::chrono::steady_clock::now();
  LJ_ASSIGN_OR_RETURN(r.graph.ids,
                      build_train_graph(model, r.graph.options, &r.graph.graph, &r.graph.passes));
  r.build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LJ_ASSIGN_OR_RETURN(
      r.figures, graph_figures(r.graph.graph, model, micro_batch, seq_len, r.graph.options,
                               DryRunOptions{.with_adam_states = true,
                                             .device = &req.device,
                                             .eff = req.coeffs.cpu_eff,
                                             .world_size = parallel.world_size,
                                             .rank = parallel.rank,
                                             .zero = parallel.zero,
                                             .rates = req.rates.get(),
                                             .measure_gemm_classes = req.measure_gemm_classes}));
  r.predicted.memory = predict_cpu_memory(r.figures, model, req.coeffs);
  r.process_baseline_bytes = req.coeffs.host.process_baseline_bytes;
  if (req.rates) r.rates_note = contention_note(*req.rates);
  r.rates = req.rates;
  if (r.figures.times) {
    r.predicted.step_seconds = r.figures.times->total();
    r.predicted.times = r.figures.times;
  } else {
    const int64_t psi = model.num_params();
    const int64_t local =
        parallel.world_size > 1 && parallel.zero.shards(ZeroSharded::optimizer_states)
            ? (psi + parallel.world_size - 1) / parallel.world_size
            : psi;
    r.predicted.step_seconds =
        r.figures.compute_seconds + optimizer_seconds(local, req.device, req.coeffs.cpu_eff);
  }
  return r;
}

}  // namespace lj
