#include <algorithm>
#include <climits>
#include <cub/device/device_radix_sort.cuh>
#include <string>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/elementwise.cuh"
#include "backends/cuda/movement.cuh"
#include "backends/cuda/workspace.h"

namespace lj::cuda {
namespace {

struct CopyGeom {
  int rank;
  int64_t dims[kMaxRank];
  int64_t src[kMaxRank], dst[kMaxRank];  // element strides per iteration dim
  int64_t src_base, dst_base;
};

// I: int64_t, or int32_t when every offset fits (walk_fits_32); dims merged (coalesce_walk), so
// a dense copy is rank 1 with no division.
template <class E, class I>
__global__ void strided_copy_kernel(const E* s, E* d, I n, CopyGeom g) {
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    I so = static_cast<I>(g.src_base), dof = static_cast<I>(g.dst_base);
    if (g.rank == 1) {
      so += i * static_cast<I>(g.src[0]);
      dof += i * static_cast<I>(g.dst[0]);
    } else {
      I rem = i;
      for (int k = g.rank - 1; k >= 0; --k) {
        const I dk = static_cast<I>(g.dims[k]);
        const I idx = rem % dk;
        rem /= dk;
        so += idx * static_cast<I>(g.src[k]);
        dof += idx * static_cast<I>(g.dst[k]);
      }
    }
    d[dof] = s[so];
  }
}

template <class E>
void launch_strided_copy(const void* src, void* dst, int64_t n, const CopyGeom& g, bool narrow,
                         unsigned grid, cudaStream_t stream) {
  if (narrow) {
    strided_copy_kernel<E, int32_t><<<grid, kBlock, 0, stream>>>(
        static_cast<const E*>(src), static_cast<E*>(dst), static_cast<int32_t>(n), g);
  } else {
    strided_copy_kernel<E, int64_t>
        <<<grid, kBlock, 0, stream>>>(static_cast<const E*>(src), static_cast<E*>(dst), n, g);
  }
}

std::vector<int64_t> dense_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size());
  int64_t st = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    s[k] = st;
    st *= dims[k];
  }
  return s;
}

Status strided_copy(const void* src, void* dst, int64_t elem, CopyGeom g, int64_t n,
                    const KernelEnv& env) {
  if (n == 0) return ok_status();
  coalesce_walk(&g.rank, g.dims, g.src, g.dst);
  const int64_t src_max = walk_max_offset(g.rank, g.dims, g.src, g.src_base);
  const int64_t dst_max = walk_max_offset(g.rank, g.dims, g.dst, g.dst_base);
  const bool narrow = src_max >= 0 && dst_max >= 0 && walk_fits_32(n, std::max(src_max, dst_max));
  const unsigned grid = grid_for(n, env.multiprocessors);
  switch (elem) {
    case 1:
      launch_strided_copy<uint8_t>(src, dst, n, g, narrow, grid, env.stream);
      break;
    case 2:
      launch_strided_copy<uint16_t>(src, dst, n, g, narrow, grid, env.stream);
      break;
    case 4:
      launch_strided_copy<uint32_t>(src, dst, n, g, narrow, grid, env.stream);
      break;
    case 8:
      launch_strided_copy<uint64_t>(src, dst, n, g, narrow, grid, env.stream);
      break;
    default:
      return unimplemented("CUDA copy: element size " + std::to_string(elem));
  }
  return launched("strided_copy_kernel");
}

// Iteration over `dims` (the destination's, unless said otherwise), dense destination.
CopyGeom geom_over(const std::vector<int64_t>& dims) {
  CopyGeom g{};
  g.rank = static_cast<int>(dims.size());
  const std::vector<int64_t> d = dense_strides(dims);
  for (int k = 0; k < g.rank; ++k) {
    g.dims[k] = dims[static_cast<size_t>(k)];
    g.dst[k] = d[static_cast<size_t>(k)];
  }
  if (g.rank == 0) {
    g.rank = 1;
    g.dims[0] = 1;
  }
  return g;
}

Status check_rank(const TensorView& t) {
  if (t.rank() > kMaxRank) return unimplemented("CUDA data movement: rank over 8");
  return ok_status();
}

