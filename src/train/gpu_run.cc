// The device-independent parts of train/gpu_train.h: what the GPU step refuses, and the
// benchmark's loop over a GpuTrainStep.
#include <string>

#include "core/units.h"
#include "train/gpu_train.h"

namespace lj {

Status check_gpu_step_config(const TrainStepConfig& c) {
  if (c.loss_scale.enabled || c.graph.autocast == DType::f16) {
    return unimplemented("--device cuda: fp16 with loss scaling does not run on the GPU yet",
                         "use --precision bf16 (no loss scaling needed), or --device cpu");
  }
  const int stage = c.data_parallel.zero.stage;
  if (c.data_parallel.comm != nullptr && stage >= 2) {
    return unimplemented(
        "--device cuda: ZeRO stage " + std::to_string(stage) +
            " does not run on the GPU yet (stages 0 and 1 do: stage 2 needs backward's "
            "reduce-scatter into the optimizer's shard, stage 3 the graph's parameter gathers)",
        "use --zero 1 (or zero_optimization.stage 1), or --device cpu");
  }
  if (c.profile) {
    return unimplemented("--device cuda: --profile times CPU kernels only",
                         "drop --profile, or use --device cpu");
  }
  if (c.graph.compile && !c.static_memory_plan) {
    return unimplemented("--device cuda: a compiled run always uses the static memory plan",
                         "drop the caching-allocator check, or use --device cpu");
  }
  return ok_status();
}

StatusOr<GpuRunResult> run_on_gpu(const GpuRunConfig& cfg) {
  LJ_CHECK(cfg.batch_fn != nullptr) << "GpuRunConfig::batch_fn is not set";
  Device host(0);
  LJ_ASSIGN_OR_RETURN(std::unique_ptr<GpuTrainStep> step,
                      create_gpu_train_step(cfg.model, cfg.step, host));
  const Communicator* comm = cfg.step.data_parallel.comm;
  const int64_t world = comm != nullptr ? comm->world_size() : 1;
  const int64_t rank = comm != nullptr ? comm->rank() : 0;
  GpuRunResult r;
  for (int64_t s = 0; s < cfg.steps; ++s) {
    std::vector<MicroBatch> micro;
    for (int64_t j = 0; j < cfg.grad_accum; ++j)
      micro.push_back(cfg.batch_fn(host, (s * world + rank) * cfg.grad_accum + j));
    const double t0 = now_seconds();
    LJ_ASSIGN_OR_RETURN(const StepResult sr, step->step(micro, cfg.lr));
    r.step_seconds.push_back(now_seconds() - t0);
    r.losses.push_back(sr.loss);
    r.comm_exposed_seconds.push_back(sr.comm_exposed_seconds);
    if (!sr.updated) {
      return internal_error("step " + std::to_string(s) +
                                ": the loss or gradient norm is not "
                                "finite (" +
                                std::to_string(sr.loss) + ")",
                            "a CUDA kernel disagrees with the CPU: run tools/gpu_check.sh's gpu "
                            "tests");
    }
  }
  r.gpu = step->report();
  return r;
}

}  // namespace lj
