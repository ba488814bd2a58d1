// matmul micro-benchmarks at a small Llama's linear-layer size: x (2048, 288) through a
// (768, 288) weight, forward and both backward GEMMs, each reporting GFLOP/s and the fraction of
// the fp32 peak (bench_util.h). Run: build/micro_bench --benchmark_filter=matmul
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/cpu.h"
#include "bench_util.h"

namespace lj::bench {
namespace {

// out = op(a) x op(b) through the CPU kernel table, timed.
void run_matmul(benchmark::State& state, std::vector<int64_t> a_dims, std::vector<int64_t> b_dims,
                std::vector<int64_t> out_dims, bool ta, bool tb, double flops) {
  OwnedTensor a(std::move(a_dims), 1), b(std::move(b_dims), 2), out(std::move(out_dims), 3);
  Node node;
  node.op = Op::matmul;
  node.attrs = Attrs{{"ta", ta}, {"tb", tb}};
  const TensorView in[] = {a.view, b.view};
  TensorView outs[] = {out.view};
  MallocWorkspace ws;
  const int threads = bench_threads();
  KernelContext c{node, in, outs, threads, &ws};
  const KernelFn fn = cpu::kernels()[Op::matmul];
  for (auto _ : state) {
    Status st = fn(c);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
    ws.release();
    benchmark::DoNotOptimize(out.storage.data());
    benchmark::ClobberMemory();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["FLOP/s"] = benchmark::Counter(flops * n, benchmark::Counter::kIsRate);
  state.counters["peak_frac"] =
      benchmark::Counter(flops * n / peak_flops(threads), benchmark::Counter::kIsRate);
  state.counters["threads"] = threads;
}

constexpr int64_t kRows = 2048, kIn = 288, kOut = 768;
constexpr double kFlops = 2.0 * kRows * kIn * kOut;

// y (2048, 768) = x (2048, 288) W (768, 288)ᵀ.
void BM_matmul_forward(benchmark::State& state) {
  run_matmul(state, {kRows, kIn}, {kOut, kIn}, {kRows, kOut}, false, true, kFlops);
}
// The same as a (B, T, C) activation: the kernel flattens it into one GEMM.
void BM_matmul_forward_3d(benchmark::State& state) {
  run_matmul(state, {8, kRows / 8, kIn}, {kOut, kIn}, {8, kRows / 8, kOut}, false, true, kFlops);
}
// dX (2048, 288) = dY (2048, 768) W (768, 288).
void BM_matmul_backward_dx(benchmark::State& state) {
  run_matmul(state, {kRows, kOut}, {kOut, kIn}, {kRows, kIn}, false, false, kFlops);
}
// dW (768, 288) = dYᵀ (768, 2048) X (2048, 288).
void BM_matmul_backward_dw(benchmark::State& state) {
  run_matmul(state, {kRows, kOut}, {kRows, kIn}, {kOut, kIn}, true, false, kFlops);
}
// Attention-shaped batched GEMM: (B, H, T, D) x (B, H, T, D)ᵀ at B=4, H=6, T=256, D=48.
void BM_matmul_batched_qk(benchmark::State& state) {
  run_matmul(state, {4, 6, 256, 48}, {4, 6, 256, 48}, {4, 6, 256, 256}, false, true,
             2.0 * 4 * 6 * 256 * 256 * 48);
}

BENCHMARK(BM_matmul_forward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_matmul_forward_3d)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_matmul_backward_dx)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_matmul_backward_dw)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_matmul_batched_qk)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lj::bench
