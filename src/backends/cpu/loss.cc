// Cross-entropy on the CPU (f32 / f64 logits, i32 / i64 labels), and the fused
// linear_cross_entropy, which never holds more than one chunk of logits.
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
//
//   linear_cross_entropy(x (N, C), w (V, C), labels (N)) -> loss (), dx (N, C), dw (V, C)
//     loss as cross_entropy(x w^T, labels); dx, dw its gradients for dloss = 1 (the VJP scales
//     them by the incoming dloss). The logits are made `chunk` rows at a time in workspace
//     scratch (chunk, V) by a GEMM (gemm.h) and consumed at once: each row gives its loss and,
//     in place, (softmax - onehot) / num_valid (num_valid counted over the whole batch first;
//     ignored rows are zero), then dx[chunk] = dlogits w and dw += dlogits^T x[chunk] (beta = 1
//     after the first chunk). Three (N, V, C) GEMMs in all, as matmul + cross_entropy and their
//     backward, and neither the (N, V) logits nor their gradient is ever held. Chunks run in row
//     order and their size depends only on the attribute, V and the dtype, never on the thread
//     count, so dw's accumulation order is fixed; f64 results are thread-count invariant. f32
//     splits each chunk further into vocabulary blocks that one thread takes from logits to
//     gradient (linear_cross_entropy_f32 below; on hosts where the own AVX-512 GEMM runs, the
//     same algorithm built from its packing and micro-kernel, loss_fused_avx512.h): its loss and
//     dw are thread-count invariant, dx reproducible for a given thread count. The gradients are
//     computed even when nothing reads them (a forward-only graph): two more GEMMs than a loss-only
//     kernel.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/loss_fused_avx512.h"
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

// bf16 logits (mixed precision): each row is loaded into an f32 buffer and goes through the f32
// row functions above, so the loss is the f32 kernel's on the same values (in f32), and dlogits
// are the f32 kernel's rounded once to bf16. Nothing of size (N, V) is made in f32.
template <class L>
Status cross_entropy_bf16(KernelContext& c) {
  const TensorView& logits = c.in[0];
  const int64_t n = logits.dim(0), vocab = logits.dim(1);
  const auto* x = logits.as<uint16_t>();
  const L* labels = c.in[1].as<L>();
  const int64_t ignore = c.attrs().i_or("ignore_index", -100);
  LJ_CHECK(c.out[0].dtype == DType::f32) << "cross_entropy of bf16 logits gives an f32 loss";
  LJ_ASSIGN_OR_RETURN(const int64_t valid, count_valid(labels, n, vocab, ignore));
  std::vector<float> row_loss(static_cast<size_t>(n), 0.0f);  // (N)
#pragma omp parallel num_threads(std::max(1, c.threads))
  {
    std::vector<float> row(static_cast<size_t>(vocab));  // (V) one row in f32
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t y = static_cast<int64_t>(labels[i]);
      if (y == ignore) continue;
      bf16_to_f32_row(x + i * vocab, row.data(), vocab);
      const float m = row_max(row.data(), vocab);
      row_loss[static_cast<size_t>(i)] =
          m + std::log(row_sum_exp<float>(row.data(), vocab, m, nullptr)) - row[y];
    }
  }
  double total = 0;
  for (float l : row_loss) total += static_cast<double>(l);
  const double mean =
      valid > 0 ? total / static_cast<double>(valid) : std::numeric_limits<double>::quiet_NaN();
  *c.out[0].as<float>() = static_cast<float>(mean);
  return ok_status();
}

