// Tier-2 forward tests of the elementwise ops (unary, cast, binary with broadcasting,
// comparisons, where) against the reference kernels, in f32 and f64.
#include <cmath>

#include <gtest/gtest.h>

#include "op_test_util.h"

namespace lj::test {
namespace {

using Dims = std::vector<int64_t>;

struct UnaryCase {
  Op op;
  double lo, hi;          // input range
  double exponent = 0.0;  // pow_scalar only
};

Val apply_unary(Op op, Val x, double exponent) {
  switch (op) {
    case Op::neg:
      return neg(x);
    case Op::exp:
      return exp(x);
    case Op::log:
      return log(x);
    case Op::sqrt:
      return sqrt(x);
    case Op::rsqrt:
      return rsqrt(x);
    case Op::reciprocal:
      return reciprocal(x);
    case Op::square:
      return square(x);
    case Op::silu:
      return silu(x);
    case Op::sigmoid:
      return sigmoid(x);
    case Op::tanh:
      return tanh(x);
    case Op::pow_scalar:
      return pow(x, exponent);
    default:
      LJ_CHECK(false) << op_name(op);
  }
  return {};
}

TEST(Forward, Unary) {
  const std::vector<UnaryCase> cases = {
      {Op::neg, -4, 4},
      {Op::exp, -6, 6},
      {Op::log, 0.05, 20},
      {Op::sqrt, 0.0, 20},
      {Op::rsqrt, 0.05, 20},
      {Op::reciprocal, 0.05, 20},
      {Op::reciprocal, -20, -0.05},
      {Op::square, -4, 4},
      {Op::silu, -8, 8},
      {Op::sigmoid, -8, 8},
      {Op::tanh, -5, 5},
      {Op::pow_scalar, 0.1, 4, 0.5},
      {Op::pow_scalar, 0.1, 4, -1.5},
      {Op::pow_scalar, 0.1, 4, 1.7},
      {Op::pow_scalar, -3, 3, 2.0},
      {Op::pow_scalar, -3, 3, 3.0},
  };
  uint64_t seed = 1;
  for (const UnaryCase& c : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (const Dims& dims : {Dims{37}, Dims{3, 65}, Dims{2, 3, 4, 5}}) {
        const RefTensor x = random_tensor(dt, dims, seed++, c.lo, c.hi);
        auto r = run_graph({{"x", x}}, [&](Builder&, const std::vector<Val>& in) {
          return std::vector<Val>{apply_unary(c.op, in[0], c.exponent)};
        });
        const std::string what = std::string(op_name(c.op)) + "(" + std::to_string(c.exponent) +
                                 ") " + dtype_name(dt) + dims_to_string(dims);
        ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
        // f32: a correctly rounded result is within 6e-8 relative; vectorised exp/tanh
        // approximations may lose a few ulps, so rtol 1e-5 (about 100 ulps) with atol 1e-6 for
        // results near zero (tanh, silu). f64: libm-grade functions, within a few ulps (1e-15);
        // rtol 1e-12 leaves room for polynomial approximations. Observed: f32 max rel 1.7e-7
        // (tanh), f64 exact.
        const RefTensor want = rounded(ref::unary(c.op, x, c.exponent), dt);
        expect_close((*r)[0], want, by_dtype(dt, 1e-6, 1e-13), by_dtype(dt, 1e-5, 1e-12), what);
      }
    }
  }
}

struct CastCase {
  DType from, to;
  double lo, hi;
};

TEST(Forward, Cast) {
  const std::vector<CastCase> cases = {
      {DType::f32, DType::f64, -10, 10},     {DType::f64, DType::f32, -10, 10},
      {DType::f32, DType::bf16, -10, 10},    {DType::f32, DType::f16, -10, 10},
      {DType::bf16, DType::f32, -10, 10},    {DType::f16, DType::f32, -10, 10},
      {DType::bf16, DType::f64, -10, 10},    {DType::f32, DType::i32, -50, 50},
      {DType::f64, DType::i64, -50, 50},     {DType::f64, DType::i32, -50, 50},
      {DType::i32, DType::f32, -1000, 1000}, {DType::i64, DType::f64, -1000, 1000},
      {DType::u8, DType::f32, 0, 256},       {DType::f32, DType::u8, 0, 255},
      {DType::i32, DType::i64, -1000, 1000}, {DType::i64, DType::i32, -1000, 1000},
      {DType::f32, DType::f32, -10, 10},     {DType::f64, DType::f64, -10, 10},
  };
  uint64_t seed = 100;
  for (const CastCase& c : cases) {
    const Dims dims{5, 37};
    // f64 sources hold f32-representable values, so a kernel that converts f64 -> bf16 through
    // f32 and one that rounds directly agree.
    RefTensor x = is_float(c.from) ? random_tensor(DType::f32, dims, seed++, c.lo, c.hi)
                                   : random_ints(c.from, dims, seed++, static_cast<int64_t>(c.lo),
                                                 static_cast<int64_t>(c.hi));
    x = rounded(x, c.from);
    auto r = run_graph({{"x", x}}, [&](Builder&, const std::vector<Val>& in) {
      return std::vector<Val>{cast(in[0], c.to)};
    });
    const std::string what = std::string("cast ") + dtype_name(c.from) + " -> " + dtype_name(c.to);
    ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
    // Exact: conversions are deterministic roundings (nearest-even to narrower floats,
    // truncation toward zero to integers). Observed exact for every pair.
    expect_close((*r)[0], ref::cast(x, c.to), 0.0, 0.0, what);
  }
}

struct BinaryShapes {
  Dims a, b;
};

const std::vector<BinaryShapes>& binary_shapes() {
  static const std::vector<BinaryShapes> kShapes = {
      {{3, 37}, {3, 37}}, {{4, 1, 3}, {5, 3}},       {{3, 1}, {1, 4}}, {{}, {2, 3}},
      {{2, 3}, {}},       {{2, 3, 1, 5}, {3, 4, 1}}, {{7, 65}, {65}},  {{65}, {7, 65}},
  };
  return kShapes;
}

TEST(Forward, BinaryArithmetic) {
  uint64_t seed = 200;
  for (Op op : {Op::add, Op::sub, Op::mul, Op::div}) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (const BinaryShapes& s : binary_shapes()) {
        const RefTensor a = random_tensor(dt, s.a, seed++, -3, 3);
        // Divisors kept away from zero.
        RefTensor b = random_tensor(dt, s.b, seed++, 0.5, 2.0);
        if (op != Op::div) b = random_tensor(dt, s.b, seed++, -3, 3);
        auto r = run_graph({{"a", a}, {"b", b}}, [&](Builder&, const std::vector<Val>& in) {
          const Val x = in[0], y = in[1];
          return std::vector<Val>{op == Op::add   ? add(x, y)
                                  : op == Op::sub ? sub(x, y)
                                  : op == Op::mul ? mul(x, y)
                                                  : div(x, y)};
        });
        const std::string what = std::string(op_name(op)) + " " + dtype_name(dt) +
                                 dims_to_string(s.a) + dims_to_string(s.b);
        ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
        // One correctly rounded operation: half an ulp of the result (6e-8 f32, 1.1e-16 f64).
        // Observed exact (the reference rounds the same single operation).
        const RefTensor want = rounded(ref::binary(op, a, b), dt);
        expect_close((*r)[0], want, 0.0, by_dtype(dt, 1e-6, 1e-14), what);
      }
    }
  }
}

