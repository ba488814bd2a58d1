// Packing and the 14 x 32 microkernel of the in-tree f32 GEMM, in AVX-512F intrinsics. Every
// function below the target pragma is compiled for AVX-512F; the library headers are included
// before it, so no inline function shared with other files gets AVX-512 code.
#include "backends/cpu/sgemm_avx512_kernels.h"

#include <immintrin.h>

#include <array>
#include <cstring>
#include <utility>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,fma,avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,fma,avx2")
#endif

namespace lj::cpu::sgemm_detail {
namespace {

__mmask16 low_mask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF)
                 : static_cast<__mmask16>((1u << static_cast<unsigned>(n > 0 ? n : 0)) - 1u);
}

// The all-lanes masks of the maskz_ forms below: GCC 12's plain forms pass _mm512_undefined_ps(),
// which -Wmaybe-uninitialized flags under a target pragma; the maskz forms compile the same.
constexpr __mmask16 kAll = 0xFFFF;
constexpr __mmask8 kAll8 = 0xFF;

// The lanes of mask m (low bits set, as low_mask makes them) of p as f32, the others 0. bf16
// sources widen exactly (the bf16 bits become an f32's high half). Partial bf16 loads copy through
// a stack buffer: a masked 16-bit load needs AVX512BW, which these functions do not assume.
inline __m512 load16(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
inline __m512 load16(const uint16_t* p, __mmask16 m) {
  __m256i h;
  if (m == kAll) {
    h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  } else {
    alignas(32) uint16_t tmp[16] = {};
    const int n = __builtin_popcount(static_cast<unsigned>(m));
    for (int i = 0; i < n; ++i) tmp[i] = p[i];
    h = _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp));
  }
  return _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, h), 16));
}

// r[j] becomes column j of the 16 x 16 matrix whose rows are r[0..15].
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_ps(kAll, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(kAll, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_castpd_ps(
        _mm512_maskz_unpacklo_pd(kAll8, _mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(
        _mm512_maskz_unpackhi_pd(kAll8, _mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(
        _mm512_maskz_unpacklo_pd(kAll8, _mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(
        _mm512_maskz_unpackhi_pd(kAll8, _mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  for (int h = 0; h < 16; h += 8) {
    for (int j = 0; j < 4; ++j) {
      t[h + j] = _mm512_maskz_shuffle_f32x4(kAll, r[h + j], r[h + j + 4], 0x88);
      t[h + j + 4] = _mm512_maskz_shuffle_f32x4(kAll, r[h + j], r[h + j + 4], 0xdd);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_maskz_shuffle_f32x4(kAll, t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_maskz_shuffle_f32x4(kAll, t[j], t[j + 8], 0xdd);
  }
}

// Transposing pack: `rows` source rows (src + r * ld, r < rows <= 16), each contiguous in k, for
// k = 0..kc-1, written k-major: dst[k * stride + r] for r < min(stride, 16). Rows past `rows`
// read as 0.
template <class T>
void pack_rows_kmajor(const T* src, int64_t ld, int rows, int64_t kc, float* dst, int64_t stride) {
  const __mmask16 wm = low_mask(stride);
  __m512 r[16];
  for (int64_t p = 0; p < kc; p += 16) {
    const int64_t kn = kc - p < 16 ? kc - p : 16;
    const __mmask16 km = low_mask(kn);
    for (int i = 0; i < 16; ++i) {
      r[i] = i < rows ? load16(src + i * ld + p, km) : _mm512_setzero_ps();
    }
    transpose16(r);
    for (int64_t t = 0; t < kn; ++t) _mm512_mask_storeu_ps(dst + (p + t) * stride, wm, r[t]);
  }
}

// One C tile: MR rows (compile-time) by up to 32 columns (masks m0, m1). ROWS: the A panel is
// row-major (row i at i * kAStride, so every broadcast address is the k pointer plus a constant),
// else k-major. STRIDED: A is read where it lies, rows lda apart (ROWS) or k steps lda apart.
template <int MR, bool ROWS, bool STRIDED>
void tile(int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b, float* c,
          int64_t ldc, float alpha, float beta, __mmask16 m0, __mmask16 m1) {
  const int64_t row_step = STRIDED ? lda : kAStride;
  const int64_t k_step = ROWS ? 1 : (STRIDED ? lda : kMr);
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    c0[i] = _mm512_setzero_ps();
    c1[i] = _mm512_setzero_ps();
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(b);
    const __m512 b1 = _mm512_load_ps(b + 16);
    if (!ROWS) _mm_prefetch(reinterpret_cast<const char*>(a + 8 * k_step), _MM_HINT_T0);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(a[ROWS ? i * row_step : i]);
      c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
    }
    a += k_step;
    b += kNr;
  }
  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
    __m512 r0 = alpha == 1.0f ? c0[i] : _mm512_mul_ps(va, c0[i]);
    __m512 r1 = alpha == 1.0f ? c1[i] : _mm512_mul_ps(va, c1[i]);
    if (beta == 1.0f) {
      r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, ci));
      r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, ci + 16));
    } else if (beta != 0.0f) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, ci), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, ci + 16), r1);
    }
    _mm512_mask_storeu_ps(ci, m0, r0);
    _mm512_mask_storeu_ps(ci + 16, m1, r1);
  }
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, float, float,
                        __mmask16, __mmask16);