template <class L>
Status cross_entropy_backward_bf16(KernelContext& c) {
  constexpr int W = simd::kWidth<float>;
  const TensorView& logits = c.in[0];
  const int64_t n = logits.dim(0), vocab = logits.dim(1);
  const auto* x = logits.as<uint16_t>();
  const L* labels = c.in[1].as<L>();
  LJ_CHECK(c.in[2].dtype == DType::f32 && c.out[0].dtype == DType::bf16);
  const float dloss = *c.in[2].as<float>();
  auto* dx = c.out[0].as<uint16_t>();
  const int64_t ignore = c.attrs().i_or("ignore_index", -100);
  LJ_ASSIGN_OR_RETURN(const int64_t valid, count_valid(labels, n, vocab, ignore));
  const float g = valid > 0
                      ? static_cast<float>(static_cast<double>(dloss) / static_cast<double>(valid))
                      : 0.0f;
#pragma omp parallel num_threads(std::max(1, c.threads))
  {
    std::vector<float> row(static_cast<size_t>(vocab)), out(static_cast<size_t>(vocab));  // (V)
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t y = static_cast<int64_t>(labels[i]);
      if (y == ignore) {
        std::fill(dx + i * vocab, dx + (i + 1) * vocab, uint16_t{0});
        continue;
      }
      bf16_to_f32_row(x + i * vocab, row.data(), vocab);
      const float m = row_max(row.data(), vocab);
      const float scale = g / row_sum_exp(row.data(), vocab, m, out.data());
      const V<float> scale_v = simd::splat(scale);
      int64_t j = 0;
      for (; j + W <= vocab; j += W) {
        simd::store(out.data() + j, simd::load(out.data() + j) * scale_v);
      }
      for (; j < vocab; ++j) out[static_cast<size_t>(j)] *= scale;
      out[static_cast<size_t>(y)] -= g;
      f32_to_bf16_row(out.data(), dx + i * vocab, vocab);
    }
  }
  return ok_status();
}

// ---- linear_cross_entropy -------------------------------------------------------------------

// Rows per chunk when the node does not say: 256, capped so one chunk of logits stays within
// 256 MiB, at least one row. Measured on `small`'s lm_head (N = 1024, C = 288, V = 32000, 2 loaded
// threads, fused fwd + bwd CPU time against matmul + cross_entropy): 64 rows x1.12, 128
// x1.00-1.04, 256 x1.04-1.05, 512 x0.94-0.96, 1024 x0.96. Each chunk reads w twice and reads and
// writes all of dw, so few rows are slow at a large vocabulary: with the former cap of 32 MiB
// (55 rows at Qwen's V = 151936, 19 chunks each rewriting a 622 MB dw) qwen3-0.6b-4l's compiled
// step ran at 0.81x its eager one (AMD EPYC, 2026-12-04, bench/peers/families/).
constexpr int64_t kChunkRows = 256;
constexpr int64_t kChunkBytes = int64_t{256} << 20;

int64_t chunk_rows(const Attrs& attrs, int64_t n, int64_t vocab, int64_t elem_bytes) {
  int64_t rows = attrs.i_or("chunk", 0);
  if (rows <= 0)
    rows = std::min(kChunkRows, kChunkBytes / std::max<int64_t>(1, vocab * elem_bytes));
  return std::clamp<int64_t>(rows, 1, std::max<int64_t>(1, n));
}

// out (m, n) = op(a) op(b) + beta * out for the f64 fused loss (gemm.h).
void loss_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
               const double* b, int64_t ldb, double beta, double* c, int64_t ldc, int threads) {
  gemm(ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc, threads);
}

// Turns one row of logits into its loss and, in place, its gradient for dloss = 1:
// (softmax(row) - onehot(y)) * g. Returns logsumexp(row) - row[y].
template <class T>
T loss_and_grad_row(T* row, int64_t vocab, int64_t y, T g) {
  constexpr int W = simd::kWidth<T>;
  const T target = row[y];
  const T m = row_max(row, vocab);
  const T s = row_sum_exp(row, vocab, m, row);  // row = exp(row - m)
  const T scale = g / s;
  const V<T> scale_v = simd::splat(scale);
  int64_t j = 0;
  for (; j + W <= vocab; j += W) simd::store(row + j, simd::load(row + j) * scale_v);
  for (; j < vocab; ++j) row[j] *= scale;
  row[y] -= g;
  return m + std::log(s) - target;
}

