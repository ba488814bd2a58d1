#include "backends/cuda/device_util.cuh"
#include "backends/cuda/rope.cuh"

namespace lj::cuda {
namespace {

template <class T>
__global__ void rope_kernel(const T* x, const T* cos, const T* sin, T* y, int64_t n, int64_t t,
                            int64_t d, bool inverse) {
  const int64_t h = d / 2;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = e / d, j = e - row * d;
    const int64_t cs = (row % t) * d;
    const T* xi = x + row * d;
    const float xc = to_f32(xi[j]) * to_f32(cos[cs + j]);
    float rot;
    if (!inverse) {
      rot = j < h ? -to_f32(xi[j + h]) * to_f32(sin[cs + j])
                  : to_f32(xi[j - h]) * to_f32(sin[cs + j]);
    } else {
      rot = j < h ? to_f32(xi[j + h]) * to_f32(sin[cs + j + h])
                  : -(to_f32(xi[j - h]) * to_f32(sin[cs + j - h]));
    }
    y[e] = from_f32<T>(xc + rot);
  }
}

}  // namespace

Status rope_forward(KernelContext& c, const KernelEnv& env) {
  const TensorView& x = c.in[0];
  const int64_t n = x.numel();
  if (n == 0) return ok_status();
  const int64_t d = x.dim(-1), t = x.dim(-2);
  const bool inverse = c.attrs().b("inverse");
  return dispatch_f32_bf16(x.dtype, "rope", [&](auto tag) -> Status {
    using T = decltype(tag);
    rope_kernel<T><<<grid_for(n, env.multiprocessors), kBlock, 0, env.stream>>>(
        x.as<const T>(), c.in[1].as<const T>(), c.in[2].as<const T>(), c.out[0].as<T>(), n, t, d,
        inverse);
    return launched("rope_kernel");
  });
}

void register_rope(CudaKernelTable& t) {
  t[Op::rope] = rope_forward;
}

}  // namespace lj::cuda
