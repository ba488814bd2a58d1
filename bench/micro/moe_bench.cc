// The mixture-of-experts grouped GEMMs at the Mixtral-shaped model's sizes
// (bench/peers/models/mixtral-h256: hidden 256, expert width 896, 8 experts, top 2; B4 T256 routes
// 2048 rows): the forward through the fused gate-up weight, the down projection, their input
// gradients and the weight gradients, with uneven group sizes as a router gives them (256 +- 40).
// Each reports GFLOP/s and the fraction of the fp32 peak (bench_util.h).
// Run: build/micro_bench --benchmark_filter=grouped
#include <benchmark/benchmark.h>

#include <cstdint>
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

// A bf16 tensor that owns its storage, filled from the same LCG as OwnedTensor.
struct Bf16Tensor {
  std::vector<uint16_t> storage;
  TensorView view;
  Bf16Tensor(std::vector<int64_t> dims, uint32_t seed) {
    view.dtype = DType::bf16;
    view.dims = std::move(dims);
    for (float v : filled(static_cast<size_t>(view.numel()), seed))
      storage.push_back(f32_to_bf16(v));
    view.data = storage.data();
  }
};

// The operands of the experts' SwiGLU at mixtral-h256's sizes, in one dtype.
struct SwigluViews {
  TensorView x, gate, up, d, y, dx, dg, du;  // x, dx (R, 2F); the rest (R, F)
};

// Times swiglu_packed on x, or swiglu on the halves as separate tensors; with `backward` their
// backward ops.
void time_swiglu(benchmark::State& state, bool packed, bool backward, const SwigluViews& v) {
  Node node;
  node.op = packed ? (backward ? Op::swiglu_packed_backward : Op::swiglu_packed)
                   : (backward ? Op::swiglu_backward : Op::swiglu);
  std::vector<TensorView> in, out;
  if (packed) {
    in = backward ? std::vector<TensorView>{v.d, v.x} : std::vector<TensorView>{v.x};
    out = {backward ? v.dx : v.y};
  } else {
    in = backward ? std::vector<TensorView>{v.d, v.gate, v.up}
                  : std::vector<TensorView>{v.gate, v.up};
    out = backward ? std::vector<TensorView>{v.dg, v.du} : std::vector<TensorView>{v.y};
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

// The experts' SwiGLU over the gate-up output (R, 2F): arg 0: 0 swiglu_packed on it, 1 swiglu on
// the two halves as separate (R, F) tensors (what slice copies feed it); arg 1: 1 the backward.
void BM_experts_swiglu(benchmark::State& state) {
  OwnedTensor x({kRows, 2 * kWidth}, 1), gate({kRows, kWidth}, 2), up({kRows, kWidth}, 3),
      d({kRows, kWidth}, 4), y({kRows, kWidth}, 5), dx({kRows, 2 * kWidth}, 6),
      dg({kRows, kWidth}, 7), du({kRows, kWidth}, 8);
  time_swiglu(state, state.range(0) == 0, state.range(1) != 0,
              {x.view, gate.view, up.view, d.view, y.view, dx.view, dg.view, du.view});
}

// The same in bf16 (the autocast step's operands): arg 0 and 1 as above.
void BM_experts_swiglu_bf16(benchmark::State& state) {
  Bf16Tensor x({kRows, 2 * kWidth}, 1), gate({kRows, kWidth}, 2), up({kRows, kWidth}, 3),
      d({kRows, kWidth}, 4), y({kRows, kWidth}, 5), dx({kRows, 2 * kWidth}, 6),
      dg({kRows, kWidth}, 7), du({kRows, kWidth}, 8);
  time_swiglu(state, state.range(0) == 0, state.range(1) != 0,
              {x.view, gate.view, up.view, d.view, y.view, dx.view, dg.view, du.view});
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