template <class T, class L>
Status linear_cross_entropy_impl(KernelContext& c) {
  const TensorView& xv = c.in[0];
  const int64_t n = xv.dim(0), dim = xv.dim(1), vocab = c.in[1].dim(0);
  const T* x = xv.as<T>();
  const T* w = c.in[1].as<T>();
  const L* labels = c.in[2].as<L>();
  T* dx = c.out[1].as<T>();
  T* dw = c.out[2].as<T>();
  const int64_t ignore = c.attrs().i_or("ignore_index", -100);
  // The count of the whole batch first: every row's gradient is divided by it.
  LJ_ASSIGN_OR_RETURN(const int64_t valid, count_valid(labels, n, vocab, ignore));
  // With no valid row the loss is NaN and every row is ignored: the gradients are all zero.
  const T g = valid > 0 ? static_cast<T>(1.0 / static_cast<double>(valid)) : T(0);
  const int threads = std::max(1, c.threads);
  const int64_t rows = chunk_rows(c.attrs(), n, vocab, static_cast<int64_t>(sizeof(T)));
  std::vector<T> row_loss(static_cast<size_t>(n), T(0));  // (N)
  if (n == 0) std::fill(dw, dw + vocab * dim, T(0));
  if (vocab == 0) std::fill(dx, dx + n * dim, T(0));  // every row is ignored (count_valid)
  if (n > 0 && vocab > 0) {
    LJ_CHECK(c.workspace != nullptr) << "linear_cross_entropy needs a workspace";
    T* logits = static_cast<T*>(c.workspace->get(static_cast<size_t>(rows * vocab) * sizeof(T)));
    ScopedOmpThreads scoped(threads);
    for (int64_t r0 = 0; r0 < n; r0 += rows) {
      const int64_t m = std::min(rows, n - r0);
      const T* xc = x + r0 * dim;
      if (dim > 0) {
        loss_gemm(false, true, m, vocab, dim, xc, dim, w, dim, T(0), logits, vocab, threads);
      } else {
        std::fill(logits, logits + m * vocab, T(0));
      }
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t i = 0; i < m; ++i) {
        T* row = logits + i * vocab;
        const int64_t y = static_cast<int64_t>(labels[r0 + i]);
        if (y == ignore) {
          std::fill(row, row + vocab, T(0));
        } else {
          row_loss[static_cast<size_t>(r0 + i)] = loss_and_grad_row(row, vocab, y, g);
        }
      }
      if (dim == 0) continue;
      // dx[chunk] (m, C) = dlogits (m, V) w (V, C); dw (V, C) += dlogits^T (V, m) x[chunk] (m, C).
      loss_gemm(false, false, m, dim, vocab, logits, vocab, w, dim, T(0), dx + r0 * dim, dim,
                threads);
      loss_gemm(true, false, vocab, dim, m, logits, vocab, xc, dim, r0 == 0 ? T(0) : T(1), dw, dim,
                threads);
    }
  }
  // Row order, in double, as cross_entropy.
  double total = 0;
  for (T l : row_loss) total += static_cast<double>(l);
  const double mean =
      valid > 0 ? total / static_cast<double>(valid) : std::numeric_limits<double>::quiet_NaN();
  *c.out[0].as<T>() = static_cast<T>(mean);
  return ok_status();
}

// f32 on gemm.h's GEMMs (hosts without the own AVX-512 GEMM; loss_fused_avx512.h is the same
// algorithm on its pieces, with no GEMM call per block): the chunk's logits in vocabulary blocks
// of `vb` columns, each block dense (rows x vb) and owned by one thread from its GEMM to its
// gradient, with one OpenMP region per chunk and single-threaded GEMMs inside it (a GEMM per
// block across both threads would meet at a barrier hundreds of times per chunk). Each thread takes
// a contiguous run of blocks holding about V / threads columns (lce_block_range). Per chunk:
//   1. each block b, while it is in the core's L2: logits_b = x[chunk] w_b^T; per row its max m_b
//      and s_b = sum exp(logits_b - m_b), the block overwritten with those exps e_b; then
//      t = e_b w_b and the thread's dx partial P += exp(m_b - R) t row by row, where R is the
//      thread's running max of the row (P rescaled by exp(R_old - R_new) when it grows);
//   2. each row: M = max_b m_b, S = sum_b s_b exp(m_b - M) in block order; loss M + log S - x_y;
//      dx = (sum over threads, in thread order, of exp(R_t - M) P_t) g / S - g w_y;
//   3. each block: dw_b (+)= e_b^T (c_b x[chunk]) with the row scales c_b = g exp(m_b - M) / S,
//      then dw_y -= g x_i for the rows whose label falls in the block, in row order.
// So the softmax's gradient is never written out: the exps go to both GEMMs as they are, the
// row scales ride on the small operands (P's rows, x's rows), and dx's GEMM reads w_b and e_b
// while the logits GEMM has left them in L2. (Before, a third pass over the chunk's logits scaled
// them into dlogits after the row combine, and dx's GEMM read w_b a second time: 18-19 ms of the
// kernel's 450 per thread on `small`'s head in session 7's phase timing; lce_fused/0/0 is now
// 0.96x the CPU time, bench/archive/speed.md lever 13.)
// The loss and dw do not depend on the thread count (e_b, m_b, s_b and the row scales do not);
// dx does through R and the thread-order sum (reproducible for a given count, as the unblocked
// kernel's f32 GEMMs).
// The default width: 512 columns (256 rows x 512 f32 = 512 KiB of logits per block) below a
// hidden size of 512, 1024 from there. Measured (lce_fused / lce_fused_wide micro-benchmarks,
// process CPU ms per call, 5 interleaved rounds, huge pages, median): `small`'s head (2048 x 288 x
// 32000) 831 at 512 against 850 at 1024 on 2 threads, 800 against 816 on 1 (load 2.7-3.5); the
// wider model's (1024 x 1024 x 32000) 1498 at 512 against 1352 at 1024 on 2 threads (every round),
// 1443 against 1332 on 1. (Session 5, on 4 KiB pages, load 7.6-8.3, 1 thread: `small` 815-955 at
// 256, 808-835 at 512; wider 1355-1379 at 256, 1310-1332 at 512, 1322-1351 at 1024.)
constexpr int64_t kVocabBlock = 512;
constexpr int64_t kVocabBlockWide = 1024;
constexpr int64_t kWideDim = 512;

