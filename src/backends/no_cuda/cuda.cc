// backends/cuda without LJ_CUDA: the answers of cuda.h for a build without the CUDA backend.
#include "backends/cuda/cuda.h"

namespace lj::cuda {

bool built_with_cuda() {
  return false;
}

std::string cuda_build_version() {
  return "";
}

Probe probe() {
  Probe p;
  p.error = "this ljperf was built without CUDA";
  return p;
}

}  // namespace lj::cuda
