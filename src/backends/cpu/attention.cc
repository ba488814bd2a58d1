// Scaled dot-product attention on the CPU, tiled flash-style: a head's (Tq, Tk) score matrix is
// never held whole, only kTile x kTile tiles in per-thread scratch.
//
//   sdpa(q (B, H, Tq, D), k (B, G, Tk, D), v (B, G, Tk, D)) -> out (B, H, Tq, D), lse (B, H, Tq)
//   sdpa_backward(q, k, v, out, lse, dout) -> dq, dk, dv
//
// q head h reads kv head h / (H / G). causal: query i sees keys 0..i (Tq == Tk). window W > 0
// (causal only, Mistral's sliding window): query i sees keys i - W < j <= i. scale <= 0 means
// 1 / sqrt(D).
//
// Forward, parallel over (b, h, query tile): online softmax over key tiles (tiles fully above the
// diagonal, and with a window those wholly older than it, skipped; on a diagonal tile every
// product skips the micro-blocks the mask hides; keys older than the window are masked); the
// output rows accumulate in place and are normalised at the end; lse = m + log(l). Scores are
// computed transposed, St = K_tile Q_tileᵀ (keys x queries), so the row statistics of a query
// vectorise across queries and no K tile is transposed.
//
// Backward, parallel over (b, kv head): Di = rowsum(dO ∘ O); per tile S = Q Kᵀ,
// P = exp(scale S - lse), dV += Pᵀ dO, dP = dO Vᵀ, dS = scale P ∘ (dP - Di), dQ += dS K,
// dK += dSᵀ Q. One thread owns a kv head and all its q heads, so dQ, dK and dV need no atomics
// and every output is bitwise independent of the thread count; it walks the key tiles outermost,
// so each K and V tile is transposed once for all those q heads, not once per q head.
//
// The tile products run on a register-blocked micro-kernel (6 rows x 2 or 3 vectors of
// accumulators, FMA) over simd.h's vectors (16 f32 lanes on AVX-512), for f32 and f64 alike. A
// head dim of 3 vectors (D = 48 on AVX-512) runs as one 6 x 3 panel: 18 accumulators, each B
// row loaded once per k, instead of a 6 x 2 panel plus a load-bound 6 x 1 one. A product sums k
// in registers from zero and adds c once at the end (accumulate): when the accumulators started
// from c, GCC kept them on the stack and copied them in and out around the k loop, and the
// B4 H6 T256 D48 forward+backward took 7.96 ms instead of 7.27 (micro_bench, one thread,
// medians of 8 interleaved runs on an AMD Zen 4 core).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/attention_tiles.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/simd.h"