// Depends on the attribute, V and C only, never on the thread count (the loss and dw stay
// thread-count invariant).
int64_t vocab_block(const Attrs& attrs, int64_t vocab, int64_t dim) {
  const int64_t b = attrs.i_or("vocab_block", 0);
  const int64_t fallback = dim >= kWideDim ? kVocabBlockWide : kVocabBlock;
  return std::clamp<int64_t>(b > 0 ? b : fallback, 1, std::max<int64_t>(1, vocab));
}

// The f32 kernel's scratch, in floats: the chunk of logits, per (row, block) max and sum, and
// per thread the dx partial P, the block product t and the scaled rows of x (rows, C) each,
// and the running row maxima R (rows).
struct BlockedScratch {
  int64_t rows, blocks, logits, stats, per_thread;
  int threads;
  int64_t total() const { return logits + 2 * stats + threads * per_thread; }
};
BlockedScratch blocked_scratch(const Attrs& attrs, int64_t n, int64_t dim, int64_t vocab,
                               int threads) {
  BlockedScratch s{};
  s.rows = chunk_rows(attrs, n, vocab, 4);
  const int64_t vb = vocab_block(attrs, vocab, dim);
  s.blocks = (vocab + vb - 1) / vb;
  s.logits = s.rows * vocab;
  s.stats = s.rows * s.blocks;
  s.threads = std::max(1, threads);
  s.per_thread = 3 * s.rows * dim + s.rows;
  return s;
}

// Whether the f32 kernel is the one on the own GEMM's pieces (loss_fused_avx512.h): where
// own_sgemm_enabled(), unless the node's `per_block_gemms` attribute (1) asks for the kernel on
// gemm.h's GEMMs (the benchmarks' baseline; tests run both). dim = 0 takes that one too.
bool own_lce(const Attrs& attrs, int64_t dim) {
  return dim > 0 && own_sgemm_enabled() && attrs.i_or("per_block_gemms", 0) == 0;
}

LceAvx512Shape own_lce_shape(const Attrs& attrs, int64_t n, int64_t dim, int64_t vocab,
                             int threads) {
  LceAvx512Shape s;
  s.rows = chunk_rows(attrs, n, vocab, 4);
  s.dim = dim;
  s.vocab = vocab;
  s.vb = vocab_block(attrs, vocab, dim);
  s.threads = std::max(1, threads);
  return s;
}

