// Pattern fusion of the loss and the residual adds (passes/pattern_fusion/pattern_fusion_ce.h):
// each rule on small graphs (fires on the pattern, leaves it alone when an intermediate value is
// used elsewhere or is a graph output), then on the `tiny` training graph: the expected number
// of matches, a graph that verifies, and the loss and every gradient equal to the eager graph's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "graph/autodiff/autodiff.h"
#include "graph/builder.h"
#include "model/model_test_util.h"
#include "passes/pattern_fusion/pattern_fusion_ce.h"
#include "runtime/executor.h"
#include "train/train_step.h"

namespace lj {
namespace {

const Dim kB = Dim::sym('B');
const Dim kT = Dim::sym('T');

GraphOptions options(bool compile, bool output_logits = false) {
  GraphOptions o;
  o.compile = compile;
  o.output_logits = output_logits;
  return o;
}

int count_op(const Graph& g, Op op, Phase phase) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op && node.phase == phase ? 1 : 0;
  return n;
}

bool run_rule(std::unique_ptr<Pass> p, Graph& g) {
  StatusOr<bool> r = p->run(g);
  EXPECT_TRUE(r.ok()) << r.status().message();
  const Status v = verify(g);
  EXPECT_TRUE(v.ok()) << v.message() << "\n" << print_graph(g);
  return r.ok() && *r;
}

// The lm_head and loss as models/llama.cc builds them. `extra_use` adds another reader of the
// logits; `logits_output` makes them a graph output.
struct LossGraph {
  Graph g;
  Val x, w, logits, loss;
};
void build_loss_graph(LossGraph* lg, bool extra_use, bool logits_output) {
  Builder b(&lg->g);
  const int64_t C = 8, V = 11;
  lg->x = b.input("x", DType::f32, Shape{kB, kT, C});
  Val targets = b.input("targets", DType::i32, Shape{kB, kT});
  lg->w = b.param("w", DType::f32, Shape{V, C});
  lg->logits = matmul(lg->x, lg->w, false, true);
  lg->loss = cross_entropy(reshape(lg->logits, Shape{kB * kT, V}), reshape(targets, {kB * kT}));
  b.output("loss", lg->loss);
  if (extra_use) b.output("logit_sum", sum(lg->logits, {}));
  if (logits_output) b.output("logits", lg->logits);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
}

TEST(LinearCrossEntropyFusion, FusesTheLmHeadAndKeepsTheLossId) {
  LossGraph lg;
  build_loss_graph(&lg, false, false);
  EXPECT_TRUE(run_rule(make_linear_cross_entropy_fusion(), lg.g));
  EXPECT_EQ(count_op(lg.g, Op::linear_cross_entropy, Phase::forward), 1) << print_graph(lg.g);
  EXPECT_EQ(count_op(lg.g, Op::cross_entropy, Phase::forward), 0);
  EXPECT_EQ(count_op(lg.g, Op::matmul, Phase::forward), 0);
  EXPECT_EQ(lg.g.find_output("loss"), lg.loss.id);
  const Node& fused = lg.g.producer(lg.loss.id);
  EXPECT_EQ(fused.op, Op::linear_cross_entropy);
  EXPECT_EQ(fused.attrs.i("ignore_index"), -100);
  EXPECT_EQ(lg.g.type(fused.inputs[0]).shape, (Shape{kB * kT, 8}));  // x flattened
  const ValueId fused_dw = fused.outputs[2];  // `fused` dangles once the graph grows
  // The fused graph differentiates: the forward made dw, the backward only scales it by dloss
  // (no GEMM), and no (N, V) value exists anywhere.
  auto grads = append_gradients(&lg.g, lg.loss.id, std::vector<ValueId>{lg.w.id});
  ASSERT_TRUE(grads.ok()) << grads.status().to_string();
  EXPECT_TRUE(verify(lg.g).ok());
  EXPECT_EQ(count_op(lg.g, Op::matmul, Phase::backward), 0) << print_graph(lg.g);
  const Node& dw = lg.g.producer((*grads)[0]);
  EXPECT_EQ(dw.op, Op::mul) << print_graph(lg.g);
  EXPECT_EQ(dw.inputs[0], fused_dw);
  for (const Node& n : lg.g.nodes()) {
    for (ValueId v : n.outputs) {
      const Shape& s = lg.g.type(v).shape;
      EXPECT_FALSE(s.rank() >= 1 && s[s.rank() - 1] == Dim(11))
          << "a logits-shaped value survived: " << print_graph(lg.g);
    }
  }
  EXPECT_FALSE(run_rule(make_linear_cross_entropy_fusion(), lg.g));  // nothing left to match
}

TEST(LinearCrossEntropyFusion, LeavesLogitsThatAreUsedElsewhereOrFetched) {
  for (bool extra_use : {true, false}) {
    LossGraph lg;
    build_loss_graph(&lg, extra_use, !extra_use);
    const size_t before = lg.g.nodes().size();
    EXPECT_FALSE(run_rule(make_linear_cross_entropy_fusion(), lg.g)) << extra_use;
    EXPECT_EQ(lg.g.nodes().size(), before);
    EXPECT_EQ(count_op(lg.g, Op::cross_entropy, Phase::forward), 1);
  }
}

TEST(MatmulAddFusion, FusesEitherOperandOrderAndKeepsTheOutputId) {
  for (bool residual_first : {true, false}) {
    Graph g;
    Builder b(&g);
    Val x = b.input("x", DType::f32, Shape{kB, kT, 8});
    Val w = b.param("w", DType::f32, Shape{8, 8});
    Val m = matmul(x, w, false, true);
    Val y = residual_first ? x + m : m + x;
    b.output("y", exp(y));
    ASSERT_TRUE(b.ok());
    EXPECT_TRUE(run_rule(make_matmul_add_fusion(), g));
    const Node& fused = g.producer(y.id);
    ASSERT_EQ(fused.op, Op::matmul_add) << print_graph(g);
    EXPECT_EQ(fused.inputs, (std::vector<ValueId>{x.id, w.id, x.id}));
    EXPECT_TRUE(fused.attrs.b("tb"));
    EXPECT_FALSE(fused.attrs.b("ta"));
    EXPECT_EQ(count_op(g, Op::matmul, Phase::forward), 0);
    EXPECT_EQ(count_op(g, Op::add, Phase::forward), 0);
  }
}

TEST(MatmulAddFusion, LeavesSharedProductsAndBroadcasts) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4, 8});
  Val w = b.param("w", DType::f32, Shape{8, 8});
  Val bias = b.param("bias", DType::f32, Shape{8});
  Val shared = matmul(x, w);
  b.output("a", x + shared);
  b.output("b", exp(shared));                       // a second use of the product
  b.output("c", matmul(x, w, false, true) + bias);  // the addend broadcasts
  b.output("d", matmul(x, w));                      // no add at all
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(run_rule(make_matmul_add_fusion(), g));
  EXPECT_EQ(count_op(g, Op::matmul, Phase::forward), 3);
}