// 32-byte vectors cross only inline functions here (see simd.h).
#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace lj::cpu {
namespace {

using attn::block_rows;
using attn::Tri;
using simd::V;
using std::ptrdiff_t;

// Queries and keys per tile. At B=4 H=6 T=256 D=48 causal, one thread, 64 beat 32, 48, 80 and
// 128 (forward 2.6 ms vs 3.0, 2.9, 3.5, 2.8; backward 5.6 ms vs 6.7, 5.8, 6.0, 5.9).
constexpr int kTile = 64;

// ---- tile products ---------------------------------------------------------------------------

// c (MR, NV * W) = [c +] a (MR, k) b (k, NV * W); a(i, kk) = a[i * rs_a + kk * cs_a], b row-major
// with leading dim ldb, c row-major with leading dim ldc.
template <class T, int MR, int NV>
inline void micro_kernel(int k, const T* a, ptrdiff_t rs_a, ptrdiff_t cs_a, const T* b,
                         ptrdiff_t ldb, T* c, ptrdiff_t ldc, bool accumulate) {
  constexpr int W = simd::kWidth<T>;
  // Fully unrolled, so the accumulators live in registers (GCC otherwise keeps the array on the
  // stack and copies it in and out around the k loop).
  V<T> acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = V<T>{};
  }
  for (int kk = 0; kk < k; ++kk) {
    const T* bk = b + kk * ldb;
    const T* ak = a + kk * cs_a;
    V<T> bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = simd::load(bk + v * W);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const V<T> av = simd::splat(ak[i * rs_a]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = simd::fma(av, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      T* ci = c + i * ldc + v * W;
      simd::store(ci, accumulate ? simd::load(ci) + acc[i][v] : acc[i][v]);
    }
  }
}

// All rows of the column panel [j, j + NV * W).
template <class T, int NV>
void panel(int m, int j, int k, const T* a, ptrdiff_t rs_a, ptrdiff_t cs_a, const T* b,
           ptrdiff_t ldb, T* c, ptrdiff_t ldc, bool accumulate, Tri tri) {
  constexpr int kCols = NV * simd::kWidth<T>;
  for (int i = 0; i < m;) {
    const int mr = block_rows(m - i);
    const int row_end = i + mr;
    const int i0 = i;
    i = row_end;
    if ((tri == Tri::out_upper && j > row_end - 1) ||
        (tri == Tri::out_lower && i0 > j + kCols - 1)) {
      continue;
    }
    int k0 = 0, k1 = k;
    if (tri == Tri::k_upto_row) k1 = std::min(k, row_end);
    if (tri == Tri::k_from_row) k0 = std::min(k, i0);
    const T* ai = a + i0 * rs_a + k0 * cs_a;
    const T* bj = b + j + k0 * ldb;
    T* ci = c + i0 * ldc + j;
    const int kk = k1 - k0;
    switch (mr) {
      case 6:
        micro_kernel<T, 6, NV>(kk, ai, rs_a, cs_a, bj, ldb, ci, ldc, accumulate);
        break;
      case 5:
        micro_kernel<T, 5, NV>(kk, ai, rs_a, cs_a, bj, ldb, ci, ldc, accumulate);
        break;
      case 4:
        micro_kernel<T, 4, NV>(kk, ai, rs_a, cs_a, bj, ldb, ci, ldc, accumulate);
        break;
      case 3:
        micro_kernel<T, 3, NV>(kk, ai, rs_a, cs_a, bj, ldb, ci, ldc, accumulate);
        break;
      case 2:
        micro_kernel<T, 2, NV>(kk, ai, rs_a, cs_a, bj, ldb, ci, ldc, accumulate);
        break;
      default:
        micro_kernel<T, 1, NV>(kk, ai, rs_a, cs_a, bj, ldb, ci, ldc, accumulate);
        break;
    }
  }
}

// c (m, n) = [c +] a (m, k) b (k, n), a with arbitrary strides (so a transposed operand is read
// in place), b and c row-major. Each element sums k in increasing order, then adds c. `tri` skips
// the parts of a diagonal tile the causal mask makes zero or unneeded (unneeded outputs are left as
// they were: the caller overwrites them).
template <class T>
void tile_gemm(int m, int n, int k, const T* a, ptrdiff_t rs_a, ptrdiff_t cs_a, const T* b,
               ptrdiff_t ldb, T* c, ptrdiff_t ldc, bool accumulate, Tri tri = Tri::none) {
  constexpr int W = simd::kWidth<T>;
  int j = 0;
  for (; j + 4 * W <= n || j + 2 * W == n; j += 2 * W) {
    panel<T, 2>(m, j, k, a, rs_a, cs_a, b, ldb, c, ldc, accumulate, tri);
  }
  if (j + 3 * W <= n) {  // e.g. D = 48 on 16 lanes: one 3-vector panel, not a 2 and a 1
    panel<T, 3>(m, j, k, a, rs_a, cs_a, b, ldb, c, ldc, accumulate, tri);
    j += 3 * W;
  }
  if (j + 2 * W <= n) {
    panel<T, 2>(m, j, k, a, rs_a, cs_a, b, ldb, c, ldc, accumulate, tri);
    j += 2 * W;
  }
  if (j + W <= n) {
    panel<T, 1>(m, j, k, a, rs_a, cs_a, b, ldb, c, ldc, accumulate, tri);
    j += W;
  }
  for (; j < n; ++j) {  // fewer than W columns left: every output, only the k range is trimmed
    for (int i = 0; i < m; ++i) {
      const int k0 = tri == Tri::k_from_row ? std::min(k, i) : 0;
      const int k1 = tri == Tri::k_upto_row ? std::min(k, i + 1) : k;
      T s = accumulate ? c[i * ldc + j] : T(0);
      for (int kk = k0; kk < k1; ++kk) s += a[i * rs_a + kk * cs_a] * b[kk * ldb + j];
      c[i * ldc + j] = s;
    }
  }
}

#if defined(__AVX__)
// dst rows 0..7 (leading dim ld) = the 8x8 block at src (leading dim lds), transposed.
inline void transpose8x8(const float* src, ptrdiff_t lds, float* dst, ptrdiff_t ld) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}
#endif

