// CUDA source ops: constant (value, dtype, shape) and iota (shape, axis, dtype), any of f32,
// bf16, i32, i64. random_normal / random_uniform have no CUDA kernel yet (initialisation runs on
// the host and is copied in).
#include "backends/cuda/device_util.cuh"
#include "backends/cuda/elementwise.cuh"
#include "backends/cuda/source.cuh"

namespace lj::cuda {
namespace {

template <class T>
__device__ __forceinline__ T value_as(double v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <class T>
__global__ void fill_kernel(T* y, int64_t n, double v) {
  const T x = value_as<T>(v);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = x;
}

// out[..., i, ...] = i along the axis: i = (e / inner) % dim.
template <class T>
__global__ void iota_kernel(T* y, int64_t n, int64_t inner, int64_t dim) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[e] = value_as<T>(static_cast<double>((e / inner) % dim));
}

Status constant_forward(KernelContext& c, const KernelEnv& env) {
  TensorView& out = c.out[0];
  const int64_t n = out.numel();
  if (n == 0) return ok_status();
  const double v = c.attrs().f("value");
  return dispatch_in<float, __nv_bfloat16, int32_t, int64_t>(
      out.dtype, "constant", [&](auto tag) -> Status {
        using T = decltype(tag);
        fill_kernel<T>
            <<<grid_for(n, env.multiprocessors), kBlock, 0, env.stream>>>(out.as<T>(), n, v);
        return launched("fill_kernel");
      });
}

Status iota_forward(KernelContext& c, const KernelEnv& env) {
  TensorView& out = c.out[0];
  const int64_t n = out.numel();
  if (n == 0) return ok_status();
  int64_t axis = c.attrs().i("axis");
  if (axis < 0) axis += out.rank();
  int64_t inner = 1;
  for (int k = static_cast<int>(axis) + 1; k < out.rank(); ++k)
    inner *= out.dims[static_cast<size_t>(k)];
  const int64_t dim = out.dims[static_cast<size_t>(axis)];
  return dispatch_in<float, __nv_bfloat16, int32_t, int64_t>(
      out.dtype, "iota", [&](auto tag) -> Status {
        using T = decltype(tag);
        iota_kernel<T><<<grid_for(n, env.multiprocessors), kBlock, 0, env.stream>>>(out.as<T>(), n,
                                                                                    inner, dim);
        return launched("iota_kernel");
      });
}

}  // namespace

void register_source(CudaKernelTable& t) {
  t[Op::constant] = constant_forward;
  t[Op::iota] = iota_forward;
}

}  // namespace lj::cuda