TEST(PatternFusionCe, TinyTrainGraphCountsAndEagerUnchanged) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  const int layers = static_cast<int>(model->num_hidden_layers);
  Graph eager, compiled;
  PassReport report;
  ASSERT_TRUE(build_train_graph(*model, GraphOptions{}, &eager).ok());
  ASSERT_TRUE(build_train_graph(*model, options(true), &compiled, &report).ok());
  ASSERT_TRUE(verify(compiled).ok()) << verify(compiled).message();
  std::printf("%s", report.to_string().c_str());
  // Eager: nothing fused.
  for (Op op : {Op::linear_cross_entropy, Op::matmul_add}) {
    EXPECT_EQ(count_op(eager, op, Phase::forward) + count_op(eager, op, Phase::backward), 0);
  }
  EXPECT_EQ(count_op(eager, Op::cross_entropy, Phase::forward), 1);
  // Compiled: one lm_head loss; each of the two residual adds per layer (o_proj, down_proj)
  // joins the norm it feeds (add_rms_norm, fused first) or else becomes a GEMM epilogue.
  EXPECT_EQ(count_op(compiled, Op::linear_cross_entropy, Phase::forward), 1);
  // The lm_head's two backward GEMMs (dx, dw) are gone: the fused forward made them.
  EXPECT_EQ(count_op(compiled, Op::matmul, Phase::backward),
            count_op(eager, Op::matmul, Phase::backward) - 2);
  EXPECT_EQ(count_op(compiled, Op::cross_entropy, Phase::forward), 0);
  EXPECT_EQ(count_op(compiled, Op::cross_entropy_backward, Phase::backward), 0);
  const int64_t epilogues = count_op(compiled, Op::matmul_add, Phase::forward);
  EXPECT_EQ(count_op(compiled, Op::add_rms_norm, Phase::forward) + epilogues, 2 * layers);
  EXPECT_EQ(count_op(compiled, Op::matmul, Phase::forward),
            count_op(eager, Op::matmul, Phase::forward) - 1 - epilogues);
  EXPECT_EQ(compiled.inputs(), eager.inputs());
  ASSERT_EQ(compiled.outputs().size(), eager.outputs().size());
  for (size_t i = 0; i < eager.outputs().size(); ++i)
    EXPECT_EQ(compiled.outputs()[i].name, eager.outputs()[i].name);

  // With the logits fetched the loss is left alone; the residual adds still fuse.
  Graph with_logits;
  ASSERT_TRUE(build_train_graph(*model, options(true, true), &with_logits).ok());
  EXPECT_EQ(count_op(with_logits, Op::linear_cross_entropy, Phase::forward), 0);
  EXPECT_EQ(count_op(with_logits, Op::cross_entropy, Phase::forward), 1);
  EXPECT_EQ(count_op(with_logits, Op::matmul_add, Phase::forward) +
                count_op(with_logits, Op::add_rms_norm, Phase::forward),
            2 * layers);
}

