// train/gpu_train.h in a build without CUDA.
#include "train/gpu_train.h"

namespace lj {

StatusOr<GpuRunResult> run_on_gpu(const GpuRunConfig&) {
  return unimplemented("this ljperf was built without CUDA",
                       "rebuild with cmake -DLJ_CUDA=ON, or use --device cpu");
}

}  // namespace lj
