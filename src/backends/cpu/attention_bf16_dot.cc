// The bf16 dot-product tile products of the CPU attention (attention_tiles.h). Every function
// below the target pragma is compiled for AVX-512 with BF16 whatever the build's -march, so it
// runs only where bf16_dot_available() is true.
//
// Packed layouts (uint32 words, each a pair of bf16 along k: the low half k = 2p, the high half
// k = 2p + 1, a missing k = 2p + 1 past the end 0):
//   B: bp[p * nv + j] for column j of n, nv = n rounded up to 16 (columns past n are 0).
//   A: rows (cs_a == 1): ap[i * kv + p], kv = the pair count rounded up to 16;
//      columns (rs_a == 1, a transposed operand): ap[p * mv + i], mv = m rounded up to 16: B's
//      layout of the source read as (k, m) with row stride cs_a, packed by pack_b.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "backends/cpu/attention_tiles.h"
#include "core/check.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512bf16,fma,avx2"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512bf16,fma,avx2")
#endif

namespace lj::cpu::attn {
namespace {

// The all-lanes mask of the maskz_ forms below: GCC 12's plain forms pass an undefined vector,
// which -Wmaybe-uninitialized flags under a target pragma (as in sgemm_avx512_kernels.cc).
constexpr __mmask16 kAll = 0xFFFF;

__mmask16 low_mask(int n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF)
                 : static_cast<__mmask16>((1u << static_cast<unsigned>(n > 0 ? n : 0)) - 1u);
}

// The 16 words pairing lo[j] (low half) with hi[j] (high half), each rounded to bf16.
inline __m512i pair16(__m512 lo, __m512 hi) {
  const __m512i l = _mm512_maskz_cvtepu16_epi32(kAll, (__m256i)_mm512_cvtneps_pbh(lo));
  const __m512i h = _mm512_maskz_cvtepu16_epi32(kAll, (__m256i)_mm512_cvtneps_pbh(hi));
  return _mm512_or_si512(l, _mm512_maskz_slli_epi32(kAll, h, 16));
}

// Pairs rows r0 and r1 (r1 null: zeros) of n floats into nv words at dst.
void pair_rows(const float* r0, const float* r1, int n, int nv, uint32_t* dst) {
  for (int j = 0; j < nv; j += 16) {
    const __mmask16 m = low_mask(n - j);
    const __m512 lo = _mm512_maskz_loadu_ps(m, r0 + j);
    const __m512 hi = r1 ? _mm512_maskz_loadu_ps(m, r1 + j) : _mm512_setzero_ps();
    _mm512_storeu_si512(dst + j, pair16(lo, hi));
  }
}

// b (k, n) row-major -> bp.
void pack_b(int k, int n, const float* b, std::ptrdiff_t ldb, int nv, uint32_t* bp) {
  for (int p = 0; 2 * p < k; ++p) {
    const float* r0 = b + 2 * p * ldb;
    pair_rows(r0, 2 * p + 1 < k ? r0 + ldb : nullptr, n, nv, bp + p * nv);
  }
}

// a's rows (k contiguous): consecutive k are already pairs, so each 32 floats of a row round into
// 16 words in order.
void pack_a_rows(int m, int k, const float* a, std::ptrdiff_t rs_a, int kv, uint32_t* ap) {
  for (int i = 0; i < m; ++i) {
    const float* row = a + i * rs_a;
    uint32_t* dst = ap + i * kv;
    for (int kk = 0; kk < 2 * kv; kk += 32) {
      const __m512 lo = _mm512_maskz_loadu_ps(low_mask(k - kk), row + kk);
      const __m512 hi = _mm512_maskz_loadu_ps(low_mask(k - kk - 16), row + kk + 16);
      _mm512_storeu_si512(dst + kk / 2, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

// c (MR rows, NV vectors of 16 columns, the last `last` lanes wide) [+]= the pairs [p0, p1) of
// A (row i's pair p at a[i * ars + p * acs]) times bp (row stride nv).
template <int MR, int NV>
inline void micro_kernel(int p0, int p1, const uint32_t* a, std::ptrdiff_t ars, std::ptrdiff_t acs,
                         const uint32_t* bp, int nv, float* c, std::ptrdiff_t ldc, __mmask16 last,
                         bool accumulate) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  for (int p = p0; p < p1; ++p) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(bp + p * nv + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i * ars + p * acs]));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* ci = c + i * ldc + 16 * v;
      const __mmask16 m = v == NV - 1 ? last : kAll;
      const __m512 r =
          accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, ci), acc[i][v]) : acc[i][v];
      _mm512_mask_storeu_ps(ci, m, r);
    }
  }
}

