#include "backends/cpu/adamw_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace lj {

void adamw_update(const AdamWStepConstants& c, float* p, const float* g, float* m, float* v,
                  int64_t n, int threads, LowCopy low) {
  const float fb1 = c.beta1, fb2 = c.beta2, eps = c.eps, decay = c.decay;
  const float c1 = 1.0f - fb1, c2 = 1.0f - fb2;
  const float step_size = c.step_size, gs = c.grad_scale;
  // torch divides sqrt(v) by sqrt(1 - beta2^t); a multiply by its reciprocal (rounded once, from
  // f64) leaves one division and one square root per element. Those two are what the pass waits
  // on, not memory: on this project's hosts a sqrt and two divisions per element ran the pass at
  // 19-20 GB/s, one of each at 23 GB/s, none at 45 (bench/speed/RESULTS.md, session 8). The
  // result moves by at most an ulp or so of the denominator (adamw_test: UpdateIsTorchsFormula).
  const float inv_bc2 = static_cast<float>(1.0 / static_cast<double>(c.bc2_sqrt));
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
    LJ_CHECK(low.dtype == DType::f16) << "a 16-bit copy is bf16 or f16";
    uint16_t* __restrict lr = low.data;
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 65536)
    for (int64_t k = 0; k < n; ++k) lr[k] = f32_to_f16(update(k));
  }
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
