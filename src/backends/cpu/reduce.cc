// CPU kernels of the reductions: sum, mean and max over any set of axes (keepdim only changes the
// output's dims, never the data), and softmax / log_softmax along one axis. f32 and f64.
//
// Accuracy and determinism. Sums (and the softmax denominators) accumulate in f64 for both f32
// and f64 inputs; the result is rounded to the input dtype once at the end. The order of every
// sum is fixed by the shapes alone, never by the thread count:
//  - A reduced run that is contiguous (the last dims, e.g. RMSNorm's mean over C) is cut into
//    blocks of kRowBlock elements. A block is summed in 16 interleaved lanes (lane j takes
//    elements j, j + 16, ...), the lanes are added in a fixed binary tree, then the block's tail;
//    the blocks' partials are added in order.
//  - A reduced run with kept dims inside it (x (R, K) -> (K), e.g. a bias gradient) accumulates
//    whole rows in order, in blocks of kRowsPerBlock rows whose partials are added in order.
//  - Any other pattern (reduced dims separated by kept ones) sums each output's elements in
//    row-major order.
// max is exact, so its order does not matter; it propagates NaN as PyTorch does. Reducing an
// empty axis gives sum 0, mean NaN (0 / 0) and max -inf.
#include <cmath>
#include <limits>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"

namespace lj::cpu {
namespace {

constexpr int64_t kRowBlock = 1 << 14;  // elements per partial of a contiguous reduced run
constexpr int64_t kRowsPerBlock = 256;  // rows per partial of a strided (R, K) reduction
constexpr int64_t kColTile = 256;       // kept inner columns one task accumulates at once
constexpr int kLanes = 16;

template <class T>
struct SumOp {
  using Acc = double;
  static Acc init() { return 0.0; }
  static Acc add(Acc a, T x) { return a + static_cast<double>(x); }
  static Acc merge(Acc a, Acc b) { return a + b; }
};

template <class T>
struct MaxOp {
  using Acc = T;
  static Acc init() { return -std::numeric_limits<T>::infinity(); }
  static Acc add(Acc a, T x) { return (x > a || x != x) ? x : a; }
  static Acc merge(Acc a, Acc b) { return add(a, b); }
};

// max of x[0, n) on explicit vectors: GCC keeps the scalar NaN-propagating select as branches
// (it may not if-convert a comparison that can trap), ~8x slower. max is exact, so the lane
// order does not matter.
template <class T>
T max_contiguous(const T* x, int64_t n) {
  using VT = simd::V<T>;
  constexpr int W = simd::kWidth<T>;
  VT m0 = simd::splat(MaxOp<T>::init()), m1 = m0;
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const VT a = simd::load(x + i), b = simd::load(x + i + W);
    m0 = ((a > m0) | (a != a)) ? a : m0;
    m1 = ((b > m1) | (b != b)) ? b : m1;
  }
  T acc = MaxOp<T>::init();
  for (int j = 0; j < W; ++j) acc = MaxOp<T>::add(MaxOp<T>::add(acc, m0[j]), m1[j]);
  for (; i < n; ++i) acc = MaxOp<T>::add(acc, x[i]);
  return acc;
}

// Reduces x[0, n) in the fixed lane order described at the top of the file.
template <class Rd, class T>
typename Rd::Acc reduce_contiguous(const T* x, int64_t n) {
  using Acc = typename Rd::Acc;
  if constexpr (std::is_same_v<Rd, MaxOp<T>>) {
    return max_contiguous(x, n);
  } else {
    Acc lanes[kLanes];
    for (Acc& l : lanes) l = Rd::init();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lanes[j] = Rd::add(lanes[j], x[i + j]);
    }
    for (int w = kLanes / 2; w >= 1; w /= 2) {
      for (int j = 0; j < w; ++j) lanes[j] = Rd::merge(lanes[j], lanes[j + w]);
    }
    Acc acc = lanes[0];
    for (; i < n; ++i) acc = Rd::add(acc, x[i]);
    return acc;
  }
}

// The reduction's input dims after dropping size-1 dims and merging neighbours of the same kind.
// With one reduced group the input is (outer, r, inner); otherwise `general` holds the groups.
struct ReduceLayout {
  bool simple = true;
  int64_t outer = 1, r = 1, inner = 1;
  std::vector<int64_t> kept_size, kept_stride;  // general only, outermost first
  std::vector<int64_t> red_size, red_stride;
};

