// Tier 3: the compiled training graph (GraphOptions::compile: pattern fusion before autodiff, the
// fused ops' own VJPs) against the eager one on the tiny and small presets: the loss and every
// parameter gradient, each compared at its own scale. (hf_parity_test.cc also runs its fixtures
// compiled, against PyTorch.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/model_test_util.h"
#include "plan/graph_figures.h"
#include "runtime/executor.h"
#include "train/train_step.h"

namespace lj {
namespace {

int count_op(const Graph& g, Op op) {
  return static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(),
                                        [op](const Node& n) { return n.op == op; }));
}

// The compiled training graph (with `recompute`) against the eager one without recompute: the
// loss and every gradient.
void expect_compiled_matches_eager(const char* preset, int64_t B, int64_t T, double tol,
                                   RecomputeConfig recompute = {}) {
  auto model = llama_preset(preset);
  ASSERT_TRUE(model.ok());
  Graph eager, compiled;
  ASSERT_TRUE(build_train_graph(*model, GraphOptions{}, &eager).ok());
  PassReport report;
  GraphOptions options;
  options.compile = true;
  options.recompute = recompute;
  auto ids = build_train_graph(*model, options, &compiled, &report);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  ASSERT_TRUE(verify(compiled).ok()) << verify(compiled).to_string();
  EXPECT_EQ(compiled.inputs(), eager.inputs());
  ASSERT_EQ(compiled.outputs().size(), eager.outputs().size());
  std::printf("%s train graph: eager %zu nodes, compiled %zu nodes\n%s", preset,
              eager.nodes().size(), compiled.nodes().size(), report.to_string().c_str());
  if (recompute.policy == RecomputePolicy::none) {
    EXPECT_LT(compiled.nodes().size(), eager.nodes().size());
  }
  EXPECT_GT(count_op(compiled, Op::rms_norm_backward), 0);
  EXPECT_GT(count_op(compiled, Op::swiglu_backward), 0);

  Device dev(2);
  auto inputs = testing_util::llama_train_inputs(dev, *model, B, T);
  ASSERT_TRUE(inputs.ok()) << inputs.status().to_string();
  Executor ex_eager(eager, dev), ex_compiled(compiled, dev);
  auto a = ex_eager.run(*inputs);
  auto b = ex_compiled.run(*inputs);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_LT(ex_compiled.kernels_launched(), ex_eager.kernels_launched());
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < a->size(); ++i) {
    const Tensor& x = (*a)[i];
    const Tensor& y = (*b)[i];
    const std::string& name = eager.outputs()[i].name;
    ASSERT_EQ(x.dims(), y.dims()) << name;
    // Error relative to the tensor's largest magnitude: gradients of different parameters
    // differ in scale by orders of magnitude, and each is compared at its own scale.
    const testing_util::MaxError e = testing_util::max_error(y, x);
    if (e.rel() > worst) worst = e.rel(), worst_name = name;
    EXPECT_LE(e.rel(), tol) << preset << " " << name << ": max diff " << e.diff << " at scale "
                            << e.scale;
  }
  std::printf("%s: loss eager %.9g compiled %.9g; worst relative error %.3g (%s)\n", preset,
              (*a)[0].at(0), (*b)[0].at(0), worst, worst_name.c_str());
}

// The fused forward rounds as the primitives do (rope up to one ulp, where the compiler contracts
// a multiply-add), and the fused backward differs from the primitives' VJPs by a few fp32
// roundings per op, which the chain through the layers carries along. Observed worst error
// relative to each tensor's largest magnitude: tiny 4.5e-7 (loss equal to 9 digits), small
// 1.3e-6 (loss 10.4933844 vs 10.4933834). The bound 2e-5 is 15x above that and far below a
// wrong rule (errors of order 1).
TEST(CompileParity, TrainGraphMatchesEagerTiny) {
  expect_compiled_matches_eager("tiny", 2, 16, 2e-5);
}

TEST(CompileParity, TrainGraphMatchesEagerSmall) {
  expect_compiled_matches_eager("small", 1, 32, 2e-5);
}

// With recompute, the fused ops are cloned like any other forward node, and residual adds are
// fused only within their layer. Observed: 4.5e-7 for full and selective (tiny).
TEST(CompileParity, RecomputedTrainGraphMatchesEagerTiny) {
  for (RecomputePolicy p : {RecomputePolicy::full, RecomputePolicy::selective}) {
    RecomputeConfig c;
    c.policy = p;
    expect_compiled_matches_eager("tiny", 2, 16, 2e-5, c);
  }
}

// Fusion saves activations (a fused op keeps what its backward reads, not every intermediate),
// and costs none under recompute: the residual adds stay inside their layers, so a recomputed
// layer still keeps one input. One exception: the fused loss (linear_cross_entropy) makes the
// lm_head gradient dw (V, C) in the forward and holds it until the backward, where eager holds
// the (N, V) logits and their gradient instead; so activations may grow by at most dw while the
// total peak falls. Observed at small, B=4, T=256 (memory dry run), activation peaks eager ->
// compiled: none 135.9 -> 135.5 MiB, selective 72.5 -> 103.9 MiB, full 10.1 -> 0.0 MiB; without
// the fused loss they were 101.4, 69.9 and 9.0 MiB.
TEST(CompileParity, ActivationPeakBelowEager) {
  auto model = llama_preset("small");
  ASSERT_TRUE(model.ok());
  for (RecomputePolicy p :
       {RecomputePolicy::none, RecomputePolicy::selective, RecomputePolicy::full}) {
    GraphOptions o;
    o.recompute.policy = p;
    auto eager = graph_figures(*model, 4, 256, o);
    o.compile = true;
    auto compiled = graph_figures(*model, 4, 256, o);
    ASSERT_TRUE(eager.ok() && compiled.ok());
    const int64_t a = eager->stats.peak(MemCategory::activations);
    const int64_t b = compiled->stats.peak(MemCategory::activations);
    std::printf("small B=4 T=256 recompute %-9s activations eager %.1f MiB, compiled %.1f MiB\n",
                recompute_policy_name(p), static_cast<double>(a) / (1 << 20),
                static_cast<double>(b) / (1 << 20));
    const int64_t dw = model->vocab_size * model->hidden_size * 4;
    EXPECT_LT(b, a + dw) << recompute_policy_name(p);
    EXPECT_LE(compiled->bytes_peak, eager->bytes_peak) << recompute_policy_name(p);
  }
}

}  // namespace
}  // namespace lj
