#include "backends/cuda/device_util.cuh"
#include "backends/cuda/swiglu.cuh"

namespace lj::cuda {
namespace {

template <class T>
__global__ void swiglu_kernel(const T* gate, const T* up, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = to_f32(gate[i]);
    const float silu = g / (1.0f + expf(-g));
    out[i] = from_f32<T>(silu * to_f32(up[i]));
  }
}

template <class T>
__global__ void swiglu_backward_kernel(const T* dout, const T* gate, const T* up, T* dgate, T* dup,
                                       int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = to_f32(gate[i]), d = to_f32(dout[i]);
    const float s = 1.0f / (1.0f + expf(-g));
    const float silu = g / (1.0f + expf(-g));
    dgate[i] = from_f32<T>((d * to_f32(up[i])) * (s * (1.0f + g * (1.0f - s))));
    dup[i] = from_f32<T>(d * silu);
  }
}

}  // namespace

Status swiglu_forward(KernelContext& c, const KernelEnv& env) {
  const int64_t n = c.in[0].numel();
  if (n == 0) return ok_status();
  return dispatch_f32_bf16(c.in[0].dtype, "swiglu", [&](auto tag) -> Status {
    using T = decltype(tag);
    swiglu_kernel<T><<<grid_for(n, env.multiprocessors), kBlock, 0, env.stream>>>(
        c.in[0].as<const T>(), c.in[1].as<const T>(), c.out[0].as<T>(), n);
    return launched("swiglu_kernel");
  });
}

Status swiglu_backward(KernelContext& c, const KernelEnv& env) {
  const int64_t n = c.in[0].numel();
  if (n == 0) return ok_status();
  return dispatch_f32_bf16(c.in[0].dtype, "swiglu_backward", [&](auto tag) -> Status {
    using T = decltype(tag);
    swiglu_backward_kernel<T><<<grid_for(n, env.multiprocessors), kBlock, 0, env.stream>>>(
        c.in[0].as<const T>(), c.in[1].as<const T>(), c.in[2].as<const T>(), c.out[0].as<T>(),
        c.out[1].as<T>(), n);
    return launched("swiglu_backward_kernel");
  });
}

void register_swiglu(CudaKernelTable& t) {
  t[Op::swiglu] = swiglu_forward;
  t[Op::swiglu_backward] = swiglu_backward;
}

}  // namespace lj::cuda
