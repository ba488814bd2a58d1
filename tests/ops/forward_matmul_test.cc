// Tier-2 forward tests of matmul: every ta/tb combination, 2-D, batched, broadcast batch dims
// and a 2-D weight shared by a batch, with sizes that are not multiples of any tile size.
#include <cmath>

#include <gtest/gtest.h>

#include "op_test_util.h"

namespace lj::test {
namespace {

using Dims = std::vector<int64_t>;

struct MatmulCase {
  Dims a_batch, b_batch;  // batch dims of each operand
  int64_t m, k, n;
};

// The operand dims for a logical (batch..., rows, cols) matrix stored transposed or not.
Dims operand_dims(const Dims& batch, int64_t rows, int64_t cols, bool transposed) {
  Dims d = batch;
  d.push_back(transposed ? cols : rows);
  d.push_back(transposed ? rows : cols);
  return d;
}

TEST(Forward, Matmul) {
  const std::vector<MatmulCase> cases = {
      {{}, {}, 1, 1, 1},         {{}, {}, 5, 7, 3},      {{}, {}, 37, 65, 29},
      {{}, {}, 64, 64, 64},      {{}, {}, 3, 300, 2},    {{4}, {4}, 5, 7, 3},
      {{3}, {}, 37, 16, 19},     {{2, 5}, {}, 7, 33, 9}, {{2, 1}, {3}, 4, 6, 5},
      {{1, 3}, {2, 1}, 3, 8, 4}, {{2}, {2}, 1, 129, 1},  {{}, {3}, 6, 5, 4},
  };
  uint64_t seed = 1;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const MatmulCase& c : cases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          const RefTensor a = random_tensor(dt, operand_dims(c.a_batch, c.m, c.k, ta), seed++);
          const RefTensor b = random_tensor(dt, operand_dims(c.b_batch, c.k, c.n, tb), seed++);
          auto r = run_graph({{"a", a}, {"b", b}}, [&](Builder&, const std::vector<Val>& in) {
            return std::vector<Val>{matmul(in[0], in[1], ta, tb)};
          });
          const std::string what = std::string("matmul ") + dtype_name(dt) +
                                   dims_to_string(a.dims) + " x " + dims_to_string(b.dims) +
                                   " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
          ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
          // Entries in [-1, 1]: each output sums K products of magnitude <= 1, about sqrt(K/9)
          // in size. f32 accumulation errs by at most K * 6e-8 * sum|a||b| <= K^2 * 6e-8 in
          // the worst naive order; blocked GEMMs are far better (observed below ~1e-6 for
          // K = 300). atol 1e-6 * K covers the sqrt(K)-scaled typical error with a wide margin.
          // f64: 1e-15 * K likewise. Observed: f32 max abs 2.9e-6 (bound 1e-6 K, K up to
          // 300), f64 max abs 3.6e-15.
          const double atol = by_dtype(dt, 1e-6, 1e-15) * static_cast<double>(c.k);
          expect_close((*r)[0], rounded(ref::matmul(a, b, ta, tb), dt), atol,
                       by_dtype(dt, 1e-5, 1e-13), what);
        }
      }
    }
  }
}

// The model's shapes: activations (B, T, C) times an HF-layout weight (out, in) with tb.
TEST(Forward, MatmulLinearLayer) {
  for (DType dt : {DType::f32, DType::f64}) {
    const RefTensor x = random_tensor(dt, {2, 37, 48}, 10);
    const RefTensor w = random_tensor(dt, {70, 48}, 11);
    auto r = run_graph({{"x", x}, {"w", w}}, [&](Builder&, const std::vector<Val>& in) {
      return std::vector<Val>{matmul(in[0], in[1], false, true)};
    });
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    // As in Forward.Matmul with K = 48. Observed: f32 abs 1.9e-6 (bound 4.8e-5), f64 exact.
    expect_close((*r)[0], rounded(ref::matmul(x, w, false, true), dt),
                 by_dtype(dt, 1e-6, 1e-15) * 48, by_dtype(dt, 1e-5, 1e-13),
                 std::string("linear ") + dtype_name(dt));
  }
}

}  // namespace
}  // namespace lj::test