// dst (cols, ld) = srcᵀ for src (rows, cols) row-major; columns rows..ld of dst are zeroed.
template <class T>
void transpose(int rows, int cols, const T* src, T* dst, int ld) {
  int r0 = 0, d0 = 0;
#if defined(__AVX__)
  if constexpr (sizeof(T) == 4) {
    for (; r0 + 8 <= rows; r0 += 8) {
      for (d0 = 0; d0 + 8 <= cols; d0 += 8)
        transpose8x8(src + r0 * cols + d0, cols, dst + d0 * ld + r0, ld);
      for (int d = d0; d < cols; ++d) {
        for (int r = r0; r < r0 + 8; ++r) dst[d * ld + r] = src[r * cols + d];
      }
    }
  }
#endif
  (void)d0;
  for (int d = 0; d < cols; ++d) {
    T* out = dst + d * ld;
    for (int r = r0; r < rows; ++r) out[r] = src[r * cols + d];
    for (int r = rows; r < ld; ++r) out[r] = T(0);
  }
}

// Per-call scratch: from the kernel's workspace when there is one.
template <class T>
T* scratch(KernelContext& c, size_t count, std::vector<T>* fallback) {
  if (c.workspace != nullptr) return static_cast<T*>(c.workspace->get(count * sizeof(T)));
  fallback->assign(count, T(0));
  return fallback->data();
}

struct Dims {
  int64_t b, h, g, tq, tk, d;
  bool causal;
  double scale;
  int64_t window;  // 0: none; else query i sees keys j > i - window (causal)
  bool bf16;       // f32 copies of bf16 tensors (widen.cc): P rounds to bf16 in products
  bool bf16_dot;   // and the products run on bf16 dot products
};

Dims read_dims(const KernelContext& c) {
  const TensorView& q = c.in[0];
  const TensorView& k = c.in[1];
  LJ_CHECK(q.rank() == 4 && k.rank() == 4 && c.in[2].rank() == 4) << "sdpa needs rank-4 q, k, v";
  Dims d{q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), q.dim(3), false, 0.0, 0, false, false};
  LJ_CHECK(d.g > 0 && d.h % d.g == 0) << "sdpa: H=" << d.h << " is not a multiple of G=" << d.g;
  LJ_CHECK_EQ(k.dim(3), d.d) << "sdpa head dims";
  LJ_CHECK(c.in[2].dims == k.dims) << "sdpa: k and v shapes differ";
  d.causal = c.attrs().b_or("causal", false);
  LJ_CHECK(!d.causal || d.tq == d.tk) << "causal sdpa needs Tq == Tk";
  d.scale = c.attrs().f_or("scale", 0.0);
  if (d.scale <= 0) d.scale = 1.0 / std::sqrt(static_cast<double>(d.d));
  d.window = c.attrs().i_or("window", 0);
  LJ_CHECK(d.window == 0 || (d.causal && d.window > 0)) << "sdpa window needs causal attention";
  d.bf16 = c.widened_from == DType::bf16 && q.dtype == DType::f32;
  d.bf16_dot = d.bf16 && attn::bf16_dot_available();
  return d;
}

