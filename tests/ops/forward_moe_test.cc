// Tier-2 forward tests of the mixture-of-experts ops (topk, moe_sort, grouped_matmul,
// grouped_matmul_wgrad) against plain loops written here, in f32 and f64, with empty groups,
// and their data errors (group sizes that do not cover the rows, expert ids out of range).
#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>

#include "graph/builder_moe.h"
#include "op_test_util.h"

namespace lj::test {
namespace {

// The reference top-k: a stable sort of the indices by value, descending.
RefTensor ref_topk(const RefTensor& x, int64_t k) {
  const int64_t e = x.dims.back(), rows = x.numel() / e;
  std::vector<int64_t> dims = x.dims;
  dims.back() = k;
  RefTensor out = ref::zeros(DType::i32, dims);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> order(static_cast<size_t>(e));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return x[r * e + a] > x[r * e + b]; });
    for (int64_t j = 0; j < k; ++j) out[r * k + j] = static_cast<double>(order[j]);
  }
  return out;
}

TEST(ForwardMoe, TopkLargestFirstTiesInIndexOrder) {
  for (DType dt : {DType::f32, DType::f64}) {
    RefTensor x = random_tensor(dt, {5, 3, 9}, 7);
    x[4] = x[7] = 5.0;  // a tie at the top of row 0: index 4 before 7
    auto r = run_graph({{"x", x}}, [](Builder&, const std::vector<Val>& in) {
      return std::vector<Val>{topk(in[0], 4)};
    });
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    expect_close((*r)[0], ref_topk(x, 4), 0, 0, std::string("topk ") + dtype_name(dt));
    EXPECT_EQ((*r)[0][0], 4);
    EXPECT_EQ((*r)[0][1], 7);
  }
}

TEST(ForwardMoe, SortGroupsRowsByExpertStably) {
  // 6 tokens x 2 choices over 5 experts; expert 3 gets no row.
  const std::vector<double> ids = {1, 0, 4, 1, 0, 2, 1, 4, 2, 0, 4, 1};
  auto r = run_graph({{"ids", make_tensor(DType::i32, {6, 2}, ids)}},
                     [](Builder&, const std::vector<Val>& in) {
                       MoeSortResult s = moe_sort(in[0], 5);
                       return std::vector<Val>{s.token, s.inverse, s.group_sizes};
                     });
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // The reference: pairs in expert order, each expert's pairs in flat order.
  std::vector<int64_t> order(12);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return ids[static_cast<size_t>(a)] < ids[static_cast<size_t>(b)];
  });
  RefTensor token = ref::zeros(DType::i32, {12}), inverse = ref::zeros(DType::i32, {12});
  RefTensor sizes = ref::zeros(DType::i32, {5});
  for (int64_t row = 0; row < 12; ++row) {
    token[row] = static_cast<double>(order[static_cast<size_t>(row)] / 2);
    inverse[order[static_cast<size_t>(row)]] = static_cast<double>(row);
    sizes[static_cast<int64_t>(ids[static_cast<size_t>(order[static_cast<size_t>(row)])])] += 1;
  }
  expect_close((*r)[0], token, 0, 0, "moe_sort token");
  expect_close((*r)[1], inverse, 0, 0, "moe_sort inverse");
  expect_close((*r)[2], sizes, 0, 0, "moe_sort group_sizes");
  EXPECT_EQ((*r)[2][3], 0);
}

TEST(ForwardMoe, SortRefusesAnExpertOutOfRange) {
  auto r = run_graph({{"ids", make_tensor(DType::i32, {2, 2}, {0, 1, 5, 2})}},
                     [](Builder&, const std::vector<Val>& in) {
                       return std::vector<Val>{moe_sort(in[0], 3).group_sizes};
                     });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().to_string().find("expert id 5"), std::string::npos)
      << r.status().to_string();
}

// y[r] = x[r] w[e(r)]^T (tb) or x[r] w[e(r)], e(r) the group of row r.
RefTensor ref_grouped(const RefTensor& x, const RefTensor& w, const std::vector<int64_t>& sizes,
                      bool tb) {
  const int64_t rows = x.dims[0], k = x.dims[1], n = tb ? w.dims[1] : w.dims[2];
  RefTensor y = ref::zeros(x.dtype, {rows, n});
  int64_t r = 0;
  for (size_t e = 0; e < sizes.size(); ++e) {
    for (int64_t i = 0; i < sizes[e]; ++i, ++r) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) {
          const int64_t wi = static_cast<int64_t>(e) * n * k + (tb ? j * k + q : q * n + j);
          acc += x[r * k + q] * w[wi];
        }
        y[r * n + j] = acc;
      }
    }
  }
  return y;
}

