// Device helpers shared by the .cu files: element loads and stores that widen 16-bit floats to
// f32 (bf16 rounds to nearest even on store), block reductions, and the dtype dispatch.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/strided_walk.h"
#include "core/dtype.h"

namespace lj::cuda {

inline constexpr int kBlock = 256;

__device__ __forceinline__ float to_f32(float x) {
  return x;
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// The order is fixed by the block size, so a result is reproducible run to run. float or double.
template <class T>
__device__ __forceinline__ T block_sum(T v) {
  __shared__ T part[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  T s = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) s += part[w];
  return s;
}

__device__ __forceinline__ float block_max(float v) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  float m = part[0];
  for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) m = fmaxf(m, part[w]);
  return m;
}

inline Status dtype_unsupported(const char* op, DType dt) {
  return unimplemented(
      std::string("CUDA ") + op + ": dtype " + dtype_name(dt) + " has no kernel (f32 and bf16 do)",
      "run with --device cpu");
}

// ---- Dtype dispatch: one helper, dispatch_in<Ts...>, every kernel's run of cases ----

// The dtype of each C++ type the CUDA kernels load and store (no other type has one).
template <class T>
struct DTypeOf;
#define LJ_CUDA_DTYPE_OF(T, D)               \
  template <>                                \
  struct DTypeOf<T> {                        \
    static constexpr DType value = DType::D; \
  };
LJ_CUDA_DTYPE_OF(float, f32)
LJ_CUDA_DTYPE_OF(__nv_bfloat16, bf16)
LJ_CUDA_DTYPE_OF(int32_t, i32)
LJ_CUDA_DTYPE_OF(int64_t, i64)
LJ_CUDA_DTYPE_OF(uint8_t, u8)
#undef LJ_CUDA_DTYPE_OF

// f(T{}) with T the one of Ts whose dtype is `dt` (f returns a Status); any other dtype is an
// unimplemented Status naming `op`.
template <class T, class... Ts, class F>
Status dispatch_in(DType dt, const char* op, F&& f) {
  if (dt == DTypeOf<T>::value) return f(T{});
  if constexpr (sizeof...(Ts) > 0) {
    return dispatch_in<Ts...>(dt, op, f);
  } else {
    return dtype_unsupported(op, dt);
  }
}

// The dtypes most kernels take: float or __nv_bfloat16.
template <class F>
Status dispatch_f32_bf16(DType dt, const char* op, F&& f) {
  return dispatch_in<float, __nv_bfloat16>(dt, op, f);
}

// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(int64_t n, int multiprocessors) {
  const int64_t want = (n + kBlock - 1) / kBlock;
  const int64_t cap = static_cast<int64_t>(multiprocessors) * 32;
  return static_cast<unsigned>(want < 1 ? 1 : (want < cap ? want : cap));
}

inline Status launched(const char* what) {
  return cuda_status(cudaGetLastError(), what);
}

}  // namespace lj::cuda
