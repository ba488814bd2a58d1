// The compiler's first passes: dead-code elimination, common-subexpression elimination and the
// pass manager (verification, LJ_DUMP files, the report). The key check: DCE+CSE on the real
// joint training graph gives bitwise the same loss and gradients on the executor.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/autodiff/autodiff.h"
#include "graph/builder.h"
#include "model/model_test_util.h"
#include "passes/cse/cse.h"
#include "passes/dce/dce.h"
#include "passes/pass.h"
#include "passes/simplify/simplify.h"
#include "runtime/executor.h"
#include "train/train_step.h"

namespace lj {
namespace {

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op ? 1 : 0;
  return n;
}

bool run_pass(Pass& p, Graph& g) {
  StatusOr<bool> r = p.run(g);
  EXPECT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(verify(g).ok()) << verify(g).message();
  return r.ok() && *r;
}

TEST(Dce, RemovesUnusedBranchKeepsInputsAndOutputs) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4, 8});
  Val unused = b.input("unused", DType::f32, Shape{4, 8});
  Val y = x * x;
  Val dead = exp(y) + 1.0;  // exp, constant, add: never reach an output
  (void)dead;
  Val dead_too = unused * 2.0;
  (void)dead_too;
  b.output("y", y);
  ASSERT_TRUE(b.ok());
  const size_t before = g.nodes().size();
  DcePass dce;
  EXPECT_TRUE(run_pass(dce, g));
  EXPECT_EQ(g.nodes().size(), 3u) << print_graph(g);  // two inputs and the mul
  EXPECT_LT(g.nodes().size(), before);
  EXPECT_EQ(count_op(g, Op::input), 2);
  EXPECT_EQ(count_op(g, Op::exp), 0);
  EXPECT_EQ(g.inputs().size(), 2u);
  EXPECT_EQ(g.find_output("y"), y.id);
  EXPECT_EQ(g.producer(y.id).op, Op::mul);
  // A second run finds nothing.
  EXPECT_FALSE(run_pass(dce, g));
}

TEST(Cse, MergesDuplicateProduct) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4, 8});
  Val y = b.input("y", DType::f32, Shape{4, 8});
  Val p1 = x * y;
  Val p2 = x * y;
  b.output("z", p1 + p2);
  ASSERT_TRUE(b.ok());
  CsePass cse;
  EXPECT_TRUE(run_pass(cse, g));
  EXPECT_EQ(count_op(g, Op::mul), 1) << print_graph(g);
  const Node& add = g.producer(g.find_output("z"));
  EXPECT_EQ(add.inputs[0], p1.id);
  EXPECT_EQ(add.inputs[1], p1.id);
  EXPECT_FALSE(run_pass(cse, g));
}

TEST(Cse, CollapsesDuplicatedChainInOneRun) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4, 8});
  Val a = silu(exp(x) * 3.0);
  Val c = silu(exp(x) * 3.0);
  b.output("a", a);
  b.output("out", sum(a + c, {}));
  ASSERT_TRUE(b.ok());
  CsePass cse;
  EXPECT_TRUE(run_pass(cse, g));
  EXPECT_EQ(count_op(g, Op::exp), 1) << print_graph(g);
  EXPECT_EQ(count_op(g, Op::constant), 1);
  EXPECT_EQ(count_op(g, Op::mul), 1);
  EXPECT_EQ(count_op(g, Op::silu), 1);
  EXPECT_FALSE(run_pass(cse, g));  // a fixed point after one run
}

TEST(Cse, GraphOutputOfTheDuplicateSurvives) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4});
  Val e1 = exp(x);
  Val use = e1 * 2.0;  // reads the first copy
  Val e2 = exp(x);
  b.output("use", use);
  b.output("e", e2);  // the later copy is a graph output
  ASSERT_TRUE(b.ok());
  CsePass cse;
  EXPECT_TRUE(run_pass(cse, g));
  EXPECT_EQ(count_op(g, Op::exp), 1);
  EXPECT_EQ(g.producer(e2.id).op, Op::exp);
  EXPECT_EQ(g.producer(use.id).inputs[0], e2.id);
  // Both copies are outputs: nothing can merge.
  Graph g2;
  Builder b2(&g2);
  Val x2 = b2.input("x", DType::f32, Shape{4});
  b2.output("a", exp(x2));
  b2.output("b", exp(x2));
  EXPECT_FALSE(run_pass(cse, g2));
  EXPECT_EQ(count_op(g2, Op::exp), 2);
}

