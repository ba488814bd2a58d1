// Fused pointwise kernels on the GPU: the kernel IR of each fused_pointwise node
// (codegen/kernel_ir.h) rendered by the CUDA renderer, compiled by NVRTC for this device's arch
// through the disk cache (codegen/cuda/cuda_kernel_cache.h), loaded once, and launched with
// the renderer's parameter words (codegen/cuda_renderer.h). Loading happens once per graph,
// never per step; loop dims are launch arguments, so a new B or T reuses every kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <span>
#include <vector>

#include "backends/cuda/kernels.h"
#include "codegen/cuda/cuda_kernel_cache.h"

namespace lj::cuda {

class FusedKernels {
 public:
  // Compiles what the cache lacks (one NVRTC run) and loads every kernel on the current device.
  static StatusOr<std::unique_ptr<FusedKernels>> load(std::span<const codegen::Kernel> kernels,
                                                      codegen::CudaKernelCache& cache);
  ~FusedKernels();
  FusedKernels(const FusedKernels&) = delete;
  FusedKernels& operator=(const FusedKernels&) = delete;

  // Runs kernel `index` (order of load()) on the node's tensors (device pointers).
  Status launch(size_t index, KernelContext& c, const KernelEnv& env) const;
  size_t size() const { return kernels_.size(); }

 private:
  FusedKernels() = default;
  std::vector<codegen::Kernel> kernels_;
  std::vector<cudaKernel_t> entries_;
  std::vector<cudaLibrary_t> libraries_;
};

}  // namespace lj::cuda
