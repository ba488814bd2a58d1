// cudaMalloc as a MemorySource (memory.h).
#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/memory.h"

namespace lj::cuda {
namespace {

class DeviceSource final : public MemorySource {
 public:
  explicit DeviceSource(int device) : device_(device) {}
  Status allocate(size_t bytes, void** p) override {
    LJ_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the sticky-free error so later calls do not see it
      return resource_exhausted(
          "GPU " + std::to_string(device_) + " is out of memory (" + std::to_string(bytes) +
              " bytes asked)",
          "`ljperf plan` predicts the peak; try --recompute full, a smaller --batch-size or ZeRO");
    }
    return cuda_status(e, "cudaMalloc");
  }
  void free(void* p) override {
    const cudaError_t e = cudaFree(p);
    // At process exit the runtime may be torn down before a static owner frees its blocks:
    // the memory is gone with the context anyway.
    if (e == cudaErrorCudartUnloading || e == cudaErrorContextIsDestroyed) return;
    LJ_CUDA_CHECK(e);
  }
  void memory_info(int64_t* bytes_free, int64_t* bytes_total) override {
    size_t f = 0, t = 0;
    LJ_CUDA_CHECK(cudaMemGetInfo(&f, &t));
    *bytes_free = static_cast<int64_t>(f);
    *bytes_total = static_cast<int64_t>(t);
  }

 private:
  int device_;
};

}  // namespace

std::unique_ptr<MemorySource> device_memory_source(int device) {
  return std::make_unique<DeviceSource>(device);
}

}  // namespace lj::cuda