template <class L>
Status linear_cross_entropy_f32(KernelContext& c) {
  constexpr int W = simd::kWidth<float>;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const TensorView& xv = c.in[0];
  const int64_t n = xv.dim(0), dim = xv.dim(1), vocab = c.in[1].dim(0);
  const float* x = xv.as<float>();
  const float* w = c.in[1].as<float>();
  const L* labels = c.in[2].as<L>();
  float* dx = c.out[1].as<float>();
  float* dw = c.out[2].as<float>();
  const int64_t ignore = c.attrs().i_or("ignore_index", -100);
  LJ_ASSIGN_OR_RETURN(const int64_t valid, count_valid(labels, n, vocab, ignore));
  const float g = valid > 0 ? static_cast<float>(1.0 / static_cast<double>(valid)) : 0.0f;
  const int threads = std::max(1, c.threads);
  std::vector<float> row_loss(static_cast<size_t>(n), 0.0f);  // (N)
  if (n == 0 || dim == 0) std::fill(dw, dw + vocab * dim, 0.0f);
  if (vocab == 0 || dim == 0) std::fill(dx, dx + n * dim, 0.0f);
  if (n > 0 && vocab > 0 && own_lce(c.attrs(), dim)) {
    LJ_CHECK(c.workspace != nullptr) << "linear_cross_entropy needs a workspace";
    const LceAvx512Shape shape = own_lce_shape(c.attrs(), n, dim, vocab, threads);
    std::vector<int64_t> y(labels, labels + n);
    auto* scratch = static_cast<float*>(
        c.workspace->get(static_cast<size_t>(lce_avx512_scratch_floats(shape)) * 4));
    lce_avx512(shape, n, x, w, y.data(), ignore, g, dx, dw, row_loss.data(), scratch);
  } else if (n > 0 && vocab > 0) {
    LJ_CHECK(c.workspace != nullptr) << "linear_cross_entropy needs a workspace";
    const BlockedScratch sc = blocked_scratch(c.attrs(), n, dim, vocab, threads);
    const int64_t vb = vocab_block(c.attrs(), vocab, dim), blocks = sc.blocks;
    auto* base = static_cast<float*>(c.workspace->get(static_cast<size_t>(sc.total()) * 4));
    float* logits = base;               // block b at logits + b * vb * m: (m, len) dense
    float* blk_m = logits + sc.logits;  // (rows, blocks)
    float* blk_s = blk_m + sc.stats;    // (rows, blocks)
    float* per_thread = blk_s + sc.stats;
    const auto partial = [&](int u) { return per_thread + u * sc.per_thread; };  // P (rows, C)
    const auto running = [&](int u) { return partial(u) + 3 * sc.rows * dim; };  // R (rows)
    for (int64_t r0 = 0; r0 < n; r0 += sc.rows) {
      const int64_t m = std::min(sc.rows, n - r0);
      const float* xc = x + r0 * dim;
#pragma omp parallel num_threads(threads)
      {
        ScopedOmpThreads one(1);  // the GEMMs below run on this thread alone
        const int t = omp_get_thread_num(), team = omp_get_num_threads();
        const LceBlockRange mine = lce_block_range(t, team, vocab, vb, blocks);
        float* my_p = partial(t);
        float* my_t = my_p + sc.rows * dim;  // t = e_b w_b (rows, C)
        float* my_x = my_t + sc.rows * dim;  // c_b x[chunk] (rows, C)
        float* my_r = running(t);
        std::fill(my_p, my_p + m * dim, 0.0f);
        std::fill(my_r, my_r + m, kNegInf);
        for (int64_t b = mine.first; b < mine.last; ++b) {
          const int64_t j0 = b * vb, len = std::min(vb, vocab - j0);
          float* lb = logits + j0 * m;
          if (dim > 0) {
            gemm(false, true, m, len, dim, 1.0f, xc, dim, w + j0 * dim, dim, 0.0f, lb, len);
          } else {
            std::fill(lb, lb + m * len, 0.0f);
          }
          for (int64_t i = 0; i < m; ++i) {
            const int64_t y = static_cast<int64_t>(labels[r0 + i]);
            float* row = lb + i * len;
            if (y == ignore) {
              std::fill(row, row + len, 0.0f);  // no part in either GEMM
              continue;
            }
            if (y >= j0 && y < j0 + len) row_loss[static_cast<size_t>(r0 + i)] = -row[y - j0];
            const float mb = row_max(row, len);
            blk_m[i * blocks + b] = mb;
            blk_s[i * blocks + b] = row_sum_exp(row, len, mb, row);
          }
          if (dim == 0) continue;
          gemm(false, false, m, dim, len, 1.0f, lb, len, w + j0 * dim, dim, 0.0f, my_t, dim);
          for (int64_t i = 0; i < m; ++i) {
            if (static_cast<int64_t>(labels[r0 + i]) == ignore) continue;
            const float mb = blk_m[i * blocks + b];
            float keep = 1.0f, add = 1.0f;  // P_i = keep P_i + add t_i
            if (mb > my_r[i]) {
              keep = my_r[i] == kNegInf ? 0.0f : std::exp(my_r[i] - mb);
              my_r[i] = mb;
            } else {
              add = std::exp(mb - my_r[i]);
            }
            float* p = my_p + i * dim;
            const float* tr = my_t + i * dim;
            const V<float> kv = simd::splat(keep), av = simd::splat(add);
            int64_t j = 0;
            for (; j + W <= dim; j += W) {
              simd::store(p + j, simd::load(p + j) * kv + simd::load(tr + j) * av);
            }
            for (; j < dim; ++j) p[j] = keep * p[j] + add * tr[j];
          }
        }
#pragma omp barrier
#pragma omp for schedule(static)
        for (int64_t i = 0; i < m; ++i) {
          const int64_t y = static_cast<int64_t>(labels[r0 + i]);
          float* dxi = dx + (r0 + i) * dim;
          if (y == ignore) {
            std::fill(dxi, dxi + dim, 0.0f);
            continue;
          }
          const float* bm = blk_m + i * blocks;
          float* bs = blk_s + i * blocks;
          float mx = kNegInf;
          for (int64_t b = 0; b < blocks; ++b) mx = std::max(mx, bm[b]);
          float s = 0.0f;
          for (int64_t b = 0; b < blocks; ++b) s += bs[b] * std::exp(bm[b] - mx);
          row_loss[static_cast<size_t>(r0 + i)] += mx + std::log(s);
          // From here blk_s holds each block's row scale: g exp(m_b - M) / S.
          for (int64_t b = 0; b < blocks; ++b) bs[b] = g * std::exp(bm[b] - mx) / s;
          // dx_i = sum_u exp(R_u - M) g / S P_u - g w_y; threads without blocks hold P = 0.
          const float* wy = w + y * dim;
          for (int64_t j = 0; j < dim; ++j) dxi[j] = 0.0f;
          for (int u = 0; u < team; ++u) {
            const float ru = running(u)[i];
            if (ru == kNegInf) continue;
            const float f = g * std::exp(ru - mx) / s;
            const float* pu = partial(u) + i * dim;
            for (int64_t j = 0; j < dim; ++j) dxi[j] += f * pu[j];
          }
          for (int64_t j = 0; j < dim; ++j) dxi[j] -= g * wy[j];
        }
        for (int64_t b = mine.first; b < mine.last && dim > 0; ++b) {
          const int64_t j0 = b * vb, len = std::min(vb, vocab - j0);
          for (int64_t i = 0; i < m; ++i) {
            const bool ignored = static_cast<int64_t>(labels[r0 + i]) == ignore;
            const float scale = ignored ? 0.0f : blk_s[i * blocks + b];
            const float* xi = xc + i * dim;
            float* out = my_x + i * dim;
            for (int64_t j = 0; j < dim; ++j) out[j] = scale * xi[j];
          }
          float* dwb = dw + j0 * dim;
          gemm(true, false, len, dim, m, 1.0f, logits + j0 * m, len, my_x, dim,
               r0 == 0 ? 0.0f : 1.0f, dwb, dim);
          for (int64_t i = 0; i < m; ++i) {
            const int64_t y = static_cast<int64_t>(labels[r0 + i]);
            if (y == ignore || y < j0 || y >= j0 + len) continue;
            const float* xi = xc + i * dim;
            float* dwy = dwb + (y - j0) * dim;
            for (int64_t j = 0; j < dim; ++j) dwy[j] -= g * xi[j];
          }
        }
      }
    }
  }
  double total = 0;
  for (float l : row_loss) total += static_cast<double>(l);
  const double mean =
      valid > 0 ? total / static_cast<double>(valid) : std::numeric_limits<double>::quiet_NaN();
  *c.out[0].as<float>() = static_cast<float>(mean);
  return ok_status();
}

