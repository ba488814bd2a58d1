#include "runtime/peak_probe.h"

#include <immintrin.h>
#include <omp.h>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
// AMX: tdpbf16ps multiplies a (16, 32) bf16 tile by a (32, 16) one into a (16, 16) f32 tile,
// 16·16·32 multiply-adds = 16384 FLOPs an instruction. Four accumulator tiles (tmm0-3) hide the
// instruction's latency; tmm4-6 hold the operands. Linux hands out AMX state on request only.
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

bool amx_permitted() {
  static const bool ok = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return ok;
}

struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

double amx_loop_bf16(int64_t iters, float* sink) {
  TileConfig cfg;
  for (int t = 0; t < 7; ++t) {
    cfg.colsb[t] = 64;  // 16 f32 or 32 bf16 a row
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  alignas(64) uint16_t ops[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) ops[i] = f32_to_bf16(i % 2 ? 1e-3f : 0.5f);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ops, 64);
  _tile_loadd(5, ops, 64);
  _tile_loadd(6, ops, 64);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 6);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 6, 5);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  for (float v : out) *sink += v;
  return 4.0 * 2 * 16 * 16 * 32 * static_cast<double>(iters);
}
#endif

using Loop = double (*)(int64_t, float*);

volatile float g_sink = 0;  // where the loops' results go, so that they are not optimised away

struct Round {
  double flops = 0;    // done, over all threads
  double seconds = 0;  // wall time of the parallel region
  // The least CPU time any thread got during the round. When it is (nearly) the wall time,
  // every thread was on a core for the whole round, so they all ran at once, undisturbed.
  double min_thread_cpu_seconds = 0;
  // Σ over threads of (FLOPs / CPU time): the rate while each thread ran, whether or not they
  // ran at the same time (the fallback on a host too busy for an undisturbed round).
  double cpu_rate = 0;
  bool undisturbed() const { return seconds > 0 && min_thread_cpu_seconds >= 0.95 * seconds; }
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// `loop` on `threads` threads, `iters` rounds each, timed as one parallel region.
Round run_parallel(Loop loop, int threads, int64_t iters) {
  Round r;
  double flops = 0, min_cpu = 1e30, cpu_rate = 0;
  float sink = 0;
  const double t0 = now_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : flops, sink, cpu_rate) \
    reduction(min : min_cpu)
  {
    const double c0 = thread_cpu_seconds();
    const double f = loop(iters, &sink);
    const double cpu = thread_cpu_seconds() - c0;
    flops += f;
    cpu_rate += cpu > 0 ? f / cpu : 0;
    min_cpu = std::min(min_cpu, cpu);
  }
  r.seconds = now_seconds() - t0;
  r.flops = flops;
  r.min_thread_cpu_seconds = min_cpu;
  r.cpu_rate = cpu_rate;
  g_sink = sink;
  return r;
}

}  // namespace

namespace {

// The widest bf16 path this build and host have: AMX tiles, else AVX512_BF16 dot products.
// oneDNN's bf16 GEMMs take the same path, so MFU divides by the right peak.
bool amx_bf16_available() {
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
  return __builtin_cpu_supports("amx-bf16") && amx_permitted();
#else
  return false;
#endif
}

}  // namespace

bool peak_probe_supports(DType dtype) {
  if (dtype == DType::f32) return true;
#if defined(__AVX512BF16__)
  if (dtype == DType::bf16) return amx_bf16_available() || __builtin_cpu_supports("avx512bf16");
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
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
  if (dtype == DType::bf16 && amx_bf16_available()) {
    loop = amx_loop_bf16;
    m.isa = "amx bf16";
  }
#endif
  const double t0 = now_seconds();
  // Short rounds, many of them: on a busy host (other processes on the same cores) a round is
  // often descheduled, and a descheduled round measures the scheduler. The peak is the best
  // round in which every thread held a core throughout (Round::undisturbed). Rounds are sized by
  // CPU time, which a busy host does not inflate: double the work until each thread computes for
  // 1 ms, then aim at kRoundSeconds.
  constexpr double kRoundSeconds = 0.004;
  int64_t iters = 256;
  Round r = run_parallel(loop, m.threads, iters);
  while (r.min_thread_cpu_seconds < 0.001 && iters < (int64_t{1} << 40)) {
    iters *= 2;
    r = run_parallel(loop, m.threads, iters);
  }
  iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * kRoundSeconds /
                                                    std::max(r.min_thread_cpu_seconds, 1e-6)));
  double best_cpu_rate = 0;
  while (true) {
    r = run_parallel(loop, m.threads, iters);
    ++m.rounds;
    best_cpu_rate = std::max(best_cpu_rate, r.cpu_rate);
    if (r.undisturbed()) {
      ++m.rounds_undisturbed;
      m.flops = std::max(m.flops, r.flops / r.seconds);
    }
    const double spent = now_seconds() - t0;
    if (spent >= seconds && m.rounds_undisturbed >= 5) break;
    if (spent >= 4 * seconds) break;  // a host this busy: say so rather than wait
  }
  // No undisturbed round: the threads' rates while they ran, summed. Exact when the threads
  // have cores of their own; too high when they are hyperthreads of one core.
  if (m.rounds_undisturbed == 0) m.flops = best_cpu_rate;
  m.seconds = now_seconds() - t0;
  return m;
}

}  // namespace lj
