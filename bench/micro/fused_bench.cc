// Pattern fusion's ops against the primitive subgraphs they replace, at the `small` model's sizes
// (B=4, T=256): forward and backward of add+RMSNorm, SwiGLU and RoPE (one of q), each run as a
// graph on the eager executor (loss = sum(out * r), gradients by append_gradients), so the
// eager side pays what eager pays: a kernel and a buffer per primitive op.
// Run: build/micro_bench --benchmark_filter=fused
#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "graph/autodiff/autodiff.h"
#include "graph/builder_fused.h"
#include "runtime/executor.h"

namespace lj::bench {
namespace {

using Ins = std::vector<Val>;

struct Subgraph {
  std::vector<std::vector<int64_t>> dims;  // inputs, all differentiated
  std::function<Ins(const Ins&)> primitive, fused;
};

Val rotate_half(Val x) {
  const int64_t d = x.shape().dim(-1).value();
  return concat({-slice(x, -1, d / 2, d), slice(x, -1, 0, d / 2)}, -1);
}

Subgraph subgraph(int which) {
  switch (which) {
    case 0:  // x = x + attn; h = rms_norm(x, w): both x and h are read later
      return {{{4, 256, 288}, {4, 256, 288}, {288}},
              [](const Ins& in) {
                const Val s = in[0] + in[1];
                return Ins{s, s * rsqrt(mean(square(s), {-1}, true) + 1e-5) * in[2]};
              },
              [](const Ins& in) {
                const AddRmsNormResult r = add_rms_norm(in[0], in[1], in[2], 1e-5);
                return Ins{r.sum, r.y};
              }};
    case 1:
      return {{{4, 256, 768}, {4, 256, 768}},
              [](const Ins& in) { return Ins{silu(in[0]) * in[1]}; },
              [](const Ins& in) { return Ins{swiglu(in[0], in[1])}; }};
    default:  // cos and sin are data in the model: differentiated here only through x
      return {{{4, 6, 256, 48}},
              [](const Ins& in) {
                const Val cos = in[0].b->input("cos", DType::f32, Shape{256, 48});
                const Val sin = in[0].b->input("sin", DType::f32, Shape{256, 48});
                return Ins{in[0] * cos + rotate_half(in[0]) * sin};
              },
              [](const Ins& in) {
                const Val cos = in[0].b->input("cos", DType::f32, Shape{256, 48});
                const Val sin = in[0].b->input("sin", DType::f32, Shape{256, 48});
                return Ins{rope(in[0], cos, sin)};
              }};
  }
}

void BM_fused_subgraph(benchmark::State& state, int which, bool fused) {
  const Subgraph s = subgraph(which);
  Graph g;
  Builder b(&g);
  Ins in;
  for (size_t i = 0; i < s.dims.size(); ++i)
    in.push_back(b.param("x" + std::to_string(i), DType::f32, Shape::concrete(s.dims[i])));
  const Ins out = (fused ? s.fused : s.primitive)(in);
  Val loss;
  for (size_t k = 0; k < out.size(); ++k) {
    const Val r = b.input("r" + std::to_string(k), DType::f32, out[k].shape());
    const Val term = sum(out[k] * r, {});
    loss = loss.valid() ? loss + term : term;
  }
  std::vector<ValueId> wrt;
  for (const Val& v : in) wrt.push_back(v.id);
  auto grads = append_gradients(&g, loss.id, wrt);
  if (!b.ok() || !grads.ok()) {
    state.SkipWithError("graph build failed");
    return;
  }
  for (ValueId v : *grads) g.add_output("grad", v);
  Device dev(bench_threads());
  std::vector<OwnedTensor> owned;
  std::vector<Tensor> inputs;
  for (ValueId v : g.inputs()) {
    Tensor t =
        Tensor::empty(dev, DType::f32, g.type(v).shape.concrete_dims(), MemCategory::weights);
    const OwnedTensor fill(t.dims(), static_cast<uint32_t>(inputs.size() + 1));
    std::copy(fill.storage.begin(), fill.storage.end(), t.data<float>());
    inputs.push_back(std::move(t));
  }
  Executor ex(g, dev);
  for (auto _ : state) {
    auto r = ex.run(inputs);
    if (!r.ok()) state.SkipWithError(r.status().to_string().c_str());
    benchmark::DoNotOptimize(r);
  }
  state.counters["kernels"] = static_cast<double>(ex.kernels_launched());
  state.counters["threads"] = bench_threads();
}

BENCHMARK_CAPTURE(BM_fused_subgraph, add_rms_norm_eager, 0, false)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_fused_subgraph, add_rms_norm_fused, 0, true)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_fused_subgraph, swiglu_eager, 1, false)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_fused_subgraph, swiglu_fused, 1, true)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_fused_subgraph, rope_eager, 2, false)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_fused_subgraph, rope_fused, 2, true)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lj::bench