// One tile product of the kernels below, but dS's (see sdpa_kv_tile_backward). On bf16 tensors
// (run widened, Dims::bf16) it multiplies bf16 operands, as flash attention and PyTorch's CPU
// flash kernel do: q, k, v and dO are bf16 values already, P (the A operand of P V and Pᵀ dO)
// rounds to bf16, the sums stay f32. On bf16 dot products where the CPU has them
// (attention_tiles.h); elsewhere tile_gemm on a rounded copy of A, so the rounding does not
// depend on the host.
template <class T>
void product(const Dims& dm, int m, int n, int k, const T* a, ptrdiff_t rs_a, ptrdiff_t cs_a,
             const T* b, ptrdiff_t ldb, T* c, ptrdiff_t ldc, bool accumulate, Tri tri = Tri::none) {
  if constexpr (std::is_same_v<T, float>) {
    if (dm.bf16_dot) {
      attn::tile_gemm_bf16_dot(m, n, k, a, rs_a, cs_a, b, ldb, c, ldc, accumulate, tri);
      return;
    }
    if (dm.bf16) {
      thread_local std::vector<float> rounded;
      rounded.resize(static_cast<size_t>(m) * static_cast<size_t>(k));
      for (int i = 0; i < m; ++i) {
        for (int kk = 0; kk < k; ++kk) {
          rounded[static_cast<size_t>(i) * k + kk] =
              bf16_to_f32(f32_to_bf16(a[i * rs_a + kk * cs_a]));
        }
      }
      tile_gemm(m, n, k, rounded.data(), k, 1, b, ldb, c, ldc, accumulate, tri);
      return;
    }
  }
  tile_gemm(m, n, k, a, rs_a, cs_a, b, ldb, c, ldc, accumulate, tri);
}

// ---- forward ---------------------------------------------------------------------------------

// Per-thread scratch of the forward, in elements.
template <class T>
struct FwdScratch {
  T* qt;     // (D, kTile): the query tile transposed
  T* st;     // (kTile keys, kTile queries): scores, then probabilities
  T* m;      // (kTile): running max of scale * score
  T* l;      // (kTile): running sum of exp
  T* alpha;  // (kTile): rescale of the previous partial sums
  static size_t count(int64_t d) { return static_cast<size_t>((d + kTile + 3) * kTile); }
  FwdScratch(T* base, int64_t d)
      : qt(base), st(base + d * kTile), m(st + kTile * kTile), l(m + kTile), alpha(l + kTile) {}
};

