#include "backends/cpu/adamw_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/check.h"

namespace lj {

namespace {

#if defined(__AVX512F__)
// 16 elements at a time, the last block masked, every element through the same instructions
// (so a slice of a tensor, as ZeRO's shards take, updates bitwise as the whole would).
// The division m / denom runs as a reciprocal: VRCP14PS (relative error below 2^-14) and one
// Newton step, r (2 - d r), which leaves it within about an ulp of 1 / d. The divider is what the
// pass waits on, not memory: on this project's hosts (2 threads, small's 23.7M parameters) a
// square root and two divisions per element ran at 19-20 GB/s, a square root and one division
// at 22-23, a square root and the reciprocal at 39-41, memory alone at 43-45
// (bench/archive/speed.md, session 8). An infinite denominator gives 0, as the division would.
// GCC 12's unmasked forms of sqrt, rcp14, the shifts and the 16-bit narrowing pass an undefined
// vector, which -Wmaybe-uninitialized flags; the all-lanes maskz forms compile the same.
constexpr __mmask16 kAll = 0xFFFF;

void adamw_avx512(const AdamWStepConstants& c, float inv_bc2, float* p, const float* g, float* m,
                  float* v, int64_t n, int threads, LowCopy low) {
  const __m512 b1 = _mm512_set1_ps(c.beta1), b2 = _mm512_set1_ps(c.beta2);
  const __m512 c1 = _mm512_set1_ps(1.0f - c.beta1), c2 = _mm512_set1_ps(1.0f - c.beta2);
  const __m512 gs = _mm512_set1_ps(c.grad_scale), decay = _mm512_set1_ps(c.decay);
  const __m512 step = _mm512_set1_ps(c.step_size), inv = _mm512_set1_ps(inv_bc2);
  const __m512 eps = _mm512_set1_ps(c.eps), two = _mm512_set1_ps(2.0f);
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  const int64_t blocks = (n + 15) / 16;
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t k = b * 16, left = n - k;
    const auto mask = static_cast<__mmask16>(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
    const __m512 gk = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, g + k), gs);
    const __m512 mk =
        _mm512_fmadd_ps(b1, _mm512_maskz_loadu_ps(mask, m + k), _mm512_mul_ps(c1, gk));
    const __m512 vk = _mm512_fmadd_ps(b2, _mm512_maskz_loadu_ps(mask, v + k),
                                      _mm512_mul_ps(_mm512_mul_ps(c2, gk), gk));
    _mm512_mask_storeu_ps(m + k, mask, mk);
    _mm512_mask_storeu_ps(v + k, mask, vk);
    // decay first, then the Adam step, as torch: p d - step m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    const __m512 d = _mm512_fmadd_ps(_mm512_maskz_sqrt_ps(kAll, vk), inv, eps);
    __m512 r = _mm512_maskz_rcp14_ps(kAll, d);
    r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, two));
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(d, inf, _CMP_EQ_OQ), _mm512_setzero_ps());
    const __m512 pk = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, p + k), decay);
    const __m512 pn = _mm512_fnmadd_ps(_mm512_mul_ps(step, mk), r, pk);
    _mm512_mask_storeu_ps(p + k, mask, pn);
    if (low.data == nullptr) continue;
    if (low.dtype == DType::bf16) {
      // round_to_bf16, 16 lanes: round to nearest even, a NaN kept quiet.
      const __m512i u = _mm512_castps_si512(pn);
      const __m512i odd =
          _mm512_and_si512(_mm512_maskz_srli_epi32(kAll, u, 16), _mm512_set1_epi32(1));
      const __m512i rounded = _mm512_maskz_srli_epi32(
          kAll, _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
      const __m512i quiet =
          _mm512_or_si512(_mm512_maskz_srli_epi32(kAll, u, 16), _mm512_set1_epi32(0x40));
      const __mmask16 nan = _mm512_cmpgt_epu32_mask(
          _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
      const __m512i bits = _mm512_mask_mov_epi32(rounded, nan, quiet);
      if (left >= 16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(low.data + k),
                            _mm512_maskz_cvtepi32_epi16(kAll, bits));
      } else {
        _mm512_mask_cvtepi32_storeu_epi16(low.data + k, mask, bits);
      }
      continue;
    }
    const int64_t cnt = std::min<int64_t>(16, left);
    for (int64_t l = 0; l < cnt; ++l) low.data[k + l] = f32_to_f16(p[k + l]);
  }
}
#endif

}  // namespace

