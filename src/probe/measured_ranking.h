// Ranking choices by measurement: the statistics of `ljperf plan --measure` (an autotune of the
// recompute choices) and of the time model's check against it (bench/plan/time_model.sh).
//
// The measurement runs every candidate in one process, round-robin (one step of each per round),
// so drift in clock frequency, page placement and other processes' load falls on every candidate
// alike. What it gives, per candidate c and round r: seconds[c][r]. Because the rounds pair the
// candidates, two candidates are compared by their paired differences seconds[i][r] -
// seconds[j][r] (the load of round r cancels), and a pair is *resolved* when the
// distribution-free confidence interval of the median difference (sign test order statistics)
// excludes 0. Kendall's tau then compares a predicted ranking against the measured one over all
// pairs (tau-b) and over the resolved pairs only.
#pragma once

#include <cstdint>
#include <vector>

namespace lj {

// Kendall's tau-b of two paired lists (ties in either count as in scipy.stats.kendalltau);
// NaN when every pair is tied in one of them. x and y have the same length.
double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y);

// The median of a list (the mean of the two middle values for an even count; 0 for none).
double median_of(std::vector<double> v);

// The median of `d` and a distribution-free confidence interval for it from its order
// statistics: [d(k), d(n+1-k)] with the largest k whose two-sided sign-test coverage
// 1 - 2·P(Binomial(n, 1/2) < k) is at least `confidence` (k = 1, the range, when n is too small
// for it; `coverage` says what was reached).
struct MedianInterval {
  double lo = 0, median = 0, hi = 0;
  double coverage = 0;
};
MedianInterval median_interval(std::vector<double> d, double confidence = 0.95);

// The measurement of n candidates over R rounds, summarised.
struct MeasuredRanking {
  std::vector<double> median;  // per candidate: the median over the rounds
  std::vector<int> rank;       // per candidate: 1 = fastest median
  // resolved[i][j]: the median of the paired differences i - j has a confidence interval
  // (`confidence`) that excludes 0, i.e. the measurement tells i and j apart.
  std::vector<std::vector<bool>> resolved;
  // Per candidate: the paired difference to the fastest candidate (median and interval, in
  // seconds; the fastest itself: 0).
  std::vector<MedianInterval> vs_fastest;
  // Kendall's tau-b of the medians over the even rounds (0, 2, ...) against the odd ones: the
  // measurement's agreement with itself (NaN with fewer than 2 rounds).
  double split_half_tau = 0;
  int rounds = 0;
};
// seconds[c][r]: candidate c in round r; every candidate has the same number of rounds.
MeasuredRanking rank_measurements(const std::vector<std::vector<double>>& seconds,
                                  double confidence = 0.95);

// Kendall's tau of `predicted` against `measured` over the pairs `resolved` marks (pairs tied in
// `predicted` skipped): (concordant - discordant) / (concordant + discordant). NaN when no pair
// counts. `pairs`, when given, receives the number of pairs counted.
double resolved_tau(const std::vector<double>& predicted, const std::vector<double>& measured,
                    const std::vector<std::vector<bool>>& resolved, int* pairs = nullptr);

}  // namespace lj