// One (b, h, query tile): out rows [i0, i0 + mq) and their lse.
template <class T>
void sdpa_tile_forward(const Dims& dm, const T* q, const T* k, const T* v, T* out, T* lse,
                       int64_t i0, FwdScratch<T>& s) {
  constexpr int W = simd::kWidth<T>;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int d = static_cast<int>(dm.d);
  const int mq = static_cast<int>(std::min<int64_t>(kTile, dm.tq - i0));
  const T scale = static_cast<T>(dm.scale);
  transpose(mq, d, q + i0 * d, s.qt, kTile);
  T* o = out + i0 * d;
  for (int i = 0; i < kTile; ++i) {
    s.m[i] = kNegInf;
    s.l[i] = T(0);
  }
  const int64_t key_end = dm.causal ? i0 + mq : dm.tk;
  // With a window, the key tiles before the one holding the first query's oldest key hold none
  // any query of this tile sees.
  const int64_t key_begin =
      dm.window > 0 ? std::max<int64_t>(0, i0 - dm.window + 1) / kTile * kTile : 0;
  if (key_end == 0) std::fill(o, o + static_cast<ptrdiff_t>(mq) * d, T(0));
  for (int64_t j0 = key_begin; j0 < key_end; j0 += kTile) {
    const int nk = static_cast<int>(std::min<int64_t>(kTile, key_end - j0));
    // St (nk, kTile) = K_tile (nk, D) Q_tileᵀ (D, kTile); padded query columns score 0.
    const Tri diag = dm.causal && j0 == i0 ? Tri::out_lower : Tri::none;
    product(dm, nk, kTile, d, k + j0 * d, d, 1, s.qt, kTile, s.st, kTile, false, diag);
    if (dm.causal && j0 + nk - 1 > i0) {
      for (int j = 0; j < nk; ++j) {  // key j0 + j is hidden from queries i0 .. j0 + j - 1
        const int64_t hidden = std::min<int64_t>(kTile, j0 + j - i0);
        for (int64_t i = 0; i < hidden; ++i) s.st[j * kTile + i] = kNegInf;
      }
    }
    if (dm.window > 0 && i0 + mq - 1 - j0 >= dm.window) {
      for (int j = 0; j < nk; ++j) {  // key j0 + j is too old for queries j0 + j + window ..
        const int64_t first = std::max<int64_t>(0, j0 + j + dm.window - i0);
        for (int64_t i = first; i < mq; ++i) s.st[j * kTile + i] = kNegInf;
      }
    }
    // Per query (vectorised across queries): running max m of scale * score, the rescale
    // alpha = exp(m_old - m_new) of earlier partial sums, p = exp(scale s - m_new), l.
    const V<T> scale_v = simd::splat(scale);
    for (int i = 0; i < kTile; i += W) {
      V<T> mx = simd::splat(kNegInf);
      for (int j = 0; j < nk; ++j) mx = simd::max(mx, simd::load(s.st + j * kTile + i));
      const V<T> m_old = simd::load(s.m + i);
      const V<T> m_new = simd::max(m_old, mx * scale_v);
      // A query with nothing visible yet keeps max -inf; use 0 so exp gives 0, not NaN.
      const V<T> neg_m = m_new == simd::splat(kNegInf) ? V<T>{} : -m_new;
      const V<T> alpha = simd::exp_vec<T>(m_old + neg_m);
      V<T> sum{};
      for (int j = 0; j < nk; ++j) {
        T* row = s.st + j * kTile + i;
        const V<T> p = simd::exp_vec<T>(simd::fma(simd::load(row), scale_v, neg_m));
        simd::store(row, p);
        sum += p;
      }
      simd::store(s.alpha + i, alpha);
      simd::store(s.m + i, m_new);
      simd::store(s.l + i, simd::fma(simd::load(s.l + i), alpha, sum));
    }
    if (j0 > key_begin) {
      for (int i = 0; i < mq; ++i) {
        const T a = s.alpha[i];
        if (a != T(1)) {
          for (int e = 0; e < d; ++e) o[i * d + e] *= a;
        }
      }
    }
    // O (mq, D) [+]= P (mq, nk) V_tile (nk, D), P read from St transposed.
    product(dm, mq, d, nk, s.st, 1, kTile, v + j0 * d, d, o, d, j0 > key_begin,
            diag == Tri::none ? Tri::none : Tri::k_upto_row);
  }
  for (int i = 0; i < mq; ++i) {
    const T l = s.l[i];
    const T inv = l > T(0) ? T(1) / l : T(0);
    for (int e = 0; e < d; ++e) o[i * d + e] *= inv;
    lse[i0 + i] = l > T(0) ? s.m[i] + std::log(l) : kNegInf;
  }
}

template <class T>
void sdpa_forward_impl(KernelContext& c, const Dims& dm) {
  const int threads = std::max(1, c.threads);
  std::vector<T> fallback;
  const size_t per_thread = FwdScratch<T>::count(dm.d);
  T* base = scratch<T>(c, per_thread * static_cast<size_t>(threads), &fallback);
  const int64_t q_tiles = (dm.tq + kTile - 1) / kTile;
  const int64_t units = dm.b * dm.h * q_tiles;
  const int64_t group = dm.h / dm.g;
  const T* q = c.in[0].as<T>();
  const T* k = c.in[1].as<T>();
  const T* v = c.in[2].as<T>();
  T* out = c.out[0].as<T>();
  T* lse = c.out[1].as<T>();
  // Each unit writes its own rows, so any schedule gives the same bits; dynamic balances the
  // causal triangle (late query tiles see more keys). Late tiles first: the longest go first.
#pragma omp parallel num_threads(threads)
  {
    FwdScratch<T> s(base + per_thread * static_cast<size_t>(omp_get_thread_num()), dm.d);
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t qt = q_tiles - 1 - u % q_tiles;
      const int64_t bh = u / q_tiles;
      const int64_t bg = (bh / dm.h) * dm.g + (bh % dm.h) / group;
      sdpa_tile_forward(dm, q + bh * dm.tq * dm.d, k + bg * dm.tk * dm.d, v + bg * dm.tk * dm.d,
                        out + bh * dm.tq * dm.d, lse + bh * dm.tq, qt * kTile, s);
    }
  }
}