RefTensor sizes_tensor(const std::vector<int64_t>& sizes) {
  return make_tensor(DType::i32, {static_cast<int64_t>(sizes.size())},
                     std::vector<double>(sizes.begin(), sizes.end()));
}

TEST(ForwardMoe, GroupedMatmulPerGroupWithEmptyGroups) {
  const std::vector<int64_t> sizes = {3, 0, 5, 1, 0};  // 9 rows, two empty experts
  for (DType dt : {DType::f32, DType::f64}) {
    for (bool tb : {true, false}) {
      const RefTensor x = random_tensor(dt, {9, 6}, 21);
      const RefTensor w =
          random_tensor(dt, tb ? std::vector<int64_t>{5, 4, 6} : std::vector<int64_t>{5, 6, 4}, 22);
      auto r = run_graph({{"x", x}, {"w", w}, {"g", sizes_tensor(sizes)}},
                         [tb](Builder&, const std::vector<Val>& in) {
                           return std::vector<Val>{grouped_matmul(in[0], in[1], in[2], tb)};
                         });
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      // f32: 6-term dot products of values in [-1, 1): observed max abs error 2.4e-7.
      expect_close((*r)[0], ref_grouped(x, w, sizes, tb), by_dtype(dt, 1e-6, 1e-14), 0,
                   std::string("grouped_matmul ") + dtype_name(dt) + (tb ? " tb" : ""));
    }
  }
}

TEST(ForwardMoe, GroupedMatmulWgradSumsEachGroupAndZeroesEmptyOnes) {
  const std::vector<int64_t> sizes = {4, 0, 2};
  for (DType dt : {DType::f32, DType::f64}) {
    const RefTensor a = random_tensor(dt, {6, 3}, 31), b = random_tensor(dt, {6, 5}, 32);
    auto r = run_graph({{"a", a}, {"b", b}, {"g", sizes_tensor(sizes)}},
                       [](Builder&, const std::vector<Val>& in) {
                         return std::vector<Val>{grouped_matmul_wgrad(in[0], in[1], in[2])};
                       });
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    RefTensor want = ref::zeros(dt, {3, 3, 5});
    int64_t row = 0;
    for (int64_t e = 0; e < 3; ++e) {
      for (int64_t i = 0; i < sizes[static_cast<size_t>(e)]; ++i, ++row) {
        for (int64_t p = 0; p < 3; ++p) {
          for (int64_t q = 0; q < 5; ++q)
            want[e * 15 + p * 5 + q] += a[row * 3 + p] * b[row * 5 + q];
        }
      }
    }
    // f32: sums of at most 4 products in [-1, 1): observed max abs error 1.2e-7.
    expect_close((*r)[0], want, by_dtype(dt, 1e-6, 1e-14), 0,
                 std::string("grouped_matmul_wgrad ") + dtype_name(dt));
  }
}

// The f32 kernels split the work over the threads once per call (the forward's rows across group
// boundaries, the weight gradient's output rows): at sizes where the split cuts through groups
// (151 rows, groups of 0 to 57), 1, 2 and 3 threads each give the reference (run_graph checks a
// rerun gives the same bits). The weight gradient's elements each sum their group's rows whatever
// the split, so it is bitwise the same at every thread count; the forward's rows are not (the
// GEMM's kernel depends on a piece's row count: 2 and 3 threads differed from 1 in the last bit).
TEST(ForwardMoe, GroupedMatmulsSplitOverThreads) {
  const std::vector<int64_t> sizes = {57, 0, 33, 1, 40, 20};  // 151 of 160 rows; 9 padding
  const int64_t rows = 160, k = 40, n = 36;
  for (bool tb : {true, false}) {
    const RefTensor x = random_tensor(DType::f32, {rows, k}, 41);
    const RefTensor w = random_tensor(
        DType::f32, tb ? std::vector<int64_t>{6, n, k} : std::vector<int64_t>{6, k, n}, 42);
    const RefTensor dy = random_tensor(DType::f32, {rows, n}, 43);
    std::vector<std::vector<RefTensor>> outs;
    for (int threads : {1, 2, 3}) {
      auto r = run_graph(
          {{"x", x}, {"w", w}, {"dy", dy}, {"g", sizes_tensor(sizes)}},
          [tb](Builder&, const std::vector<Val>& in) {
            return std::vector<Val>{grouped_matmul(in[0], in[1], in[3], tb),
                                    grouped_matmul_wgrad(in[2], in[0], in[3])};
          },
          RunOptions{threads});
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      outs.push_back(*r);
    }
    RefTensor head = ref::zeros(DType::f32, {151, k});
    for (int64_t i = 0; i < 151 * k; ++i) head[i] = x[i];
    RefTensor want = ref::zeros(DType::f32, {rows, n});
    const RefTensor used = ref_grouped(head, w, sizes, tb);
    for (int64_t i = 0; i < used.numel(); ++i) want[i] = used[i];
    for (size_t t = 0; t < outs.size(); ++t) {
      // 40-term dot products of values in [-1, 1): observed max abs error 1.6e-6.
      expect_close(outs[t][0], want, 1e-5, 0,
                   std::string(tb ? "grouped_matmul tb" : "grouped_matmul") + ", threads " +
                       std::to_string(t + 1));
    }
    RefTensor want_w = ref::zeros(DType::f32, {6, n, k});
    int64_t row = 0;
    for (int64_t e = 0; e < 6; ++e) {
      for (int64_t i = 0; i < sizes[static_cast<size_t>(e)]; ++i, ++row) {
        for (int64_t p = 0; p < n; ++p) {
          for (int64_t q = 0; q < k; ++q)
            want_w[(e * n + p) * k + q] += dy[row * n + p] * x[row * k + q];
        }
      }
    }
    // Sums of up to 57 products in [-1, 1): observed max abs error 1.8e-6.
    expect_close(outs[0][1], want_w, 1e-5, 0, "grouped_matmul_wgrad");
    for (size_t t = 1; t < outs.size(); ++t) {
      EXPECT_EQ(outs[t][1].data, outs[0][1].data) << "weight gradient, threads " << t + 1;
    }
  }
}

