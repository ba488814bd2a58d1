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

// Flat row-major indices over dims `size`, tracking the offset sum idx[d] * stride[d] as the
// index advances (no divisions after the start).
class Odometer {
 public:
  Odometer(const std::vector<int64_t>& size, const std::vector<int64_t>& stride, int64_t start)
      : size_(size), stride_(stride), idx_(size.size()) {
    for (int d = static_cast<int>(size_.size()) - 1; d >= 0; --d) {
      idx_[d] = start % size_[d];
      start /= size_[d];
      offset_ += idx_[d] * stride_[d];
    }
  }
  int64_t offset() const { return offset_; }
  void next() {
    for (int d = static_cast<int>(size_.size()) - 1; d >= 0; --d) {
      offset_ += stride_[d];
      if (++idx_[d] < size_[d]) return;
      offset_ -= size_[d] * stride_[d];
      idx_[d] = 0;
    }
  }

 private:
  const std::vector<int64_t>& size_;
  const std::vector<int64_t>& stride_;
  std::vector<int64_t> idx_;
  int64_t offset_ = 0;
};

// Transpose tiles: kTileA elements along the input's contiguous axis by kTileB along the
// output's. Narrow kTileB measured ~3x faster than 32 x 32 on (768, 4096) f32 here: each output
// row segment is one vector store and the strided reads stay in few pages per tile.
constexpr int64_t kTileA = 128;
constexpr int64_t kTileB = 8;

Status permute_forward(KernelContext& c) {
  const TensorView& in = c.in[0];
  TensorView& out = c.out[0];
  const int rank = in.rank();
  const std::vector<int64_t>& perm = c.attrs().ints("perm");
  LJ_CHECK(static_cast<int>(perm.size()) == rank && in.dtype == out.dtype);
  if (in.numel() == 0) return ok_status();
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
  if (n <= 1) {  // the identity once size-1 dims are ignored
    parallel_copy(c.threads, out.data, in.data, in.bytes());
    return ok_status();
  }
  if (stride.back() == 1) {
    // Rows of the last output axis are contiguous in the input ((B, T, H, D) -> (B, H, T, D):
    // rows of D): copy them, walking the outer axes with an odometer.
    const int64_t row_bytes = size.back() * es;
    const std::vector<int64_t> outer_size(size.begin(), size.end() - 1);
    const std::vector<int64_t> outer_stride(stride.begin(), stride.end() - 1);
    const char* src = static_cast<const char*>(in.data);
    char* dst = static_cast<char*>(out.data);
    parallel_for(c.threads, in.numel() / size.back(),
                 std::max<int64_t>(1, kCopyGrainBytes / row_bytes), [&](int64_t b, int64_t e) {
                   Odometer od(outer_size, outer_stride, b);
                   for (int64_t r = b; r < e; ++r, od.next()) {
                     std::memcpy(dst + r * row_bytes, src + od.offset() * es,
                                 static_cast<size_t>(row_bytes));
                   }
                 });
    return ok_status();
  }

  // The input's contiguous axis j is not the output's last: tiled 2-D transposes of (j, last),
  // looped over the other axes.
  int j = 0;
  while (stride[j] != 1) ++j;
  const int last = n - 1;
  std::vector<int64_t> out_stride(static_cast<size_t>(n));
  for (int64_t i = n - 1, s = 1; i >= 0; --i) out_stride[i] = s, s *= size[i];
  std::vector<int64_t> outer_size, outer_in, outer_out;
  for (int d = 0; d < last; ++d) {
    if (d == j) continue;
    outer_size.push_back(size[d]);
    outer_in.push_back(stride[d]);
    outer_out.push_back(out_stride[d]);
  }
  const int64_t outer = prod(outer_size, 0, static_cast<int>(outer_size.size()));
  const int64_t ta = (size[j] + kTileA - 1) / kTileA, tb = (size[last] + kTileB - 1) / kTileB;
  const int64_t sj = out_stride[j], sl = stride[last];
  dispatch_size(static_cast<int>(es), [&](auto tag) {
    using E = decltype(tag);
    const E* src = in.as<E>();
    E* dst = out.as<E>();
    parallel_for(c.threads, outer * ta * tb,
                 std::max<int64_t>(1, kPointwiseGrain / (kTileA * kTileB)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t t = b; t < e; ++t) {
                     const int64_t o = t / (ta * tb);
                     const int64_t in_off = Odometer(outer_size, outer_in, o).offset();
                     const int64_t out_off = Odometer(outer_size, outer_out, o).offset();
                     const int64_t a0 = (t / tb) % ta * kTileA, b0 = t % tb * kTileB;
                     const int64_t a1 = std::min(size[j], a0 + kTileA);
                     const int64_t b1 = std::min(size[last], b0 + kTileB);
                     for (int64_t a = a0; a < a1; ++a) {
                       const E* s = src + in_off + a;
                       E* d = dst + out_off + a * sj;
                       for (int64_t bb = b0; bb < b1; ++bb) d[bb] = s[bb * sl];
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
                          "ids index the table's first dim: for an embedding, token ids must be "
                          "below the model's vocab_size");
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
  t.bf16[static_cast<int>(Op::permute)] = true;
  t.bf16[static_cast<int>(Op::slice)] = true;
  t.bf16[static_cast<int>(Op::concat)] = true;
  t.bf16[static_cast<int>(Op::expand)] = true;
  t.bf16[static_cast<int>(Op::gather)] = true;
}

}  // namespace lj::cpu