ReduceLayout reduce_layout(const std::vector<int64_t>& dims, const std::vector<int64_t>& axes) {
  const int rank = static_cast<int>(dims.size());
  std::vector<bool> reduced(dims.size(), axes.empty());
  for (int64_t a : axes) reduced[norm_axis(a, rank)] = true;
  struct Group {
    int64_t size, stride;
    bool reduced;
  };
  std::vector<Group> groups;  // innermost first while building
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (dims[i] != 1) {
      if (!groups.empty() && groups.back().reduced == reduced[i]) {
        groups.back().size *= dims[i];
      } else {
        groups.push_back({dims[i], stride, reduced[i]});
      }
    }
    stride *= dims[i];
  }
  std::reverse(groups.begin(), groups.end());
  int num_reduced = 0;
  for (const Group& g : groups) num_reduced += g.reduced ? 1 : 0;
  ReduceLayout l;
  if (num_reduced <= 1) {
    bool seen = false;
    for (const Group& g : groups) {
      if (g.reduced) {
        l.r = g.size;
        seen = true;
      } else {
        (seen ? l.inner : l.outer) *= g.size;
      }
    }
    return l;
  }
  l.simple = false;
  for (const Group& g : groups) {
    (g.reduced ? l.red_size : l.kept_size).push_back(g.size);
    (g.reduced ? l.red_stride : l.kept_stride).push_back(g.stride);
    l.r *= g.reduced ? g.size : 1;
  }
  return l;
}

// out[o] = finish(reduce over the reduced elements of output o), finish(a) = T(a / divisor).
template <class Rd, class T>
void reduce_kernel(KernelContext& c, const ReduceLayout& l, bool mean) {
  using Acc = typename Rd::Acc;
  const T* x = c.in[0].as<T>();
  T* out = c.out[0].as<T>();
  const double divisor = mean ? static_cast<double>(l.r) : 1.0;
  auto finish = [&](Acc a) {
    return mean ? static_cast<T>(static_cast<double>(a) / divisor) : static_cast<T>(a);
  };
  const int64_t work_grain = kPointwiseGrain;

  if (!l.simple) {
    const int nk = static_cast<int>(l.kept_size.size());
    const int nr = static_cast<int>(l.red_size.size());
    const int64_t num_out = c.out[0].numel();
    parallel_for(c.threads, num_out, std::max<int64_t>(1, work_grain / std::max<int64_t>(l.r, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t o = b; o < e; ++o) {
                     int64_t base = 0;
                     for (int64_t d = nk - 1, rest = o; d >= 0; --d) {
                       base += (rest % l.kept_size[d]) * l.kept_stride[d];
                       rest /= l.kept_size[d];
                     }
                     std::array<int64_t, kMaxRank> idx{};
                     Acc acc = Rd::init();
                     int64_t off = base;
                     for (int64_t k = 0; k < l.r; ++k) {
                       acc = Rd::add(acc, x[off]);
                       for (int d = nr - 1; d >= 0; --d) {  // odometer, innermost first
                         off += l.red_stride[d];
                         if (++idx[d] < l.red_size[d]) break;
                         off -= l.red_size[d] * l.red_stride[d];
                         idx[d] = 0;
                       }
                     }
                     out[o] = finish(acc);
                   }
                 });
    return;
  }

  const int64_t outer = l.outer, r = l.r, inner = l.inner;
  if (inner == 1) {
    // x (outer, r): each row reduced in blocks of kRowBlock.
    const int64_t nblk = std::max<int64_t>(1, (r + kRowBlock - 1) / kRowBlock);
    if (nblk == 1) {
      parallel_for(c.threads, outer, std::max<int64_t>(1, work_grain / std::max<int64_t>(r, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t o = b; o < e; ++o) {
                       out[o] = finish(reduce_contiguous<Rd>(x + o * r, r));
                     }
                   });
      return;
    }
    std::vector<Acc> partial(static_cast<size_t>(outer * nblk));
    parallel_for(c.threads, outer * nblk, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / nblk, blk = t % nblk;
        const int64_t begin = blk * kRowBlock, len = std::min(kRowBlock, r - begin);
        partial[t] = reduce_contiguous<Rd>(x + o * r + begin, len);
      }
    });
    for (int64_t o = 0; o < outer; ++o) {
      Acc acc = partial[o * nblk];
      for (int64_t blk = 1; blk < nblk; ++blk) acc = Rd::merge(acc, partial[o * nblk + blk]);
      out[o] = finish(acc);
    }
    return;
  }

  // x (outer, r, inner): tasks are (o, row block, column tile); each accumulates its rows in order.
  const int64_t ntiles = (inner + kColTile - 1) / kColTile;
  const int64_t nblk = std::max<int64_t>(1, (r + kRowsPerBlock - 1) / kRowsPerBlock);
  std::vector<Acc> partial(nblk > 1 ? static_cast<size_t>(outer * nblk * inner) : 0);
  const int64_t tasks = outer * nblk * ntiles;
  const int64_t task_elems = std::min(r, kRowsPerBlock) * std::min(inner, kColTile);
  parallel_for(c.threads, tasks,
               std::max<int64_t>(1, work_grain / std::max<int64_t>(task_elems, 1)),
               [&](int64_t b, int64_t e) {
                 Acc acc[kColTile];
                 for (int64_t t = b; t < e; ++t) {
                   const int64_t o = t / (nblk * ntiles);
                   const int64_t blk = (t / ntiles) % nblk;
                   const int64_t col = (t % ntiles) * kColTile;
                   const int64_t w = std::min(kColTile, inner - col);
                   const int64_t r0 = blk * kRowsPerBlock, r1 = std::min(r, r0 + kRowsPerBlock);
                   for (int64_t j = 0; j < w; ++j) acc[j] = Rd::init();
                   for (int64_t i = r0; i < r1; ++i) {
                     const T* row = x + (o * r + i) * inner + col;
                     for (int64_t j = 0; j < w; ++j) acc[j] = Rd::add(acc[j], row[j]);
                   }
                   if (nblk == 1) {
                     for (int64_t j = 0; j < w; ++j) out[o * inner + col + j] = finish(acc[j]);
                   } else {
                     Acc* p = partial.data() + (o * nblk + blk) * inner + col;
                     for (int64_t j = 0; j < w; ++j) p[j] = acc[j];
                   }
                 }
               });
  if (nblk == 1) return;
  parallel_for(c.threads, outer * inner, work_grain / 4, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t o = q / inner, j = q % inner;
      Acc acc = partial[(o * nblk) * inner + j];
      for (int64_t blk = 1; blk < nblk; ++blk)
        acc = Rd::merge(acc, partial[(o * nblk + blk) * inner + j]);
      out[q] = finish(acc);
    }
  });
}

