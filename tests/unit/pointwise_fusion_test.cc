// passes/pointwise_fusion: which nodes form a group (the rules of its header), on small graphs.
// Numerics of the fused node are tests/ops/fused_pointwise_test.cc's business.
#include <gtest/gtest.h>

#include "graph/builder.h"
#include "passes/dce/dce.h"
#include "passes/pointwise_fusion/pointwise_fusion.h"

namespace lj {
namespace {

const Dim kB = Dim::sym('B');
const Dim kT = Dim::sym('T');

std::vector<const Node*> fused_nodes(const Graph& g) {
  std::vector<const Node*> out;
  for (const Node& n : g.nodes())
    if (n.op == Op::fused_pointwise) out.push_back(&n);
  return out;
}

// Runs the pass then dce; checks the graph still verifies.
int64_t fuse(Graph& g) {
  PointwiseFusionPass pass;
  auto r = pass.run(g);
  EXPECT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(DcePass().run(g).ok());
  EXPECT_TRUE(verify(g).ok()) << verify(g).message() << "\n" << print_graph(g);
  return pass.fused_groups();
}

TEST(PointwiseFusion, ChainWithBroadcastAndLiteralIsOneNodeWithSymbolFreeKernel) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, {kB, kT, 16});
  Val w = b.input("w", DType::f32, {16});
  b.output("y", exp(x) * w + 1.0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(fuse(g), 1);
  const auto f = fused_nodes(g);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]->inputs.size(), 2u);  // x and w; the constant 1 is a literal
  EXPECT_EQ(f[0]->attrs.shape("shape"), (Shape{kB, kT, 16}));
  const std::string& k = f[0]->attrs.s("kernel");
  // (B, T) merge into one loop dim (every input reads them alike); no concrete B or T anywhere.
  EXPECT_NE(k.find("; loop 2 1;"), std::string::npos) << k;
  EXPECT_EQ(k.find("16"), std::string::npos) << k;
  EXPECT_EQ(g.nodes().size(), 3u);  // two inputs and the fused node
}

TEST(PointwiseFusion, NeverAcrossANonFusibleNode) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, {8, 16});
  Val w = b.input("w", DType::f32, {16, 16});
  Val a = exp(x) * 2.0;
  Val m = matmul(a, w, false, false);
  b.output("y", (a + m) * 3.0);
  ASSERT_TRUE(b.ok());
  // {exp, mul} before the matmul and {add, mul} after it; the matmul reads the first group's
  // output, so the add cannot join that group.
  EXPECT_EQ(fuse(g), 2);
  EXPECT_EQ(g.nodes()[3].op, Op::matmul) << print_graph(g);
}

TEST(PointwiseFusion, PhasesStaySeparate) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, {8, 16});
  Val e = exp(x);
  b.set_phase(Phase::backward);
  b.output("y", e * e);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(fuse(g), 0);
}

TEST(PointwiseFusion, IntermediateReadOutsideBecomesAnOutput) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f64, {4, 16});
  Val y = exp(x);
  b.output("y", y);
  b.output("z", y * 2.0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(fuse(g), 1);
  const auto f = fused_nodes(g);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]->outputs.size(), 2u);
  EXPECT_EQ(f[0]->outputs[0], g.find_output("y"));  // value ids are kept
}

TEST(PointwiseFusion, ReductionClosesAGroupAndSmallValuesReadOutsideStopGrowth) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, {kB, kT, 16});
  Val r = rsqrt(mean(square(x), {-1}, /*keepdim=*/true) + 1e-5);  // (B, T, 1)
  b.output("r", r);
  b.output("y", x * r);
  Val s = sum(exp(x), {0}, /*keepdim=*/false);  // not the last axis: stays a reduction node
  b.output("s", s);
  ASSERT_TRUE(b.ok());
  // {square, mean}, {add, rsqrt} (r is read outside, so it cannot grow into (B, T, 16)); the
  // mul and the exp are single nodes and stay.
  EXPECT_EQ(fuse(g), 2);
  int sums = 0;
  for (const Node& n : g.nodes()) sums += n.op == Op::sum ? 1 : 0;
  EXPECT_EQ(sums, 1);
  const auto f = fused_nodes(g);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0]->attrs.s("reduce"), "mean");
  EXPECT_EQ(f[1]->attrs.shape("shape"), (Shape{kB, kT, 1}));
}

TEST(PointwiseFusion, SmallChainGrowsIntoTheLoopWhenReadOnlyInside) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, {kB, kT, 16});
  Val v = b.input("v", DType::f32, {kB, kT, 1});
  b.output("y", x * rsqrt(v + 1e-5));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(fuse(g), 1);
  const auto f = fused_nodes(g);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]->attrs.shape("shape"), (Shape{kB, kT, 16}));
  EXPECT_NE(f[0]->attrs.s("kernel").find("; in f32 10;"), std::string::npos)
      << f[0]->attrs.s("kernel");  // v is broadcast along the last loop dim
}

}  // namespace
}  // namespace lj
