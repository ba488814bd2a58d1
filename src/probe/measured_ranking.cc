#include "probe/measured_ranking.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/check.h"

namespace lj {

double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y) {
  LJ_CHECK(x.size() == y.size()) << "kendall_tau_b: " << x.size() << " vs " << y.size();
  double conc = 0, disc = 0, tx = 0, ty = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    for (size_t j = i + 1; j < x.size(); ++j) {
      const double dx = x[i] - x[j], dy = y[i] - y[j];
      if (dx == 0 && dy == 0) continue;
      if (dx == 0) {
        ++tx;
      } else if (dy == 0) {
        ++ty;
      } else if ((dx > 0) == (dy > 0)) {
        ++conc;
      } else {
        ++disc;
      }
    }
  }
  const double denom = std::sqrt((conc + disc + tx) * (conc + disc + ty));
  return denom > 0 ? (conc - disc) / denom : std::numeric_limits<double>::quiet_NaN();
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

MedianInterval median_interval(std::vector<double> d, double confidence) {
  MedianInterval r;
  if (d.empty()) return r;
  std::sort(d.begin(), d.end());
  const auto n = static_cast<int64_t>(d.size());
  r.median = median_of(d);
  // P(Binomial(n, 1/2) <= j) for j = 0, 1, ...: the coverage of [d(k), d(n+1-k)] is
  // 1 - 2·P(X <= k-1).
  std::vector<double> cdf;
  double pmf = std::pow(0.5, static_cast<double>(n)), acc = 0;
  for (int64_t j = 0; j <= n; ++j) {
    acc += pmf;
    cdf.push_back(acc);
    pmf *= static_cast<double>(n - j) / static_cast<double>(j + 1);
  }
  int64_t k = 1;
  while (k + 1 <= (n + 1) / 2 && 1.0 - 2.0 * cdf[static_cast<size_t>(k)] >= confidence) ++k;
  r.lo = d[static_cast<size_t>(k - 1)];
  r.hi = d[static_cast<size_t>(n - k)];
  r.coverage = std::max(0.0, 1.0 - 2.0 * cdf[static_cast<size_t>(k - 1)]);
  return r;
}

MeasuredRanking rank_measurements(const std::vector<std::vector<double>>& seconds,
                                  double confidence) {
  MeasuredRanking m;
  const size_t n = seconds.size();
  if (n == 0) return m;
  const size_t rounds = seconds[0].size();
  for (const auto& s : seconds)
    LJ_CHECK(s.size() == rounds) << "rank_measurements: candidates with different round counts";
  m.rounds = static_cast<int>(rounds);
  for (const auto& s : seconds) m.median.push_back(median_of(s));
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return m.median[a] < m.median[b]; });
  m.rank.assign(n, 0);
  for (size_t i = 0; i < n; ++i) m.rank[order[i]] = static_cast<int>(i + 1);
  const auto diffs = [&](size_t i, size_t j) {
    std::vector<double> d(rounds);
    for (size_t r = 0; r < rounds; ++r) d[r] = seconds[i][r] - seconds[j][r];
    return d;
  };
  m.resolved.assign(n, std::vector<bool>(n, false));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const MedianInterval ci = median_interval(diffs(i, j), confidence);
      const bool apart = ci.coverage >= confidence && (ci.lo > 0 || ci.hi < 0);
      m.resolved[i][j] = m.resolved[j][i] = apart;
    }
  }
  const size_t fastest = order[0];
  for (size_t i = 0; i < n; ++i)
    m.vs_fastest.push_back(i == fastest ? MedianInterval{0, 0, 0, 1}
                                        : median_interval(diffs(i, fastest), confidence));
  if (rounds >= 2) {
    std::vector<double> even, odd;
    for (const auto& s : seconds) {
      std::vector<double> e, o;
      for (size_t r = 0; r < rounds; ++r) (r % 2 == 0 ? e : o).push_back(s[r]);
      even.push_back(median_of(e));
      odd.push_back(median_of(o));
    }
    m.split_half_tau = kendall_tau_b(even, odd);
  } else {
    m.split_half_tau = std::numeric_limits<double>::quiet_NaN();
  }
  return m;
}

double resolved_tau(const std::vector<double>& predicted, const std::vector<double>& measured,
                    const std::vector<std::vector<bool>>& resolved, int* pairs) {
  LJ_CHECK(predicted.size() == measured.size() && resolved.size() == measured.size())
      << "resolved_tau: lists of different lengths";
  double conc = 0, disc = 0;
  for (size_t i = 0; i < predicted.size(); ++i) {
    for (size_t j = i + 1; j < predicted.size(); ++j) {
      if (!resolved[i][j]) continue;
      const double dp = predicted[i] - predicted[j], dm = measured[i] - measured[j];
      if (dp == 0 || dm == 0) continue;
      ((dp > 0) == (dm > 0) ? conc : disc) += 1;
    }
  }
  if (pairs != nullptr) *pairs = static_cast<int>(conc + disc);
  return conc + disc > 0 ? (conc - disc) / (conc + disc) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace lj
