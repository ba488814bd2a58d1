// linear_cross_entropy micro-benchmarks at `small`'s LM head: x (2048, 288), w (32000, 288),
// labels (2048) (and the wider model's: x (1024, 1024)), the fused loss with its gradients through
// the CPU kernel table, at several chunk sizes and vocabulary blocks (the arguments, 0 = the
// kernel's default), and its three GEMM shapes alone on one default chunk. FLOPs: the three (N, V,
// C) GEMMs. Run: build/micro_bench
// --benchmark_filter=lce
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/gemm.h"
#include "bench_util.h"

namespace lj::bench {
namespace {

constexpr int64_t kRows = 2048, kDim = 288, kVocab = 32000;
constexpr double kFlops = 3 * 2.0 * kRows * kDim * kVocab;

void report(benchmark::State& state, double flops, int threads) {
  const double n = static_cast<double>(state.iterations());
  state.counters["FLOP/s"] = benchmark::Counter(flops * n, benchmark::Counter::kIsRate);
  state.counters["peak_frac"] =
      benchmark::Counter(flops * n / peak_flops(threads), benchmark::Counter::kIsRate);
  state.counters["threads"] = threads;
}

void run_lce(benchmark::State& state, int64_t rows, int64_t dim) {
  const double flops = 3 * 2.0 * rows * dim * kVocab;
  OwnedTensor x({rows, dim}, 1), w({kVocab, dim}, 2);
  for (float& v : x.storage) v *= 0.1f;
  TensorView labels;
  std::vector<int32_t> lab(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    lab[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % kVocab);
  labels.dtype = DType::i32;
  labels.dims = {rows};
  labels.data = lab.data();
  OwnedTensor loss({}, 3), dx({rows, dim}, 4), dw({kVocab, dim}, 5);
  Node node;
  node.op = Op::linear_cross_entropy;
  node.attrs = Attrs{{"chunk", state.range(0)}, {"vocab_block", state.range(1)}};
  const TensorView in[] = {x.view, w.view, labels};
  TensorView outs[] = {loss.view, dx.view, dw.view};
  MallocWorkspace ws;
  const int threads = bench_threads();
  KernelContext c{node, in, outs, threads, &ws};
  const KernelFn fn = cpu::kernels()[Op::linear_cross_entropy];
  for (auto _ : state) {
    Status st = fn(c);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
    ws.release();
    benchmark::DoNotOptimize(dw.storage.data());
    benchmark::ClobberMemory();
  }
  report(state, flops, threads);
}

void BM_lce_fused(benchmark::State& state) {
  run_lce(state, kRows, kDim);
}
// The wider model's head: B4 T256 rows, hidden 1024.
void BM_lce_fused_wide(benchmark::State& state) {
  run_lce(state, 1024, 1024);
}

// One chunk's GEMM alone (dnnl_sgemm, gemm.h); arg 0: 0 logits, 1 dx, 2 dw; arg 1: rows.
void BM_lce_gemm(benchmark::State& state) {
  const int64_t which = state.range(0), m = state.range(1);
  OwnedTensor x({m, kDim}, 1), w({kVocab, kDim}, 2), g({m, kVocab}, 3), dx({m, kDim}, 4),
      dw({kVocab, kDim}, 5);
  const int threads = bench_threads();
  cpu::ScopedOmpThreads scoped(threads);
  for (auto _ : state) {
    if (which == 0) {
      cpu::gemm(false, true, m, kVocab, kDim, 1.0f, x.storage.data(), kDim, w.storage.data(), kDim,
                0.0f, g.storage.data(), kVocab);
    } else if (which == 1) {
      cpu::gemm(false, false, m, kDim, kVocab, 1.0f, g.storage.data(), kVocab, w.storage.data(),
                kDim, 0.0f, dx.storage.data(), kDim);
    } else {
      cpu::gemm(true, false, kVocab, kDim, m, 1.0f, g.storage.data(), kVocab, x.storage.data(),
                kDim, 1.0f, dw.storage.data(), kDim);
    }
    benchmark::ClobberMemory();
  }
  report(state, 2.0 * m * kDim * kVocab, threads);
}

BENCHMARK(BM_lce_fused)
    ->ArgsProduct({{0, 256, 512}, {0, 128, 256, 512}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lce_fused_wide)
    ->ArgsProduct({{0}, {0, 128, 256, 512, 1024}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lce_gemm)->ArgsProduct({{0, 1, 2}, {256}})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lj::bench