template <bool ROWS, bool STRIDED, int... R>
constexpr std::array<TileFn, sizeof...(R)> tiles(std::integer_sequence<int, R...>) {
  return {tile<R + 1, ROWS, STRIDED>...};
}
constexpr auto kTilesKMajor = tiles<false, false>(std::make_integer_sequence<int, kMr>{});
constexpr auto kTilesRows = tiles<true, false>(std::make_integer_sequence<int, kMr>{});
constexpr auto kTilesKMajorStrided = tiles<false, true>(std::make_integer_sequence<int, kMr>{});
constexpr auto kTilesRowsStrided = tiles<true, true>(std::make_integer_sequence<int, kMr>{});

template <class T>
void pack_a_any(bool ta, const T* a, int64_t lda, int64_t i0, int64_t p0, int64_t mc, int64_t kc,
                float* dst) {
  if (!ta) {  // row-major panels: a copy of each row
    const __mmask16 tail = low_mask(kc % 16);
    for (int64_t i = 0; i < mc; ++i) {
      const T* src = a + (i0 + i) * lda + p0;
      float* d = dst + (i / kMr) * kMr * kAStride + (i % kMr) * kAStride;
      int64_t p = 0;
      for (; p + 16 <= kc; p += 16) _mm512_storeu_ps(d + p, load16(src + p, kAll));
      if (p < kc) _mm512_mask_storeu_ps(d + p, tail, load16(src + p, tail));
    }
    return;
  }
  // Row p of the block is contiguous in the source: read it once, left to right, writing kMr
  // values into each panel (reading panel by panel instead walks kc rows per panel: a TLB miss
  // per load when lda is large).
  const int64_t panels = (mc + kMr - 1) / kMr;
  const __mmask16 full = low_mask(kMr), last = low_mask(mc - (panels - 1) * kMr);
  for (int64_t p = 0; p < kc; ++p) {
    const T* src = a + (p0 + p) * lda + i0;
    float* d = dst + p * kMr;
    for (int64_t q = 0; q + 1 < panels; ++q) {
      _mm512_mask_storeu_ps(d + q * kc * kMr, full, load16(src + q * kMr, full));
    }
    _mm512_mask_storeu_ps(d + (panels - 1) * kc * kMr, full,
                          load16(src + (panels - 1) * kMr, last));
  }
}