template <class I>
__global__ void check_ids_kernel(const I* ids, int64_t n, int64_t v, long long* first_bad) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    if (id < 0 || id >= v) atomicMin(first_bad, static_cast<long long>(i));
  }
}

// `bad_d`: 8 bytes of the kernel's scratch (at the start of its one request, workspace.h).
template <class I>
Status check_ids(const char* op, const I* ids, int64_t n, int64_t v, long long* bad_d,
                 const KernelEnv& env) {
  if (n == 0 || !env.check_ids) return ok_status();  // unchecked: the caller checked on the host
  long long bad = LLONG_MAX;
  LJ_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(bad_d, &bad, sizeof bad, cudaMemcpyHostToDevice, env.stream));
  check_ids_kernel<I>
      <<<grid_for(n, env.multiprocessors), kBlock, 0, env.stream>>>(ids, n, v, bad_d);
  LJ_RETURN_IF_ERROR(launched("check_ids_kernel"));
  LJ_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&bad, bad_d, sizeof bad, cudaMemcpyDeviceToHost, env.stream));
  LJ_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(env.stream));
  if (bad == LLONG_MAX) return ok_status();
  I id{};
  LJ_CUDA_RETURN_IF_ERROR(cudaMemcpy(&id, ids + bad, sizeof id, cudaMemcpyDeviceToHost));
  return out_of_range(std::string(op) + ": id " + std::to_string(static_cast<int64_t>(id)) +
                          " at position " + std::to_string(bad) +
                          " is outside [0, V) for V = " + std::to_string(v),
                      "ids index the table's first dim: for an embedding, token ids must be "
                      "below the model's vocab_size");
}

template <class F>
Status dispatch_index(DType dt, const char* op, F&& f) {
  if (dt == DType::i32) return f(int32_t{});
  if (dt == DType::i64) return f(int64_t{});
  return dtype_unsupported(op, dt);
}

// out[e] = table[ids[e / cols], e % cols], by element size.
template <class E, class I>
__global__ void gather_kernel(const E* table, const I* ids, E* out, int64_t total, int64_t cols) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / cols, j = e - i * cols;
    out[e] = table[static_cast<int64_t>(ids[i]) * cols + j];
  }
}

// scatter_add, deterministic and parallel (embedding backward): the ids are sorted with their
// positions (CUB's radix sort is stable, so each id's positions stay ascending), then one thread
// per (run head, column) sums its run's rows in position order, the CPU kernel's order, and
// writes the row once. Work is spread over every (position, column) pair instead of one thread
// per column walking all B*T positions.
__global__ void iota_kernel(int32_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = static_cast<int32_t>(i);
}

template <class T, class I>
__global__ void scatter_add_sorted_kernel(const I* keys, const int32_t* pos, const T* src,
                                          float* acc, int64_t n, int64_t cols) {
  const int64_t total = n * cols;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = t / cols, j = t % cols;
    if (k > 0 && keys[k] == keys[k - 1]) continue;  // not the first of its id's run
    const I id = keys[k];
    float sum = 0;
    for (int64_t q = k; q < n && keys[q] == id; ++q) {
      sum += to_f32(src[static_cast<int64_t>(pos[q]) * cols + j]);
    }
    acc[static_cast<int64_t>(id) * cols + j] = sum;
  }
}

template <class T>
__global__ void store_kernel(const float* acc, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = from_f32<T>(acc[i]);
}

}  // namespace

Status permute_forward(KernelContext& c, const KernelEnv& env) {
  const TensorView &x = c.in[0], &out = c.out[0];
  LJ_RETURN_IF_ERROR(check_rank(x));
  const std::vector<int64_t>& perm = c.attrs().ints("perm");
  CopyGeom g = geom_over(out.dims);
  const std::vector<int64_t> xs = dense_strides(x.dims);
  for (int k = 0; k < out.rank(); ++k)
    g.src[k] = xs[static_cast<size_t>(perm[static_cast<size_t>(k)])];
  return strided_copy(x.data, out.data, dtype_size(x.dtype), g, out.numel(), env);
}