template <template <class> class Rd>
Status reduce(KernelContext& c, bool mean) {
  LJ_CHECK(c.in[0].dtype == c.out[0].dtype);
  if (c.out[0].numel() == 0) return ok_status();
  const ReduceLayout l = reduce_layout(c.in[0].dims, c.attrs().ints("axes"));
  dispatch_float(c.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    reduce_kernel<Rd<T>, T>(c, l, mean);
  });
  return ok_status();
}

Status sum_forward(KernelContext& c) {
  return reduce<SumOp>(c, /*mean=*/false);
}
Status mean_forward(KernelContext& c) {
  return reduce<SumOp>(c, /*mean=*/true);
}
Status max_forward(KernelContext& c) {
  return reduce<MaxOp>(c, /*mean=*/false);
}

// ---- softmax, log_softmax ----

// y[i] = exp(y[i]): simd::exp_vec for f32 (vectorised, ~2 ulp), libm for f64.
template <class T>
void exp_inplace(T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    map_f32(y, y, n, [](simd::V<float> v) { return simd::exp_vec<float>(v); });
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = std::exp(y[i]);
  }
}

// x, out (outer, r, inner) with the softmax axis as r. Stable: exp(x - max) with the max of each
// run; the denominator accumulates in f64. softmax = e / s, log_softmax = (x - max) - log s
// (in f64 and in that order, so log-probabilities near 0 keep their accuracy).
template <class T>
void softmax_kernel(KernelContext& c, bool log) {
  const TensorView& in = c.in[0];
  const int axis = norm_axis(c.attrs().i("axis"), in.rank());
  const int64_t r = in.rank() == 0 ? 1 : in.dims[axis];
  const int64_t inner = in.rank() == 0 ? 1 : prod(in.dims, axis + 1, in.rank());
  const int64_t outer = r * inner == 0 ? 0 : in.numel() / (r * inner);
  const T* x = in.as<T>();
  T* out = c.out[0].as<T>();
  if (outer == 0 || r == 0 || inner == 0) return;

  if (inner == 1) {  // the last axis: contiguous rows
    parallel_for(
        c.threads, outer, std::max<int64_t>(1, kPointwiseGrain / (4 * r)),
        [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o) {
            const T* xr = x + o * r;
            T* yr = out + o * r;
            const T m = reduce_contiguous<MaxOp<T>>(xr, r);
            for (int64_t i = 0; i < r; ++i) yr[i] = xr[i] - m;
            exp_inplace(yr, r);
            const double s = reduce_contiguous<SumOp<T>>(yr, r);
            if (log) {
              const double log_s = std::log(s);
              for (int64_t i = 0; i < r; ++i) {
                yr[i] = static_cast<T>(static_cast<double>(xr[i]) - static_cast<double>(m) - log_s);
              }
            } else {
              const double inv = 1.0 / s;
              for (int64_t i = 0; i < r; ++i) {
                yr[i] = static_cast<T>(static_cast<double>(yr[i]) * inv);
              }
            }
          }
        });
    return;
  }

  // An inner axis: tasks are (o, column tile), each keeps a max and a sum per column.
  const int64_t ntiles = (inner + kColTile - 1) / kColTile;
  parallel_for(c.threads, outer * ntiles,
               std::max<int64_t>(1, kPointwiseGrain / (4 * r * std::min(inner, kColTile))),
               [&](int64_t b, int64_t e) {
                 T m[kColTile];
                 double s[kColTile];
                 for (int64_t t = b; t < e; ++t) {
                   const int64_t o = t / ntiles, col = (t % ntiles) * kColTile;
                   const int64_t w = std::min(kColTile, inner - col);
                   const int64_t base = o * r * inner + col;
                   for (int64_t j = 0; j < w; ++j) {
                     m[j] = MaxOp<T>::init();
                     s[j] = 0.0;
                   }
                   for (int64_t i = 0; i < r; ++i) {
                     const T* xr = x + base + i * inner;
                     for (int64_t j = 0; j < w; ++j) m[j] = MaxOp<T>::add(m[j], xr[j]);
                   }
                   for (int64_t i = 0; i < r; ++i) {
                     const T* xr = x + base + i * inner;
                     T* yr = out + base + i * inner;
                     for (int64_t j = 0; j < w; ++j) yr[j] = xr[j] - m[j];
                     exp_inplace(yr, w);
                     for (int64_t j = 0; j < w; ++j) s[j] += static_cast<double>(yr[j]);
                   }
                   for (int64_t j = 0; j < w; ++j) {
                     s[j] = log ? std::log(s[j]) : 1.0 / s[j];
                   }
                   for (int64_t i = 0; i < r; ++i) {
                     const T* xr = x + base + i * inner;
                     T* yr = out + base + i * inner;
                     for (int64_t j = 0; j < w; ++j) {
                       yr[j] = log ? static_cast<T>(static_cast<double>(xr[j]) -
                                                    static_cast<double>(m[j]) - s[j])
                                   : static_cast<T>(static_cast<double>(yr[j]) * s[j]);
                     }
                   }
                 }
               });
}

Status softmax_forward(KernelContext& c) {
  LJ_CHECK(c.in[0].dtype == c.out[0].dtype);
  dispatch_float(c.in[0].dtype, [&](auto tag) { softmax_kernel<decltype(tag)>(c, /*log=*/false); });
  return ok_status();
}

Status log_softmax_forward(KernelContext& c) {
  LJ_CHECK(c.in[0].dtype == c.out[0].dtype);
  dispatch_float(c.in[0].dtype, [&](auto tag) { softmax_kernel<decltype(tag)>(c, /*log=*/true); });
  return ok_status();
}

}  // namespace

void register_reduce(KernelTable& t) {
  t[Op::sum] = sum_forward;
  t[Op::mean] = mean_forward;
  t[Op::max] = max_forward;
  t[Op::softmax] = softmax_forward;
  t[Op::log_softmax] = log_softmax_forward;
}

}  // namespace lj::cpu