template <class T>
void pack_b_any(bool tb, const T* b, int64_t ldb, int64_t p0, int64_t j0, int64_t kc, int64_t nc,
                float* dst) {
  for (int64_t j = 0; tb && j < nc; j += kNr) {
    float* dst_j = dst + j * kc;
    const int64_t cols = nc - j < kNr ? nc - j : kNr;
    {
      const T* src = b + (j0 + j) * ldb + p0;
      const int lo = static_cast<int>(cols < 16 ? cols : 16);
      pack_rows_kmajor(src, ldb, lo, kc, dst_j, kNr);
      if (cols > 16) {
        pack_rows_kmajor(src + 16 * ldb, ldb, static_cast<int>(cols - 16), kc, dst_j + 16, kNr);
      } else {
        for (int64_t p = 0; p < kc; ++p) _mm512_store_ps(dst_j + p * kNr + 16, _mm512_setzero_ps());
      }
    }
  }
  if (tb) return;
  // Row by row of the source (contiguous), as in pack_a.
  const int64_t panels = (nc + kNr - 1) / kNr;
  const int64_t tail = nc - (panels - 1) * kNr;
  const __mmask16 t0 = low_mask(tail), t1 = low_mask(tail - 16);
  for (int64_t p = 0; p < kc; ++p) {
    const T* src = b + (p0 + p) * ldb + j0;
    float* d = dst + p * kNr;
    for (int64_t q = 0; q + 1 < panels; ++q) {
      _mm512_store_ps(d + q * kc * kNr, load16(src + q * kNr, kAll));
      _mm512_store_ps(d + q * kc * kNr + 16, load16(src + q * kNr + 16, kAll));
    }
    float* dl = d + (panels - 1) * kc * kNr;
    _mm512_store_ps(dl, load16(src + (panels - 1) * kNr, t0));
    _mm512_store_ps(dl + 16, load16(src + (panels - 1) * kNr + 16, t1));
  }
}

}  // namespace

void pack_a(bool ta, const float* a, int64_t lda, int64_t i0, int64_t p0, int64_t mc, int64_t kc,
            float* dst) {
  pack_a_any(ta, a, lda, i0, p0, mc, kc, dst);
}
void pack_a(bool ta, const uint16_t* a, int64_t lda, int64_t i0, int64_t p0, int64_t mc, int64_t kc,
            float* dst) {
  pack_a_any(ta, a, lda, i0, p0, mc, kc, dst);
}
void pack_a_rows_scaled(const float* a, int64_t lda, int64_t i0, int64_t p0, int64_t mc, int64_t kc,
                        const float* scale, float* dst) {
  const __mmask16 tail = low_mask(kc % 16);
  for (int64_t i = 0; i < mc; ++i) {
    const float* src = a + (i0 + i) * lda + p0;
    float* d = dst + (i / kMr) * kMr * kAStride + (i % kMr) * kAStride;
    int64_t p = 0;
    for (; p + 16 <= kc; p += 16) {
      _mm512_storeu_ps(d + p, _mm512_mul_ps(_mm512_loadu_ps(src + p), _mm512_loadu_ps(scale + p)));
    }
    if (p < kc) {
      _mm512_mask_storeu_ps(d + p, tail,
                            _mm512_maskz_mul_ps(tail, _mm512_maskz_loadu_ps(tail, src + p),
                                                _mm512_maskz_loadu_ps(tail, scale + p)));
    }
  }
}

void pack_b(bool tb, const float* b, int64_t ldb, int64_t p0, int64_t j0, int64_t kc, int64_t nc,
            float* dst) {
  pack_b_any(tb, b, ldb, p0, j0, kc, nc, dst);
}
void pack_b(bool tb, const uint16_t* b, int64_t ldb, int64_t p0, int64_t j0, int64_t kc, int64_t nc,
            float* dst) {
  pack_b_any(tb, b, ldb, p0, j0, kc, nc, dst);
}

void micro_tile(bool a_rows, int mr, int nr, int64_t kc, const float* a_panel, const float* b_panel,
                float* c, int64_t ldc, float alpha, float beta) {
  const TileFn f = a_rows ? kTilesRows[mr - 1] : kTilesKMajor[mr - 1];
  f(kc, a_panel, 0, b_panel, c, ldc, alpha, beta, low_mask(nr), low_mask(nr - 16));
}

void micro_tile_strided(bool a_rows, int mr, int nr, int64_t kc, const float* a, int64_t lda,
                        const float* b_panel, float* c, int64_t ldc, float alpha, float beta) {
  const TileFn f = a_rows ? kTilesRowsStrided[mr - 1] : kTilesKMajorStrided[mr - 1];
  f(kc, a, lda, b_panel, c, ldc, alpha, beta, low_mask(nr), low_mask(nr - 16));
}

}  // namespace lj::cpu::sgemm_detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