Status slice_forward(KernelContext& c, const KernelEnv& env) {
  const TensorView &x = c.in[0], &out = c.out[0];
  LJ_RETURN_IF_ERROR(check_rank(x));
  int64_t axis = c.attrs().i("axis");
  if (axis < 0) axis += x.rank();
  const int64_t start = c.attrs().i("start");
  CopyGeom g = geom_over(out.dims);
  const std::vector<int64_t> xs = dense_strides(x.dims);
  for (int k = 0; k < out.rank(); ++k) g.src[k] = xs[static_cast<size_t>(k)];
  g.src_base = start * xs[static_cast<size_t>(axis)];
  return strided_copy(x.data, out.data, dtype_size(x.dtype), g, out.numel(), env);
}

Status concat_forward(KernelContext& c, const KernelEnv& env) {
  const TensorView& out = c.out[0];
  LJ_RETURN_IF_ERROR(check_rank(out));
  int64_t axis = c.attrs().i("axis");
  if (axis < 0) axis += out.rank();
  const std::vector<int64_t> os = dense_strides(out.dims);
  int64_t at = 0;
  for (const TensorView& x : c.in) {
    // Iterate over x; the destination is out's strides, shifted along the axis.
    CopyGeom g = geom_over(x.dims);
    const std::vector<int64_t> xs = dense_strides(x.dims);
    for (int k = 0; k < x.rank(); ++k) {
      g.src[k] = xs[static_cast<size_t>(k)];
      g.dst[k] = os[static_cast<size_t>(k)];
    }
    g.dst_base = at * os[static_cast<size_t>(axis)];
    LJ_RETURN_IF_ERROR(strided_copy(x.data, out.data, dtype_size(x.dtype), g, x.numel(), env));
    at += x.dims[static_cast<size_t>(axis)];
  }
  return ok_status();
}

Status expand_forward(KernelContext& c, const KernelEnv& env) {
  const TensorView &x = c.in[0], &out = c.out[0];
  LJ_RETURN_IF_ERROR(check_rank(out));
  CopyGeom g = geom_over(out.dims);
  const std::vector<int64_t> xs = dense_strides(x.dims);
  const int off = out.rank() - x.rank();
  for (int k = 0; k < out.rank(); ++k) {
    const int kx = k - off;
    g.src[k] = kx < 0 || x.dims[static_cast<size_t>(kx)] == 1 ? 0 : xs[static_cast<size_t>(kx)];
  }
  return strided_copy(x.data, out.data, dtype_size(x.dtype), g, out.numel(), env);
}

namespace {
// The kernel's one request (workspace.h), before anything is launched.
StatusOr<char*> acquire_scratch(KernelContext& c, const char* op, size_t bytes) {
  if (bytes == 0) return static_cast<char*>(nullptr);
  LJ_CHECK(c.workspace != nullptr) << "CUDA " << op << " needs a device workspace";
  LJ_ASSIGN_OR_RETURN(void* p, c.workspace->acquire(bytes));
  return static_cast<char*>(p);
}
}  // namespace

Status gather_forward(KernelContext& c, const KernelEnv& env) {
  const TensorView &table = c.in[0], &ids = c.in[1], &out = c.out[0];
  const int64_t v = table.dims[0], n = ids.numel();
  const int64_t cols = v == 0 ? 0 : table.numel() / v;
  LJ_ASSIGN_OR_RETURN(char* verdict, acquire_scratch(c, "gather", n > 0 ? sizeof(long long) : 0));
  return dispatch_index(ids.dtype, "gather", [&](auto tag) -> Status {
    using I = decltype(tag);
    const I* id = ids.as<const I>();
    LJ_RETURN_IF_ERROR(check_ids("gather", id, n, v, reinterpret_cast<long long*>(verdict), env));
    const int64_t total = n * cols;
    if (total == 0) return ok_status();
    const unsigned grid = grid_for(total, env.multiprocessors);
    switch (dtype_size(table.dtype)) {
      case 2:
        gather_kernel<<<grid, kBlock, 0, env.stream>>>(table.as<const uint16_t>(), id,
                                                       out.as<uint16_t>(), total, cols);
        break;
      case 4:
        gather_kernel<<<grid, kBlock, 0, env.stream>>>(table.as<const uint32_t>(), id,
                                                       out.as<uint32_t>(), total, cols);
        break;
      case 8:
        gather_kernel<<<grid, kBlock, 0, env.stream>>>(table.as<const uint64_t>(), id,
                                                       out.as<uint64_t>(), total, cols);
        break;
      default:
        return dtype_unsupported("gather", table.dtype);
    }
    return launched("gather_kernel");
  });
}

