// Pattern fusion (passes/pattern_fusion): each rule fires exactly where models/llama.cc spells
// RMSNorm, SwiGLU and RoPE in primitives and nowhere else, and leaves a graph that verifies;
// subgraphs that are not exact (an intermediate read elsewhere, another axis, a broadcasting add)
// are left alone; compile off builds the same graph as before. The numbers of the compiled
// training graph against the eager one are tests/model/compile_parity_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "graph/autodiff/autodiff.h"
#include "graph/builder.h"
#include "passes/pattern_fusion/pattern_fusion.h"
#include "passes/pipeline/train_graph.h"

namespace lj {
namespace {

int count_op(const Graph& g, Op op) {
  return static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(),
                                        [op](const Node& n) { return n.op == op; }));
}

struct Counts {
  int rope = 0, swiglu = 0, rms_norm = 0, add_rms_norm = 0;
};

// Runs the three rules once, checking each verifies the graph afterwards.
Counts fuse(Graph& g) {
  RopeFusion rope;
  SwigluFusion swiglu;
  RmsNormFusion norm;
  for (Pass* p : std::initializer_list<Pass*>{&rope, &swiglu, &norm}) {
    auto r = p->run(g);
    EXPECT_TRUE(r.ok()) << p->name() << ": " << r.status().to_string();
    const Status v = verify(g);
    EXPECT_TRUE(v.ok()) << p->name() << ": " << v.to_string() << "\n" << print_graph(g);
  }
  return {rope.count(), swiglu.count(), norm.rms_norm_count(), norm.add_rms_norm_count()};
}

TEST(PatternFusion, FiresOncePerNormSwigluAndRopeOfPresets) {
  for (const char* preset : {"tiny", "small"}) {
    auto model = llama_preset(preset);
    ASSERT_TRUE(model.ok());
    Graph g;
    ASSERT_TRUE(build_llama(*model, &g, DType::f32, false).ok());
    const size_t before = g.nodes().size();
    const Counts c = fuse(g);
    const int layers = static_cast<int>(model->num_hidden_layers);
    std::printf(
        "%s forward graph: %zu -> %zu nodes; rope %d, swiglu %d, add_rms_norm %d, "
        "rms_norm %d\n",
        preset, before, g.nodes().size(), c.rope, c.swiglu, c.add_rms_norm, c.rms_norm);
    // q and k of every layer; one MLP per layer; two norms per layer and the final one, of which
    // only layer 0's input_layernorm (reading the embedding) has no residual add before it.
    EXPECT_EQ(c.rope, 2 * layers) << preset;
    EXPECT_EQ(c.swiglu, layers) << preset;
    EXPECT_EQ(c.add_rms_norm, 2 * layers) << preset;
    EXPECT_EQ(c.rms_norm, 1) << preset;
    EXPECT_EQ(count_op(g, Op::rope), 2 * layers);
    EXPECT_EQ(count_op(g, Op::swiglu), layers);
    EXPECT_EQ(count_op(g, Op::add_rms_norm), 2 * layers);
    EXPECT_EQ(count_op(g, Op::rms_norm), 1);
    // Nothing of the primitive spellings is left, and the matched nodes are gone, not dead.
    for (Op op : {Op::rsqrt, Op::square, Op::mean, Op::silu, Op::neg, Op::concat, Op::slice}) {
      EXPECT_EQ(count_op(g, op), 0) << preset << ": " << op_name(op) << " left";
    }
    EXPECT_EQ(count_op(g, Op::add), 0) << preset;  // every residual add joined a norm
    // Fused nodes carry the scope of the subgraph they replace.
    std::vector<std::string> norm_scopes;
    for (const Node& n : g.nodes()) {
      if (n.op == Op::rms_norm || n.op == Op::add_rms_norm) norm_scopes.push_back(n.scope);
      if (n.op == Op::rope) {
        EXPECT_NE(n.scope.find("rotary_emb"), std::string::npos) << n.scope;
      }
      if (n.op == Op::swiglu) {
        EXPECT_NE(n.scope.find(".mlp"), std::string::npos) << n.scope;
      }
    }
    ASSERT_EQ(norm_scopes.size(), static_cast<size_t>(2 * layers + 1));
    EXPECT_EQ(norm_scopes.front(), "model.layers.0.input_layernorm");
    EXPECT_EQ(norm_scopes[1], "model.layers.0.post_attention_layernorm");
    EXPECT_EQ(norm_scopes.back(), "model.norm");
    // A second run finds nothing more.
    const Counts again = fuse(g);
    EXPECT_EQ(again.rope + again.swiglu + again.rms_norm + again.add_rms_norm, 0);
  }
}

