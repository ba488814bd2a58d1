// Tier-2 forward tests of the reductions (sum, mean, max over any axes, keepdim) and of softmax /
// log_softmax along any axis, against the reference kernels, in f32 and f64.
#include <cmath>

#include <gtest/gtest.h>

#include "op_test_util.h"

namespace lj::test {
namespace {

using Dims = std::vector<int64_t>;

struct ReduceCase {
  Dims dims;
  std::vector<int64_t> axes;
};

int64_t reduced_count(const ReduceCase& c) {
  int64_t n = 1;
  const int r = static_cast<int>(c.dims.size());
  if (c.axes.empty()) return ref::RefTensor{DType::f64, c.dims, {}}.numel();
  for (int64_t a : c.axes) n *= c.dims[static_cast<size_t>(a < 0 ? a + r : a)];
  return n;
}

std::string axes_string(const std::vector<int64_t>& axes) {
  std::string s = "{";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + std::to_string(axes[i]);
  return s + "}";
}

TEST(Forward, Reductions) {
  const std::vector<ReduceCase> cases = {
      {{3, 37, 5}, {}},   {{3, 37, 5}, {0}},    {{3, 37, 5}, {1}},     {{3, 37, 5}, {2}},
      {{3, 37, 5}, {-1}}, {{3, 37, 5}, {0, 2}}, {{3, 37, 5}, {1, -1}}, {{3, 37, 5}, {0, 1, 2}},
      {{129}, {0}},       {{4, 1000}, {-1}},    {{1000, 4}, {0}},      {{2, 3, 4, 5}, {1, 3}},
      {{6, 1}, {1}},
  };
  uint64_t seed = 1;
  for (Op op : {Op::sum, Op::mean, Op::max}) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (const ReduceCase& c : cases) {
        for (bool keepdim : {false, true}) {
          const RefTensor x = random_tensor(dt, c.dims, seed++, -1, 1);
          auto r = run_graph({{"x", x}}, [&](Builder&, const std::vector<Val>& in) {
            return std::vector<Val>{op == Op::sum    ? sum(in[0], c.axes, keepdim)
                                    : op == Op::mean ? mean(in[0], c.axes, keepdim)
                                                     : max(in[0], c.axes, keepdim)};
          });
          const std::string what = std::string(op_name(op)) + " " + dtype_name(dt) +
                                   dims_to_string(c.dims) + " axes " + axes_string(c.axes) +
                                   (keepdim ? " keepdim" : "");
          ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
          const double n = static_cast<double>(reduced_count(c));
          // Inputs in [-1, 1]. Summing n values in f32 errs by about sqrt(n) * 6e-8 * (typical
          // partial sum), at worst n * 6e-8 * sum|x| for a naive loop: atol 2e-7 * n bounds
          // the worst case for our n <= 1000 (sum is about 0.5 n). f64: 1e-15 * n likewise.
          // mean divides both by n; max is exact. Observed: f32 exact (the kernel accumulates
          // f32 wider than f32), f64 max abs 5.3e-14 at n = 1000 (bound 1e-12).
          double atol = by_dtype(dt, 2e-7, 1e-15) * n;
          if (op == Op::mean) atol /= n;
          if (op == Op::max) atol = 0.0;
          expect_close((*r)[0], rounded(ref::reduce(op, x, c.axes, keepdim), dt), atol,
                       by_dtype(dt, 1e-6, 1e-14), what);
        }
      }
    }
  }
}

struct SoftmaxCase {
  Dims dims;
  int axis;
  double range;  // inputs in [-range, range]
};

TEST(Forward, SoftmaxAndLogSoftmax) {
  const std::vector<SoftmaxCase> cases = {
      {{3, 37, 5}, 0, 3},  {{3, 37, 5}, 1, 3},  {{3, 37, 5}, 2, 3}, {{3, 37, 5}, -1, 3},
      {{3, 37, 5}, -2, 3}, {{8, 1001}, -1, 20}, {{2, 1}, -1, 3},    {{5, 129}, 1, 50},
  };
  uint64_t seed = 100;
  for (Op op : {Op::softmax, Op::log_softmax}) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (const SoftmaxCase& c : cases) {
        const RefTensor x = random_tensor(dt, c.dims, seed++, -c.range, c.range);
        auto r = run_graph({{"x", x}}, [&](Builder&, const std::vector<Val>& in) {
          return std::vector<Val>{op == Op::softmax ? softmax(in[0], c.axis)
                                                    : log_softmax(in[0], c.axis)};
        });
        const std::string what = std::string(op_name(op)) + " " + dtype_name(dt) +
                                 dims_to_string(c.dims) + " axis " + std::to_string(c.axis);
        ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
        const RefTensor want =
            rounded(op == Op::softmax ? ref::softmax(x, c.axis) : ref::log_softmax(x, c.axis), dt);
        // softmax: probabilities in [0, 1], each an exp over a sum of up to 1001 terms: f32
        // relative error about 1e-6 (exp approximations plus the sum), so atol 1e-6 for tiny
        // probabilities and rtol 1e-5. log_softmax: values up to ~100 in magnitude (range 50),
        // error relative to the max-shifted logits: atol 1e-5 f32. f64: 1e-13 either way.
        // Observed: softmax f32 abs 6e-8 (rel 3.6e-7), log_softmax f32 abs 1.9e-6 at values
        // near 100; f64 <= 7e-15.
        expect_close((*r)[0], want, by_dtype(dt, op == Op::softmax ? 1e-6 : 1e-5, 1e-13),
                     by_dtype(dt, 1e-5, 1e-12), what);
      }
    }
  }
}

// Softmax rows sum to one and survive huge logits (the max must be subtracted).
TEST(Forward, SoftmaxIsStableForLargeLogits) {
  for (DType dt : {DType::f32, DType::f64}) {
    RefTensor x = random_tensor(dt, {4, 37}, 200, -1, 1);
    for (int64_t i = 0; i < x.numel(); ++i) x[i] = ref::round_to(dt, x[i] + 1000.0);
    auto r = run_graph({{"x", x}}, [&](Builder&, const std::vector<Val>& in) {
      return std::vector<Val>{softmax(in[0], -1), log_softmax(in[0], -1)};
    });
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    // Same bounds as Forward.SoftmaxAndLogSoftmax; log_softmax values are O(4) here, but the
    // f32 inputs near 1000 are quantised to 6e-5, which the reference sees too. Observed:
    // softmax abs 3.7e-9, log_softmax abs 4.4e-16 (f64) and below the f32 bound.
    expect_close((*r)[0], rounded(ref::softmax(x, -1), dt), by_dtype(dt, 1e-6, 1e-13),
                 by_dtype(dt, 1e-5, 1e-12), std::string("softmax large ") + dtype_name(dt));
    expect_close((*r)[1], rounded(ref::log_softmax(x, -1), dt), by_dtype(dt, 1e-5, 1e-12),
                 by_dtype(dt, 1e-5, 1e-12), std::string("log_softmax large ") + dtype_name(dt));
  }
}

}  // namespace
}  // namespace lj::test