Status scatter_add_forward(KernelContext& c, const KernelEnv& env) {
  const TensorView &ids = c.in[0], &src = c.in[1], &out = c.out[0];
  const int64_t v = out.dims[0], n = ids.numel();
  const int64_t cols = v == 0 ? 0 : out.numel() / v;
  const ScatterAddScratch at = scatter_add_scratch(
      n, v, cols, static_cast<size_t>(dtype_size(ids.dtype)), out.dtype == DType::bf16);
  LJ_ASSIGN_OR_RETURN(char* w, acquire_scratch(c, "scatter_add", at.total));
  return dispatch_index(ids.dtype, "scatter_add", [&](auto itag) -> Status {
    using I = decltype(itag);
    LJ_RETURN_IF_ERROR(
        check_ids("scatter_add", ids.as<const I>(), n, v, reinterpret_cast<long long*>(w), env));
    return dispatch_f32_bf16(out.dtype, "scatter_add", [&](auto tag) -> Status {
      using T = decltype(tag);
      if (out.numel() == 0) return ok_status();
      float* acc = at.has_acc ? reinterpret_cast<float*>(w + at.acc) : out.as<float>();
      LJ_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(acc, 0, static_cast<size_t>(out.numel()) * 4, env.stream));
      if (at.sorted) {
        LJ_CHECK_LT(n, int64_t{INT_MAX}) << "scatter_add: positions are int32";
        const int items = static_cast<int>(n);
        I* keys = reinterpret_cast<I*>(w + at.keys);
        auto* pos_in = reinterpret_cast<int32_t*>(w + at.pos_in);
        auto* pos = reinterpret_cast<int32_t*>(w + at.pos);
        iota_kernel<<<grid_for(n, env.multiprocessors), kBlock, 0, env.stream>>>(pos_in, n);
        LJ_RETURN_IF_ERROR(launched("iota_kernel"));
        // CUB's temporary storage: only CUB can size it, so it is the one second request.
        size_t temp = 0;
        LJ_CUDA_RETURN_IF_ERROR(
            cub::DeviceRadixSort::SortPairs(nullptr, temp, ids.as<const I>(), keys, pos_in, pos,
                                            items, 0, static_cast<int>(sizeof(I) * 8), env.stream));
        LJ_ASSIGN_OR_RETURN(void* temp_d, c.workspace->acquire(std::max<size_t>(temp, 1)));
        LJ_CUDA_RETURN_IF_ERROR(
            cub::DeviceRadixSort::SortPairs(temp_d, temp, ids.as<const I>(), keys, pos_in, pos,
                                            items, 0, static_cast<int>(sizeof(I) * 8), env.stream));
        scatter_add_sorted_kernel<T, I>
            <<<grid_for(n * cols, env.multiprocessors), kBlock, 0, env.stream>>>(
                keys, pos, src.as<const T>(), acc, n, cols);
        LJ_RETURN_IF_ERROR(launched("scatter_add_sorted_kernel"));
      }
      if constexpr (!std::is_same_v<T, float>) {
        store_kernel<T><<<grid_for(out.numel(), env.multiprocessors), kBlock, 0, env.stream>>>(
            acc, out.as<T>(), out.numel());
        return launched("store_kernel");
      }
      return ok_status();
    });
  });
}

void register_movement(CudaKernelTable& t) {
  t[Op::permute] = permute_forward;
  t[Op::slice] = slice_forward;
  t[Op::concat] = concat_forward;
  t[Op::expand] = expand_forward;
  t[Op::gather] = gather_forward;
  t[Op::scatter_add] = scatter_add_forward;
}

}  // namespace lj::cuda