// When layers are recomputed, a residual add is fused only into a norm of its own layer: the
// post_attention_layernorm's; input_layernorm and model.norm read the previous layer's add.
TEST(PatternFusion, ResidualAddsStayInTheirLayerWhenRecomputing) {
  auto model = llama_preset("small");
  ASSERT_TRUE(model.ok());
  Graph g;
  ASSERT_TRUE(build_llama(*model, &g, DType::f32, false).ok());
  RopeFusion rope;  // its adds out of the way
  ASSERT_TRUE(rope.run(g).ok());
  RmsNormFusion norm(/*add_across_layers=*/false);
  ASSERT_TRUE(norm.run(g).ok());
  ASSERT_TRUE(verify(g).ok());
  const int layers = static_cast<int>(model->num_hidden_layers);
  EXPECT_EQ(norm.add_rms_norm_count(), layers);
  EXPECT_EQ(norm.rms_norm_count(), layers + 1);
  for (const Node& n : g.nodes()) {
    if (n.op == Op::add_rms_norm) {
      EXPECT_NE(n.scope.find("post_attention_layernorm"), std::string::npos) << n.scope;
    }
    if (n.op == Op::add) {
      EXPECT_NE(n.scope.find(".mlp"), std::string::npos) << n.scope;
    }
  }
  EXPECT_EQ(count_op(g, Op::add), layers);  // each layer's MLP residual
}

// Compile off builds the joint graph exactly as before fusion existed: the forward graph,
// append_gradients, the gradient outputs, no pass.
TEST(PatternFusion, EagerGraphIsUnchanged) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  Graph eager, manual;
  ASSERT_TRUE(build_train_graph(*model, GraphOptions{}, &eager).ok());
  auto ids = build_llama(*model, &manual, DType::f32, false);
  ASSERT_TRUE(ids.ok());
  auto grads = append_gradients(&manual, ids->loss, ids->params);
  ASSERT_TRUE(grads.ok());
  const auto specs = llama_param_specs(*model);
  for (size_t i = 0; i < grads->size(); ++i)
    manual.add_output("grad:" + specs[i].name, (*grads)[i]);
  EXPECT_EQ(print_graph(eager), print_graph(manual));
  for (Op op : {Op::rms_norm, Op::add_rms_norm, Op::swiglu, Op::rope}) {
    EXPECT_EQ(count_op(eager, op), 0) << op_name(op);
  }
}

// ---- What must not fuse, and what must ----

const Dim kB = Dim::sym('B');

TEST(PatternFusion, NormWithOperandsSwappedAndBroadcastAddBefore) {
  Graph g;
  Builder b(&g);
  const Val x = b.input("x", DType::f32, Shape{kB, 4, 8});
  const Val bias = b.input("bias", DType::f32, Shape{8});
  const Val w = b.param("w", DType::f32, Shape{8});
  const Val s = x + bias;  // broadcasts: add_rms_norm takes equal shapes only
  const Val r = rsqrt(1e-6 + mean(square(s), {2}, true));
  b.output("y", w * (r * s));
  ASSERT_TRUE(b.ok());
  const Counts c = fuse(g);
  EXPECT_EQ(c.rms_norm, 1);
  EXPECT_EQ(c.add_rms_norm, 0);
  ASSERT_EQ(count_op(g, Op::rms_norm), 1);
  const Node& n = g.producer(g.find_output("y"));
  EXPECT_EQ(n.op, Op::rms_norm);
  EXPECT_EQ(n.inputs[0], s.id);
  EXPECT_EQ(n.attrs.f("eps"), 1e-6);
  EXPECT_EQ(count_op(g, Op::add), 1);  // the broadcasting add stays
}

