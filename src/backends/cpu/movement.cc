// CPU kernels of the data-movement ops: permute, slice, concat, expand, gather and scatter_add.
// reshape has no kernel: it aliases its input (the executor hands out the same storage).
//
// Everything except scatter_add moves elements without looking at them, so it works on any dtype
// by element size. permute coalesces dims that stay adjacent, then either copies contiguous rows
// ((B, T, H, D) -> (B, H, T, D) moves rows of D) or, when the innermost dim changes, transposes
// in cache-sized tiles. gather and scatter_add check every id before touching memory and return
// out_of_range naming the first bad one. scatter_add is parallel over the C columns, each thread
// adding the rows of its columns in increasing n, so it is deterministic for any thread count.
#include <string>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"

namespace lj::cpu {
namespace {

constexpr int64_t kCopyGrainBytes = 1 << 16;
constexpr int64_t kTile = 32;  // transpose tile edge, elements

// Copies `rows` rows of `row_bytes` bytes from src(i) to dst(i) (byte pointers). The total is
// split evenly across threads, so many short rows and a few long ones both parallelise.
template <class Src, class Dst>
void copy_rows(int threads, int64_t rows, int64_t row_bytes, Src src, Dst dst) {
  if (rows <= 0 || row_bytes <= 0) return;
  parallel_for(threads, rows * row_bytes, kCopyGrainBytes, [&](int64_t b, int64_t e) {
    for (int64_t at = b; at < e;) {
      const int64_t row = at / row_bytes, pos = at % row_bytes;
      const int64_t len = std::min(row_bytes - pos, e - at);
      std::memcpy(dst(row) + pos, src(row) + pos, static_cast<size_t>(len));
      at += len;
    }
  });
}

// ---- permute ----

Status permute_forward(KernelContext& c) {
  const TensorView& in = c.in[0];
  TensorView& out = c.out[0];
  const int rank = in.rank();
  const std::vector<int64_t>& perm = c.attrs().ints("perm");
  LJ_CHECK(static_cast<int>(perm.size()) == rank && in.dtype == out.dtype);
  const int64_t es = dtype_size(in.dtype);
  std::vector<int64_t> in_stride(static_cast<size_t>(rank));
  for (int64_t i = rank - 1, s = 1; i >= 0; --i) in_stride[i] = s, s *= in.dims[i];
  // Output axes (outermost first) as (size, input stride), size-1 dims dropped, neighbours that
  // are adjacent in the input merged.
  std::vector<int64_t> size, stride;
  for (int i = 0; i < rank; ++i) {
    const int a = norm_axis(perm[i], rank);
    if (in.dims[a] == 1) continue;
    if (!size.empty() && stride.back() == in_stride[a] * in.dims[a]) {
      size.back() *= in.dims[a];
      stride.back() = in_stride[a];
    } else {
      size.push_back(in.dims[a]);
      stride.push_back(in_stride[a]);
    }
  }
  const int n = static_cast<int>(size.size());
  if (n <= 1 || stride.back() == 1) {
    // Rows of the last output axis are contiguous in the input: copy them.
    const int64_t row = n == 0 ? 1 : size.back();
    const int64_t rows = in.numel() / std::max<int64_t>(row, 1);
    const char* src = static_cast<const char*>(in.data);
    char* dst = static_cast<char*>(out.data);
    if (n <= 1) {
      parallel_copy(c.threads, dst, src, in.bytes());
      return ok_status();
    }
    // Row index -> input element offset, decoded over the outer axes.
    auto src_row = [&](int64_t r) {
      int64_t off = 0;
      for (int d = n - 2; d >= 0; --d) off += (r % size[d]) * stride[d], r /= size[d];
      return src + off * es;
    };
    copy_rows(c.threads, rows, row * es, src_row, [&](int64_t r) { return dst + r * row * es; });
    return ok_status();
  }

  // The input's contiguous axis j is not the output's last: tiled 2-D transposes of (j, last),
  // looped over the other axes.
  int j = 0;
  while (stride[j] != 1) ++j;
  const int last = n - 1;
  std::vector<int64_t> out_stride(static_cast<size_t>(n));
  for (int64_t i = n - 1, s = 1; i >= 0; --i) out_stride[i] = s, s *= size[i];
  std::vector<int> outer_axes;
  int64_t outer = 1;
  for (int d = 0; d < last; ++d) {
    if (d != j) outer_axes.push_back(d), outer *= size[d];
  }
  const int64_t ta = (size[j] + kTile - 1) / kTile, tb = (size[last] + kTile - 1) / kTile;
  const int64_t sj = out_stride[j], sl = stride[last];
  dispatch_size(static_cast<int>(es), [&](auto tag) {
    using E = decltype(tag);
    const E* src = in.as<E>();
    E* dst = out.as<E>();
    parallel_for(c.threads, outer * ta * tb,
                 std::max<int64_t>(1, kPointwiseGrain / (kTile * kTile)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t t = b; t < e; ++t) {
                     int64_t rest = t / (ta * tb), in_off = 0, out_off = 0;
                     for (int k = static_cast<int>(outer_axes.size()) - 1; k >= 0; --k) {
                       const int d = outer_axes[k];
                       in_off += (rest % size[d]) * stride[d];
                       out_off += (rest % size[d]) * out_stride[d];
                       rest /= size[d];
                     }
                     const int64_t a0 = (t / tb) % ta * kTile, b0 = t % tb * kTile;
                     const int64_t a1 = std::min(size[j], a0 + kTile);
                     const int64_t b1 = std::min(size[last], b0 + kTile);
                     for (int64_t a = a0; a < a1; ++a) {
                       const E* s = src + in_off + a;
                       E* o = dst + out_off + a * sj;
                       for (int64_t bb = b0; bb < b1; ++bb) o[bb] = s[bb * sl];
                     }
                   }
                 });
  });
  return ok_status();
}

// ---- slice, concat, expand ----

// x (outer, L, inner) -> (outer, len, inner) taking [start, start + len) of L.
Status slice_forward(KernelContext& c) {
  const TensorView& in = c.in[0];
  TensorView& out = c.out[0];
  const int axis = norm_axis(c.attrs().i("axis"), in.rank());
  const int64_t start = c.attrs().i("start");
  const int64_t len = out.dims[axis], in_len = in.dims[axis];
  LJ_CHECK(start >= 0 && start + len <= in_len)
      << "slice [" << start << ", " << start + len << ") of " << in_len;
  const int64_t inner = prod(in.dims, axis + 1, in.rank()) * dtype_size(in.dtype);
  const int64_t outer = prod(in.dims, 0, axis);
  const char* src = static_cast<const char*>(in.data);
  char* dst = static_cast<char*>(out.data);
  copy_rows(
      c.threads, outer, len * inner, [&](int64_t o) { return src + (o * in_len + start) * inner; },
      [&](int64_t o) { return dst + o * len * inner; });
  return ok_status();
}

// Inputs (outer, L_k, inner) -> (outer, sum L_k, inner), input k at offset sum_{i<k} L_i.
Status concat_forward(KernelContext& c) {
  TensorView& out = c.out[0];
  const int axis = norm_axis(c.attrs().i("axis"), out.rank());
  const int64_t inner = prod(out.dims, axis + 1, out.rank()) * dtype_size(out.dtype);
  const int64_t outer = prod(out.dims, 0, axis);
  const int64_t total = out.dims[axis];
  char* dst = static_cast<char*>(out.data);
  int64_t at = 0;
  for (const TensorView& in : c.in) {
    LJ_CHECK(in.dtype == out.dtype && in.rank() == out.rank());
    const int64_t len = in.dims[axis];
    const char* src = static_cast<const char*>(in.data);
    copy_rows(
        c.threads, outer, len * inner, [&](int64_t o) { return src + o * len * inner; },
        [&](int64_t o) { return dst + (o * total + at) * inner; });
    at += len;
  }
  LJ_CHECK(at == total) << "concat: inputs sum to " << at << " along the axis, output has "
                        << total;
  return ok_status();
}

Status expand_forward(KernelContext& c) {
  const TensorView& in = c.in[0];
  TensorView& out = c.out[0];
  LJ_CHECK(in.dtype == out.dtype);
  const BroadcastPlan<1> plan(out.dims, {&in.dims});
  const bool contiguous = plan.inner_stride(0) == 1;
  dispatch_size(dtype_size(in.dtype), [&](auto tag) {
    using E = decltype(tag);
    const E* src = in.as<E>();
    E* dst = out.as<E>();
    parallel_for(c.threads, plan.numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
      plan.for_rows(b, e, [&](int64_t oo, const BroadcastPlan<1>::Offsets& io, int64_t n) {
        if (contiguous) {
          std::memcpy(dst + oo, src + io[0], static_cast<size_t>(n) * sizeof(E));
        } else {
          const E v = src[io[0]];
          for (int64_t i = 0; i < n; ++i) dst[oo + i] = v;
        }
      });
    });
  });
  return ok_status();
}

