#include "backends/cuda/device_util.cuh"
#include "backends/cuda/norm.cuh"

namespace lj::cuda {
namespace {

// s (optional) = x + r, stored rounded to T; the norm of the f32 sum (or of x) in f32, each
// result rounded once to T on store (as the CPU's bf16 rows).
template <class T>
__global__ void rms_norm_kernel(const T* x, const T* r, const T* w, T* s, T* y, T* rstd,
                                int64_t rows, int64_t cols, float eps) {
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const T* xi = x + i * cols;
    const T* ri = r == nullptr ? nullptr : r + i * cols;
    T* si = s == nullptr ? nullptr : s + i * cols;
    float ss = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float v = to_f32(xi[j]);
      if (ri != nullptr) {
        v += to_f32(ri[j]);
        si[j] = from_f32<T>(v);
      }
      ss += v * v;
    }
    ss = block_sum(ss);
    const float rs = 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
    if (threadIdx.x == 0) rstd[i] = from_f32<T>(rs);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float v = to_f32(xi[j]);
      if (ri != nullptr) v += to_f32(ri[j]);
      y[i * cols + j] = from_f32<T>((v * rs) * to_f32(w[j]));
    }
  }
}

template <class T>
__global__ void rms_norm_dx_kernel(const T* dy, const T* x, const T* w, const T* rstd,
                                   const T* dres, T* dx, int64_t rows, int64_t cols) {
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const T* dyi = dy + i * cols;
    const T* xi = x + i * cols;
    float dot = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      dot += to_f32(dyi[j]) * to_f32(w[j]) * to_f32(xi[j]);
    dot = block_sum(dot);
    const float rs = to_f32(rstd[i]);
    const float k = rs * rs * rs / static_cast<float>(cols) * dot;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float g = rs * to_f32(w[j]) * to_f32(dyi[j]) - to_f32(xi[j]) * k;
      if (dres != nullptr) g += to_f32(dres[i * cols + j]);
      dx[i * cols + j] = from_f32<T>(g);
    }
  }
}

// Block (32, 8): column j0 + threadIdx.x, rows strided by 8 per warp row; partials added in
// threadIdx.y order.
template <class T>
__global__ void rms_norm_dw_kernel(const T* dy, const T* x, const T* rstd, T* dw, int64_t rows,
                                   int64_t cols) {
  __shared__ float part[8][33];
  const int64_t j = blockIdx.x * 32 + threadIdx.x;
  float acc = 0;
  if (j < cols) {
    for (int64_t i = threadIdx.y; i < rows; i += 8)
      acc += to_f32(dy[i * cols + j]) * to_f32(x[i * cols + j]) * to_f32(rstd[i]);
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    float s = 0;
    for (int r = 0; r < 8; ++r) s += part[r][threadIdx.x];
    dw[j] = from_f32<T>(s);
  }
}

struct RowShape {
  int64_t rows = 0, cols = 0;
};
RowShape row_shape(const TensorView& x) {
  const int64_t cols = x.dim(-1);
  return {cols == 0 ? 0 : x.numel() / cols, cols};
}

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : (rows < (1 << 30) ? rows : (1 << 30)));
}

Status norm_forward(KernelContext& c, const KernelEnv& env, bool add) {
  const RowShape sh = row_shape(c.in[0]);
  const float eps = static_cast<float>(c.attrs().f("eps"));
  if (sh.rows == 0) return ok_status();
  return dispatch_f32_bf16(c.in[0].dtype, "rms_norm", [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* r = add ? c.in[1].as<const T>() : nullptr;
    const T* w = c.in[add ? 2 : 1].as<const T>();
    T* s = add ? c.out[0].as<T>() : nullptr;
    T* y = c.out[add ? 1 : 0].as<T>();
    T* rstd = c.out[add ? 2 : 1].as<T>();
    rms_norm_kernel<T><<<row_grid(sh.rows), kBlock, 0, env.stream>>>(
        c.in[0].as<const T>(), r, w, s, y, rstd, sh.rows, sh.cols, eps);
    return launched("rms_norm_kernel");
  });
}

}  // namespace

Status rms_norm_forward(KernelContext& c, const KernelEnv& env) {
  return norm_forward(c, env, false);
}

Status add_rms_norm_forward(KernelContext& c, const KernelEnv& env) {
  return norm_forward(c, env, true);
}

Status rms_norm_backward(KernelContext& c, const KernelEnv& env) {
  const RowShape sh = row_shape(c.in[1]);
  return dispatch_f32_bf16(c.in[1].dtype, "rms_norm_backward", [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* dy = c.in[0].as<const T>();
    const T* x = c.in[1].as<const T>();
    const T* w = c.in[2].as<const T>();
    const T* rstd = c.in[3].as<const T>();
    const T* dres = c.in.size() == 5 ? c.in[4].as<const T>() : nullptr;
    if (sh.rows > 0) {
      rms_norm_dx_kernel<T><<<row_grid(sh.rows), kBlock, 0, env.stream>>>(
          dy, x, w, rstd, dres, c.out[0].as<T>(), sh.rows, sh.cols);
    }
    if (sh.cols > 0) {
      const unsigned blocks = static_cast<unsigned>((sh.cols + 31) / 32);
      rms_norm_dw_kernel<T>
          <<<blocks, dim3(32, 8), 0, env.stream>>>(dy, x, rstd, c.out[1].as<T>(), sh.rows, sh.cols);
    }
    return launched("rms_norm_backward");
  });
}

void register_norm(CudaKernelTable& t) {
  t[Op::rms_norm] = rms_norm_forward;
  t[Op::add_rms_norm] = add_rms_norm_forward;
  t[Op::rms_norm_backward] = rms_norm_backward;
}

}  // namespace lj::cuda
