// The loss and residual-add fusions on the `small` benchmark model: the rules fire once for the
// lm_head loss and twice per layer, the compiled step's loss and gradients equal the eager
// step's, and the memory estimate drops by at least the logits it no longer makes.
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

GraphOptions options(bool compile, bool output_logits = false) {
  GraphOptions o;
  o.compile = compile;
  o.output_logits = output_logits;
  return o;
}

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op ? 1 : 0;
  return n;
}

TEST(CompileCe, SmallCompiledLossAndGradientsEqualEager) {
  auto model = llama_preset("small");
  ASSERT_TRUE(model.ok());
  Graph eager, compiled;
  ASSERT_TRUE(build_train_graph(*model, GraphOptions{}, &eager).ok());
  ASSERT_TRUE(build_train_graph(*model, options(true), &compiled).ok());
  ASSERT_TRUE(verify(compiled).ok());
  EXPECT_EQ(count_op(compiled, Op::linear_cross_entropy), 1);
  // Each residual add joins its norm (add_rms_norm) or else becomes a GEMM epilogue.
  const int64_t epilogues = count_op(compiled, Op::matmul_add);
  EXPECT_EQ(count_op(compiled, Op::add_rms_norm) + epilogues, 2 * model->num_hidden_layers);
  EXPECT_EQ(count_op(compiled, Op::cross_entropy) + count_op(compiled, Op::cross_entropy_backward),
            0);
  // Gone: the lm_head GEMM and those that became matmul_add (forward), and the lm_head's dx and
  // dw GEMMs (backward: the fused forward made them, nothing recomputes them).
  EXPECT_EQ(count_op(compiled, Op::matmul), count_op(eager, Op::matmul) - 1 - epilogues - 2);

  Device dev(2);
  const int64_t B = 2, T = 16;
  auto inputs = testing_util::llama_train_inputs(dev, *model, B, T, {7919, 104729});
  ASSERT_TRUE(inputs.ok()) << inputs.status().to_string();
  std::vector<Tensor> a, b;
  {
    Executor ex(eager, dev);
    auto r = ex.run(*inputs);
    ASSERT_TRUE(r.ok()) << r.status().message();
    a = std::move(*r);
  }
  {
    Executor ex(compiled, dev);
    auto r = ex.run(*inputs);
    ASSERT_TRUE(r.ok()) << r.status().message();
    b = std::move(*r);
  }
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].dims(), b[i].dims()) << eager.outputs()[i].name;
    const testing_util::MaxError e = testing_util::max_error(b[i], a[i]);
    // fp32 rounding only (the lm_head GEMMs on chunks of rows rather than the whole batch, dw
    // summed chunk by chunk), carried through six layers: bound 1e-4 of the tensor's largest
    // entry. Observed: at most 2.2e-6 of it; the loss bitwise equal.
    EXPECT_LE(e.diff, 1e-4 * e.scale + 1e-12) << eager.outputs()[i].name;
    worst = std::max(worst, e.rel());
  }
  std::printf("small B=%lld T=%lld: loss %.9g (eager) vs %.9g (compiled), worst diff / max %.3g\n",
              static_cast<long long>(B), static_cast<long long>(T), a[0].at(0), b[0].at(0), worst);
}

TEST(CompileCe, SmallCompiledPeakIsBelowEagerByTheLogits) {
  auto model = llama_preset("small");
  ASSERT_TRUE(model.ok());
  const int64_t B = 4, T = 256;
  auto eager = graph_figures(*model, B, T, GraphOptions{});
  auto compiled = graph_figures(*model, B, T, options(true));
  ASSERT_TRUE(eager.ok()) << eager.status().to_string();
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  std::printf("small B=4 T=256 peak bytes by category (eager -> compiled):\n");
  for (auto c : {MemCategory::weights, MemCategory::grads, MemCategory::optimizer,
                 MemCategory::activations, MemCategory::temporaries, MemCategory::workspace}) {
    std::printf("  %-12s %12lld -> %12lld\n", mem_category_name(c),
                static_cast<long long>(eager->stats.peak(c)),
                static_cast<long long>(compiled->stats.peak(c)));
  }
  std::printf("  %-12s %12lld -> %12lld\n", "total", static_cast<long long>(eager->bytes_peak),
              static_cast<long long>(compiled->bytes_peak));
  // The eager step holds the (B*T, V) f32 logits for the backward and makes their gradient;
  // the fused loss makes neither: it holds dx (B*T, C) and dw (V, C) from the forward to the
  // backward instead, and its chunk of logits is kernel workspace (256 rows, 31 MiB here, not in
  // the estimate). Observed: 696.8 MB eager, 508.4 MB compiled (131 MB of logits).
  const int64_t logits_bytes = B * T * model->vocab_size * 4;
  EXPECT_LE(compiled->bytes_peak + logits_bytes, eager->bytes_peak);
  EXPECT_EQ(compiled->stats.peak(MemCategory::weights), eager->stats.peak(MemCategory::weights));
}

}  // namespace
}  // namespace lj