// ---- backward --------------------------------------------------------------------------------

// Per-thread scratch of the backward, in elements.
template <class T>
struct BwdScratch {
  T* kt;  // (D, kTile): the key tile transposed
  T* vt;  // (D, kTile): the value tile transposed
  T* p;   // (kTile queries, kTile keys): probabilities
  T* ds;  // (kTile, kTile): dP, then dS
  T* di;  // (group, Tq): rowsum(dO ∘ O) of each q head of the kv head
  static size_t count(int64_t d, int64_t tq, int64_t group) {
    return static_cast<size_t>(2 * d * kTile + 2 * kTile * kTile + group * tq);
  }
  BwdScratch(T* base, int64_t d)
      : kt(base),
        vt(kt + d * kTile),
        p(vt + d * kTile),
        ds(p + kTile * kTile),
        di(ds + kTile * kTile) {}
};

// Per-head pointers of the backward (V reaches it transposed, in the scratch); dq, dk, dv are
// zeroed by the caller.
template <class T>
struct HeadPtrs {
  const T *q, *k, *o, *lse, *dout;
  T *dq, *dk, *dv;
};

// di (Tq) = rowsum(dO ∘ O) of one q head.
template <class T>
void head_di(const Dims& dm, const T* dout, const T* o, T* di) {
  constexpr int W = simd::kWidth<T>;
  const int d = static_cast<int>(dm.d);
  for (int64_t i = 0; i < dm.tq; ++i, dout += d, o += d) {
    V<T> acc{};
    int e = 0;
    for (; e + W <= d; e += W) acc = simd::fma(simd::load(dout + e), simd::load(o + e), acc);
    T sum = simd::hsum(acc);
    for (; e < d; ++e) sum += dout[e] * o[e];
    di[i] = sum;
  }
}

