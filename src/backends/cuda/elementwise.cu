#include "backends/cuda/device_util.cuh"
#include "backends/cuda/elementwise.cuh"

namespace lj::cuda {
namespace {

enum class U : int { neg, exp, log, sqrt, rsqrt, reciprocal, square, silu, sigmoid, tanh, pow };

__device__ __forceinline__ float unary(U op, float x, float e) {
  switch (op) {
    case U::neg:
      return -x;
    case U::exp:
      return expf(x);
    case U::log:
      return logf(x);
    case U::sqrt:
      return sqrtf(x);
    case U::rsqrt:
      return 1.0f / sqrtf(x);
    case U::reciprocal:
      return 1.0f / x;
    case U::square:
      return x * x;
    case U::silu:
      return x / (1.0f + expf(-x));
    case U::sigmoid:
      return 1.0f / (1.0f + expf(-x));
    case U::tanh:
      return tanhf(x);
    case U::pow:
      if (e == 1.0f) return x;
      if (e == 2.0f) return x * x;
      if (e == -1.0f) return 1.0f / x;
      return powf(x, e);
  }
  return x;
}

template <class T>
__global__ void unary_kernel(U op, const T* x, T* y, int64_t n, float e) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(unary(op, to_f32(x[i]), e));
}

struct Broadcast {
  int rank;
  int64_t dims[kMaxRank];
  int64_t sa[kMaxRank], sb[kMaxRank];  // element strides of a and b per output dim, 0: broadcast
};

enum class B : int { add, sub, mul, div };

// I: int64_t, or int32_t when every index fits (walk_fits_32). Dims merged (coalesce_walk), so
// rank 1 is two dense operands or a scalar broadcast, with no division.
template <class T, class I>
__global__ void binary_kernel(B op, const T* a, const T* b, T* y, I n, Broadcast bc) {
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    I oa, ob;
    if (bc.rank == 1) {
      oa = i * static_cast<I>(bc.sa[0]);
      ob = i * static_cast<I>(bc.sb[0]);
    } else {
      I rem = i;
      oa = ob = 0;
      for (int k = bc.rank - 1; k >= 0; --k) {
        const I d = static_cast<I>(bc.dims[k]);
        const I idx = rem % d;
        rem /= d;
        oa += idx * static_cast<I>(bc.sa[k]);
        ob += idx * static_cast<I>(bc.sb[k]);
      }
    }
    const float x = to_f32(a[oa]), z = to_f32(b[ob]);
    float r;
    switch (op) {
      case B::add:
        r = x + z;
        break;
      case B::sub:
        r = x - z;
        break;
      case B::mul:
        r = x * z;
        break;
      default:
        r = x / z;
        break;
    }
    y[i] = from_f32<T>(r);
  }
}

// Strides of `in` (right-aligned against `out`, numpy rules) per output dim.
void strides_for(const std::vector<int64_t>& in, const std::vector<int64_t>& out, int64_t* s) {
  const int r = static_cast<int>(out.size()), ri = static_cast<int>(in.size());
  int64_t stride = 1;
  for (int k = r - 1; k >= 0; --k) {
    const int ki = k - (r - ri);
    if (ki < 0) {
      s[k] = 0;
      continue;
    }
    s[k] = in[static_cast<size_t>(ki)] == 1 ? 0 : stride;
    stride *= in[static_cast<size_t>(ki)];
  }
}

template <class S, class D>
__global__ void cast_kernel(const S* x, D* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<D, __nv_bfloat16>) {
      if constexpr (std::is_same_v<S, __nv_bfloat16>) {
        y[i] = x[i];
      } else {
        y[i] = __float2bfloat16_rn(static_cast<float>(x[i]));
      }
    } else if constexpr (std::is_same_v<S, __nv_bfloat16>) {
      y[i] = static_cast<D>(__bfloat162float(x[i]));
    } else {
      y[i] = static_cast<D>(x[i]);
    }
  }
}

