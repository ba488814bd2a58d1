// train/gpu_train.h in a build without CUDA.
#include "train/gpu_train.h"

namespace lj {

StatusOr<std::unique_ptr<GpuTrainStep>> create_gpu_train_step(const LlamaConfig&,
                                                              const TrainStepConfig& config,
                                                              Device&) {
  LJ_RETURN_IF_ERROR(check_gpu_step_config(config));
  return unimplemented("--device cuda: this ljperf was built without CUDA",
                       "rebuild with cmake -DLJ_CUDA=ON, or use --device cpu");
}

}  // namespace lj
