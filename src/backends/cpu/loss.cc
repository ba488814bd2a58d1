// Cross-entropy on the CPU (f32 / f64 logits, i32 / i64 labels).
//
//   cross_entropy(logits (N, V), labels (N)) -> loss ()
//     mean over rows with label != ignore_index of logsumexp(row) - row[label]; NaN (0/0) when
//     no row counts, as PyTorch.
//   cross_entropy_backward(logits (N, V), labels (N), dloss ()) -> dlogits (N, V)
//     (softmax(row) - onehot(label)) * dloss / num_valid; zero rows for ignored labels.
//
// Labels are checked before any work: one outside [0, V) that is not ignore_index is an
// out_of_range Status naming the first such row. Rows run in parallel (static partition); the
// forward writes one loss per row and sums them in row order, so the result is bitwise the same
// for any thread count. Row statistics use simd.h's vectorised exp.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/simd.h"

// 32-byte vectors cross only inline functions here (see simd.h).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace lj::cpu {
namespace {

using simd::V;

// Checks every label; returns the number of rows that count.
template <class L>
StatusOr<int64_t> count_valid(const L* labels, int64_t n, int64_t vocab, int64_t ignore_index) {
  int64_t valid = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y = static_cast<int64_t>(labels[i]);
    if (y == ignore_index) continue;
    if (y < 0 || y >= vocab) {
      return out_of_range("cross_entropy: label " + std::to_string(y) + " at row " +
                              std::to_string(i) + " is outside the vocabulary [0, " +
                              std::to_string(vocab) + ")",
                          "token ids in the data must be below the model's vocab_size");
    }
    ++valid;
  }
  return valid;
}

constexpr int kAcc = 4;  // independent vector accumulators hide the max / add latency