U unary_of(Op op) {
  switch (op) {
    case Op::neg:
      return U::neg;
    case Op::exp:
      return U::exp;
    case Op::log:
      return U::log;
    case Op::sqrt:
      return U::sqrt;
    case Op::rsqrt:
      return U::rsqrt;
    case Op::reciprocal:
      return U::reciprocal;
    case Op::square:
      return U::square;
    case Op::silu:
      return U::silu;
    case Op::sigmoid:
      return U::sigmoid;
    case Op::tanh:
      return U::tanh;
    default:
      return U::pow;
  }
}

B binary_of(Op op) {
  switch (op) {
    case Op::add:
      return B::add;
    case Op::sub:
      return B::sub;
    case Op::mul:
      return B::mul;
    default:
      return B::div;
  }
}

}  // namespace

Status unary_forward(KernelContext& c, const KernelEnv& env) {
  const int64_t n = c.in[0].numel();
  if (n == 0) return ok_status();
  const U op = unary_of(c.node.op);
  const float e = c.node.op == Op::pow_scalar ? static_cast<float>(c.attrs().f("exponent")) : 0.0f;
  return dispatch_f32_bf16(c.in[0].dtype, op_name(c.node.op), [&](auto tag) -> Status {
    using T = decltype(tag);
    unary_kernel<T><<<grid_for(n, env.multiprocessors), kBlock, 0, env.stream>>>(
        op, c.in[0].as<const T>(), c.out[0].as<T>(), n, e);
    return launched("unary_kernel");
  });
}

Status binary_forward(KernelContext& c, const KernelEnv& env) {
  const TensorView& out = c.out[0];
  const int64_t n = out.numel();
  if (n == 0) return ok_status();
  if (out.rank() > kMaxRank) return unimplemented("CUDA binary op: rank over 8");
  Broadcast bc{};
  bc.rank = out.rank();
  for (int k = 0; k < bc.rank; ++k) bc.dims[k] = out.dims[static_cast<size_t>(k)];
  strides_for(c.in[0].dims, out.dims, bc.sa);
  strides_for(c.in[1].dims, out.dims, bc.sb);
  coalesce_walk(&bc.rank, bc.dims, bc.sa, bc.sb);
  const B op = binary_of(c.node.op);
  // Each operand's offsets stay below its numel, at most n.
  const bool narrow = walk_fits_32(n, n);
  return dispatch_f32_bf16(out.dtype, op_name(c.node.op), [&](auto tag) -> Status {
    using T = decltype(tag);
    const unsigned grid = grid_for(n, env.multiprocessors);
    if (narrow) {
      binary_kernel<T, int32_t><<<grid, kBlock, 0, env.stream>>>(op, c.in[0].as<const T>(),
                                                                 c.in[1].as<const T>(), out.as<T>(),
                                                                 static_cast<int32_t>(n), bc);
    } else {
      binary_kernel<T, int64_t><<<grid, kBlock, 0, env.stream>>>(
          op, c.in[0].as<const T>(), c.in[1].as<const T>(), out.as<T>(), n, bc);
    }
    return launched("binary_kernel");
  });
}

Status cast_forward(KernelContext& c, const KernelEnv& env) {
  const int64_t n = c.in[0].numel();
  if (n == 0) return ok_status();
  return dispatch_in<float, __nv_bfloat16, int32_t, int64_t, uint8_t>(
      c.in[0].dtype, "cast", [&](auto s) -> Status {
        using S = decltype(s);
        return dispatch_in<float, __nv_bfloat16, int32_t, int64_t, uint8_t>(
            c.out[0].dtype, "cast", [&](auto d) -> Status {
              using D = decltype(d);
              cast_kernel<S, D><<<grid_for(n, env.multiprocessors), kBlock, 0, env.stream>>>(
                  c.in[0].as<const S>(), c.out[0].as<D>(), n);
              return launched("cast_kernel");
            });
      });
}

void register_elementwise(CudaKernelTable& t) {
  for (Op op : {Op::neg, Op::exp, Op::log, Op::sqrt, Op::rsqrt, Op::reciprocal, Op::square,
                Op::silu, Op::sigmoid, Op::tanh, Op::pow_scalar})
    t[op] = unary_forward;
  for (Op op : {Op::add, Op::sub, Op::mul, Op::div}) t[op] = binary_forward;
  t[Op::cast] = cast_forward;
}

}  // namespace lj::cuda
