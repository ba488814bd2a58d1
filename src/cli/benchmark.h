// The pieces of `ljperf benchmark` (cli/benchmark.cc) that its other files share: the command's
// arguments and the run they resolve to. The command is cut into rooms:
//   cli/benchmark.cc         arguments, resolution, the ranks' agreement, the CPU and GPU routes
//   cli/benchmark_fit.h      the memory check before anything is allocated, and what would fit
//   cli/benchmark_loop.h     the one step loop, over any StepEngine (CPU or GPU)
//   cli/benchmark_report.h   the printed summary and the JSON record (--out), CPU and GPU
//   cli/benchmark_gpu.h      the GPU route's step engine
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/run_config.h"
#include "cli/run_flags.h"
#include "plan/host_plan.h"

namespace lj::cli {

inline constexpr int64_t kDefaultWarmupSteps = 2;

struct BenchmarkArgs {
  RunFlags f;  // the flags benchmark and train share (cli/run_flags.h)
  std::string output;
  int64_t steps = 12;
  int64_t warmup_steps = kDefaultWarmupSteps;  // --skip-steps
  int64_t log_every = 1;
  bool profile = false;
  std::string profile_clock = "wall";
  CLI::App* app = nullptr;
  bool given(const char* flag) const { return app->get_option(flag)->count() > 0; }
};

// What the benchmark runs: the resolved run (cli/run_flags.h, with every value's origin) and the
// benchmark's own step counts.
struct Resolved : ResolvedRun {
  int64_t steps = 0;        // --steps, --skip-steps included
  int64_t warmup = 0;       // --skip-steps: steps left out of the summary
  std::string warmup_note;  // set when the default --skip-steps was lowered for a short run
  // This rank's tokens per optimizer step (every rank trains as many).
  int64_t tokens_per_step() const { return micro_batch * seq_len * grad_accum; }
};

}  // namespace lj::cli
