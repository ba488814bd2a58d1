// dist/expert_exchange.h in one process (an expert-parallel group of one): the route keeps every
// row, dispatch and combine are copies, and a size that cannot be a row count is refused.
// tests/dist/expert_exchange_test.cc checks the exchange between ranks.
#include "dist/expert_exchange.h"

#include <gtest/gtest.h>

#include <vector>

namespace lj {
namespace {

TEST(ExpertExchange, OneRankKeepsEveryRowInPlace) {
  SelfCommunicator c;
  const std::vector<int64_t> sizes{2, 0, 1};
  StatusOr<ExpertRoute> route = plan_expert_route(c, sizes);
  ASSERT_TRUE(route.ok()) << route.status().message();
  EXPECT_EQ(route->local_experts, 3);
  EXPECT_EQ(route->group_sizes, sizes);
  EXPECT_EQ(route->rows_in(), 3);
  EXPECT_EQ(route->rows_out(), 3);
  const std::vector<float> rows{1, 2, 3, 4, 5, 6};  // 3 rows of 2
  std::vector<float> staging(6), out(6), back(6);
  ExpertExchange x(c, *route, 2);
  ASSERT_TRUE(x.dispatch(rows, staging, out).ok());
  EXPECT_EQ(out, rows);
  ASSERT_TRUE(x.combine(out, staging, back).ok());
  EXPECT_EQ(back, rows);
  std::vector<float> short_out(4);
  EXPECT_FALSE(x.dispatch(rows, staging, short_out).ok());
}

TEST(ExpertExchange, RefusesANegativeGroupSize) {
  SelfCommunicator c;
  const std::vector<int64_t> sizes{2, -1};
  EXPECT_FALSE(plan_expert_route(c, sizes).ok());
  EXPECT_FALSE(plan_expert_route(c, std::vector<int64_t>{}).ok());
}

// The route from both sides' counts (what the graph's ep_route output holds), without
// communicating: rank 1 of 2 with E = 4 (local experts 2 and 3) that sends 3 rows to rank 0 and
// 2 to itself, and receives [q L + l] = {4, 1, 2, 0} (rank 0: 4 for expert 2, 1 for expert 3).
TEST(ExpertExchange, RouteFromCountsOfBothSides) {
  const std::vector<int64_t> sizes{1, 2, 2, 0}, recv{4, 1, 2, 0};
  StatusOr<ExpertRoute> r = expert_route(2, sizes, recv);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->local_experts, 2);
  EXPECT_EQ(r->send_rows, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(r->recv_rows, (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(r->group_sizes, (std::vector<int64_t>{6, 1}));
  EXPECT_EQ(r->rows_out(), 5);
  EXPECT_EQ(r->rows_in(), 7);
  EXPECT_FALSE(expert_route(3, sizes, recv).ok());                        // 4 over 3 ranks
  EXPECT_FALSE(expert_route(2, sizes, std::vector<int64_t>{4, 1}).ok());  // lengths differ
  EXPECT_FALSE(expert_route(2, sizes, std::vector<int64_t>{4, -1, 2, 0}).ok());
}

}  // namespace
}  // namespace lj
