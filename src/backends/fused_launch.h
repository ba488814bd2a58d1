// What launching a fused pointwise kernel takes from a KernelContext, for every backend (the
// CPU's compiled entries in runtime/fused_kernels, the CUDA launcher in backends/cuda/fused):
// the loop geometry of the node's tensors and their data pointers, in the kernel's order.
#pragma once

#include <vector>

#include "backends/kernel.h"
#include "codegen/kernel_ir.h"

namespace lj {

struct FusedLaunch {
  codegen::LaunchGeometry geo;
  std::vector<const void*> in;
  std::vector<void*> out;
};

inline Status fused_launch(const codegen::Kernel& k, const KernelContext& c, FusedLaunch* l) {
  std::vector<std::vector<int64_t>> in_dims, out_dims;
  for (const TensorView& v : c.in) {
    in_dims.push_back(v.dims);
    l->in.push_back(v.data);
  }
  for (const TensorView& v : c.out) {
    out_dims.push_back(v.dims);
    l->out.push_back(v.data);
  }
  return codegen::launch_geometry(k, in_dims, out_dims, &l->geo);
}

}  // namespace lj
