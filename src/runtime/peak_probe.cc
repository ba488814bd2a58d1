#include "runtime/peak_probe.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "core/units.h"

namespace lj {
namespace {

// One thread's loop: `iters` rounds of kPeakChains independent FMAs; returns FLOPs done. The
// accumulators converge (a·b + c with |b| < 1), so no value overflows or goes denormal, and the
// result is summed into `sink` so the compiler cannot drop the loop.
double fma_loop_f32(int64_t iters, float* sink) {
#if defined(__AVX512F__)
  constexpr int kLanes = 16;
  __m512 acc[kPeakChains];
  for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm512_set1_ps(0.001f * static_cast<float>(c));
  const __m512 b = _mm512_set1_ps(0.999f), add = _mm512_set1_ps(1e-3f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], b, add);
  }
  __m512 s = acc[0];
  for (int c = 1; c < kPeakChains; ++c) s = _mm512_add_ps(s, acc[c]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  for (float v : out) *sink += v;
#elif defined(__AVX2__) && defined(__FMA__)
  constexpr int kLanes = 8;
  __m256 acc[kPeakChains];
  for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm256_set1_ps(0.001f * static_cast<float>(c));
  const __m256 b = _mm256_set1_ps(0.999f), add = _mm256_set1_ps(1e-3f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], b, add);
  }
  alignas(32) float out[8];
  __m256 s = acc[0];
  for (int c = 1; c < kPeakChains; ++c) s = _mm256_add_ps(s, acc[c]);
  _mm256_store_ps(out, s);
  for (float v : out) *sink += v;
#else
  constexpr int kLanes = 1;
  float acc[kPeakChains];
  for (int c = 0; c < kPeakChains; ++c) acc[c] = 0.001f * static_cast<float>(c);
  for (int64_t i = 0; i < iters; ++i) {
    for (int c = 0; c < kPeakChains; ++c) acc[c] = acc[c] * 0.999f + 1e-3f;
  }
  for (float v : acc) *sink += v;
#endif
  return 2.0 * kLanes * kPeakChains * static_cast<double>(iters);
}

#if defined(__AVX512BF16__)
// vdpbf16ps: each of 16 f32 lanes accumulates the dot product of two bf16 pairs, 4 FLOPs per
// lane (2 multiplies, 2 adds), 64 per instruction. Inputs are bf16 values near 1 and 1e-3.
double fma_loop_bf16(int64_t iters, float* sink) {
  __m512 acc[kPeakChains];
  for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm512_setzero_ps();
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.5f));
  for (int64_t i = 0; i < iters; ++i) {
    for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], x, y);
  }
  __m512 s = acc[0];
  for (int c = 1; c < kPeakChains; ++c) s = _mm512_add_ps(s, acc[c]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  for (float v : out) *sink += v;
  return 64.0 * kPeakChains * static_cast<double>(iters);
}
#endif

using Loop = double (*)(int64_t, float*);

volatile float g_sink = 0;  // where the loops' results go, so that they are not optimised away

struct Round {
  double flops = 0;    // done, over all threads
  double seconds = 0;  // wall time of the parallel region
};

// `loop` on `threads` threads, `iters` rounds each, timed as one parallel region.
Round run_parallel(Loop loop, int threads, int64_t iters) {
  Round r;
  double flops = 0;
  float sink = 0;
  const double t0 = now_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : flops, sink)
  { flops += loop(iters, &sink); }
  r.seconds = now_seconds() - t0;
  r.flops = flops;
  g_sink = sink;
  return r;
}

}  // namespace

bool peak_probe_supports(DType dtype) {
  if (dtype == DType::f32) return true;
#if defined(__AVX512BF16__)
  if (dtype == DType::bf16) return __builtin_cpu_supports("avx512bf16");
#endif
  return false;
}

StatusOr<PeakMeasurement> measure_peak_flops(DType dtype, int threads, double seconds) {
  if (!peak_probe_supports(dtype)) {
    return unimplemented(std::string("no peak probe for ") + dtype_name(dtype) + " on this host",
                         "this build or CPU has no bf16 dot-product instructions (AVX512_BF16)");
  }
  PeakMeasurement m;
  m.dtype = dtype;
  m.threads = threads > 0 ? threads : omp_get_num_procs();
  Loop loop = fma_loop_f32;
#if defined(__AVX512F__)
  m.isa = "avx512 fma";
#elif defined(__AVX2__) && defined(__FMA__)
  m.isa = "avx2 fma";
#else
  m.isa = "scalar";
#endif
#if defined(__AVX512BF16__)
  if (dtype == DType::bf16) {
    loop = fma_loop_bf16;
    m.isa = "avx512_bf16 dot";
  }
#endif
  const double t0 = now_seconds();
  // Size a round: double the work until one takes 10 ms (thread start-up and clock ramp-up are
  // then small beside it), then scale it so three rounds fill about `seconds`.
  int64_t iters = 1024;
  Round r = run_parallel(loop, m.threads, iters);
  while (r.seconds < 0.01 && iters < (int64_t{1} << 40)) {
    iters *= 2;
    r = run_parallel(loop, m.threads, iters);
  }
  const double scale = std::max(1.0, seconds / 3.0 / r.seconds);
  iters = static_cast<int64_t>(static_cast<double>(iters) * scale);
  for (int k = 0; k < 3; ++k) {
    r = run_parallel(loop, m.threads, iters);
    if (r.seconds > 0) m.flops = std::max(m.flops, r.flops / r.seconds);
  }
  m.seconds = now_seconds() - t0;
  return m;
}

}  // namespace lj
