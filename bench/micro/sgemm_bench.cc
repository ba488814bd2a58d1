// The in-tree AVX-512 GEMM (backends/cpu/sgemm_avx512.h) against oneDNN's dnnl_sgemm on the
// shapes the `small` (B8 T256) and wide (bench/speed/wide, B4 T256) training steps run, each
// shape registered twice in a row (onednn, then ljperf) so both see the same load. Process CPU
// time, so a 2-thread call counts both threads; GFLOP/s per CPU second is the `GFLOPs_cpu`
// counter. The kernel-selection logic (gemm.cc) is not involved: both sides are called directly.
//   OMP_NUM_THREADS=1 build/micro_bench --benchmark_filter=sgemm/
//   bench/micro/sgemm_ab.sh  (rounds, 1 and 2 threads, ratios)
#include <benchmark/benchmark.h>
#include <dnnl.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/sgemm_avx512.h"
#include "backends/cpu/sgemm_avx512_kernels.h"
#include "bench_util.h"

namespace lj::bench {
namespace {

struct GemmShape {
  const char* name;
  bool ta, tb;
  int64_t m, n, k;
  float beta;
};

// small: hidden 288, FFN 768, kv 96, 2048 tokens; the loss's per-block GEMMs (256 rows, 512
// vocabulary columns). wide: hidden 1024, FFN 2816, kv 256, 1024 tokens.
constexpr GemmShape kShapes[] = {
    {"small_qo_fwd", false, true, 2048, 288, 288, 0},
    {"small_kv_fwd", false, true, 2048, 96, 288, 0},
    {"small_up_fwd", false, true, 2048, 768, 288, 0},
    {"small_down_fwd", false, true, 2048, 288, 768, 0},
    {"small_up_dx", false, false, 2048, 288, 768, 0},
    {"small_down_dx", false, false, 2048, 768, 288, 0},
    {"small_qo_dx", false, false, 2048, 288, 288, 0},
    {"small_up_dw", true, false, 768, 288, 2048, 0},
    {"small_down_dw", true, false, 288, 768, 2048, 0},
    {"small_qo_dw", true, false, 288, 288, 2048, 0},
    {"small_kv_dw", true, false, 96, 288, 2048, 0},
    {"lce_logits", false, true, 256, 512, 288, 0},
    {"lce_dw", true, false, 512, 288, 256, 1},
    {"lce_dx", false, false, 256, 288, 512, 1},
    {"wide_q_fwd", false, true, 1024, 1024, 1024, 0},
    {"wide_up_fwd", false, true, 1024, 2816, 1024, 0},
    {"wide_down_fwd", false, true, 1024, 1024, 2816, 0},
    {"wide_up_dx", false, false, 1024, 1024, 2816, 0},
    {"wide_up_dw", true, false, 2816, 1024, 1024, 0},
    {"wide_down_dw", true, false, 1024, 2816, 1024, 0},
    {"wide_lce_logits", false, true, 256, 512, 1024, 0},
    {"wide_lce_dw", true, false, 512, 1024, 256, 1},
    {"wide_lce_dx", false, false, 256, 1024, 512, 1},
};

// LJ_SGEMM_KC / _MC / _NC override the host's blocking (for tuning; unset: the host's).
cpu::SgemmBlocking blocking_from_env() {
  cpu::SgemmBlocking b = cpu::sgemm_avx512_blocking();
  if (const char* v = std::getenv("LJ_SGEMM_KC")) b.kc = std::atoll(v);
  if (const char* v = std::getenv("LJ_SGEMM_MC")) b.mc = std::atoll(v);
  if (const char* v = std::getenv("LJ_SGEMM_NC")) b.nc = std::atoll(v);
  return b;
}

void BM_sgemm(benchmark::State& state, GemmShape s, bool ours) {
  if (ours && !cpu::sgemm_avx512_available()) {
    state.SkipWithError("no AVX-512F on this CPU");
    return;
  }
  const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  std::vector<float> a = filled(static_cast<size_t>(s.m * s.k), 1);
  std::vector<float> b = filled(static_cast<size_t>(s.k * s.n), 2);
  std::vector<float> c = filled(static_cast<size_t>(s.m * s.n), 3);
  const cpu::SgemmBlocking blk = blocking_from_env();
  for (auto _ : state) {
    if (ours) {
      cpu::sgemm_avx512(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, s.beta,
                        c.data(), s.n, &blk);
    } else {
      dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(),
                 ldb, s.beta, c.data(), s.n);
    }
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) *
                       static_cast<double>(s.k) * static_cast<double>(state.iterations());
  state.counters["GFLOPs_cpu"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.counters["threads"] = bench_threads();
}

// The 14 x 32 microkernel alone on panels that stay in L1 (kc = range(0)): its ceiling.
void BM_sgemm_microkernel(benchmark::State& state) {
  if (!cpu::sgemm_avx512_available()) {
    state.SkipWithError("no AVX-512F on this CPU");
    return;
  }
  using cpu::sgemm_detail::kMr;
  using cpu::sgemm_detail::kNr;
  const int64_t kc = state.range(0);
  std::vector<float> a = filled(static_cast<size_t>(kMr * kc), 1);
  std::vector<float> b = filled(static_cast<size_t>(kNr * kc), 2);
  std::vector<float> c = filled(static_cast<size_t>(kMr * kNr), 3);
  auto* ap = static_cast<float*>(std::aligned_alloc(64, cpu::sgemm_detail::kAStride * kMr * 4));
  auto* bp = static_cast<float*>(std::aligned_alloc(64, b.size() * 4 + 64));
  cpu::sgemm_detail::pack_a(false, a.data(), kc, 0, 0, kMr, kc, ap);
  cpu::sgemm_detail::pack_b(false, b.data(), kNr, 0, 0, kc, kNr, bp);
  for (auto _ : state) {
    for (int r = 0; r < 64; ++r) {
      cpu::sgemm_detail::micro_tile(true, kMr, kNr, kc, ap, bp, c.data(), kNr, 1.0f, 1.0f);
    }
    benchmark::ClobberMemory();
  }
  std::free(ap);
  std::free(bp);
  const double flops =
      2.0 * kMr * kNr * static_cast<double>(kc) * 64.0 * static_cast<double>(state.iterations());
  state.counters["GFLOPs_cpu"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_sgemm_microkernel)
    ->Arg(96)
    ->Arg(144)
    ->Arg(288)
    ->Arg(384)
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMicrosecond);

const bool kRegistered = [] {
  for (const GemmShape& s : kShapes) {
    for (const bool ours : {false, true}) {
      const std::string name = std::string("sgemm/") + (ours ? "ljperf/" : "onednn/") + s.name;
      benchmark::RegisterBenchmark(name.c_str(), BM_sgemm, s, ours)
          ->MeasureProcessCPUTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace lj::bench