TEST(PatternFusionCe, TinyCompiledLossAndGradientsEqualEager) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  for (bool output_logits : {false, true}) {
    Graph eager, compiled;
    ASSERT_TRUE(build_train_graph(*model, options(false, output_logits), &eager).ok());
    ASSERT_TRUE(build_train_graph(*model, options(true, output_logits), &compiled).ok());
    Device dev(2);
    const int64_t B = 2, T = 16;
    auto inputs = testing_util::llama_train_inputs(dev, *model, B, T);
    ASSERT_TRUE(inputs.ok()) << inputs.status().to_string();
    Tensor& targets = (*inputs)[1];
    for (int64_t i = 0; i < B * T; i += 5) targets.data<int32_t>()[i] = -100;  // ignored rows
    Executor ex_eager(eager, dev), ex_compiled(compiled, dev);
    auto a = ex_eager.run(*inputs);
    auto b = ex_compiled.run(*inputs);
    ASSERT_TRUE(a.ok()) << a.status().message();
    ASSERT_TRUE(b.ok()) << b.status().message();
    ASSERT_EQ(a->size(), b->size());
    EXPECT_LT(ex_compiled.kernels_launched(), ex_eager.kernels_launched());
    double worst = 0;
    for (size_t i = 0; i < a->size(); ++i) {
      const Tensor& x = (*a)[i];
      const Tensor& y = (*b)[i];
      ASSERT_EQ(x.dims(), y.dims()) << eager.outputs()[i].name;
      const testing_util::MaxError e = testing_util::max_error(y, x);
      // fp32: the fused loss runs its GEMMs on chunks of rows (dw summed chunk by chunk) where
      // the eager one runs them on the whole batch: a few ulp per value where the chunking
      // changes the GEMM's blocking, carried through the backward. Bound: 1e-5 of the tensor's
      // largest entry. Observed: 0 (tiny's 32 rows are one chunk, and the row math is
      // cross_entropy(_backward)'s; matmul_add is bitwise equal too).
      EXPECT_LE(e.diff, 1e-5 * e.scale + 1e-12) << eager.outputs()[i].name;
      worst = std::max(worst, e.rel());
    }
    std::printf("tiny output_logits=%d: loss %.9g vs %.9g, worst diff / max |value| %.3g\n",
                output_logits ? 1 : 0, (*a)[0].at(0), (*b)[0].at(0), worst);
  }
}

}  // namespace
}  // namespace lj
