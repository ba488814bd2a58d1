#include "backends/cuda/kernels.h"

namespace lj::cuda {

const CudaKernelTable& kernels() {
  static const CudaKernelTable table = [] {
    CudaKernelTable t;
    register_source(t);
    register_elementwise(t);
    register_reduce(t);
    register_movement(t);
    register_norm(t);
    register_swiglu(t);
    register_rope(t);
    register_loss(t);
    register_attention(t);
    register_gemm(t);
    return t;
  }();
  return table;
}

}  // namespace lj::cuda