// Whether the bf16 kernel keeps the dlogits of all n rows and makes dw in one GEMM at the end
// (bf16 out, its f32 sum over every row rounded once), rather than accumulating each chunk's
// product in an f32 dw (V, C) and rounding that: when n bf16 rows of dlogits take no more than one
// chunk's and the f32 dw would (n <= rows + 2C), so the workspace never grows. Qwen3-0.6B's head at
// B4 T256 (n 1024, 256-row chunks, C 1024): 311 MB of dlogits against 78 MB + 622 MB, and no
// more f32 dw read and written per chunk (4 x 1.24 GB) and converted at the end.
bool bf16_lce_whole_dw(int64_t n, int64_t rows, int64_t dim) {
  return n <= rows + 2 * dim;
}

// bf16 x and w (mixed precision): the same chunks, with the three GEMMs on bf16 operands
// (gemm_bf16: f32 accumulation). Each chunk's logits come out in f32 and go through the f32 row
// function; its dlogits are rounded to bf16 for the two backward GEMMs. dx is rounded once per
// row; dw is one GEMM over every row (bf16_lce_whole_dw), else accumulates over the chunks in f32
// (workspace) and is rounded once at the end. The loss is f32.
template <class L>
Status linear_cross_entropy_bf16(KernelContext& c) {
  const TensorView& xv = c.in[0];
  const int64_t n = xv.dim(0), dim = xv.dim(1), vocab = c.in[1].dim(0);
  LJ_CHECK(c.in[1].dtype == DType::bf16 && c.out[0].dtype == DType::f32 &&
           c.out[1].dtype == DType::bf16 && c.out[2].dtype == DType::bf16);
  const auto* x = xv.as<uint16_t>();
  const auto* w = c.in[1].as<uint16_t>();
  const L* labels = c.in[2].as<L>();
  auto* dx = c.out[1].as<uint16_t>();
  auto* dw = c.out[2].as<uint16_t>();
  const int64_t ignore = c.attrs().i_or("ignore_index", -100);
  LJ_ASSIGN_OR_RETURN(const int64_t valid, count_valid(labels, n, vocab, ignore));
  const float g = valid > 0 ? static_cast<float>(1.0 / static_cast<double>(valid)) : 0.0f;
  const int threads = std::max(1, c.threads);
  const int64_t rows = chunk_rows(c.attrs(), n, vocab, int64_t{4});
  std::vector<float> row_loss(static_cast<size_t>(n), 0.0f);  // (N)
  if (n == 0 || dim == 0 || vocab == 0) {
    std::fill(dw, dw + vocab * dim, uint16_t{0});
    std::fill(dx, dx + n * dim, uint16_t{0});
  }
  if (n > 0 && vocab > 0 && dim > 0) {
    LJ_CHECK(c.workspace != nullptr) << "linear_cross_entropy needs a workspace";
    const bool whole = bf16_lce_whole_dw(n, rows, dim);
    auto* logits = static_cast<float*>(c.workspace->get(static_cast<size_t>(rows * vocab) * 4));
    auto* dlogits_all = static_cast<uint16_t*>(
        c.workspace->get(static_cast<size_t>((whole ? n : rows) * vocab) * 2));
    auto* dw_acc =
        whole ? nullptr
              : static_cast<float*>(c.workspace->get(static_cast<size_t>(vocab * dim) * 4));
    ScopedOmpThreads scoped(threads);
    for (int64_t r0 = 0; r0 < n; r0 += rows) {
      const int64_t m = std::min(rows, n - r0);
      const uint16_t* xc = x + r0 * dim;
      uint16_t* dlogits = dlogits_all + (whole ? r0 * vocab : 0);
      gemm_bf16(false, true, m, vocab, dim, xc, w, logits, /*c_f32=*/true, false);
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t i = 0; i < m; ++i) {
        float* row = logits + i * vocab;
        const int64_t y = static_cast<int64_t>(labels[r0 + i]);
        if (y == ignore) {
          std::fill(row, row + vocab, 0.0f);
        } else {
          row_loss[static_cast<size_t>(r0 + i)] = loss_and_grad_row(row, vocab, y, g);
        }
        f32_to_bf16_row(row, dlogits + i * vocab, vocab);
      }
      // dx[chunk] (m, C) = dlogits (m, V) w (V, C); dw (V, C) += dlogits^T (V, m) x[chunk] (m, C).
      gemm_bf16(false, false, m, dim, vocab, dlogits, w, dx + r0 * dim, /*c_f32=*/false, false);
      if (!whole) {
        gemm_bf16(true, false, vocab, dim, m, dlogits, xc, dw_acc, /*c_f32=*/true, r0 > 0);
      }
    }
    if (whole) {
      gemm_bf16(true, false, vocab, dim, n, dlogits_all, x, dw, /*c_f32=*/false, false);
    } else {
      parallel_for(threads, vocab * dim, kPointwiseGrain,
                   [&](int64_t b, int64_t e) { f32_to_bf16_row(dw_acc + b, dw + b, e - b); });
    }
  }
  double total = 0;
  for (float l : row_loss) total += static_cast<double>(l);
  const double mean =
      valid > 0 ? total / static_cast<double>(valid) : std::numeric_limits<double>::quiet_NaN();
  *c.out[0].as<float>() = static_cast<float>(mean);
  return ok_status();
}

