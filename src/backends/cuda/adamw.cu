#include "backends/cuda/adamw.cuh"
#include "backends/cuda/device_util.cuh"

namespace lj::cuda {
namespace {

struct AdamWLaunch {
  AdamWTensor t[kAdamWTensors];
  int chunk[kAdamWBlocks];
  unsigned char tensor[kAdamWBlocks];
};
static_assert(sizeof(AdamWLaunch) + sizeof(AdamWConstants) < 4096, "kernel parameters fit 4 KiB");

__global__ void adamw_kernel(AdamWConstants c, AdamWLaunch l) {
  const AdamWTensor& t = l.t[l.tensor[blockIdx.x]];
  const int64_t begin = static_cast<int64_t>(l.chunk[blockIdx.x]) * kAdamWChunk;
  const int64_t end = begin + kAdamWChunk < t.n ? begin + kAdamWChunk : t.n;
  for (int64_t k = begin + threadIdx.x; k < end; k += blockDim.x) {
    const float g = t.g[k] * c.grad_scale;
    float p = t.p[k] * c.decay;
    const float m = c.beta1 * t.m[k] + (1.0f - c.beta1) * g;
    const float v = c.beta2 * t.v[k] + (1.0f - c.beta2) * g * g;
    p -= c.step_size * m / (sqrtf(v) / c.bc2_sqrt + c.eps);
    t.p[k] = p;
    t.m[k] = m;
    t.v[k] = v;
  }
}

}  // namespace

Status adamw_multi_tensor(const AdamWConstants& c, std::span<const AdamWTensor> tensors,
                          const KernelEnv& env) {
  AdamWLaunch l{};
  int nt = 0, nb = 0;
  auto flush = [&]() -> Status {
    if (nb > 0) {
      adamw_kernel<<<nb, kBlock, 0, env.stream>>>(c, l);
      LJ_RETURN_IF_ERROR(launched("adamw_kernel"));
    }
    nt = 0;
    nb = 0;
    return ok_status();
  };
  for (const AdamWTensor& t : tensors) {
    if (t.n == 0) continue;
    if (nt == kAdamWTensors) LJ_RETURN_IF_ERROR(flush());
    l.t[nt] = t;
    const int64_t chunks = (t.n + kAdamWChunk - 1) / kAdamWChunk;
    for (int64_t ch = 0; ch < chunks; ++ch) {
      if (nb == kAdamWBlocks) {
        // The tensor continues in the next launch, in slot 0.
        LJ_RETURN_IF_ERROR(flush());
        l.t[0] = t;
        nt = 0;
      }
      l.chunk[nb] = static_cast<int>(ch);
      l.tensor[nb] = static_cast<unsigned char>(nt);
      ++nb;
    }
    ++nt;
  }
  return flush();
}

}  // namespace lj::cuda
