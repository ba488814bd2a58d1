#include "backends/cuda/device_util.cuh"
#include "backends/cuda/grad_ops.cuh"

namespace lj::cuda {
namespace {

int blocks_for(int64_t n) {
  const int64_t b = (n + kBlock - 1) / kBlock;
  return static_cast<int>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

__global__ void accumulate_kernel(float* acc, const float* g, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride)
    acc[k] += g[k];
}

__global__ void scale_kernel(float* x, float s, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride)
    x[k] *= s;
}

__global__ void square_partials_kernel(const float* x, int64_t n, double* partials) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  double s = 0;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride) {
    const double v = x[k];
    s += v * v;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(const double* partials, int count, double* out) {
  double s = 0;
  for (int k = threadIdx.x; k < count; k += blockDim.x) s += partials[k];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

}  // namespace

Status accumulate_f32(float* acc, const float* g, int64_t n, const KernelEnv& env) {
  if (n == 0) return ok_status();
  accumulate_kernel<<<blocks_for(n), kBlock, 0, env.stream>>>(acc, g, n);
  return launched("accumulate_kernel");
}

Status scale_f32(float* x, float s, int64_t n, const KernelEnv& env) {
  if (n == 0) return ok_status();
  scale_kernel<<<blocks_for(n), kBlock, 0, env.stream>>>(x, s, n);
  return launched("scale_kernel");
}

Status sum_squares_f32(std::span<const GradSpan> spans, double* partials, double* out,
                       const KernelEnv& env) {
  for (size_t i = 0; i < spans.size(); ++i) {
    square_partials_kernel<<<kSquareBlocks, kBlock, 0, env.stream>>>(spans[i].x, spans[i].n,
                                                                     partials + i * kSquareBlocks);
    LJ_RETURN_IF_ERROR(launched("square_partials_kernel"));
  }
  sum_partials_kernel<<<1, kBlock, 0, env.stream>>>(
      partials, static_cast<int>(spans.size()) * kSquareBlocks, out);
  return launched("sum_partials_kernel");
}

}  // namespace lj::cuda
