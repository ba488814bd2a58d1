#include <algorithm>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/elementwise.cuh"
#include "backends/cuda/reduce.cuh"

namespace lj::cuda {
namespace {

struct ReduceGeom {
  int kept_rank, red_rank;
  int64_t kept_dims[kMaxRank], kept_strides[kMaxRank];  // of the input
  int64_t red_dims[kMaxRank], red_strides[kMaxRank];
  int64_t red_count;
};

enum class R : int { sum, mean, max };

template <class T>
__global__ void reduce_kernel(R op, const T* x, T* y, int64_t outputs, ReduceGeom g) {
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    int64_t rem = o, base = 0;
    for (int k = g.kept_rank - 1; k >= 0; --k) {
      base += (rem % g.kept_dims[k]) * g.kept_strides[k];
      rem /= g.kept_dims[k];
    }
    float acc = op == R::max ? -INFINITY : 0.0f;
    for (int64_t r = threadIdx.x; r < g.red_count; r += blockDim.x) {
      int64_t rr = r, off = base;
      for (int k = g.red_rank - 1; k >= 0; --k) {
        off += (rr % g.red_dims[k]) * g.red_strides[k];
        rr /= g.red_dims[k];
      }
      const float v = to_f32(x[off]);
      acc = op == R::max ? fmaxf(acc, v) : acc + v;
    }
    acc = op == R::max ? block_max(acc) : block_sum(acc);
    if (threadIdx.x == 0)
      y[o] = from_f32<T>(op == R::mean ? acc / static_cast<float>(g.red_count) : acc);
  }
}

}  // namespace

Status reduce_forward(KernelContext& c, const KernelEnv& env) {
  const TensorView& x = c.in[0];
  const int rank = x.rank();
  if (rank > kMaxRank) return unimplemented("CUDA reduction: rank over 8");
  std::vector<int64_t> axes = c.attrs().ints("axes");
  std::vector<bool> red(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) red[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  ReduceGeom g{};
  g.red_count = 1;
  int64_t stride = 1;
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  for (int k = rank - 1; k >= 0; --k) {
    strides[static_cast<size_t>(k)] = stride;
    stride *= x.dims[static_cast<size_t>(k)];
  }
  for (int k = 0; k < rank; ++k) {
    const int64_t d = x.dims[static_cast<size_t>(k)], s = strides[static_cast<size_t>(k)];
    if (red[static_cast<size_t>(k)]) {
      g.red_dims[g.red_rank] = d;
      g.red_strides[g.red_rank++] = s;
      g.red_count *= d;
    } else {
      g.kept_dims[g.kept_rank] = d;
      g.kept_strides[g.kept_rank++] = s;
    }
  }
  const int64_t outputs = c.out[0].numel();
  if (outputs == 0) return ok_status();
  const R op = c.node.op == Op::sum ? R::sum : c.node.op == Op::mean ? R::mean : R::max;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(outputs, 1 << 30));
  return dispatch_f32_bf16(x.dtype, op_name(c.node.op), [&](auto tag) -> Status {
    using T = decltype(tag);
    reduce_kernel<T>
        <<<grid, kBlock, 0, env.stream>>>(op, x.as<const T>(), c.out[0].as<T>(), outputs, g);
    return launched("reduce_kernel");
  });
}

void register_reduce(CudaKernelTable& t) {
  t[Op::sum] = reduce_forward;
  t[Op::mean] = reduce_forward;
  t[Op::max] = reduce_forward;
}

}  // namespace lj::cuda
