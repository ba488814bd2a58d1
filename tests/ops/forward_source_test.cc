// Tier-2 forward tests of the source ops: constant, iota, random_normal, random_uniform. Also
// checks that the CPU kernel table covers every op of the op table except `input` and the alias
// ops (reshape), which the executor serves without a kernel.
#include <cmath>

#include <gtest/gtest.h>

#include "backends/cpu/cpu.h"
#include "op_test_util.h"
#include "runtime/executor.h"

namespace lj::test {
namespace {

TEST(KernelTable, CpuHasAKernelForEveryComputingOp) {
  const KernelTable& t = cpu::kernels();
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    if (op == Op::input || op_def(op).has(kAlias)) continue;
    EXPECT_NE(t[op], nullptr) << "no CPU kernel for " << op_name(op);
  }
}

TEST(Forward, Constant) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64, DType::u8}) {
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{}, std::vector<int64_t>{3, 37}}) {
      const double value = is_float(dt) ? 2.75 : 7.0;
      auto r = run_graph({}, [&](Builder& b, const std::vector<Val>&) {
        return std::vector<Val>{constant(b, value, dt, Shape::concrete(dims))};
      });
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      // Exact: 2.75 and 7 are representable in every tested dtype.
      expect_close((*r)[0], ref::constant(value, dt, dims), 0.0, 0.0,
                   std::string("constant ") + dtype_name(dt) + dims_to_string(dims));
    }
  }
}

TEST(Forward, Iota) {
  const std::vector<int64_t> dims{3, 5, 37};
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    for (int axis : {0, 1, 2, -1}) {
      auto r = run_graph({}, [&](Builder& b, const std::vector<Val>&) {
        return std::vector<Val>{iota(b, Shape::concrete(dims), axis, dt)};
      });
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      // Exact: small integers.
      expect_close((*r)[0], ref::iota(dims, axis, dt), 0.0, 0.0,
                   std::string("iota ") + dtype_name(dt) + " axis " + std::to_string(axis));
    }
  }
}

// Runs one random op and returns its values.
std::vector<double> run_random(Op op, DType dt, std::vector<int64_t> dims, double p0, double p1,
                               uint64_t seed, int threads) {
  auto r = run_graph(
      {},
      [&](Builder& b, const std::vector<Val>&) {
        const Shape s = Shape::concrete(dims);
        return std::vector<Val>{op == Op::random_normal ? random_normal(b, s, dt, p0, p1, seed)
                                                        : random_uniform(b, s, dt, p0, p1, seed)};
      },
      RunOptions{threads, true});
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return {};
  EXPECT_EQ((*r)[0].dtype, dt);
  EXPECT_EQ((*r)[0].dims, dims);
  return (*r)[0].data;
}

// 20000 draws: the 1% critical value of the one-sample Kolmogorov-Smirnov statistic is
// 1.63 / sqrt(20000) = 0.0115. The bound 0.02 leaves room for f32 rounding of the values; the
// seeds are fixed, so the test is deterministic. Observed statistics (printed with
// LJ_OPS_VERBOSE): 0.0061 normal, 0.0062 uniform.
constexpr int64_t kDraws = 20000;
constexpr double kKsBound = 0.02;

TEST(Forward, RandomNormalDistribution) {
  for (DType dt : {DType::f32, DType::f64}) {
    const std::vector<double> x = run_random(Op::random_normal, dt, {kDraws}, 1.5, 2.0, 42, 2);
    ASSERT_EQ(static_cast<int64_t>(x.size()), kDraws);
    double mean = 0, sq = 0;
    for (double v : x) mean += v;
    mean /= kDraws;
    for (double v : x) sq += (v - mean) * (v - mean);
    const double std = std::sqrt(sq / (kDraws - 1));
    // Standard error of the mean: 2 / sqrt(20000) = 0.014; of the std: 2 / sqrt(40000) = 0.01.
    // 5 standard errors.
    EXPECT_NEAR(mean, 1.5, 0.07) << dtype_name(dt);
    EXPECT_NEAR(std, 2.0, 0.05) << dtype_name(dt);
    const double ks = ref::ks_statistic(x, ref::normal_cdf, 1.5, 2.0);
    EXPECT_LT(ks, kKsBound) << dtype_name(dt);
    report(std::string("random_normal KS ") + dtype_name(dt), {ks, 0.0});
  }
}