// `label_input`: which input holds the labels (1 for cross_entropy, 2 for the fused ops).
template <template <class, class> class Impl>
Status dispatch(KernelContext& c, const char* op, int label_input = 1) {
  const DType xt = c.in[0].dtype, lt = c.in[static_cast<size_t>(label_input)].dtype;
  LJ_CHECK(c.in[0].rank() == 2 && c.in[static_cast<size_t>(label_input)].rank() == 1 &&
           c.in[static_cast<size_t>(label_input)].dim(0) == c.in[0].dim(0))
      << op << ": logits (or x) must be (N, .) and labels (N)";
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

template <class T, class L>
struct LinearForward {
  static Status run(KernelContext& c) {
    if constexpr (std::is_same_v<T, float>) {
      return linear_cross_entropy_f32<L>(c);
    } else {
      return linear_cross_entropy_impl<T, L>(c);
    }
  }
};

Status cross_entropy_forward(KernelContext& c) {
  if (c.in[0].dtype == DType::bf16) {
    return dispatch_index(c.in[1].dtype,
                          [&](auto l) { return cross_entropy_bf16<decltype(l)>(c); });
  }
  return dispatch<Forward>(c, "cross_entropy");
}
Status cross_entropy_backward(KernelContext& c) {
  if (c.in[0].dtype == DType::bf16) {
    return dispatch_index(c.in[1].dtype,
                          [&](auto l) { return cross_entropy_backward_bf16<decltype(l)>(c); });
  }
  return dispatch<Backward>(c, "cross_entropy_backward");
}
Status linear_cross_entropy_forward(KernelContext& c) {
  if (c.in[0].dtype == DType::bf16) {
    return dispatch_index(c.in[2].dtype,
                          [&](auto l) { return linear_cross_entropy_bf16<decltype(l)>(c); });
  }
  return dispatch<LinearForward>(c, "linear_cross_entropy", 2);
}

}  // namespace

