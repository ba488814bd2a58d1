// The CUDA runtime's view of this host (cuda.h) and the error lines of cuda_check.h.
#include <cuda_runtime_api.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_check.h"

namespace lj::cuda {
namespace {

// 13000 -> "13.0" (CUDA's version encoding: 1000 * major + 10 * minor).
std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return ok_status();
  const std::string line =
      std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  switch (e) {
    case cudaErrorNoDevice:
      return unimplemented(line, "no NVIDIA GPU is visible; run with --device cpu");
    case cudaErrorInsufficientDriver:
      return unimplemented(line, "the NVIDIA driver is missing or older than CUDA " +
                                     cuda_build_version() +
                                     " needs; `ljperf doctor` says which driver it needs");
    case cudaErrorMemoryAllocation:
      return resource_exhausted(line,
                                "the GPU is out of memory: `ljperf plan` predicts the peak; try "
                                "--recompute full, a smaller --batch-size or ZeRO");
    default:
      return internal_error(line);
  }
}

bool built_with_cuda() {
  return true;
}

std::string cuda_build_version() {
  return LJ_CUDA_VERSION_STRING;
}

Probe probe() {
  Probe p;
  p.built = true;
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) p.runtime_version = version_string(runtime);
  // 0 when no driver is installed; no error either way.
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    p.driver_version = version_string(driver);
  }
  if (p.driver_version.empty()) {
    p.error = "no NVIDIA driver is loaded";
    return p;
  }
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    p.error = cuda_status(e, "cudaGetDeviceCount").message();
    return p;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceProps d;
    d.index = i;
    d.name = prop.name;
    d.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    d.sm_major = prop.major;
    d.sm_minor = prop.minor;
    d.multiprocessors = prop.multiProcessorCount;
    p.devices.push_back(std::move(d));
  }
  if (p.devices.empty()) p.error = "the NVIDIA driver is loaded but no GPU is visible";
  return p;
}

}  // namespace lj::cuda
