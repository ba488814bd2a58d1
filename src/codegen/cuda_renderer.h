// The CUDA renderer: one __global__ function per kernel (codegen/kernel_ir.h), compiled at run
// time by NVRTC for the device's arch (codegen/cuda/cuda_kernel_cache.h) and launched by
// backends/cuda/fused.cc. Plain text: this file needs no CUDA header and builds everywhere.
//
// Device ABI (in place of renderer.h's host ABI): the entry takes ONE argument by value, a
// struct of 8-byte words in this order:
//   const void* in[I];        // the kernel's inputs, in order
//   void* out[O];             // elementwise outputs, then the reduction
//   long long d[R];           // loop dims (LaunchGeometry::loop_dims)
//   long long s[max(I*R,1)];  // (inputs, rank) element strides, 0 = broadcast
// so a launcher packs exactly those words (cuda_launch_words) and passes them as the kernel's
// parameter buffer. Launch: kCudaBlock threads a block; without a reduction a grid-stride loop
// over rows * inner elements (any grid size); with one, one block per row in a grid-stride loop
// over rows, threads strided over the row, sums accumulated in f64 and reduced across the block
// (warp shuffles, then one shared-memory step), max NaN-propagating as the CPU's.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/renderer.h"

namespace lj::codegen {

inline constexpr int kCudaBlock = 256;

class CudaRenderer final : public Renderer {
 public:
  const char* name() const override { return "cuda"; }
  RenderedKernel render(const Kernel& k, const std::string& entry) const override;
  std::string prelude() const override;
};

// The parameter words of one launch (the ABI above), from the tensors' addresses and geometry.
std::vector<uint64_t> cuda_launch_words(const Kernel& k, const LaunchGeometry& geo,
                                        const std::vector<const void*>& in,
                                        const std::vector<void*>& out);

// Grid size (blocks) for one launch of `k` with `geo` on a device with `multiprocessors` SMs;
// 0 when there is nothing to do (an empty tensor).
int64_t cuda_grid_size(const Kernel& k, const LaunchGeometry& geo, int multiprocessors);

}  // namespace lj::codegen
