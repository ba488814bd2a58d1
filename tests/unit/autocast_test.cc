// passes/autocast: the table, the casts it places on a small graph (value ids kept, parameter
// gradients in f32), its place in the pipeline, and the Llama train graph in bf16 against f32.
#include "passes/autocast/autocast.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include "graph/autodiff/autodiff.h"
#include "graph/builder.h"
#include "model/model_test_util.h"
#include "passes/pipeline/pipeline.h"
#include "train/train_step.h"

namespace lj {
namespace {

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op ? 1 : 0;
  return n;
}

TEST(Autocast, TableHasOneRowPerOpAndCoversTheMath) {
  std::set<Op> seen;
  for (const AutocastRule& r : autocast_rules()) {
    EXPECT_TRUE(seen.insert(r.op).second) << op_name(r.op) << " has two rows";
    EXPECT_FALSE(r.why.empty()) << op_name(r.op);
  }
  // Every differentiable op that computes (not sources, data movement, callbacks or cast) has a
  // row: an op added to ops.def without one would silently keep whatever dtype it meets.
  for (int i = 0; i < kNumOps; ++i) {
    const OpDef& d = op_def(static_cast<Op>(i));
    const bool computes =
        d.category == OpCategory::elementwise || d.category == OpCategory::reduction ||
        d.category == OpCategory::contraction || d.category == OpCategory::attention;
    // The ops autodiff and fusion make (never in a graph the pass sees) have no row either.
    const std::string name = d.name;
    const bool made_later = name.ends_with("_backward") || d.op == Op::fused_pointwise;
    if (!computes || d.vjp == nullptr || d.op == Op::cast || made_later) continue;
    EXPECT_TRUE(seen.count(d.op)) << d.name << " has no autocast rule";
  }
  EXPECT_EQ(autocast_policy(Op::matmul), CastPolicy::low);
  EXPECT_EQ(autocast_policy(Op::sdpa), CastPolicy::low);
  EXPECT_EQ(autocast_policy(Op::softmax), CastPolicy::f32);
  EXPECT_EQ(autocast_policy(Op::cross_entropy), CastPolicy::keep);  // f32 inside the kernel
  EXPECT_EQ(autocast_policy(Op::mean), CastPolicy::f32);
  EXPECT_EQ(autocast_policy(Op::add), CastPolicy::follow);
  EXPECT_EQ(autocast_policy(Op::gather), CastPolicy::low_output);
  EXPECT_EQ(autocast_policy(Op::reshape), CastPolicy::keep);
}

TEST(Autocast, MatmulGoesBf16ReductionF32IdsKeptGradientsF32) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4, 8});
  Val w = b.param("w", DType::f32, Shape{16, 8});
  Val y = matmul(x, w, false, true);  // (4, 16)
  Val h = silu(y) * y;
  Val loss = mean(h, {}, false);
  b.output("loss", loss);
  b.output("h", h);
  ASSERT_TRUE(b.ok()) << b.status().message();

  AutocastPass pass(DType::bf16);
  StatusOr<bool> changed = pass.run(g);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(verify(g).ok()) << verify(g).message() << "\n" << print_graph(g);
  // x and w cast down; the mean's input cast up; h (a graph output) produced again in f32.
  EXPECT_EQ(count_op(g, Op::cast), 4) << print_graph(g);
  for (const Node& n : g.nodes()) {
    if (n.op == Op::matmul || n.op == Op::silu || n.op == Op::mul) {
      EXPECT_EQ(g.type(n.outputs[0]).dtype, DType::bf16) << print_graph(g);
    }
    if (n.op == Op::mean) {
      EXPECT_EQ(g.type(n.inputs[0]).dtype, DType::f32);
    }
  }
  // Ids and types the caller holds are unchanged.
  EXPECT_EQ(g.find_output("loss"), loss.id);
  EXPECT_EQ(g.find_output("h"), h.id);
  EXPECT_EQ(g.type(h.id).dtype, DType::f32);
  EXPECT_EQ(g.params(), std::vector<ValueId>{w.id});
  EXPECT_EQ(g.type(w.id).dtype, DType::f32);

  const std::vector<ValueId> params{w.id};
  auto grads = append_gradients(&g, loss.id, params);
  ASSERT_TRUE(grads.ok()) << grads.status().message();
  ASSERT_TRUE(verify(g).ok()) << verify(g).message();
  // The parameter's gradient comes out of cast's VJP in f32.
  EXPECT_EQ(g.type((*grads)[0]).dtype, DType::f32);
  EXPECT_EQ(g.producer((*grads)[0]).op, Op::cast);
}