// ---- gather, scatter_add ----

// The first id outside [0, v), as an out_of_range Status; ok when all are in range.
template <class I>
Status check_ids(const char* op, const I* ids, int64_t n, int64_t v) {
  for (int64_t i = 0; i < n; ++i) {
    const auto id = static_cast<int64_t>(ids[i]);
    if (id < 0 || id >= v) {
      return out_of_range(std::string(op) + ": id " + std::to_string(id) + " at position " +
                              std::to_string(i) + " is outside [0, V) for V = " + std::to_string(v),
                          "token ids must be below the model's vocabulary size");
    }
  }
  return ok_status();
}

// table (V, C...), ids (N...) -> out (N..., C...): out[n] = table[ids[n]].
Status gather_forward(KernelContext& c) {
  const TensorView& table = c.in[0];
  const TensorView& ids = c.in[1];
  TensorView& out = c.out[0];
  LJ_CHECK(table.rank() >= 1 && table.dtype == out.dtype);
  const int64_t v = table.dims[0];
  const int64_t n = ids.numel();
  const int64_t row = (v == 0 ? 0 : table.numel() / v) * dtype_size(table.dtype);
  LJ_CHECK(out.numel() * dtype_size(out.dtype) == n * row);
  return dispatch_index(ids.dtype, [&](auto tag) -> Status {
    using I = decltype(tag);
    const I* id = ids.as<I>();
    LJ_RETURN_IF_ERROR(check_ids("gather", id, n, v));
    const char* src = static_cast<const char*>(table.data);
    char* dst = static_cast<char*>(out.data);
    copy_rows(
        c.threads, n, row, [&](int64_t i) { return src + static_cast<int64_t>(id[i]) * row; },
        [&](int64_t i) { return dst + i * row; });
    return ok_status();
  });
}