TEST(PatternFusion, IntermediatesReadElsewhereAreNotFused) {
  Graph g;
  Builder b(&g);
  const Val x = b.input("x", DType::f32, Shape{kB, 4, 8});
  const Val w = b.param("w", DType::f32, Shape{8});
  const Val cs = b.input("cos", DType::f32, Shape{4, 8});
  const Val sn = b.input("sin", DType::f32, Shape{4, 8});
  // RMSNorm whose mean is also an output.
  const Val var = mean(square(x), {-1}, true);
  b.output("norm", x * rsqrt(var + 1e-5) * w);
  b.output("var", var);
  // SwiGLU whose silu is read twice.
  const Val act = silu(x);
  b.output("glu", act * x + act);
  // RoPE whose rotate_half is read by another node too.
  const Val rot = concat({-slice(x, -1, 4, 8), slice(x, -1, 0, 4)}, -1);
  b.output("rope", x * cs + rot * sn);
  b.output("rot", exp(rot));
  ASSERT_TRUE(b.ok());
  const size_t before = g.nodes().size();
  const Counts c = fuse(g);
  EXPECT_EQ(c.rms_norm + c.add_rms_norm + c.swiglu + c.rope, 0);
  EXPECT_EQ(g.nodes().size(), before);
}

TEST(PatternFusion, WrongAxesSlicesOrShapesAreNotFused) {
  Graph g;
  Builder b(&g);
  const Val x = b.input("x", DType::f32, Shape{kB, 4, 8});
  const Val w = b.param("w", DType::f32, Shape{8});
  const Val w4 = b.param("w4", DType::f32, Shape{4, 1});
  const Val cs = b.input("cos", DType::f32, Shape{4, 8});
  const Val sn = b.input("sin", DType::f32, Shape{4, 8});
  const Val cs_full = b.input("cos_full", DType::f32, Shape{kB, 4, 8});
  // Mean over another axis; a weight along another axis; a per-element "eps".
  b.output("a", x * rsqrt(mean(square(x), {1}, true) + 1e-5) * w);
  b.output("b", x * rsqrt(mean(square(x), {-1}, true) + 1e-5) * w4);
  b.output("c", x * rsqrt(mean(square(x), {-1}, true) + x) * w);
  // Halves swapped (that is rotate_half^T), and a cos table that is not (T, D).
  b.output("d", x * cs + concat({slice(x, -1, 4, 8), -slice(x, -1, 0, 4)}, -1) * sn);
  b.output("e", x * cs_full + concat({-slice(x, -1, 4, 8), slice(x, -1, 0, 4)}, -1) * sn);
  // silu times a broadcast operand.
  b.output("f", silu(x) * w);
  ASSERT_TRUE(b.ok());
  const size_t before = g.nodes().size();
  const Counts c = fuse(g);
  EXPECT_EQ(c.rms_norm + c.add_rms_norm + c.swiglu + c.rope, 0) << print_graph(g);
  EXPECT_EQ(g.nodes().size(), before);
}

// A fused value that is a graph output stays one, now produced by the fused node; and the
// values the loss reads downstream are unchanged ids.
TEST(PatternFusion, TakesOverOutputValues) {
  Graph g;
  Builder b(&g);
  const Val x = b.input("x", DType::f32, Shape{kB, 4, 8});
  const Val r = b.input("r", DType::f32, Shape{kB, 4, 8});
  const Val w = b.param("w", DType::f32, Shape{8});
  const Val s = x + r;
  const Val y = s * rsqrt(mean(square(s), {-1}, true) + 1e-5) * w;
  const Val glu = silu(y) * s;
  b.output("s", s);
  b.output("glu", glu);
  ASSERT_TRUE(b.ok());
  const Counts c = fuse(g);
  EXPECT_EQ(c.add_rms_norm, 1);
  EXPECT_EQ(c.swiglu, 1);
  EXPECT_EQ(g.producer(s.id).op, Op::add_rms_norm);
  EXPECT_EQ(g.producer(y.id).op, Op::add_rms_norm);
  EXPECT_EQ(g.producer(glu.id).op, Op::swiglu);
  EXPECT_EQ(g.find_output("s"), s.id);
  EXPECT_EQ(g.nodes().size(), 5u);  // x, r, w, add_rms_norm, swiglu
}

}  // namespace
}  // namespace lj
