// Graph-side op rules: shape inference of every op (with symbolic dims), the errors a user can
// provoke and how the builder reports them, verify() and print_graph(), FLOP counts, and that
// autodiff builds well-typed gradients through every differentiable op. Numbers computed by the
// kernels are tested in tests/ops/.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "graph/autodiff/autodiff.h"
#include "graph/autodiff/vjp.h"
#include "graph/builder.h"
#include "graph/builder_fused.h"
#include "graph/builder_moe.h"
#include "graph/op_rules.h"

namespace lj {

// Readable gtest failures for types ("f32(B, T, 8)" rather than bytes).
static void PrintTo(const TypedShape& t, std::ostream* os) {
  *os << t.to_string();
}

namespace {

const Dim kB = Dim::sym('B');
const Dim kT = Dim::sym('T');

TypedShape f32(Shape s) {
  return TypedShape{DType::f32, std::move(s)};
}
TypedShape typed(DType t, Shape s) {
  return TypedShape{t, std::move(s)};
}

// Runs op's shape inference directly.
Status infer(Op op, std::vector<TypedShape> in, const Attrs& attrs, std::vector<TypedShape>* out) {
  const OpDef& def = op_def(op);
  return def.infer(InferCtx{def, in, attrs}, out);
}

// The single output type, failing the test when inference fails.
TypedShape infer1(Op op, std::vector<TypedShape> in, const Attrs& attrs = {}) {
  std::vector<TypedShape> out;
  const Status s = infer(op, std::move(in), attrs, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  if (!s.ok() || out.empty()) return {};
  return out[0];
}

// The error message of an inference expected to fail ("" when it succeeds).
std::string infer_error(Op op, std::vector<TypedShape> in, const Attrs& attrs = {}) {
  std::vector<TypedShape> out;
  const Status s = infer(op, std::move(in), attrs, &out);
  EXPECT_FALSE(s.ok()) << op_name(op) << " accepted its inputs";
  EXPECT_TRUE(s.ok() || s.code() == StatusCode::invalid_argument) << s.to_string();
  return s.message();
}

Attrs reduce_attrs(std::vector<int64_t> axes, bool keepdim) {
  return {{"axes", std::move(axes)}, {"keepdim", keepdim}};
}

TEST(InferTest, Sources) {
  EXPECT_EQ(infer1(Op::input, {},
                   {{"name", std::string("x")}, {"dtype", DType::i32}, {"shape", Shape{kB, kT}}}),
            typed(DType::i32, Shape{kB, kT}));
  EXPECT_EQ(infer1(Op::constant, {}, {{"value", 1.0}, {"dtype", DType::f64}, {"shape", Shape{}}}),
            typed(DType::f64, Shape{}));
  EXPECT_EQ(
      infer1(Op::iota, {}, {{"shape", Shape{kT, 4}}, {"axis", int64_t{-2}}, {"dtype", DType::i64}}),
      typed(DType::i64, Shape{kT, 4}));
  EXPECT_EQ(infer1(Op::random_normal, {},
                   {{"shape", Shape{3, 5}},
                    {"dtype", DType::f32},
                    {"mean", 0.0},
                    {"std", 0.02},
                    {"seed", int64_t{1}}}),
            f32(Shape{3, 5}));
  EXPECT_NE(infer_error(Op::input, {}, {{"name", std::string("x")}}).find("dtype/shape"),
            std::string::npos);
  EXPECT_NE(
      infer_error(Op::iota, {}, {{"shape", Shape{4}}, {"axis", int64_t{1}}, {"dtype", DType::i32}})
          .find("axis 1"),
      std::string::npos);
  EXPECT_NE(infer_error(Op::random_uniform, {},
                        {{"shape", Shape{4}},
                         {"dtype", DType::i32},
                         {"low", 0.0},
                         {"high", 1.0},
                         {"seed", int64_t{1}}})
                .find("float"),
            std::string::npos);
  infer_error(Op::constant, {}, {{"value", 1.0}, {"dtype", DType::f32}, {"shape", Shape{4, -2}}});
}

TEST(InferTest, Elementwise) {
  const TypedShape x = f32(Shape{kB, kT, 8});
  EXPECT_EQ(infer1(Op::exp, {x}), x);
  EXPECT_EQ(infer1(Op::pow_scalar, {x}, {{"exponent", 3.0}}), x);
  EXPECT_EQ(infer1(Op::cast, {x}, {{"dtype", DType::bf16}}), typed(DType::bf16, Shape{kB, kT, 8}));
  EXPECT_NE(infer_error(Op::exp, {typed(DType::i32, Shape{4})}).find("float"), std::string::npos);

  EXPECT_EQ(infer1(Op::add, {x, f32(Shape{8})}), x);
  EXPECT_EQ(infer1(Op::mul, {f32(Shape{kB, 1, 8}), f32(Shape{kT, 1})}), x);
  EXPECT_EQ(infer1(Op::sub, {f32(Shape{}), x}), x);
  EXPECT_EQ(infer1(Op::lt, {x, f32(Shape{})}), typed(DType::u8, Shape{kB, kT, 8}));
  EXPECT_EQ(infer1(Op::eq, {typed(DType::i32, Shape{4}), typed(DType::i32, Shape{})}),
            typed(DType::u8, Shape{4}));

  const std::string msg = infer_error(Op::add, {f32(Shape{4, 8}), f32(Shape{3, 8})});
  EXPECT_EQ(msg, "add: cannot broadcast (inputs: f32(4, 8), f32(3, 8))");
  EXPECT_NE(infer_error(Op::mul, {x, f32(Shape{kB, 8})}).find("cannot broadcast"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::div, {x, typed(DType::f64, Shape{8})}).find("dtypes differ"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::add, {typed(DType::i32, Shape{4}), typed(DType::i32, Shape{4})})
                .find("float"),
            std::string::npos);

  const TypedShape cond = typed(DType::u8, Shape{kB, kT, 1});
  EXPECT_EQ(infer1(Op::where, {cond, f32(Shape{8}), f32(Shape{})}), x);
  EXPECT_NE(infer_error(Op::where, {x, x, x}).find("cond must be u8"), std::string::npos);
  EXPECT_NE(infer_error(Op::where, {cond, x, typed(DType::f64, Shape{})}).find("dtypes differ"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::where, {typed(DType::u8, Shape{3}), x, x}).find("cannot broadcast"),
            std::string::npos);
}

TEST(InferTest, Reductions) {
  const TypedShape x = f32(Shape{kB, kT, 8});
  EXPECT_EQ(infer1(Op::sum, {x}, reduce_attrs({-1}, false)), f32(Shape{kB, kT}));
  EXPECT_EQ(infer1(Op::mean, {x}, reduce_attrs({-1}, true)), f32(Shape{kB, kT, 1}));
  EXPECT_EQ(infer1(Op::max, {x}, reduce_attrs({0, 2}, true)), f32(Shape{1, kT, 1}));
  EXPECT_EQ(infer1(Op::sum, {x}, reduce_attrs({}, false)), f32(Shape{}));
  EXPECT_EQ(infer1(Op::sum, {x}, reduce_attrs({}, true)), f32(Shape{1, 1, 1}));
  EXPECT_EQ(infer1(Op::softmax, {x}, {{"axis", int64_t{-1}}}), x);
  EXPECT_NE(infer_error(Op::sum, {x}, reduce_attrs({3}, false)).find("axis 3 is out of range"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::sum, {x}, reduce_attrs({1, -2}, false)).find("twice"),
            std::string::npos);
  EXPECT_NE(
      infer_error(Op::mean, {typed(DType::i64, Shape{4})}, reduce_attrs({}, false)).find("float"),
      std::string::npos);
  EXPECT_NE(infer_error(Op::log_softmax, {x}, {{"axis", int64_t{-4}}}).find("out of range"),
            std::string::npos);
}

TEST(InferTest, Matmul) {
  auto mm = [](bool ta, bool tb) { return Attrs{{"ta", ta}, {"tb", tb}}; };
  // A linear layer: x (B, T, C) times w (F, C) stored HF-style, transposed.
  EXPECT_EQ(infer1(Op::matmul, {f32(Shape{kB, kT, 8}), f32(Shape{12, 8})}, mm(false, true)),
            f32(Shape{kB, kT, 12}));
  EXPECT_EQ(infer1(Op::matmul, {f32(Shape{8, kT}), f32(Shape{8, 12})}, mm(true, false)),
            f32(Shape{kT, 12}));
  EXPECT_EQ(infer1(Op::matmul, {f32(Shape{2, 1, 5, 4}), f32(Shape{3, 4, 6})}, mm(false, false)),
            f32(Shape{2, 3, 5, 6}));
  EXPECT_EQ(
      infer1(Op::matmul, {f32(Shape{kB, 4, kT, 16}), f32(Shape{kB, 1, kT, 16})}, mm(false, true)),
      f32(Shape{kB, 4, kT, kT}));
  const std::string msg =
      infer_error(Op::matmul, {f32(Shape{4, 8}), f32(Shape{7, 5})}, mm(false, false));
  EXPECT_NE(msg.find("matmul"), std::string::npos);
  EXPECT_NE(msg.find("K = 8 vs 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32(4, 8)"), std::string::npos);
  EXPECT_NE(msg.find("f32(7, 5)"), std::string::npos);
  EXPECT_NE(infer_error(Op::matmul, {f32(Shape{8}), f32(Shape{8, 5})}, mm(false, false))
                .find("rank >= 2"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::matmul, {f32(Shape{2, 4, 8}), f32(Shape{3, 8, 5})}, mm(false, false))
                .find("batch"),
            std::string::npos);
  EXPECT_NE(
      infer_error(Op::matmul, {f32(Shape{4, 8}), typed(DType::f64, Shape{8, 5})}, mm(false, false))
          .find("dtypes differ"),
      std::string::npos);
}

TEST(InferTest, Attention) {
  const Attrs causal{{"causal", true}, {"scale", 0.0}};
  const Attrs full{{"causal", false}, {"scale", 0.0}};
  const TypedShape q = f32(Shape{kB, 8, kT, 16});
  const TypedShape kv = f32(Shape{kB, 2, kT, 16});
  std::vector<TypedShape> out;
  ASSERT_TRUE(infer(Op::sdpa, {q, kv, kv}, causal, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], q);
  EXPECT_EQ(out[1], f32(Shape{kB, 8, kT}));
  // Cross attention (Tq != Tk) is fine without the causal mask.
  const TypedShape kv_long = f32(Shape{kB, 2, 32, 16});
  ASSERT_TRUE(infer(Op::sdpa, {q, kv_long, kv_long}, full, &out).ok());
  EXPECT_EQ(out[0], q);
  EXPECT_NE(infer_error(Op::sdpa, {q, kv_long, kv_long}, causal).find("Tq == Tk"),
            std::string::npos);
  const TypedShape kv3 = f32(Shape{kB, 3, kT, 16});
  EXPECT_NE(infer_error(Op::sdpa, {q, kv3, kv3}, causal).find("not a multiple"), std::string::npos);
  const TypedShape kv_d = f32(Shape{kB, 2, kT, 8});
  EXPECT_NE(infer_error(Op::sdpa, {q, kv_d, kv_d}, causal).find("head dims differ"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::sdpa, {q, kv, kv_d}, causal).find("same shape"), std::string::npos);
  EXPECT_NE(infer_error(Op::sdpa, {f32(Shape{8, kT, 16}), kv, kv}, causal).find("rank 4"),
            std::string::npos);

  const TypedShape lse = f32(Shape{kB, 8, kT});
  ASSERT_TRUE(infer(Op::sdpa_backward, {q, kv, kv, q, lse, q}, causal, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], q);
  EXPECT_EQ(out[1], kv);
  EXPECT_EQ(out[2], kv);
  EXPECT_NE(infer_error(Op::sdpa_backward, {q, kv, kv, q, q, q}, causal).find("lse"),
            std::string::npos);
}

TEST(InferTest, CrossEntropy) {
  const Dim n = kB * kT;
  const TypedShape logits = f32(Shape{n, 32});
  const TypedShape labels = typed(DType::i64, Shape{n});
  EXPECT_EQ(infer1(Op::cross_entropy, {logits, labels}, {{"ignore_index", int64_t{-100}}}),
            f32(Shape{}));
  EXPECT_EQ(infer1(Op::cross_entropy_backward, {logits, labels, f32(Shape{})},
                   {{"ignore_index", int64_t{-100}}}),
            logits);
  EXPECT_NE(
      infer_error(Op::cross_entropy, {logits, f32(Shape{n})}).find("labels must be i32 or i64"),
      std::string::npos);
  EXPECT_NE(infer_error(Op::cross_entropy, {logits, typed(DType::i32, Shape{kT})}).find("rows"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::cross_entropy, {f32(Shape{kB, kT, 32}), labels}).find("rank 2"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::cross_entropy_backward, {logits, labels, f32(Shape{1})}).find("dloss"),
            std::string::npos);
}

TEST(InferTest, Reshape) {
  const TypedShape x = f32(Shape{kB, kT, 12});
  auto shape = [](Shape s) { return Attrs{{"shape", std::move(s)}}; };
  EXPECT_EQ(infer1(Op::reshape, {x}, shape(Shape{kB * kT, 12})), f32(Shape{kT * kB, 12}));
  EXPECT_EQ(infer1(Op::reshape, {x}, shape(Shape{kB, kT, 3, 4})), f32(Shape{kB, kT, 3, 4}));
  EXPECT_EQ(infer1(Op::reshape, {x}, shape(Shape{-1, 4})), f32(Shape{Dim::sym('B', 3) * kT, 4}));
  EXPECT_EQ(infer1(Op::reshape, {x}, shape(Shape{kB, -1})), f32(Shape{kB, kT * 12}));
  EXPECT_EQ(infer1(Op::reshape, {f32(Shape{1, 1})}, shape(Shape{})), f32(Shape{}));
  EXPECT_NE(infer_error(Op::reshape, {x}, shape(Shape{kB, 12})).find("cannot reshape"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::reshape, {x}, shape(Shape{-1, -1})).find("more than one -1"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::reshape, {x}, shape(Shape{-1, 5})).find("cannot infer"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::reshape, {x}, shape(Shape{kB, kT, -3, -4})).find("invalid dim"),
            std::string::npos);
}

TEST(InferTest, PermuteSliceConcatExpand) {
  const TypedShape x = f32(Shape{kB, kT, 4, 16});
  auto perm = [](std::vector<int64_t> p) { return Attrs{{"perm", std::move(p)}}; };
  EXPECT_EQ(infer1(Op::permute, {x}, perm({0, 2, 1, 3})), f32(Shape{kB, 4, kT, 16}));
  EXPECT_EQ(infer1(Op::permute, {x}, perm({-1, 0, 1, 2})), f32(Shape{16, kB, kT, 4}));
  EXPECT_NE(infer_error(Op::permute, {x}, perm({0, 1, 1, 3})).find("not a permutation"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::permute, {x}, perm({0, 1, 2})).find("one entry per dim"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::permute, {x}, perm({0, 1, 2, 4})).find("not a permutation"),
            std::string::npos);

  auto sl = [](int64_t axis, int64_t start, int64_t end) {
    return Attrs{{"axis", axis}, {"start", start}, {"end", end}};
  };
  EXPECT_EQ(infer1(Op::slice, {x}, sl(-1, 8, 16)), f32(Shape{kB, kT, 4, 8}));
  EXPECT_EQ(infer1(Op::slice, {x}, sl(3, 4, 100)), f32(Shape{kB, kT, 4, 12}));  // end clamps
  EXPECT_EQ(infer1(Op::slice, {x}, sl(3, 16, 16)), f32(Shape{kB, kT, 4, 0}));   // empty is allowed
  EXPECT_EQ(infer1(Op::slice, {x}, sl(1, 0, INT64_MAX)), x);  // a symbolic dim, whole
  EXPECT_NE(infer_error(Op::slice, {x}, sl(1, 1, INT64_MAX)).find("sliced whole"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::slice, {x}, sl(3, 17, 20)).find("starts past"), std::string::npos);
  EXPECT_NE(infer_error(Op::slice, {x}, sl(3, 5, 2)).find("start <= end"), std::string::npos);
  EXPECT_NE(infer_error(Op::slice, {x}, sl(3, -1, 2)).find("start <= end"), std::string::npos);
  EXPECT_NE(infer_error(Op::slice, {x}, sl(4, 0, 1)).find("out of range"), std::string::npos);

  const Attrs last{{"axis", int64_t{-1}}};
  EXPECT_EQ(infer1(Op::concat, {x, f32(Shape{kB, kT, 4, 8}), x}, last), f32(Shape{kB, kT, 4, 40}));
  EXPECT_EQ(infer1(Op::concat, {x}, last), x);
  EXPECT_NE(infer_error(Op::concat, {x, f32(Shape{kB, kT, 5, 8})}, last).find("dim 2 differs"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::concat, {x, x}, Attrs{{"axis", int64_t{1}}}).find("concrete"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::concat, {x, typed(DType::f64, Shape{kB, kT, 4, 16})}, last)
                .find("dtypes differ"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::concat, {}, last).find("at least one"), std::string::npos);

  auto ex = [](Shape s) { return Attrs{{"shape", std::move(s)}}; };
  EXPECT_EQ(infer1(Op::expand, {f32(Shape{16})}, ex(Shape{kB, kT, 16})), f32(Shape{kB, kT, 16}));
  EXPECT_EQ(infer1(Op::expand, {f32(Shape{kB, 1, 1})}, ex(Shape{2, kB, kT, 16})),
            f32(Shape{2, kB, kT, 16}));
  EXPECT_NE(infer_error(Op::expand, {f32(Shape{kB, 2})}, ex(Shape{kB, 3})).find("cannot expand"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::expand, {f32(Shape{2, 3})}, ex(Shape{3})).find("fewer dims"),
            std::string::npos);
}

TEST(InferTest, GatherScatter) {
  const TypedShape table = f32(Shape{32, 8});
  const TypedShape ids = typed(DType::i32, Shape{kB, kT});
  EXPECT_EQ(infer1(Op::gather, {table, ids}), f32(Shape{kB, kT, 8}));
  EXPECT_EQ(infer1(Op::gather, {f32(Shape{32}), typed(DType::i64, Shape{5})}), f32(Shape{5}));
  EXPECT_NE(infer_error(Op::gather, {table, f32(Shape{kB, kT})}).find("ids must be i32 or i64"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::gather, {f32(Shape{}), ids}).find("rank >= 1"), std::string::npos);

  const Attrs out_shape{{"shape", Shape{32, 8}}};
  EXPECT_EQ(infer1(Op::scatter_add, {ids, f32(Shape{kB, kT, 8})}, out_shape), table);
  EXPECT_NE(infer_error(Op::scatter_add, {ids, f32(Shape{kT, kB, 8})}, out_shape).find("ids' dims"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::scatter_add, {ids, f32(Shape{kB, kT, 4})}, out_shape).find("row dims"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::scatter_add, {ids, f32(Shape{kB, kT, 8})}, Attrs{{"shape", Shape{32}}})
                .find("rank 2"),
            std::string::npos);
  EXPECT_NE(infer_error(Op::scatter_add, {f32(Shape{kB, kT}), f32(Shape{kB, kT, 8})}, out_shape)
                .find("ids"),
            std::string::npos);
}

// Every op of the table has rules, and each rule accepts what its builder function produces.
TEST(InferTest, EveryOpHasRules) {
  for (int i = 0; i < kNumOps; ++i) {
    const OpDef& def = op_def(static_cast<Op>(i));
    EXPECT_NE(def.infer, nullptr) << def.name;
    EXPECT_NE(def.flops, nullptr) << def.name;
    EXPECT_NE(def.vjp, nullptr) << def.name;
  }
}

TEST(BuilderErrorTest, MismatchIsStickyAndNamesTheShapes) {
  Graph g;
  Builder b(&g);
  const Val x = b.input("x", DType::f32, Shape{4, 8});
  const Val y = b.input("y", DType::f32, Shape{3, 8});
  ASSERT_TRUE(b.ok());
  const size_t nodes_before = g.nodes().size();
  const Val z = x + y;
  EXPECT_FALSE(z.valid());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::invalid_argument);
  const std::string& msg = b.status().message();
  EXPECT_NE(msg.find("add"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32(4, 8)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32(3, 8)"), std::string::npos) << msg;
  EXPECT_EQ(g.nodes().size(), nodes_before);

  // Later ops on the invalid value add nothing and keep the first error.
  const Val w = b.param("w", DType::f32, Shape{8, 8});
  const size_t nodes_after_param = g.nodes().size();
  const Val chained = softmax(matmul(exp(z) * 2.0, w), -1);
  EXPECT_FALSE(chained.valid());
  EXPECT_FALSE(sdpa(z, z, z).out.valid());
  EXPECT_FALSE(concat({x, z}, 0).valid());
  EXPECT_EQ(g.nodes().size(), nodes_after_param);
  EXPECT_EQ(b.status().message(), msg);
  b.output("z", z);
  EXPECT_TRUE(g.outputs().empty());
}

TEST(BuilderErrorTest, MatmulMismatchInScope) {
  Graph g;
  Builder b(&g);
  const Val x = b.input("x", DType::f32, Shape{kB, kT, 16});
  const Val w = b.param("w", DType::f32, Shape{32, 24});
  {
    ScopeGuard s(b, "model.layers.0.mlp");
    EXPECT_FALSE(matmul(x, w, false, true).valid());
  }
  ASSERT_FALSE(b.ok());
  const std::string& msg = b.status().message();
  EXPECT_NE(msg.find("model.layers.0.mlp"), std::string::npos) << msg;
  EXPECT_NE(msg.find("matmul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32(B, T, 16)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32(32, 24)"), std::string::npos) << msg;
}

// A small block: embedding, a projection, a residual, and a loss.
void build_small(Graph* g) {
  Builder b(g);
  const Val tokens = b.input("tokens", DType::i32, Shape{kB, kT});
  const Val labels = b.input("labels", DType::i32, Shape{kB, kT});
  const Val emb = b.param("emb", DType::f32, Shape{32, 16});
  const Val w = b.param("w", DType::f32, Shape{16, 16});
  Val h = gather(emb, tokens);  // (B, T, 16)
  {
    ScopeGuard s(b, "model.layers.0");
    h = h + silu(matmul(h, w, false, true));
  }
  const Val logits = matmul(reshape(h, Shape{-1, 16}), emb, false, true);  // (B*T, 32)
  const Val loss = cross_entropy(logits, reshape(labels, Shape{kB * kT}));
  b.output("loss", loss);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
}

TEST(VerifyTest, RoundTripAndTamper) {
  Graph g;
  build_small(&g);
  ASSERT_TRUE(verify(g).ok()) << verify(g).to_string();
  EXPECT_EQ(g.type(g.find_output("loss")), f32(Shape{}));
  EXPECT_EQ(g.type(g.find_input("tokens")), typed(DType::i32, Shape{kB, kT}));

  // A node whose recorded type disagrees with its op's inference is caught and named.
  Graph bad;
  build_small(&bad);
  std::vector<Node> nodes = bad.nodes();
  for (Node& n : nodes) {
    if (n.op == Op::silu) n.op = Op::sigmoid;  // the same type: still consistent
  }
  bad.set_nodes(nodes);
  EXPECT_TRUE(verify(bad).ok());
  for (Node& n : nodes) {
    if (n.op == Op::sigmoid) n.op = Op::cast, n.attrs = Attrs{{"dtype", DType::f64}};
  }
  bad.set_nodes(nodes);
  Status s = verify(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("(cast): output 0 is f32(B, T, 16) but the op infers f64(B, T, 16)"),
            std::string::npos)
      << s.message();

  // A node whose attributes no longer fit its inputs fails with the op's own message.
  nodes = g.nodes();
  for (Node& n : nodes) {
    if (n.op == Op::matmul && g.type(n.inputs[0]).shape.rank() == 2) n.attrs.set("tb", false);
  }
  g.set_nodes(nodes);
  s = verify(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("(matmul): matmul: contracted dims differ: K = 16 vs 32"),
            std::string::npos)
      << s.message();
}

TEST(VerifyTest, PrintGraph) {
  Graph g;
  build_small(&g);
  const std::string text = print_graph(g);
  EXPECT_NE(text.find("matmul("), std::string::npos) << text;
  EXPECT_NE(text.find("{ta=false, tb=true} : f32(B, T, 16)  @model.layers.0 [fwd]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cross_entropy("), std::string::npos) << text;
  EXPECT_NE(text.find("output loss = %"), std::string::npos) << text;
  // One line per node plus one per output.
  const auto lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  EXPECT_EQ(lines, g.nodes().size() + g.outputs().size());
}

TEST(CostTest, Flops) {
  Graph g;
  Builder b(&g);
  const Val x = b.input("x", DType::f32, Shape{kB, kT, 16});
  const Val w = b.param("w", DType::f32, Shape{24, 16});
  const Val y = matmul(x, w, false, true);
  const Val q = b.input("q", DType::f32, Shape{kB, 4, kT, 8});
  const Val kv = b.input("kv", DType::f32, Shape{kB, 2, kT, 8});
  const SdpaResult causal = sdpa(q, kv, kv, true);
  const SdpaResult full = sdpa(q, kv, kv, false);
  const Val s = sum(y, {-1});
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const SymEnv env{{'B', 2}, {'T', 10}};
  auto flops_of = [&](Val v) { return node_cost(g, g.producer(v.id), env).flops; };
  EXPECT_EQ(flops_of(y), 2.0 * 2 * 10 * 24 * 16);
  EXPECT_EQ(flops_of(full.out), 4.0 * 2 * 4 * 10 * 10 * 8);
  EXPECT_EQ(flops_of(causal.out), 4.0 * 2 * 4 * (10 * 11 / 2) * 8);
  EXPECT_EQ(flops_of(s), 2.0 * 10 * 24);
  EXPECT_EQ(node_cost(g, g.producer(x.id), env).flops, 0.0);
  // Bytes: x (2*10*16) and w (24*16) read, y (2*10*24) written, 4 bytes each.
  EXPECT_EQ(node_cost(g, g.producer(y.id), env).bytes, 4.0 * (2 * 10 * 16 + 24 * 16 + 2 * 10 * 24));
}

// A forward graph that uses every differentiable op, with symbolic B and T.
struct EveryOpModel {
  Graph g;
  ValueId loss = kNoValue;
  std::vector<ValueId> params;
};

void build_every_op(EveryOpModel* m) {
  Builder b(&m->g);
  const Val tokens = b.input("tokens", DType::i32, Shape{kB, kT});
  const Val labels = b.input("labels", DType::i64, Shape{kB, kT});
  const Val emb = b.param("emb", DType::f32, Shape{32, 8});
  const Val norm = b.param("norm", DType::f32, Shape{8});
  const Val wq = b.param("wq", DType::f32, Shape{8, 8});
  const Val wkv = b.param("wkv", DType::f32, Shape{8, 8});
  const Val w1 = b.param("w1", DType::f32, Shape{12, 8});
  const Val w2 = b.param("w2", DType::f32, Shape{8, 12});
  const Val bias = b.param("bias", DType::f32, Shape{8});
  const Val table = b.param("table", DType::f32, Shape{32, 8});

  Val h = gather(emb, tokens);  // (B, T, 8)
  // RMSNorm in primitives.
  const Val hn = h * rsqrt(mean(square(h), {-1}, true) + 1e-5) * norm;
  // Attention: 2 query heads, 1 kv head, D = 4; a RoPE-like rotation by slice/neg/concat.
  auto heads = [&](Val t, int n) { return permute(reshape(t, Shape{kB, kT, n, 4}), {0, 2, 1, 3}); };
  Val q = heads(matmul(hn, wq, false, true), 2);  // (B, 2, T, 4)
  const Val kv = matmul(hn, wkv, false, true);    // (B, T, 8)
  const Val k = heads(slice(kv, -1, 0, 4), 1);    // (B, 1, T, 4)
  const Val v = heads(slice(kv, -1, 4, 8), 1);    // (B, 1, T, 4)
  q = q + concat({-slice(q, -1, 2, 4), slice(q, -1, 0, 2)}, -1);
  const Val attn = transpose(sdpa(q, k, v, true).out, 1, 2);  // (B, T, 2, 4)
  h = h + reshape(attn, Shape{kB, kT, 8});
  // A batched matmul whose batch dims broadcast (k has 1 head), and one with ta.
  const Val scores = matmul(q, k, false, true);             // (B, 2, T, T)
  const Val gram = matmul(hn, hn, true, false);             // (B, 8, 8)
  const Val aux = mean(scores, {}) + sum(gram, {}) * 1e-3;  // ()
  // MLP with every unary op.
  const Val a = matmul(h, w1, false, true);  // (B, T, 12)
  Val u = silu(a) * tanh(a) + sigmoid(a) * 0.5;
  u = u + log(exp(a) + 1.0) - sqrt(square(a) + 1.0) + reciprocal(exp(a) + 1.0) + pow(a, 3.0) * 0.01;
  h = h + matmul(u, w2, false, true);
  // where (leaky relu), max, softmax, log_softmax, div, cast, expand.
  const Val zero = constant(b, 0.0, DType::f32);
  h = where(gt(h, zero), h, h * 0.1);
  h = h - max(h, {-1}, true);
  h = h + softmax(h, -1) * log_softmax(h, -1);
  h = h / (square(h) + 1.0);
  h = cast(cast(h, DType::f64), DType::f32);
  h = opaque(h, "host_probe");  // a host callback (a graph break); its VJP is its own backward
  h = h + expand(reshape(bias, Shape{1, 1, 8}), Shape{kB, kT, 8});
  // An embedding round trip: scatter rows into a table, gather them back.
  const Val scattered = scatter_add(tokens, h, Shape{32, 8}) + table;  // (32, 8)
  h = h + gather(scattered, tokens);
  // The fused ops of pattern fusion.
  const AddRmsNormResult fused_norm = add_rms_norm(h, hn, norm, 1e-5);
  h = fused_norm.sum + rms_norm(fused_norm.y, norm, 1e-5).y;
  const Val rope_table = mean(q, {0, 1});  // (T, 4)
  const Val rotated =
      rope(transpose(reshape(h, Shape{kB, kT, 2, 4}), 1, 2), rope_table, rope_table * 0.5);
  h = h + reshape(transpose(rotated, 1, 2), Shape{kB, kT, 8});
  h = swiglu(h, hn);
  h = h + swiglu_packed(concat({h, hn}, -1));  // (B, T, 16) -> (B, T, 8)
  // A mixture of experts: top 2 of 3 experts, rows sorted by expert, a grouped GEMM and its
  // weight gradient, the rows gathered back and summed over the 2.
  const Val router = b.param("router", DType::f32, Shape{3, 8});
  const Val experts = b.param("experts", DType::f32, Shape{3, 8, 8});
  const Val flat = reshape(h, Shape{kB * kT, 8});
  const Val router_logits = matmul(flat, router, false, true);  // (B*T, 3)
  const MoeSortResult sorted = moe_sort(topk(router_logits, 2), 3);
  // The exchange of expert parallelism, over a group of one rank (the rows stay).
  const ExpertRouteVals route = ep_route(sorted.group_sizes, 1);
  const Val rows = ep_dispatch(gather(flat, sorted.token), sorted.group_sizes, route.recv_sizes, 1);
  const Val routed = ep_combine(grouped_matmul(rows, experts, route.local_sizes, true),
                                sorted.group_sizes, route.recv_sizes, 1);
  const Val back = reshape(gather(routed, sorted.inverse), Shape{kB * kT, 2, 8});
  h = h + reshape(sum(back, {1}), Shape{kB, kT, 8}) +
      sum(grouped_matmul_wgrad(rows, rows, sorted.group_sizes), {}) * 1e-3 +
      mean(router_logits, {}) * 1e-3;
  // The fused ops of pattern fusion: a GEMM with the residual as epilogue, the chunked loss.
  h = matmul_add(h, wq, h, false, true);  // (B, T, 8)
  const Val fused_loss =
      linear_cross_entropy(reshape(h, Shape{-1, 8}), emb, reshape(labels, Shape{kB * kT})).loss;
  const Val logits = matmul(reshape(h, Shape{-1, 8}), emb, false, true);  // (B*T, 32)
  const Val loss = cross_entropy(logits, reshape(labels, Shape{kB * kT})) + aux + fused_loss;
  b.output("loss", loss);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  m->loss = loss.id;
  m->params = m->g.params();
}

TEST(AutodiffTest, EveryDifferentiableOpGetsTypedGradients) {
  EveryOpModel m;
  build_every_op(&m);
  ASSERT_TRUE(verify(m.g).ok());

  // The graph really uses every op that has a VJP rule.
  std::set<Op> used;
  for (const Node& n : m.g.nodes()) used.insert(n.op);
  for (int i = 0; i < kNumOps; ++i) {
    const OpDef& def = op_def(static_cast<Op>(i));
    if (def.vjp == &vjp_none || def.category == OpCategory::source) continue;
    EXPECT_TRUE(used.count(def.op)) << def.name << " has a VJP but the test graph does not use it";
  }

  const size_t num_fwd_nodes = m.g.nodes().size();
  auto grads = append_gradients(&m.g, m.loss, m.params);
  ASSERT_TRUE(grads.ok()) << grads.status().to_string();
  ASSERT_EQ(grads->size(), m.params.size());
  for (size_t i = 0; i < m.params.size(); ++i) {
    EXPECT_EQ(m.g.type((*grads)[i]), m.g.type(m.params[i])) << m.g.input_name(m.params[i]);
    // Every parameter is reached by the loss, so none is a constant zero.
    EXPECT_NE(m.g.producer((*grads)[i]).op, Op::constant) << m.g.input_name(m.params[i]);
  }
  const Status s = verify(m.g);
  EXPECT_TRUE(s.ok()) << s.to_string();

  std::set<Op> bwd_ops;
  for (size_t i = num_fwd_nodes; i < m.g.nodes().size(); ++i) {
    const Node& n = m.g.nodes()[i];
    EXPECT_EQ(n.phase, Phase::backward);
    bwd_ops.insert(n.op);
    // A 2-D weight's gradient is one GEMM over the flattened batch: no (B, K, N) stack of
    // per-row products is built and then summed.
    for (ValueId v : n.outputs) {
      const Shape& sh = m.g.type(v).shape;
      if (n.op == Op::matmul && sh.rank() == 3 && sh[0] == kB) {
        EXPECT_FALSE(sh[1].is_concrete() && sh[2].is_concrete())
            << "batched weight-gradient temporary " << sh.to_string() << "\n"
            << print_graph(m.g);
      }
    }
  }
  EXPECT_TRUE(bwd_ops.count(Op::sdpa_backward));
  EXPECT_TRUE(bwd_ops.count(Op::cross_entropy_backward));
  EXPECT_TRUE(bwd_ops.count(Op::scatter_add));  // the gradient of gather
}

// Gradients of broadcasting binary ops are summed back to each operand's shape.
TEST(AutodiffTest, BroadcastGradientsHaveOperandShapes) {
  Graph g;
  Builder b(&g);
  const Val x = b.param("x", DType::f64, Shape{kB, 1, 8});
  const Val y = b.param("y", DType::f64, Shape{kT, 1});
  const Val z = b.param("z", DType::f64, Shape{});
  const Val c = b.input("c", DType::u8, Shape{kT, 8});
  const Val loss = sum(where(c, x * y - z, x / (y + 2.0)), {});
  ASSERT_TRUE(b.ok());
  const std::vector<ValueId> wrt{x.id, y.id, z.id};
  auto grads = append_gradients(&g, loss.id, wrt);
  ASSERT_TRUE(grads.ok()) << grads.status().to_string();
  EXPECT_EQ(g.type((*grads)[0]), typed(DType::f64, Shape{kB, 1, 8}));
  EXPECT_EQ(g.type((*grads)[1]), typed(DType::f64, Shape{kT, 1}));
  EXPECT_EQ(g.type((*grads)[2]), typed(DType::f64, Shape{}));
  EXPECT_TRUE(verify(g).ok());
}

// A loss that reads sdpa's lse cannot be differentiated (the fused backward takes no lse
// gradient): autodiff says so instead of dropping that part of the gradient.
TEST(AutodiffTest, GradientThroughLseIsReported) {
  Graph g;
  Builder b(&g);
  const Val q = b.param("q", DType::f32, Shape{1, 2, 4, 8});
  const Val kv = b.param("kv", DType::f32, Shape{1, 2, 4, 8});
  const SdpaResult r = sdpa(q, kv, kv);
  const Val loss = sum(r.lse, {});
  ASSERT_TRUE(b.ok());
  const std::vector<ValueId> wrt{q.id};
  auto grads = append_gradients(&g, loss.id, wrt);
  ASSERT_FALSE(grads.ok());
  EXPECT_EQ(grads.status().code(), StatusCode::unimplemented);
  EXPECT_NE(grads.status().message().find("lse"), std::string::npos) << grads.status().message();
}

}  // namespace
}  // namespace lj