// One q head against the key tile [j0, j0 + nk) of its kv head, whose K and V the caller has
// transposed into s.kt and s.vt: every query tile that sees the keys.
template <class T>
void sdpa_kv_tile_backward(const Dims& dm, const HeadPtrs<T>& h, const T* di, int64_t j0,
                           BwdScratch<T>& s) {
  constexpr int W = simd::kWidth<T>;
  const int d = static_cast<int>(dm.d);
  const T scale = static_cast<T>(dm.scale);
  const int nk = static_cast<int>(std::min<int64_t>(kTile, dm.tk - j0));
  const int nk_pad = (nk + W - 1) / W * W;  // vector width; columns nk..nk_pad are zero
  T* dk = h.dk + j0 * d;
  T* dv = h.dv + j0 * d;
  // Causal: query tiles whose last query is before j0 see none of these keys; with a window,
  // neither do those whose first query is past the last key's window.
  const int64_t i_begin = dm.causal ? j0 / kTile * kTile : 0;
  const int64_t i_end = dm.window > 0 ? std::min(dm.tq, j0 + nk - 1 + dm.window) : dm.tq;
  for (int64_t i0 = i_begin; i0 < i_end; i0 += kTile) {
    const int mq = static_cast<int>(std::min<int64_t>(kTile, dm.tq - i0));
    const T* q = h.q + i0 * d;
    const T* dout = h.dout + i0 * d;
    // A diagonal tile: query i0 + i sees keys j0 .. i0 + i only.
    const bool diag = dm.causal && i0 == j0;
    // S (mq, nk_pad) = Q_tile (mq, D) K_tileᵀ (D, nk_pad); P = exp(scale S - lse).
    product(dm, mq, nk_pad, d, q, d, 1, s.kt, kTile, s.p, kTile, false,
            diag ? Tri::out_upper : Tri::none);
    for (int i = 0; i < mq; ++i) {
      T* row = s.p + i * kTile;
      const V<T> lse = simd::splat(h.lse[i0 + i]);
      const int visible = diag ? std::min(nk, i + 1) : nk;
      const int vis_pad = (visible + W - 1) / W * W;
      for (int j = 0; j < vis_pad; j += W) {
        simd::store(row + j, simd::exp_vec<T>(simd::load(row + j) * scale - lse));
      }
      for (int j = visible; j < nk_pad; ++j) row[j] = T(0);  // hidden keys and padding
      if (dm.window > 0) {  // keys older than the window: j0 + j <= i0 + i - window
        const int64_t old = std::min<int64_t>(nk, i0 + i - dm.window - j0 + 1);
        for (int64_t j = 0; j < old; ++j) row[j] = T(0);
      }
    }
    // dV_tile (nk, D) += Pᵀ (nk, mq) dO_tile (mq, D).
    product(dm, nk, d, mq, s.p, 1, kTile, dout, d, dv, d, true, diag ? Tri::k_from_row : Tri::none);
    // dP (mq, nk_pad) = dO_tile (mq, D) V_tileᵀ (D, nk_pad); dS = scale P ∘ (dP - Di).
    product(dm, mq, nk_pad, d, dout, d, 1, s.vt, kTile, s.ds, kTile, false,
            diag ? Tri::out_upper : Tri::none);
    for (int i = 0; i < mq; ++i) {
      T* ds = s.ds + i * kTile;
      const T* p = s.p + i * kTile;
      const V<T> di_i = simd::splat(di[i0 + i]);
      const int vis_pad = diag ? std::min(nk_pad, (i + 1 + W - 1) / W * W) : nk_pad;
      for (int j = 0; j < vis_pad; j += W) {
        simd::store(ds + j, simd::load(p + j) * (simd::load(ds + j) - di_i) * scale);
      }
      for (int j = vis_pad; j < nk_pad; ++j) ds[j] = T(0);  // dP was not computed there
    }
    // dQ_tile (mq, D) += dS (mq, nk) K_tile (nk, D), then dK_tile (nk, D) += dSᵀ (nk, mq) Q_tile.
    // In f32 at every dtype: dS (P times a difference that cancels) is not rounded to bf16, as
    // flash attention rounds it. Rounding it moved the bf16 10-step trajectories against torch
    // twice as far as rounding P does (bf16_parity_test, qwen3 eager: mean relative loss
    // difference 1.66e-2 against 8.3e-3 with P alone, 4.2e-3 with neither).
    tile_gemm(mq, d, nk, s.ds, kTile, 1, h.k + j0 * d, d, h.dq + i0 * d, d, true,
              diag ? Tri::k_upto_row : Tri::none);
    tile_gemm(nk, d, mq, s.ds, 1, kTile, q, d, dk, d, true, diag ? Tri::k_from_row : Tri::none);
  }
}

template <class T>
void sdpa_backward_impl(KernelContext& c, const Dims& dm) {
  const int threads = std::max(1, c.threads);
  std::vector<T> fallback;
  const size_t per_thread = BwdScratch<T>::count(dm.d, dm.tq, dm.h / dm.g);
  T* base = scratch<T>(c, per_thread * static_cast<size_t>(threads), &fallback);
  const int64_t group = dm.h / dm.g;
  const int64_t q_head = dm.tq * dm.d, kv_head = dm.tk * dm.d;
  const T* q = c.in[0].as<T>();
  const T* k = c.in[1].as<T>();
  const T* v = c.in[2].as<T>();
  const T* o = c.in[3].as<T>();
  const T* lse = c.in[4].as<T>();
  const T* dout = c.in[5].as<T>();
  T* dq = c.out[0].as<T>();
  T* dk = c.out[1].as<T>();
  T* dv = c.out[2].as<T>();
  // One unit = (b, kv head): it alone writes that kv head's dk, dv and its q heads' dq. Each key
  // tile's K and V are transposed once for all the q heads that read them; dk and dv of a tile
  // still sum over (q head, query tile) in that order, dq over key tiles in increasing order.
#pragma omp parallel num_threads(threads)
  {
    BwdScratch<T> s(base + per_thread * static_cast<size_t>(omp_get_thread_num()), dm.d);
#pragma omp for schedule(dynamic, 1)
    for (int64_t bg = 0; bg < dm.b * dm.g; ++bg) {
      std::fill(dk + bg * kv_head, dk + (bg + 1) * kv_head, T(0));
      std::fill(dv + bg * kv_head, dv + (bg + 1) * kv_head, T(0));
      const int64_t b = bg / dm.g, g = bg % dm.g;
      auto ptrs = [&](int64_t hh) {
        const int64_t bh = b * dm.h + g * group + hh;
        return HeadPtrs<T>{q + bh * q_head,   k + bg * kv_head,   o + bh * q_head,
                           lse + bh * dm.tq,  dout + bh * q_head, dq + bh * q_head,
                           dk + bg * kv_head, dv + bg * kv_head};
      };
      for (int64_t hh = 0; hh < group; ++hh) {
        const HeadPtrs<T> h = ptrs(hh);
        std::fill(h.dq, h.dq + q_head, T(0));
        head_di(dm, h.dout, h.o, s.di + hh * dm.tq);
      }
      for (int64_t j0 = 0; j0 < dm.tk; j0 += kTile) {
        const int nk = static_cast<int>(std::min<int64_t>(kTile, dm.tk - j0));
        transpose(nk, static_cast<int>(dm.d), k + bg * kv_head + j0 * dm.d, s.kt, kTile);
        transpose(nk, static_cast<int>(dm.d), v + bg * kv_head + j0 * dm.d, s.vt, kTile);
        for (int64_t hh = 0; hh < group; ++hh) {
          sdpa_kv_tile_backward(dm, ptrs(hh), s.di + hh * dm.tq, j0, s);
        }
      }
    }
  }
}