TEST(Cse, KeepsDistinctAttrsAndInputsApart) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4, 8});
  Val x2 = b.input("x2", DType::f32, Shape{4, 8});  // same type, another input
  Val s0 = sum(x, {0});
  Val s1 = sum(x, {1});
  Val s1k = sum(x, {1}, /*keepdim=*/true);
  Val p = pow(x, 2.0), q = pow(x, 3.0);
  Val y = x * x2;
  b.output("s0", s0);
  b.output("s1", s1);
  b.output("s1k", s1k);
  b.output("p", p + q);
  b.output("y", y);
  ASSERT_TRUE(b.ok());
  const size_t before = g.nodes().size();
  CsePass cse;
  EXPECT_FALSE(run_pass(cse, g));
  EXPECT_EQ(g.nodes().size(), before);
  EXPECT_EQ(count_op(g, Op::input), 2);
}

TEST(Cse, RandomMergesOnlyWithEqualSeed) {
  Graph g;
  Builder b(&g);
  Val r1 = random_normal(b, Shape{16}, DType::f32, 0.0, 1.0, 7);
  Val r2 = random_normal(b, Shape{16}, DType::f32, 0.0, 1.0, 8);
  Val r3 = random_uniform(b, Shape{16}, DType::f32, 0.0, 1.0, 7);
  Val r4 = random_uniform(b, Shape{16}, DType::f32, 0.0, 1.0, 9);
  b.output("out", (r1 + r2) + (r3 + r4));
  ASSERT_TRUE(b.ok());
  CsePass cse;
  EXPECT_FALSE(run_pass(cse, g));
  EXPECT_EQ(count_op(g, Op::random_normal), 2);
  EXPECT_EQ(count_op(g, Op::random_uniform), 2);
  // The same seed and attributes are the same values: those merge.
  Graph g2;
  Builder b2(&g2);
  Val a = random_normal(b2, Shape{16}, DType::f32, 0.0, 1.0, 7);
  Val c = random_normal(b2, Shape{16}, DType::f32, 0.0, 1.0, 7);
  b2.output("out", a + c);
  ASSERT_TRUE(b2.ok());
  EXPECT_TRUE(run_pass(cse, g2));
  EXPECT_EQ(count_op(g2, Op::random_normal), 1);
}

TEST(Simplify, DropsAProductWithConstantOne) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4, 8});
  Val e = exp(x);
  Val one = constant(b, 1.0, DType::f32, Shape{});
  Val w = (e * one) + (one * e) + x;
  b.output("w", w);
  ASSERT_TRUE(b.ok());
  SimplifyPass simplify;
  EXPECT_TRUE(run_pass(simplify, g));
  EXPECT_EQ(count_op(g, Op::mul), 0) << print_graph(g);
  // Both products read e now: the first add adds e to itself.
  const Node& add = g.producer(g.producer(g.find_output("w")).inputs[0]);
  EXPECT_EQ(add.inputs[0], e.id);
  EXPECT_EQ(add.inputs[1], e.id);
  EXPECT_FALSE(run_pass(simplify, g));
}

TEST(Simplify, AGraphOutputKeepsItsIdAndItsProducerMovesUp) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4});
  Val e = exp(x);
  Val use = e * 2.0;  // reads e before the product
  Val z = e * constant(b, 1.0, DType::f32, Shape{});
  b.output("use", use);
  b.output("z", z);
  ASSERT_TRUE(b.ok());
  SimplifyPass simplify;
  EXPECT_TRUE(run_pass(simplify, g));
  EXPECT_EQ(g.producer(z.id).op, Op::exp);  // exp makes the output's id now
  EXPECT_EQ(g.producer(use.id).inputs[0], z.id);
  EXPECT_EQ(count_op(g, Op::mul), 1);
}

