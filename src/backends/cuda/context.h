// One device's execution context: the compute stream, the cuBLASLt handle and its workspace,
// the caching allocator of eager mode over cudaMalloc, and the device's properties. What the
// CUDA kernels get as KernelEnv (kernels.h). Passed explicitly, never a global.
#pragma once

#include <memory>

#include "backends/cuda/cuda.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/memory.h"
#include "backends/cuda/stream.h"

namespace lj::cuda {

class Context {
 public:
  // Sets `device` current and makes its stream and handles; unimplemented (with the probe's
  // reason) on a host without a usable GPU.
  static StatusOr<std::unique_ptr<Context>> create(int device = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const KernelEnv& env() const { return env_; }
  const Stream& stream() const { return stream_; }
  CachingAllocator& allocator() { return *allocator_; }
  MemorySource& source() { return *source_; }
  const DeviceProps& props() const { return props_; }
  Status synchronize() const { return stream_.synchronize(); }

  // 32 MiB: cuBLASLt's recommendation for Hopper.
  static constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

 private:
  Context() = default;
  DeviceProps props_;
  Stream stream_;
  std::unique_ptr<MemorySource> source_;
  std::unique_ptr<CachingAllocator> allocator_;
  void* gemm_workspace_ = nullptr;
  KernelEnv env_;
};

}  // namespace lj::cuda