TEST(Forward, RandomUniformDistribution) {
  for (DType dt : {DType::f32, DType::f64}) {
    const std::vector<double> x = run_random(Op::random_uniform, dt, {kDraws}, -2.0, 3.0, 7, 2);
    ASSERT_EQ(static_cast<int64_t>(x.size()), kDraws);
    for (double v : x) {
      ASSERT_GE(v, -2.0);
      ASSERT_LE(v, 3.0);  // f32 rounding may reach `high` itself
    }
    const double ks = ref::ks_statistic(x, ref::uniform_cdf, -2.0, 3.0);
    EXPECT_LT(ks, kKsBound) << dtype_name(dt);
    report(std::string("random_uniform KS ") + dtype_name(dt), {ks, 0.0});
  }
}

// Counter-based generators: element i depends on (seed, i) only, so 1 and 2 threads give the
// same bits; another seed gives other values.
TEST(Forward, RandomIsThreadCountIndependent) {
  for (Op op : {Op::random_normal, Op::random_uniform}) {
    for (DType dt : {DType::f32, DType::f64}) {
      const std::vector<int64_t> dims{37, 129};
      const std::vector<double> one = run_random(op, dt, dims, 0.0, 1.0, 1234, 1);
      const std::vector<double> two = run_random(op, dt, dims, 0.0, 1.0, 1234, 2);
      ASSERT_EQ(one.size(), two.size());
      EXPECT_TRUE(one == two) << op_name(op) << " " << dtype_name(dt)
                              << ": values depend on the thread count";
      const std::vector<double> other = run_random(op, dt, dims, 0.0, 1.0, 1235, 2);
      int64_t same = 0;
      for (size_t i = 0; i < other.size(); ++i) same += other[i] == two[i];
      EXPECT_LT(same, 10) << op_name(op) << ": seeds 1234 and 1235 give the same values";
    }
  }
}

// The value at a position does not depend on the tensor's shape beyond its flat index.
TEST(Forward, RandomPrefixIsStable) {
  const std::vector<double> small = run_random(Op::random_normal, DType::f64, {100}, 0, 1, 9, 2);
  const std::vector<double> big = run_random(Op::random_normal, DType::f64, {1000}, 0, 1, 9, 2);
  ASSERT_EQ(small.size(), 100u);
  ASSERT_EQ(big.size(), 1000u);
  for (size_t i = 0; i < small.size(); ++i) EXPECT_EQ(small[i], big[i]) << "element " << i;
}

}  // namespace
}  // namespace lj::test

namespace lj {
namespace {

// A bf16 op on the CPU runs (widened around the f32 kernel: backends/cpu/widen.cc): exp of
// bf16 values is exp in f32 rounded once to bf16.
TEST(ExecutorDtypes, Bf16ComputeOnTheCpuRoundsOnce) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{4});
  b.output("y", cast(exp(cast(x, DType::bf16)), DType::f32));
  ASSERT_TRUE(b.ok());
  Device dev(1);
  Executor ex(g, dev);
  const std::vector<double> v{0, 1, 2, 3};
  std::vector<Tensor> in{Tensor::from_doubles(dev, DType::f32, {4}, v)};
  auto r = ex.run(in);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::vector<double> got = (*r)[0].to_doubles();
  for (size_t i = 0; i < v.size(); ++i) {
    const double want = bf16_to_f32(f32_to_bf16(std::exp(static_cast<float>(v[i]))));
    // Observed equal. The f32 exp is within 2 ulp of exact, so its bf16 rounding can differ from
    // the reference's only at a tie: one bf16 ulp (2^-8 relative) at most.
    EXPECT_NEAR(got[i], want, std::ldexp(std::fabs(want), -8)) << "exp(" << v[i] << ")";
  }
}

}  // namespace
}  // namespace lj