// micro_kernel<mr, NV> for mr in 1..kMr.
template <int NV>
void rows_kernel(int mr, int p0, int p1, const uint32_t* a, std::ptrdiff_t ars, std::ptrdiff_t acs,
                 const uint32_t* bp, int nv, float* c, std::ptrdiff_t ldc, __mmask16 last,
                 bool accumulate) {
  using Fn = void (*)(int, int, const uint32_t*, std::ptrdiff_t, std::ptrdiff_t, const uint32_t*,
                      int, float*, std::ptrdiff_t, __mmask16, bool);
  static constexpr Fn kByRows[kMr] = {micro_kernel<1, NV>, micro_kernel<2, NV>,
                                      micro_kernel<3, NV>, micro_kernel<4, NV>,
                                      micro_kernel<5, NV>, micro_kernel<6, NV>};
  kByRows[mr - 1](p0, p1, a, ars, acs, bp, nv, c, ldc, last, accumulate);
}

struct Buffers {
  std::vector<uint32_t> a, b;
};
Buffers& buffers() {
  thread_local Buffers b;
  return b;
}

uint32_t* at_least(std::vector<uint32_t>& v, size_t words) {
  if (v.size() < words) v.resize(words);
  return v.data();
}

}  // namespace

void tile_gemm_bf16_dot(int m, int n, int k, const float* a, std::ptrdiff_t rs_a,
                        std::ptrdiff_t cs_a, const float* b, std::ptrdiff_t ldb, float* c,
                        std::ptrdiff_t ldc, bool accumulate, Tri tri) {
  LJ_CHECK(cs_a == 1 || rs_a == 1) << "tile_gemm_bf16_dot: a must have rows or columns contiguous";
  if (m <= 0 || n <= 0) return;
  const int pairs = (k + 1) / 2;
  const int nv = (n + 15) / 16 * 16, kv = (pairs + 15) / 16 * 16, mv = (m + 15) / 16 * 16;
  Buffers& buf = buffers();
  uint32_t* bp = at_least(buf.b, static_cast<size_t>(std::max(pairs, 1)) * nv);
  pack_b(k, n, b, ldb, nv, bp);
  const bool rows = cs_a == 1;
  uint32_t* ap = at_least(
      buf.a, rows ? static_cast<size_t>(m) * kv : static_cast<size_t>(std::max(pairs, 1)) * mv);
  if (rows) {
    pack_a_rows(m, k, a, rs_a, kv, ap);
  } else {
    pack_b(k, m, a, cs_a, mv, ap);
  }
  const std::ptrdiff_t ars = rows ? kv : 1, acs = rows ? 1 : mv;
  for (int j = 0; j < n; j += 32) {
    const int cols = std::min(32, n - j);
    const __mmask16 last = low_mask(cols > 16 ? cols - 16 : cols);
    for (int i = 0; i < m;) {
      const int mr = block_rows(m - i);
      const int i0 = i, row_end = i + mr;
      i = row_end;
      if ((tri == Tri::out_upper && j > row_end - 1) || (tri == Tri::out_lower && i0 > j + 31)) {
        continue;
      }
      // The k range the rows need, widened to whole pairs: the entries it adds are zero (tri's
      // promise) or past k (packed as 0).
      int k0 = 0, k1 = k;
      if (tri == Tri::k_upto_row) k1 = std::min(k, row_end);
      if (tri == Tri::k_from_row) k0 = std::min(k, i0);
      const int p0 = k0 / 2, p1 = (k1 + 1) / 2;
      const uint32_t* ai = ap + i0 * ars;
      float* ci = c + i0 * ldc + j;
      if (cols > 16) {
        rows_kernel<2>(mr, p0, p1, ai, ars, acs, bp + j, nv, ci, ldc, last, accumulate);
      } else {
        rows_kernel<1>(mr, p0, p1, ai, ars, acs, bp + j, nv, ci, ldc, last, accumulate);
      }
    }
  }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace {
std::atomic<bool>& dot_enabled() {
  static std::atomic<bool> on{true};
  return on;
}
}  // namespace

bool bf16_dot_available() {
  static const bool cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512bf16");
  return cpu && dot_enabled().load(std::memory_order_relaxed);
}

void set_bf16_dot_enabled(bool on) {
  dot_enabled().store(on, std::memory_order_relaxed);
}

}  // namespace lj::cpu::attn