TEST(Simplify, KeepsWhatIsNotTheIdentity) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4});
  Val e = exp(x);
  b.output("two", e * 2.0);                                         // not one
  b.output("wide", e * constant(b, 1.0, DType::f32, Shape{3, 4}));  // broadcasts to (3, 4)
  b.output("input", x * constant(b, 1.0, DType::f32, Shape{}));     // x is a graph input
  b.output("e", e);
  b.output("both", e * constant(b, 1.0, DType::f32, Shape{}));  // e is an output too
  ASSERT_TRUE(b.ok());
  SimplifyPass simplify;
  EXPECT_FALSE(run_pass(simplify, g));
  EXPECT_EQ(count_op(g, Op::mul), 4);
}

// The rule's real target: the fused loss's VJPs scale dx and dw by the seed. The simplified
// graph computes the same bits with two kernels fewer.
TEST(Simplify, FusedLossGradientsKeepTheirBits) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{6, 8});
  Val w = b.input("w", DType::f32, Shape{11, 8});
  Val labels = b.input("labels", DType::i32, Shape{6});
  const LinearCrossEntropyResult r = linear_cross_entropy(x, w, labels);
  b.output("loss", r.loss);
  ASSERT_TRUE(b.ok());
  const std::vector<ValueId> wrt{x.id, w.id};
  auto grads = append_gradients(&g, r.loss.id, wrt);
  ASSERT_TRUE(grads.ok()) << grads.status().message();
  g.add_output("dx", (*grads)[0]);
  g.add_output("dw", (*grads)[1]);
  Graph opt = g;
  SimplifyPass simplify;
  EXPECT_TRUE(run_pass(simplify, opt));
  EXPECT_EQ(count_op(opt, Op::mul), 0) << print_graph(opt);
  EXPECT_EQ(count_op(g, Op::mul), 2) << print_graph(g);

  Device dev(2);
  std::vector<double> xs(48), ws(88);
  const std::vector<double> ys{0, 3, 10, 7, 7, 1};
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.7 * static_cast<double>(i));
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = std::cos(0.3 * static_cast<double>(i));
  const std::vector<Tensor> in{
      Tensor::from_doubles(dev, DType::f32, {6, 8}, xs, MemCategory::activations),
      Tensor::from_doubles(dev, DType::f32, {11, 8}, ws, MemCategory::weights),
      Tensor::from_doubles(dev, DType::i32, {6}, ys, MemCategory::activations)};
  Executor ex_plain(g, dev), ex_opt(opt, dev);
  auto a = ex_plain.run(in);
  auto o = ex_opt.run(in);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(ex_opt.kernels_launched() + 2, ex_plain.kernels_launched());
  ASSERT_EQ(a->size(), o->size());
  for (size_t i = 0; i < a->size(); ++i) {
    ASSERT_EQ((*a)[i].bytes(), (*o)[i].bytes());
    EXPECT_EQ(std::memcmp((*a)[i].raw(), (*o)[i].raw(), (*a)[i].bytes()), 0) << g.outputs()[i].name;
  }
}

// Builds the joint training graph of a preset, returns its node count before and after
// DCE+CSE through the pass manager.
void optimize(Graph& g, PassReport* report) {
  PassManager pm;
  pm.add(std::make_unique<SimplifyPass>());
  pm.add(std::make_unique<CsePass>());
  pm.add(std::make_unique<DcePass>());
  auto r = pm.run(g);
  ASSERT_TRUE(r.ok()) << r.status().message();
  *report = *r;
}

TEST(Passes, TrainGraphBitwiseEqualAfterDceCse) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  Graph plain, opt;
  auto ids = build_train_graph(*model, GraphOptions{}, &plain);
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  ASSERT_TRUE(build_train_graph(*model, GraphOptions{}, &opt).ok());
  PassReport report;
  optimize(opt, &report);
  ASSERT_TRUE(verify(opt).ok()) << verify(opt).message();
  EXPECT_LE(opt.nodes().size(), plain.nodes().size());
  EXPECT_EQ(opt.inputs(), plain.inputs());
  ASSERT_EQ(opt.outputs().size(), plain.outputs().size());
  std::printf("tiny train graph: %zu -> %zu nodes\n%s", plain.nodes().size(), opt.nodes().size(),
              report.to_string().c_str());

  Device dev(2);
  const int64_t B = 2, T = 16;
  auto inputs = testing_util::llama_train_inputs(dev, *model, B, T);
  ASSERT_TRUE(inputs.ok()) << inputs.status().to_string();
  Executor ex_plain(plain, dev), ex_opt(opt, dev);
  auto a = ex_plain.run(*inputs);
  auto b = ex_opt.run(*inputs);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(a->size(), b->size());
  EXPECT_LE(ex_opt.kernels_launched(), ex_plain.kernels_launched());
  for (size_t i = 0; i < a->size(); ++i) {
    const Tensor& x = (*a)[i];
    const Tensor& y = (*b)[i];
    ASSERT_EQ(x.dims(), y.dims()) << plain.outputs()[i].name;
    ASSERT_EQ(x.bytes(), y.bytes());
    // Bitwise: merged nodes computed the same values with the same deterministic kernels.
    EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.bytes()), 0) << plain.outputs()[i].name;
  }
  EXPECT_TRUE(std::isfinite((*a)[0].at(0)));
}

