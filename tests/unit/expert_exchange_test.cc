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

}  // namespace
}  // namespace lj
