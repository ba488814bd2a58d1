// probe/measured_ranking.h: the statistics of `ljperf plan --measure` and of the time model's
// ranking check. Values are made up; what is checked is the arithmetic.
#include "probe/measured_ranking.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lj {
namespace {

TEST(MeasuredRanking, KendallTauB) {
  EXPECT_DOUBLE_EQ(kendall_tau_b({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(kendall_tau_b({1, 2, 3, 4}, {40, 30, 20, 10}), -1.0);
  // One swap among 4: 5 concordant, 1 discordant of 6 pairs.
  EXPECT_NEAR(kendall_tau_b({1, 2, 3, 4}, {1, 3, 2, 4}), 4.0 / 6.0, 1e-15);
  // A tie in y: scipy.stats.kendalltau([1,2,3],[1,1,2]) = 0.8164965809277261.
  EXPECT_NEAR(kendall_tau_b({1, 2, 3}, {1, 1, 2}), 0.8164965809277261, 1e-15);
  EXPECT_TRUE(std::isnan(kendall_tau_b({1, 1}, {2, 3})));
}

TEST(MeasuredRanking, MedianIntervalFromOrderStatistics) {
  EXPECT_DOUBLE_EQ(median_of({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median_of({4, 1, 2, 3}), 2.5);
  // n = 10: k = 2 (coverage 1 - 2·11/1024 = 0.978515625; k = 3 would give 0.890625 < 0.95).
  std::vector<double> d{10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  const MedianInterval ci = median_interval(d, 0.95);
  EXPECT_DOUBLE_EQ(ci.lo, 2.0);
  EXPECT_DOUBLE_EQ(ci.hi, 9.0);
  EXPECT_DOUBLE_EQ(ci.median, 5.5);
  EXPECT_DOUBLE_EQ(ci.coverage, 1.0 - 2.0 * 11.0 / 1024.0);
  // n = 4 cannot reach 95%: the range, coverage 1 - 2/16.
  const MedianInterval small = median_interval({4, 1, 3, 2}, 0.95);
  EXPECT_DOUBLE_EQ(small.lo, 1.0);
  EXPECT_DOUBLE_EQ(small.hi, 4.0);
  EXPECT_DOUBLE_EQ(small.coverage, 0.875);
}

// Three candidates over 8 rounds with a load that moves every round by the same amount for all
// (what round-robin measurement cancels): A < B always by 1 ms, C is B with noise of ±5 ms.
std::vector<std::vector<double>> three_candidates() {
  const double load[8] = {0.0, 0.3, -0.1, 0.5, 0.2, -0.2, 0.4, 0.1};
  const double noise[8] = {0.005, -0.005, 0.004, -0.004, 0.003, -0.003, 0.002, -0.0025};
  std::vector<std::vector<double>> s(3, std::vector<double>(8));
  for (int r = 0; r < 8; ++r) {
    s[0][r] = 1.000 + load[r];
    s[1][r] = 1.001 + load[r];
    s[2][r] = 1.001 + load[r] + noise[r];
  }
  return s;
}

TEST(MeasuredRanking, PairedRoundsCancelTheLoad) {
  const MeasuredRanking m = rank_measurements(three_candidates(), 0.95);
  ASSERT_EQ(m.rounds, 8);
  EXPECT_EQ(m.rank[0], 1);
  // A and B differ by 1 ms in every round while the load moves 0.7 s: resolved.
  EXPECT_TRUE(m.resolved[0][1]);
  EXPECT_TRUE(m.resolved[1][0]);
  // B and C: differences of both signs, the interval contains 0.
  EXPECT_FALSE(m.resolved[1][2]);
  EXPECT_NEAR(m.vs_fastest[1].median, 0.001, 1e-12);
  EXPECT_DOUBLE_EQ(m.vs_fastest[0].median, 0.0);
  // The same medians in both halves order A first in both.
  EXPECT_FALSE(std::isnan(m.split_half_tau));
}

TEST(MeasuredRanking, SplitHalfTauSeesAnUnstableMeasurement) {
  // Two candidates that swap between even and odd rounds: split-half tau -1.
  std::vector<std::vector<double>> s{{1, 2, 1, 2}, {2, 1, 2, 1}, {3, 3, 3, 3}};
  const MeasuredRanking m = rank_measurements(s);
  EXPECT_NEAR(m.split_half_tau, 1.0 / 3.0, 1e-15);  // 2 concordant pairs, 1 discordant
  EXPECT_TRUE(std::isnan(rank_measurements({{1.0}, {2.0}}).split_half_tau));
}

TEST(MeasuredRanking, ResolvedTauCountsOnlyResolvedPairs) {
  const std::vector<double> measured{1.0, 2.0, 3.0};
  std::vector<std::vector<bool>> resolved(3, std::vector<bool>(3, true));
  // Predicted swaps 2 and 3: tau over all 3 pairs 1/3.
  const std::vector<double> predicted{1.0, 3.0, 2.0};
  int pairs = 0;
  EXPECT_NEAR(resolved_tau(predicted, measured, resolved, &pairs), 1.0 / 3.0, 1e-15);
  EXPECT_EQ(pairs, 3);
  // The swapped pair unresolved: the rest agree.
  resolved[1][2] = resolved[2][1] = false;
  EXPECT_DOUBLE_EQ(resolved_tau(predicted, measured, resolved, &pairs), 1.0);
  EXPECT_EQ(pairs, 2);
}

}  // namespace
}  // namespace lj