// What linear_cross_entropy's get() asks for: one chunk of logits; for bf16 operands an f32
// chunk and either the bf16 dlogits of every row or one chunk's and the f32 accumulator of dw
// (V, C) (bf16_lce_whole_dw).
static size_t linear_cross_entropy_workspace(const Node& n, std::span<const TensorView> in,
                                             int threads) {
  const auto round = [](int64_t bytes) { return (static_cast<size_t>(bytes) + 63) / 64 * 64; };
  const int64_t rows_total = in[0].dim(0), dim = in[0].dim(1), vocab = in[1].dim(0);
  if (rows_total == 0 || vocab == 0) return 0;
  if (in[0].dtype == DType::bf16) {
    if (dim == 0) return 0;
    const int64_t rows = chunk_rows(n.attrs, rows_total, vocab, 4);
    if (bf16_lce_whole_dw(rows_total, rows, dim)) {
      return round(rows * vocab * 4) + round(rows_total * vocab * 2);
    }
    return round(rows * vocab * 4) + round(rows * vocab * 2) + round(vocab * dim * 4);
  }
  if (in[0].dtype == DType::f32) {
    if (own_lce(n.attrs, dim)) {
      return round(
          lce_avx512_scratch_floats(own_lce_shape(n.attrs, rows_total, dim, vocab, threads)) * 4);
    }
    return round(blocked_scratch(n.attrs, rows_total, dim, vocab, threads).total() * 4);
  }
  const int64_t elem = dtype_size(in[0].dtype);
  const int64_t rows = chunk_rows(n.attrs, rows_total, vocab, elem);
  return round(rows * vocab * elem);
}

void register_loss(KernelTable& t) {
  t[Op::cross_entropy] = cross_entropy_forward;
  t[Op::cross_entropy_backward] = cross_entropy_backward;
  t.bf16[static_cast<int>(Op::cross_entropy)] = true;
  t.bf16[static_cast<int>(Op::cross_entropy_backward)] = true;
  t.bf16[static_cast<int>(Op::linear_cross_entropy)] = true;
  t[Op::linear_cross_entropy] = linear_cross_entropy_forward;
  t.ws[static_cast<int>(Op::linear_cross_entropy)] = linear_cross_entropy_workspace;
}

int64_t linear_cross_entropy_chunk_rows(const Attrs& attrs, int64_t n, int64_t vocab) {
  return chunk_rows(attrs, n, vocab, int64_t{4});
}

int64_t linear_cross_entropy_vocab_block(const Attrs& attrs, int64_t vocab, int64_t dim) {
  return vocab_block(attrs, vocab, dim);
}

}  // namespace lj::cpu