void adamw_update(const AdamWStepConstants& c, float* p, const float* g, float* m, float* v,
                  int64_t n, int threads, LowCopy low) {
  LJ_CHECK(low.data == nullptr || low.dtype == DType::bf16 || low.dtype == DType::f16)
      << "a 16-bit copy is bf16 or f16";
  // torch divides sqrt(v) by sqrt(1 - beta2^t); here it is multiplied by the reciprocal, rounded
  // once from f64, which moves the denominator by at most an ulp or so (adamw_test:
  // UpdateIsTorchsFormula) and saves a division per element.
  const float inv_bc2 = static_cast<float>(1.0 / static_cast<double>(c.bc2_sqrt));
#if defined(__AVX512F__)
  adamw_avx512(c, inv_bc2, p, g, m, v, n, threads, low);
#else
  const float fb1 = c.beta1, fb2 = c.beta2, eps = c.eps, decay = c.decay;
  const float c1 = 1.0f - fb1, c2 = 1.0f - fb2;
  const float step_size = c.step_size, gs = c.grad_scale;
  float* __restrict pr = p;
  const float* __restrict gr = g;
  float* __restrict mr = m;
  float* __restrict vr = v;
  // One pass: each element's p, g, m, v are loaded once and p, m, v stored once; the arithmetic
  // is torch's, in its order (decay first, then the Adam step), but for inv_bc2 above.
  const auto update = [=](int64_t k) {
    const float gk = gr[k] * gs;
    const float mk = fb1 * mr[k] + c1 * gk;
    const float vk = fb2 * vr[k] + c2 * gk * gk;
    mr[k] = mk;
    vr[k] = vk;
    const float pk = pr[k] * decay;
    const float pn = pk - step_size * mk / (std::sqrt(vk) * inv_bc2 + eps);
    pr[k] = pn;
    return pn;
  };
  if (low.data == nullptr) {
#pragma omp parallel for simd schedule(static) num_threads(threads) if (n > 65536)
    for (int64_t k = 0; k < n; ++k) update(k);
  } else if (low.dtype == DType::bf16) {
    uint16_t* __restrict lr = low.data;
#pragma omp parallel for simd schedule(static) num_threads(threads) if (n > 65536)
    for (int64_t k = 0; k < n; ++k) lr[k] = round_to_bf16(update(k));
  } else {
    uint16_t* __restrict lr = low.data;
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 65536)
    for (int64_t k = 0; k < n; ++k) lr[k] = f32_to_f16(update(k));
  }
#endif
}

void accumulate_squares(const float* g, int64_t n, int threads, double* sum) {
  // Fixed chunks summed in order: the result does not depend on thread scheduling (an OpenMP
  // reduction clause combines partial sums in an unspecified order). Within a chunk, element k
  // goes to partial sum k % kLanes and the partial sums are combined pairwise at the end: kLanes
  // independent f64 chains (vectorised), not one chain of dependent adds, which ran at a quarter
  // of the memory's speed.
  constexpr int64_t kChunk = 16384;
  constexpr int kLanes = 32;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) num_threads(threads) if (chunks > 4)
  for (int64_t c = 0; c < chunks; ++c) {
    double acc[kLanes] = {};
    const int64_t begin = c * kChunk, end = std::min(n, (c + 1) * kChunk);
    int64_t k = begin;
    for (; k + kLanes <= end; k += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const auto x = static_cast<double>(g[k + l]);
        acc[l] += x * x;
      }
    }
    for (int l = 0; k < end; ++k, ++l) acc[l] += static_cast<double>(g[k]) * g[k];
    for (int width = kLanes / 2; width >= 1; width /= 2) {
      for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
    }
    partial[static_cast<size_t>(c)] = acc[0];
  }
  for (double s : partial) *sum += s;
}

}  // namespace lj
