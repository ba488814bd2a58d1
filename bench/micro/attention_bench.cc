// sdpa micro-benchmarks at a small Llama's attention size: B=4, H=6 query heads, G=2 kv heads,
// T=256, D=48, causal. FLOPs follow the flash-attention convention: the causal forward is
// 4·B·H·T²·D / 2 (two GEMMs over half the score matrix), the backward 2.5x that (five GEMMs), so
// forward+backward is 3.5x. Run: build/micro_bench --benchmark_filter=sdpa
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/cpu.h"
#include "bench_util.h"

namespace lj::bench {
namespace {

constexpr int64_t kB = 4, kH = 6, kG = 2, kT = 256, kD = 48;
constexpr double kForwardFlops = 4.0 * kB * kH * kT * kT * kD / 2;

void set_counters(benchmark::State& state, double flops, int threads) {
  const double n = static_cast<double>(state.iterations());
  state.counters["FLOP/s"] = benchmark::Counter(flops * n, benchmark::Counter::kIsRate);
  state.counters["peak_frac"] =
      benchmark::Counter(flops * n / peak_flops(threads), benchmark::Counter::kIsRate);
  state.counters["threads"] = threads;
}

void run_sdpa(benchmark::State& state, bool backward) {
  OwnedTensor q({kB, kH, kT, kD}, 1), k({kB, kG, kT, kD}, 2), v({kB, kG, kT, kD}, 3);
  OwnedTensor out({kB, kH, kT, kD}, 4), lse({kB, kH, kT}, 5), dout({kB, kH, kT, kD}, 6);
  OwnedTensor dq({kB, kH, kT, kD}, 7), dk({kB, kG, kT, kD}, 8), dv({kB, kG, kT, kD}, 9);
  Node fwd_node, bwd_node;
  fwd_node.op = Op::sdpa;
  fwd_node.attrs = Attrs{{"causal", true}, {"scale", 0.0}};
  bwd_node.op = Op::sdpa_backward;
  bwd_node.attrs = fwd_node.attrs;
  const TensorView fwd_in[] = {q.view, k.view, v.view};
  TensorView fwd_out[] = {out.view, lse.view};
  const TensorView bwd_in[] = {q.view, k.view, v.view, out.view, lse.view, dout.view};
  TensorView bwd_out[] = {dq.view, dk.view, dv.view};
  MallocWorkspace ws;
  const int threads = bench_threads();
  KernelContext fwd{fwd_node, fwd_in, fwd_out, threads, &ws};
  KernelContext bwd{bwd_node, bwd_in, bwd_out, threads, &ws};
  const KernelTable& t = cpu::kernels();
  for (auto _ : state) {
    Status st = t[Op::sdpa](fwd);
    ws.release();
    if (st.ok() && backward) st = t[Op::sdpa_backward](bwd);
    ws.release();
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
    benchmark::ClobberMemory();
  }
  set_counters(state, backward ? 3.5 * kForwardFlops : kForwardFlops, threads);
}

void BM_sdpa_forward(benchmark::State& state) {
  run_sdpa(state, false);
}
void BM_sdpa_forward_backward(benchmark::State& state) {
  run_sdpa(state, true);
}

BENCHMARK(BM_sdpa_forward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_sdpa_forward_backward)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lj::bench
