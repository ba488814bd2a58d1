// The device-independent part of train/gpu_train.h: what the GPU step refuses (any build).
#include <string>

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

}  // namespace lj
