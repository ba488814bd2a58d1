// sdpa micro-benchmarks at a small Llama's attention size: B=4, H=6 query heads, G=2 kv heads,
// T=256, D=48, causal; and (BM_sdpa_wide) the wider model's (bench/speed/wide: H=16, G=4, D=64)
// at B=1 T=2048, in f32 (arg 0) and as the kernel runs for bf16 tensors (arg 1: the f32 copies
// widen.cc makes, P rounded, bf16 dot products where the CPU has them; the widening's own
// conversions are not timed). FLOPs follow the flash-attention convention: the causal forward is
// 4·B·H·T²·D / 2 (two GEMMs over half the score matrix), the backward 2.5x that (five GEMMs), so
// forward+backward is 3.5x. Run: build/micro_bench --benchmark_filter=sdpa
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/cpu.h"
#include "bench_util.h"

namespace lj::bench {
namespace {

constexpr int64_t kB = 4, kH = 6, kG = 2, kT = 256, kD = 48;

void set_counters(benchmark::State& state, double flops, int threads) {
  const double n = static_cast<double>(state.iterations());
  state.counters["FLOP/s"] = benchmark::Counter(flops * n, benchmark::Counter::kIsRate);
  state.counters["peak_frac"] =
      benchmark::Counter(flops * n / peak_flops(threads), benchmark::Counter::kIsRate);
  state.counters["threads"] = threads;
}

struct Shape {
  int64_t b, h, g, t, d;
};

void run_sdpa(benchmark::State& state, bool backward, Shape s = {kB, kH, kG, kT, kD},
              DType widened_from = DType::f32) {
  OwnedTensor q({s.b, s.h, s.t, s.d}, 1), k({s.b, s.g, s.t, s.d}, 2), v({s.b, s.g, s.t, s.d}, 3);
  OwnedTensor out({s.b, s.h, s.t, s.d}, 4), lse({s.b, s.h, s.t}, 5), dout({s.b, s.h, s.t, s.d}, 6);
  OwnedTensor dq({s.b, s.h, s.t, s.d}, 7), dk({s.b, s.g, s.t, s.d}, 8), dv({s.b, s.g, s.t, s.d}, 9);
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
  KernelContext fwd{fwd_node, fwd_in, fwd_out, threads, &ws, widened_from};
  KernelContext bwd{bwd_node, bwd_in, bwd_out, threads, &ws, widened_from};
  const KernelTable& t = cpu::kernels();
  for (auto _ : state) {
    Status st = t[Op::sdpa](fwd);
    ws.release();
    if (st.ok() && backward) st = t[Op::sdpa_backward](bwd);
    ws.release();
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
    benchmark::ClobberMemory();
  }
  const double forward_flops =
      4.0 * static_cast<double>(s.b * s.h * s.t) * static_cast<double>(s.t * s.d) / 2;
  set_counters(state, backward ? 3.5 * forward_flops : forward_flops, threads);
}

void BM_sdpa_forward(benchmark::State& state) {
  run_sdpa(state, false);
}
void BM_sdpa_forward_backward(benchmark::State& state) {
  run_sdpa(state, true);
}

// arg 0: 0 the forward, 1 forward and backward; arg 1: 0 f32, 1 as for bf16 tensors.
void BM_sdpa_wide(benchmark::State& state) {
  run_sdpa(state, state.range(0) != 0, Shape{1, 16, 4, 2048, 64},
           state.range(1) != 0 ? DType::bf16 : DType::f32);
}

BENCHMARK(BM_sdpa_forward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_sdpa_forward_backward)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_sdpa_wide)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lj::bench