// ids (N...), src (N..., C...) -> out (V, C...) = 0, then out[ids[n]] += src[n] for n = 0, 1, ...
Status scatter_add_forward(KernelContext& c) {
  const TensorView& ids = c.in[0];
  const TensorView& src = c.in[1];
  TensorView& out = c.out[0];
  LJ_CHECK(out.rank() >= 1 && src.dtype == out.dtype);
  const int64_t v = out.dims[0];
  const int64_t n = ids.numel();
  const int64_t cols = v == 0 ? 0 : out.numel() / v;
  LJ_CHECK(src.numel() == n * cols)
      << "scatter_add: src " << dims_to_string(src.dims) << ", ids " << dims_to_string(ids.dims)
      << ", out " << dims_to_string(out.dims);
  return dispatch_index(ids.dtype, [&](auto itag) -> Status {
    using I = decltype(itag);
    const I* id = ids.as<I>();
    LJ_RETURN_IF_ERROR(check_ids("scatter_add", id, n, v));
    dispatch_float(src.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* s = src.as<T>();
      T* o = out.as<T>();
      const int64_t grain = std::max<int64_t>(16, kPointwiseGrain / std::max<int64_t>(n + v, 1));
      parallel_for(c.threads, cols, grain, [&](int64_t c0, int64_t c1) {
        for (int64_t r = 0; r < v; ++r) {
          for (int64_t j = c0; j < c1; ++j) o[r * cols + j] = T{0};
        }
        for (int64_t i = 0; i < n; ++i) {
          T* dst = o + static_cast<int64_t>(id[i]) * cols;
          const T* row = s + i * cols;
          for (int64_t j = c0; j < c1; ++j) dst[j] += row[j];
        }
      });
    });
    return ok_status();
  });
}

}  // namespace

void register_movement(KernelTable& t) {
  t[Op::permute] = permute_forward;
  t[Op::slice] = slice_forward;
  t[Op::concat] = concat_forward;
  t[Op::expand] = expand_forward;
  t[Op::gather] = gather_forward;
  t[Op::scatter_add] = scatter_add_forward;
  // reshape aliases its input: the executor handles it without a kernel.
}

}  // namespace lj::cpu
