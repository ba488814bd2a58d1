// The device-independent parts of train/gpu_train.h: what the GPU step refuses, and the
// benchmark's loop over a GpuTrainStep.
#include <string>

#include "core/units.h"
#include "dist/batch_shard.h"
#include "train/capabilities.h"
#include "train/gpu_train.h"

namespace lj {

Status check_gpu_step_config(const TrainStepConfig& c) {
  // The settings a user chooses, against the capability table (train/capabilities.h).
  constexpr TrainDevice gpu = TrainDevice::cuda;
  if (c.loss_scale.enabled || c.graph.autocast == DType::f16) {
    LJ_RETURN_IF_ERROR(require_capability(gpu, "precision", "fp16"));
  }
  if (c.data_parallel.comm != nullptr) {
    LJ_RETURN_IF_ERROR(require_capability(gpu, "zero", std::to_string(c.data_parallel.zero.stage)));
  }
  LJ_RETURN_IF_ERROR(
      require_capability(gpu, "recompute", recompute_policy_name(c.graph.recompute.policy)));
  if (c.graph.compile) LJ_RETURN_IF_ERROR(require_capability(gpu, "compile", "on"));
  if (c.profile) LJ_RETURN_IF_ERROR(require_capability(gpu, "profile", "on"));
  if (c.graph.compile && !c.static_memory_plan) {
    return unimplemented("--device cuda: a compiled run always uses the static memory plan",
                         "drop the caching-allocator check, or use --device cpu");
  }
  return ok_status();
}

StatusOr<GpuRunResult> run_on_gpu(const GpuRunConfig& cfg) {
  LJ_CHECK(cfg.batch_fn != nullptr) << "GpuRunConfig::batch_fn is not set";
  if (cfg.model.is_moe()) LJ_RETURN_IF_ERROR(require_capability(TrainDevice::cuda, "moe", "on"));
  Device host(0);
  LJ_ASSIGN_OR_RETURN(std::unique_ptr<GpuTrainStep> step,
                      create_gpu_train_step(cfg.model, cfg.step, host));
  const Communicator* comm = cfg.step.data_parallel.comm;
  const int64_t world = comm != nullptr ? comm->world_size() : 1;
  const int64_t rank = comm != nullptr ? comm->rank() : 0;
  GpuRunResult r;
  for (int64_t s = 0; s < cfg.steps; ++s) {
    // This rank's slice of the global step, by the one rule the CPU's ranks follow too.
    std::vector<MicroBatch> micro;
    for (const int64_t index :
         rank_micro_batches(s, cfg.grad_accum, static_cast<int>(rank), static_cast<int>(world)))
      micro.push_back(cfg.batch_fn(host, index));
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