// ---- kernels ---------------------------------------------------------------------------------

Status check_float(const KernelContext& c, const char* op) {
  const DType dt = c.in[0].dtype;
  for (const TensorView& t : c.in) LJ_CHECK(t.dtype == dt) << op << ": operand dtypes differ";
  if (dt != DType::f32 && dt != DType::f64) {
    return unimplemented(std::string(op) + " on the CPU supports f32 and f64, not " +
                         dtype_name(dt));
  }
  return ok_status();
}

Status sdpa_forward(KernelContext& c) {
  LJ_RETURN_IF_ERROR(check_float(c, "sdpa"));
  const Dims dm = read_dims(c);
  if (c.out[0].numel() == 0) return ok_status();
  if (c.in[0].dtype == DType::f32) {
    sdpa_forward_impl<float>(c, dm);
  } else {
    sdpa_forward_impl<double>(c, dm);
  }
  return ok_status();
}

Status sdpa_backward(KernelContext& c) {
  LJ_RETURN_IF_ERROR(check_float(c, "sdpa_backward"));
  const Dims dm = read_dims(c);
  if (c.out[0].numel() == 0 && c.out[1].numel() == 0) return ok_status();
  if (c.in[0].dtype == DType::f32) {
    sdpa_backward_impl<float>(c, dm);
  } else {
    sdpa_backward_impl<double>(c, dm);
  }
  return ok_status();
}

// What the kernels' scratch() asks for: per-thread tiles.
template <bool kBackward>
size_t sdpa_workspace(const Node& n, std::span<const TensorView> in, int threads) {
  if (in[0].numel() == 0) return 0;
  KernelContext c{n, in, {}, threads, nullptr};
  const Dims dm = read_dims(c);
  const bool f32 = in[0].dtype == DType::f32;
  const size_t per_thread =
      kBackward ? (f32 ? BwdScratch<float>::count(dm.d, dm.tq, dm.h / dm.g)
                       : BwdScratch<double>::count(dm.d, dm.tq, dm.h / dm.g))
                : (f32 ? FwdScratch<float>::count(dm.d) : FwdScratch<double>::count(dm.d));
  const size_t bytes = per_thread * static_cast<size_t>(std::max(1, threads)) *
                       static_cast<size_t>(dtype_size(in[0].dtype));
  return (bytes + 63) / 64 * 64;
}

}  // namespace

void register_attention(KernelTable& t) {
  t[Op::sdpa] = sdpa_forward;
  t[Op::sdpa_backward] = sdpa_backward;
  t.ws[static_cast<int>(Op::sdpa)] = sdpa_workspace<false>;
  t.ws[static_cast<int>(Op::sdpa_backward)] = sdpa_workspace<true>;
}

}  // namespace lj::cpu
