// AdamW's update over `small`'s 23.7M parameters (train/adamw.h), clipped: the fused pass (the
// clip scale applied as each gradient is read) against the two passes it replaced (scale the
// gradients in place, then update). Reports GB/s of the bytes each variant must move: 28 bytes
// per element for the fused pass (read p, g, m, v; write p, m, v), 36 for the two passes, 30 with
// a bf16 copy.
// Run: OMP_NUM_THREADS=1 build/micro_bench --benchmark_filter=adamw
#include <benchmark/benchmark.h>

#include <vector>

#include "bench_util.h"
#include "train/adamw.h"

namespace lj::bench {
namespace {

constexpr int64_t kParams = 23'700'000;

void run_adamw(benchmark::State& state, bool fused, bool bf16_copy = false) {
  std::vector<float> p(kParams, 0.5f), g(kParams, 0.01f), m(kParams, 0.0f), v(kParams, 0.0f);
  std::vector<uint16_t> low(bf16_copy ? kParams : 0);
  AdamWStepConstants c;
  c.beta1 = 0.9f;
  c.beta2 = 0.95f;
  c.eps = 1e-8f;
  c.step_size = 3e-3f;
  c.bc2_sqrt = 0.2f;
  c.decay = 0.99997f;
  const float scale = 0.999f;  // close to 1: the gradients stay in range over the iterations
  const int threads = bench_threads();
  for (auto _ : state) {
    if (fused) {
      c.grad_scale = scale;
    } else {
      float* gp = g.data();
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t k = 0; k < kParams; ++k) gp[k] *= scale;
      c.grad_scale = 1.0f;
    }
    adamw_update(c, p.data(), g.data(), m.data(), v.data(), kParams, threads,
                 LowCopy{bf16_copy ? low.data() : nullptr, DType::bf16});
    benchmark::ClobberMemory();
  }
  const double bytes =
      ((fused ? 28.0 : 36.0) + (bf16_copy ? 2.0 : 0.0)) * static_cast<double>(kParams);
  state.counters["GB/s"] = benchmark::Counter(bytes * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
  state.counters["threads"] = threads;
}

void BM_adamw_fused(benchmark::State& state) {
  run_adamw(state, true);
}
// Mixed precision: the same pass also writes the bf16 copy of each weight (2 more bytes).
void BM_adamw_fused_bf16_copy(benchmark::State& state) {
  run_adamw(state, true, true);
}
void BM_adamw_two_passes(benchmark::State& state) {
  run_adamw(state, false);
}
// The gradient norm before the update (accumulate_squares: f64 sums in fixed chunks): 4 bytes
// read per element.
void BM_adamw_grad_norm(benchmark::State& state) {
  std::vector<float> g(kParams, 0.01f);
  const int threads = bench_threads();
  double total = 0;
  for (auto _ : state) {
    double sum = 0;
    accumulate_squares(g.data(), kParams, threads, &sum);
    total += sum;
    benchmark::DoNotOptimize(total);
  }
  state.counters["GB/s"] = benchmark::Counter(
      4.0 * static_cast<double>(kParams) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
  state.counters["threads"] = threads;
}

BENCHMARK(BM_adamw_grad_norm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_adamw_fused)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_adamw_fused_bf16_copy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_adamw_two_passes)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lj::bench
