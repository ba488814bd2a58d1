// The GPU route of cli/benchmark_gpu.h.
#include "cli/benchmark_gpu.h"

#include <memory>

#include "cli/benchmark_loop.h"
#include "cli/benchmark_report.h"
#include "train/gpu_train.h"

namespace lj::cli {
namespace {

// A step that skipped its update on the GPU is a kernel's fault, not the data's: stop there.
Status require_finite(int64_t step, const StepResult& res) {
  if (res.updated) return ok_status();
  return internal_error("step " + std::to_string(step) +
                            ": the loss or gradient norm is not "
                            "finite (" +
                            std::to_string(res.loss) + ")",
                        "a CUDA kernel disagrees with the CPU: run tools/gpu_check.sh's gpu "
                        "tests");
}

}  // namespace

Status run_gpu_benchmark(const BenchmarkArgs& a, const Resolved& r, const std::string& output) {
  const Communicator* comm = r.step.data_parallel.comm;
  GpuRun run{r, comm != nullptr ? comm->world_size() : 1, {}};
  print_gpu_header(run);
  Device host(0);  // where the batches are made
  LJ_ASSIGN_OR_RETURN(std::unique_ptr<GpuTrainStep> engine,
                      create_gpu_train_step(r.model.config, r.step, host));
  StepHooks hooks;
  hooks.after_step = [](int64_t step, const StepResult& res, double) {
    return require_finite(step, res);
  };
  const double lr = r.step.adamw.lr;
  LJ_ASSIGN_OR_RETURN(
      const StepLog log,
      run_steps(*engine, host, loop_plan(r, r.seed, [lr](int64_t) { return lr; }), hooks));
  run.gpu = engine->report();
  return report_gpu_run(run, log, output);
}

}  // namespace lj::cli