TEST(Forward, Comparisons) {
  uint64_t seed = 300;
  for (Op op : {Op::eq, Op::lt, Op::gt}) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (const BinaryShapes& s : binary_shapes()) {
        // Small integers, so that many pairs are equal.
        const RefTensor a = rounded(random_ints(DType::f64, s.a, seed++, 0, 3), dt);
        const RefTensor b = rounded(random_ints(DType::f64, s.b, seed++, 0, 3), dt);
        auto r = run_graph({{"a", a}, {"b", b}}, [&](Builder&, const std::vector<Val>& in) {
          const Val x = in[0], y = in[1];
          return std::vector<Val>{op == Op::eq ? eq(x, y) : op == Op::lt ? lt(x, y) : gt(x, y)};
        });
        const std::string what = std::string(op_name(op)) + " " + dtype_name(dt) +
                                 dims_to_string(s.a) + dims_to_string(s.b);
        ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
        // Exact: u8 1/0.
        expect_close((*r)[0], ref::binary(op, a, b), 0.0, 0.0, what);
      }
    }
  }
}

TEST(Forward, Where) {
  struct WhereShapes {
    Dims cond, a, b;
  };
  const std::vector<WhereShapes> shapes = {
      {{3, 37}, {3, 37}, {3, 37}},
      {{3, 1, 5}, {4, 5}, {3, 4, 1}},
      {{37}, {37}, {}},
      {{2, 1}, {}, {1, 6}},
  };
  uint64_t seed = 400;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const WhereShapes& s : shapes) {
      const RefTensor c = random_ints(DType::u8, s.cond, seed++, 0, 2);
      const RefTensor a = random_tensor(dt, s.a, seed++);
      const RefTensor b = random_tensor(dt, s.b, seed++);
      auto r = run_graph({{"c", c}, {"a", a}, {"b", b}}, [&](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{where(in[0], in[1], in[2])};
      });
      const std::string what = std::string("where ") + dtype_name(dt) + dims_to_string(s.cond) +
                               dims_to_string(s.a) + dims_to_string(s.b);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
      // Exact: a selection.
      expect_close((*r)[0], ref::where(c, a, b), 0.0, 0.0, what);
    }
  }
}

// A chain of elementwise ops in one graph, as model code writes them: the executor must pass
// each result on unchanged (e.g. the scalar operators make constants of x's dtype).
TEST(Forward, ElementwiseChain) {
  for (DType dt : {DType::f32, DType::f64}) {
    const RefTensor x = random_tensor(dt, {4, 37}, 500, -2, 2);
    auto r = run_graph({{"x", x}}, [&](Builder&, const std::vector<Val>& in) {
      return std::vector<Val>{(silu(in[0]) * 2.0 + 1.0) / (1.0 + square(in[0]))};
    });
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    RefTensor want = ref::zeros(dt, x.dims);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = x[i];
      want[i] = (ref::unary_scalar(Op::silu, v, 0) * 2.0 + 1.0) / (1.0 + v * v);
    }
    // f32: five roundings plus silu's exp, each <= 1e-5 relative as in Forward.Unary: 5e-5.
    // Observed: f32 rel 1.7e-7, f64 rel 2.7e-16.
    expect_close((*r)[0], want, by_dtype(dt, 1e-6, 1e-13), by_dtype(dt, 5e-5, 1e-12),
                 std::string("chain ") + dtype_name(dt));
  }
}

}  // namespace
}  // namespace lj::test
