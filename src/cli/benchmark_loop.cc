// The step loop of cli/benchmark_loop.h.
#include "cli/benchmark_loop.h"

#include <utility>

#include "cli/synthetic_batch.h"
#include "core/units.h"
#include "dist/batch_shard.h"

namespace lj::cli {
namespace {

// This rank's slice of global step `s`, by global micro-batch index: N ranks x accum A train
// what one process with accum N x A trains (dist/batch_shard.h).
std::vector<MicroBatch> rank_batches(Device& host, const LoopPlan& p, int64_t s) {
  std::vector<MicroBatch> micro;
  for (const int64_t index : rank_micro_batches(s, p.grad_accum, p.rank, p.world_size)) {
    micro.push_back(synthetic_batch(host, p.micro_batch, p.seq_len, p.vocab_size, p.seed, index));
  }
  return micro;
}

void record(const StepResult& res, double seconds, double cpu_seconds, bool measured,
            StepLog* log) {
  log->all_seconds.push_back(seconds);
  log->losses.push_back(res.loss);
  if (!measured) return;
  log->measured_seconds.push_back(seconds);
  log->measured_comm_seconds.push_back(res.comm_seconds);
  log->measured_optimizer_seconds.push_back(res.optimizer_seconds);
  log->measured_cpu_seconds.push_back(cpu_seconds);
  log->measured_exposed_seconds.push_back(res.comm_exposed_seconds);
}

}  // namespace

LoopPlan loop_plan(const Resolved& r, uint64_t seed, std::function<double(int64_t step)> lr_at) {
  LoopPlan p;
  p.steps = r.steps;
  p.warmup = r.warmup;
  p.micro_batch = r.micro_batch;
  p.seq_len = r.seq_len;
  p.grad_accum = r.grad_accum;
  p.vocab_size = r.model.config.vocab_size;
  p.seed = seed;
  p.rank = r.dp.rank;
  p.world_size = r.dp.world_size;
  p.lr_at = std::move(lr_at);
  return p;
}

StatusOr<StepLog> run_steps(StepEngine& engine, Device& host, const LoopPlan& plan,
                            const StepHooks& hooks) {
  StepLog log;
  for (int64_t s = 0; s < plan.steps; ++s) {
    const std::vector<MicroBatch> micro = rank_batches(host, plan, s);
    if (s == plan.warmup) {
      if (hooks.measure_start) hooks.measure_start();
      log.load_start = cpu_load_mark();
    }
    const double t0 = now_seconds();
    const double cpu0 = process_cpu_seconds();
    LJ_ASSIGN_OR_RETURN(const StepResult res, engine.step(micro, plan.lr_at(s)));
    const double dt = now_seconds() - t0;
    record(res, dt, process_cpu_seconds() - cpu0, s >= plan.warmup, &log);
    if (hooks.after_step) LJ_RETURN_IF_ERROR(hooks.after_step(s, res, dt));
  }
  log.load_end = cpu_load_mark();
  return log;
}

}  // namespace lj::cli