TEST(ForwardMoe, GroupSizesAboveTheRowsAreAnError) {
  auto r = run_graph({{"x", random_tensor(DType::f32, {4, 2}, 1)},
                      {"w", random_tensor(DType::f32, {2, 3, 2}, 2)},
                      {"g", sizes_tensor({3, 2})}},
                     [](Builder&, const std::vector<Val>& in) {
                       return std::vector<Val>{grouped_matmul(in[0], in[1], in[2], true)};
                     });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().to_string().find("sum to 5"), std::string::npos) << r.status().to_string();
}

// Sizes below the rows: expert parallelism's receive capacity. The groups' rows are their GEMMs,
// bitwise those of the same groups without padding; the rows past them are zero.
TEST(ForwardMoe, RowsPastTheGroupsComeOutZero) {
  const RefTensor x = random_tensor(DType::f32, {5, 2}, 1),
                  w = random_tensor(DType::f32, {2, 3, 2}, 2);
  RefTensor head = ref::zeros(DType::f32, {3, 2});
  for (int64_t i = 0; i < 6; ++i) head[i] = x[i];
  const auto run = [&](const RefTensor& rows) {
    return run_graph({{"x", rows}, {"w", w}, {"g", sizes_tensor({2, 1})}},
                     [](Builder&, const std::vector<Val>& in) {
                       return std::vector<Val>{grouped_matmul(in[0], in[1], in[2], true)};
                     });
  };
  auto padded = run(x);
  auto exact = run(head);
  ASSERT_TRUE(padded.ok()) << padded.status().to_string();
  ASSERT_TRUE(exact.ok()) << exact.status().to_string();
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ((*padded)[0][i], (*exact)[0][i]) << i;
  for (int64_t i = 9; i < 15; ++i) EXPECT_EQ((*padded)[0][i], 0.0) << i;
}

// Expert parallelism's exchange over a group of one rank (the CPU kernels' own case; the
// exchange between ranks runs in tests/e2e/dist_moe_test.sh): the route keeps every row, dispatch
// and combine give the rows back as they are, and sizes that do not route the rows are an error.
TEST(ForwardMoe, ExchangeOverOneRankKeepsEveryRow) {
  const RefTensor x = random_tensor(DType::f32, {4, 3}, 5);
  auto r = run_graph({{"x", x}, {"g", sizes_tensor({1, 0, 3})}},
                     [](Builder&, const std::vector<Val>& in) {
                       const ExpertRouteVals route = ep_route(in[1], 1);
                       const Val there = ep_dispatch(in[0], in[1], route.recv_sizes, 1);
                       return std::vector<Val>{route.recv_sizes, route.local_sizes, there,
                                               ep_combine(there, in[1], route.recv_sizes, 1)};
                     });
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].data, (std::vector<double>{1, 0, 3}));
  EXPECT_EQ((*r)[1].data, (std::vector<double>{1, 0, 3}));
  EXPECT_EQ((*r)[2].data, x.data);
  EXPECT_EQ((*r)[3].data, x.data);
  auto bad = run_graph({{"x", x}, {"g", sizes_tensor({1, 0, 2})}},
                       [](Builder&, const std::vector<Val>& in) {
                         return std::vector<Val>{ep_dispatch(in[0], in[1], in[1], 1)};
                       });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("do not route the 4 rows"), std::string::npos)
      << bad.status().to_string();
}

}  // namespace
}  // namespace lj::test
