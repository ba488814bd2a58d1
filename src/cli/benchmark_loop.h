// `ljperf benchmark`'s step loop, written once for every device: it drives any StepEngine
// (train/step_engine.h: the CPU's TrainStep or the GPU's GpuTrainStep) over this rank's seeded
// synthetic micro-batches (dist/batch_shard.h's rule), times each step on the host clock and
// records what the summary and the JSON record read (cli/benchmark_report.h). What differs by
// device comes in as hooks: the CPU resets its kernel profile and prints progress, the GPU stops
// on a non-finite step.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cli/benchmark.h"
#include "core/status.h"
#include "runtime/cpu_load.h"
#include "train/step_engine.h"

namespace lj::cli {

// What the loop runs: the steps, and the batches each rank draws.
struct LoopPlan {
  int64_t steps = 0;
  int64_t warmup = 0;  // the first steps, left out of the measured lists
  int64_t micro_batch = 0, seq_len = 0, grad_accum = 1;
  int64_t vocab_size = 0;
  uint64_t seed = 0;  // of the synthetic tokens (cli/synthetic_batch.h)
  int rank = 0, world_size = 1;
  std::function<double(int64_t step)> lr_at;  // the learning rate of step s (0-based)
};

// The plan of the resolved run `r` on this rank: its batches from --seed, its learning rate from
// `lr_at`.
LoopPlan loop_plan(const Resolved& r, uint64_t seed, std::function<double(int64_t step)> lr_at);

// What differs by device; each may be empty.
struct StepHooks {
  // Before the first measured step runs (its batches are made).
  std::function<void()> measure_start;
  // After step `step` (0-based) ran in `seconds`; an error ends the loop with it.
  std::function<Status(int64_t step, const StepResult& result, double seconds)> after_step;
};

// What the step loop measured.
struct StepLog {
  std::vector<double> measured_seconds;  // after warmup
  std::vector<double> all_seconds;
  std::vector<double> losses;
  std::vector<double> measured_comm_seconds;       // this rank's time in collectives, after warmup
  std::vector<double> measured_exposed_seconds;    // the part of it the step waited for
  std::vector<double> measured_optimizer_seconds;  // StepResult::optimizer_seconds, after warmup
  std::vector<double> measured_cpu_seconds;        // process CPU time per step, after warmup
  // The host's CPU use at the first measured step's start and after the last (runtime/cpu_load.h).
  CpuLoadMark load_start, load_end;
};

// Runs plan.steps steps of `engine`, its batches made on `host` (where host tensors live).
StatusOr<StepLog> run_steps(StepEngine& engine, Device& host, const LoopPlan& plan,
                            const StepHooks& hooks = {});

}  // namespace lj::cli