// Max of one row of v elements (-inf for v == 0).
template <class T>
T row_max(const T* x, int64_t v) {
  constexpr int W = simd::kWidth<T>;
  V<T> mv[kAcc];
  for (auto& m : mv) m = simd::splat(-std::numeric_limits<T>::infinity());
  int64_t j = 0;
  for (; j + kAcc * W <= v; j += kAcc * W) {
    for (int a = 0; a < kAcc; ++a) mv[a] = simd::max(mv[a], simd::load(x + j + a * W));
  }
  for (; j + W <= v; j += W) mv[0] = simd::max(mv[0], simd::load(x + j));
  T m = simd::hmax(simd::max(simd::max(mv[0], mv[1]), simd::max(mv[2], mv[3])));
  for (; j < v; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// sum_j exp(x[j] - m) in a fixed order; also writes each exp(x[j] - m) to e when e != nullptr.
// An infinite m gives NaN, as PyTorch's softmax does.
template <class T>
T row_sum_exp(const T* x, int64_t v, T m, T* e) {
  constexpr int W = simd::kWidth<T>;
  const V<T> mvec = simd::splat(m);
  V<T> sv[kAcc] = {};
  int64_t j = 0;
  for (; j + kAcc * W <= v; j += kAcc * W) {
    for (int a = 0; a < kAcc; ++a) {
      const V<T> p = simd::exp_vec<T>(simd::load(x + j + a * W) - mvec);
      if (e != nullptr) simd::store(e + j + a * W, p);
      sv[a] += p;
    }
  }
  for (; j + W <= v; j += W) {
    const V<T> p = simd::exp_vec<T>(simd::load(x + j) - mvec);
    if (e != nullptr) simd::store(e + j, p);
    sv[0] += p;
  }
  T s = simd::hsum((sv[0] + sv[1]) + (sv[2] + sv[3]));
  for (; j < v; ++j) {
    const T p = std::exp(x[j] - m);
    if (e != nullptr) e[j] = p;
    s += p;
  }
  return s;
}

template <class T, class L>
Status cross_entropy_impl(KernelContext& c) {
  const TensorView& logits = c.in[0];
  const int64_t n = logits.dim(0), vocab = logits.dim(1);
  const T* x = logits.as<T>();
  const L* labels = c.in[1].as<L>();
  const int64_t ignore = c.attrs().i_or("ignore_index", -100);
  LJ_ASSIGN_OR_RETURN(const int64_t valid, count_valid(labels, n, vocab, ignore));
  std::vector<T> row_loss(static_cast<size_t>(n), T(0));  // (N)
#pragma omp parallel for num_threads(std::max(1, c.threads)) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y = static_cast<int64_t>(labels[i]);
    if (y == ignore) continue;
    const T* row = x + i * vocab;
    const T m = row_max(row, vocab);
    row_loss[static_cast<size_t>(i)] =
        m + std::log(row_sum_exp<T>(row, vocab, m, nullptr)) - row[y];
  }
  // Row order, in double: the sum does not depend on the partition.
  double total = 0;
  for (T l : row_loss) total += static_cast<double>(l);
  const double mean =
      valid > 0 ? total / static_cast<double>(valid) : std::numeric_limits<double>::quiet_NaN();
  *c.out[0].as<T>() = static_cast<T>(mean);
  return ok_status();
}

template <class T, class L>
Status cross_entropy_backward_impl(KernelContext& c) {
  constexpr int W = simd::kWidth<T>;
  const TensorView& logits = c.in[0];
  const int64_t n = logits.dim(0), vocab = logits.dim(1);
  const T* x = logits.as<T>();
  const L* labels = c.in[1].as<L>();
  const T dloss = *c.in[2].as<T>();
  T* dx = c.out[0].as<T>();
  const int64_t ignore = c.attrs().i_or("ignore_index", -100);
  LJ_ASSIGN_OR_RETURN(const int64_t valid, count_valid(labels, n, vocab, ignore));
  // With no valid row the forward is NaN and every row is ignored: the gradient is all zero.
  const T g =
      valid > 0 ? static_cast<T>(static_cast<double>(dloss) / static_cast<double>(valid)) : T(0);
#pragma omp parallel for num_threads(std::max(1, c.threads)) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y = static_cast<int64_t>(labels[i]);
    T* out = dx + i * vocab;
    if (y == ignore) {
      std::fill(out, out + vocab, T(0));
      continue;
    }
    const T* row = x + i * vocab;
    // out = exp(row - max), then scaled by g / sum while the row is still in cache.
    const T m = row_max(row, vocab);
    const T scale = g / row_sum_exp(row, vocab, m, out);
    const V<T> scale_v = simd::splat(scale);
    int64_t j = 0;
    for (; j + W <= vocab; j += W) simd::store(out + j, simd::load(out + j) * scale_v);
    for (; j < vocab; ++j) out[j] *= scale;
    out[y] -= g;
  }
  return ok_status();
}

template <template <class, class> class Impl>
Status dispatch(KernelContext& c, const char* op) {
  const DType xt = c.in[0].dtype, lt = c.in[1].dtype;
  LJ_CHECK(c.in[0].rank() == 2 && c.in[1].rank() == 1 && c.in[1].dim(0) == c.in[0].dim(0))
      << op << ": logits must be (N, V) and labels (N)";
  if (xt == DType::f32 && lt == DType::i32) return Impl<float, int32_t>::run(c);
  if (xt == DType::f32 && lt == DType::i64) return Impl<float, int64_t>::run(c);
  if (xt == DType::f64 && lt == DType::i32) return Impl<double, int32_t>::run(c);
  if (xt == DType::f64 && lt == DType::i64) return Impl<double, int64_t>::run(c);
  return unimplemented(std::string(op) +
                       " on the CPU takes f32/f64 logits and i32/i64 labels, not " +
                       dtype_name(xt) + "/" + dtype_name(lt));
}

template <class T, class L>
struct Forward {
  static Status run(KernelContext& c) { return cross_entropy_impl<T, L>(c); }
};
template <class T, class L>
struct Backward {
  static Status run(KernelContext& c) { return cross_entropy_backward_impl<T, L>(c); }
};

Status cross_entropy_forward(KernelContext& c) {
  return dispatch<Forward>(c, "cross_entropy");
}
Status cross_entropy_backward(KernelContext& c) {
  return dispatch<Backward>(c, "cross_entropy_backward");
}

}  // namespace

void register_loss(KernelTable& t) {
  t[Op::cross_entropy] = cross_entropy_forward;
  t[Op::cross_entropy_backward] = cross_entropy_backward;
}

}  // namespace lj::cpu
