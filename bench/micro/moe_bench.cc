// The mixture-of-experts grouped GEMMs at the Mixtral-shaped model's sizes
// (bench/peers/models/mixtral-h256: hidden 256, expert width 896, 8 experts, top 2; B4 T256 routes
// 2048 rows): the forward through the fused gate-up weight, the down projection, their input
// gradients and the weight gradients, with uneven group sizes as a router gives them (256 +- 40).
// Each reports GFLOP/s and the fraction of the fp32 peak (bench_util.h).
// Run: build/micro_bench --benchmark_filter=grouped
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "backends/cpu/cpu.h"
#include "bench_util.h"

namespace lj::bench {
namespace {

constexpr int64_t kRows = 2048, kHidden = 256, kWidth = 896, kExperts = 8;
// Sums to kRows: the spread of a freshly initialised router's counts at B4 T256.
const int32_t kSizes[kExperts] = {241, 270, 255, 296, 217, 268, 231, 270};

void run(benchmark::State& state, Op op, std::vector<int64_t> a_dims, std::vector<int64_t> b_dims,
         std::vector<int64_t> out_dims, bool tb, double flops) {
  OwnedTensor a(std::move(a_dims), 1), b(std::move(b_dims), 2), out(std::move(out_dims), 3);
  std::vector<int32_t> sizes(kSizes, kSizes + kExperts);
  TensorView s;
  s.dtype = DType::i32;
  s.dims = {kExperts};
  s.data = sizes.data();
  Node node;
  node.op = op;
  if (op == Op::grouped_matmul) node.attrs = Attrs{{"tb", tb}};
  const TensorView in[] = {a.view, b.view, s};
  TensorView outs[] = {out.view};
  MallocWorkspace ws;
  const int threads = bench_threads();
  KernelContext c{node, in, outs, threads, &ws};
  const KernelFn fn = cpu::kernels()[op];
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

double flops(int64_t n, int64_t k) {
  return 2.0 * kRows * n * k;
}

// (R, 2F) = x (R, C) w_e (2F, C)ᵀ, the fused gate and up projections.
void BM_grouped_gate_up(benchmark::State& state) {
  run(state, Op::grouped_matmul, {kRows, kHidden}, {kExperts, 2 * kWidth, kHidden},
      {kRows, 2 * kWidth}, true, flops(2 * kWidth, kHidden));
}
// (R, C) = h (R, F) w_e (C, F)ᵀ, the down projection.
void BM_grouped_down(benchmark::State& state) {
  run(state, Op::grouped_matmul, {kRows, kWidth}, {kExperts, kHidden, kWidth}, {kRows, kHidden},
      true, flops(kHidden, kWidth));
}
// dx (R, C) = dy (R, 2F) w_e (2F, C): the gate-up input gradient.
void BM_grouped_gate_up_dx(benchmark::State& state) {
  run(state, Op::grouped_matmul, {kRows, 2 * kWidth}, {kExperts, 2 * kWidth, kHidden},
      {kRows, kHidden}, false, flops(kHidden, 2 * kWidth));
}
// dh (R, F) = dy (R, C) w_e (C, F): the down projection's input gradient.
void BM_grouped_down_dx(benchmark::State& state) {
  run(state, Op::grouped_matmul, {kRows, kHidden}, {kExperts, kHidden, kWidth}, {kRows, kWidth},
      false, flops(kWidth, kHidden));
}
// dW_e (2F, C) = dy_eᵀ x_e.
void BM_grouped_gate_up_wgrad(benchmark::State& state) {
  run(state, Op::grouped_matmul_wgrad, {kRows, 2 * kWidth}, {kRows, kHidden},
      {kExperts, 2 * kWidth, kHidden}, false, flops(2 * kWidth, kHidden));
}
// dW_e (C, F) = dy_eᵀ h_e.
void BM_grouped_down_wgrad(benchmark::State& state) {
  run(state, Op::grouped_matmul_wgrad, {kRows, kHidden}, {kRows, kWidth},
      {kExperts, kHidden, kWidth}, false, flops(kHidden, kWidth));
}

// The experts' SwiGLU over the gate-up output (R, 2F): arg 0: 0 swiglu_packed on it, 1 swiglu on
// the two halves as separate (R, F) tensors (what slice copies feed it); arg 1: 1 the backward.
void BM_experts_swiglu(benchmark::State& state) {
  const bool packed = state.range(0) == 0, backward = state.range(1) != 0;
  OwnedTensor x({kRows, 2 * kWidth}, 1), gate({kRows, kWidth}, 2), up({kRows, kWidth}, 3),
      d({kRows, kWidth}, 4), y({kRows, kWidth}, 5), dx({kRows, 2 * kWidth}, 6),
      dg({kRows, kWidth}, 7), du({kRows, kWidth}, 8);
  Node node;
  node.op = packed ? (backward ? Op::swiglu_packed_backward : Op::swiglu_packed)
                   : (backward ? Op::swiglu_backward : Op::swiglu);
  std::vector<TensorView> in, out;
  if (packed) {
    in = backward ? std::vector<TensorView>{d.view, x.view} : std::vector<TensorView>{x.view};
    out = backward ? std::vector<TensorView>{dx.view} : std::vector<TensorView>{y.view};
  } else {
    in = backward ? std::vector<TensorView>{d.view, gate.view, up.view}
                  : std::vector<TensorView>{gate.view, up.view};
    out = backward ? std::vector<TensorView>{dg.view, du.view} : std::vector<TensorView>{y.view};
  }
  MallocWorkspace ws;
  KernelContext c{node, in, out, bench_threads(), &ws};
  const KernelFn fn = cpu::kernels()[node.op];
  for (auto _ : state) {
    Status st = fn(c);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
    benchmark::ClobberMemory();
  }
}

// The same in bf16 (the autocast step's operands): arg 0 and 1 as above.
void BM_experts_swiglu_bf16(benchmark::State& state) {
  const bool packed = state.range(0) == 0, backward = state.range(1) != 0;
  const auto bf16 = [](std::vector<int64_t> dims, uint32_t seed) {
    auto t = std::make_unique<std::pair<std::vector<uint16_t>, TensorView>>();
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    for (float v : filled(static_cast<size_t>(n), seed)) t->first.push_back(f32_to_bf16(v));
    t->second.dtype = DType::bf16;
    t->second.dims = std::move(dims);
    t->second.data = t->first.data();
    return t;
  };
  auto x = bf16({kRows, 2 * kWidth}, 1), gate = bf16({kRows, kWidth}, 2),
       up = bf16({kRows, kWidth}, 3), d = bf16({kRows, kWidth}, 4), y = bf16({kRows, kWidth}, 5),
       dx = bf16({kRows, 2 * kWidth}, 6), dg = bf16({kRows, kWidth}, 7),
       du = bf16({kRows, kWidth}, 8);
  Node node;
  node.op = packed ? (backward ? Op::swiglu_packed_backward : Op::swiglu_packed)
                   : (backward ? Op::swiglu_backward : Op::swiglu);
  std::vector<TensorView> in, out;
  if (packed) {
    in = backward ? std::vector<TensorView>{d->second, x->second}
                  : std::vector<TensorView>{x->second};
    out = backward ? std::vector<TensorView>{dx->second} : std::vector<TensorView>{y->second};
  } else {
    in = backward ? std::vector<TensorView>{d->second, gate->second, up->second}
                  : std::vector<TensorView>{gate->second, up->second};
    out = backward ? std::vector<TensorView>{dg->second, du->second}
                   : std::vector<TensorView>{y->second};
  }
  MallocWorkspace ws;
  KernelContext c{node, in, out, bench_threads(), &ws};
  const KernelFn fn = cpu::kernels()[node.op];
  for (auto _ : state) {
    Status st = fn(c);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
    benchmark::ClobberMemory();
  }
}

BENCHMARK(BM_experts_swiglu)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_experts_swiglu_bf16)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_grouped_gate_up)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_grouped_down)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_grouped_gate_up_dx)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_grouped_down_dx)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_grouped_gate_up_wgrad)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_grouped_down_wgrad)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lj::bench