TEST(Passes, NodeCountsOfPresets) {
  for (const char* preset : {"tiny", "small"}) {
    auto model = llama_preset(preset);
    ASSERT_TRUE(model.ok());
    Graph g;
    ASSERT_TRUE(build_train_graph(*model, GraphOptions{}, &g).ok());
    const size_t before = g.nodes().size();
    std::vector<int> ops_before(kNumOps, 0);
    for (const Node& n : g.nodes()) ++ops_before[static_cast<size_t>(n.op)];
    PassReport report;
    optimize(g, &report);
    ASSERT_TRUE(verify(g).ok());
    EXPECT_LE(g.nodes().size(), before);
    std::printf("%s train graph: %zu -> %zu nodes after cse+dce; merged:", preset, before,
                g.nodes().size());
    for (int op = 0; op < kNumOps; ++op) {
      const int after = count_op(g, static_cast<Op>(op));
      if (after != ops_before[static_cast<size_t>(op)])
        std::printf(" %s %d->%d", op_name(static_cast<Op>(op)), ops_before[static_cast<size_t>(op)],
                    after);
    }
    std::printf("\n");
  }
}

TEST(PassManager, DumpsEachPassAndReports) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("lj_passes_dump_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ASSERT_EQ(setenv("LJ_DUMP", dir.c_str(), 1), 0);
  ASSERT_EQ(setenv("LJ_VERIFY_PASSES", "1", 1), 0);
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4});
  Val dead = exp(x);
  (void)dead;
  b.output("y", (x * x) + (x * x));
  ASSERT_TRUE(b.ok());
  PassManager pm;
  pm.add(std::make_unique<CsePass>());
  pm.add(std::make_unique<DcePass>());
  auto r = pm.run(g);
  unsetenv("LJ_DUMP");
  unsetenv("LJ_VERIFY_PASSES");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->runs.size(), 2u);
  EXPECT_EQ(r->runs[0].name, "cse");
  EXPECT_TRUE(r->runs[0].changed);
  EXPECT_EQ(r->runs[0].nodes_before, 5);  // input, exp, mul, mul, add
  EXPECT_EQ(r->runs[0].nodes_after, 4);
  EXPECT_EQ(r->runs[1].name, "dce");
  EXPECT_EQ(r->runs[1].nodes_after, 3);
  EXPECT_GE(r->runs[0].wall_s, 0.0);
  EXPECT_TRUE(r->changed());
  const std::string table = r->to_string();
  EXPECT_NE(table.find("cse"), std::string::npos) << table;
  EXPECT_NE(table.find("dce"), std::string::npos) << table;
  for (const char* f : {"00-cse.txt", "01-dce.txt"}) {
    std::ifstream in(dir / f);
    ASSERT_TRUE(in.good()) << (dir / f);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_NE(ss.str().find("mul"), std::string::npos) << ss.str();
  }
  std::filesystem::remove_all(dir);
}

TEST(PassManager, UnwritableDumpIsAStatus) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("lj_passes_file_" + std::to_string(::getpid()));
  { std::ofstream(file) << "x"; }
  // A directory below a regular file cannot be created.
  ASSERT_EQ(setenv("LJ_DUMP", (file / "sub").c_str(), 1), 0);
  Graph g;
  Builder b(&g);
  b.output("y", exp(b.input("x", DType::f32, Shape{4})));
  PassManager pm;
  pm.add(std::make_unique<DcePass>());
  auto r = pm.run(g);
  unsetenv("LJ_DUMP");
  std::filesystem::remove(file);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::io);
}

}  // namespace
}  // namespace lj