TEST(Autocast, F32GraphWithoutGemmsIsUnchanged) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4, 8});
  Val s = sum(exp(x), {1}, false);
  b.output("s", s);
  ASSERT_TRUE(b.ok());
  AutocastPass pass(DType::bf16);
  StatusOr<bool> changed = pass.run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed) << print_graph(g);  // nothing low: exp follows f32, sum stays f32
}

TEST(Autocast, RunsAfterPatternFusionAndBeforeAutodiff) {
  PipelineOptions o;
  o.compile = true;
  o.autocast = DType::bf16;
  const std::vector<std::string> names = pipeline_pass_names(o);
  const auto at = [&](const std::string& s) {
    return std::find(names.begin(), names.end(), s) - names.begin();
  };
  EXPECT_LT(at("matmul_add_fusion"), at("autocast"));
  EXPECT_LT(at("autocast"), at("autodiff"));
  const std::vector<std::string> wrong{"autodiff", "autocast"};
  EXPECT_FALSE(check_pass_order(wrong).ok());
  const std::vector<std::string> wrong2{"autocast", "rms_norm_fusion", "autodiff"};
  EXPECT_FALSE(check_pass_order(wrong2).ok());
  PipelineOptions eager;
  eager.autocast = DType::bf16;
  EXPECT_EQ(pipeline_pass_names(eager),
            (std::vector<std::string>{"autocast", "autodiff", "master_weights"}));
  eager.low_weight_copies = false;  // casts at the point of use
  EXPECT_EQ(pipeline_pass_names(eager), (std::vector<std::string>{"autocast", "autodiff"}));
  eager.low_weight_copies = true;
  eager.grad_sync = GradSyncOptions::of(ZeroConfig::defaults(3), 2,
                                        0);  // the graph gathers f32 parameters: no copies
  EXPECT_EQ(pipeline_pass_names(eager),
            (std::vector<std::string>{"autocast", "autodiff", "grad_sync"}));
}

// The tiny Llama trained one forward+backward in bf16 (eager and compiled) against f32.
TEST(Autocast, TinyLlamaBf16LossAndGradientsNearF32) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  Device dev(2);
  const int64_t B = 2, T = 32, V = model->vocab_size;
  Tensor x = testing_util::tokens_of(dev, B, T, 0, V), y = testing_util::tokens_of(dev, B, T, 1, V);
  TrainStepConfig ref_cfg;
  auto ref = TrainStep::create(*model, ref_cfg, dev);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  auto want = (*ref)->forward_backward(x, y);
  ASSERT_TRUE(want.ok()) << want.status().message();
  for (bool compile : {false, true}) {
    TrainStepConfig cfg;
    cfg.graph.compile = compile;
    cfg.graph.autocast = DType::bf16;
    auto step = TrainStep::create(*model, cfg, dev);
    ASSERT_TRUE(step.ok()) << step.status().message();
    const Graph& g = (*step)->graph();
    int bf16_gemms = 0, gemms = 0;
    for (const Node& n : g.nodes()) {
      if (n.op == Op::matmul || n.op == Op::matmul_add) {
        ++gemms;
        bf16_gemms += g.type(n.inputs[0]).dtype == DType::bf16 ? 1 : 0;
      }
    }
    EXPECT_GT(gemms, 0);
    EXPECT_EQ(bf16_gemms, gemms) << "every GEMM, forward and backward, on bf16 operands";
    auto got = (*step)->forward_backward(x, y);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got->grads.size(), want->grads.size());
    for (size_t i = 0; i < got->grads.size(); ++i) {
      EXPECT_EQ(got->grads[i].dtype(), DType::f32) << "gradient " << i;
    }
    const double worst = testing_util::worst_relative_error(got->grads, want->grads);
    std::printf("tiny bf16 (%s): loss %.6f vs f32 %.6f, worst gradient error %.3g of its max\n",
                compile ? "compiled" : "eager", got->loss, want->loss, worst);
    // bf16 rounds each activation to 8 significant bits (relative 2^-9 = 0.2%); the loss, a mean
    // of log-probabilities near log(V) = 5.5, moves by far less than 1%.
    EXPECT_NEAR(got->loss, want->loss, 0.01 * want->loss);
    // Gradients go through ~2 layers of bf16 GEMMs forward and back: a few 2^-9 roundings
    // compound; 5% of the largest entry still fails a wrong rule (a dropped cast VJP or a
    // transposed operand moves them by O(1)).
    EXPECT_LT(worst, 0.05);
  }
}

}  // namespace
}  // namespace lj
