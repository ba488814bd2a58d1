#include "backends/cpu/cpu.h"

namespace lj::cpu {

const KernelTable& kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    register_source(t);
    register_elementwise(t);
    register_reduce(t);
    register_matmul(t);
    register_movement(t);
    register_loss(t);
    register_attention(t);
    register_opaque(t);
    register_collective(t);
    register_fused(t);
    register_moe(t);
    register_norm(t);
    register_swiglu(t);
    register_rope(t);
    widen_half_kernels(t);  // last: wraps what the others registered
    return t;
  }();
  return table;
}

}  // namespace lj::cpu
