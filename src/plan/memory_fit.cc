#include "plan/memory_fit.h"

#include <algorithm>
#include <cmath>

#include "plan/memory_model.h"

namespace lj {

StatusOr<std::vector<double>> least_squares(const std::vector<std::vector<double>>& a,
                                            const std::vector<double>& y) {
  if (a.empty() || a.size() != y.size()) return invalid_argument("least squares: no records");
  const size_t n = a[0].size();
  // Scale columns to unit max so the normal equations stay well conditioned (bytes ~1e9 next
  // to a constant 1); zero columns are dropped.
  std::vector<double> scale(n, 0.0);
  for (const auto& r : a) {
    if (r.size() != n) return invalid_argument("least squares: ragged rows");
    for (size_t j = 0; j < n; ++j) scale[j] = std::max(scale[j], std::fabs(r[j]));
  }
  std::vector<size_t> cols;
  for (size_t j = 0; j < n; ++j) {
    if (scale[j] > 0) cols.push_back(j);
  }
  const size_t k = cols.size();
  if (k == 0 || k > 64) return invalid_argument("least squares: between 1 and 64 coefficients");
  if (a.size() < k) {
    return invalid_argument("least squares: " + std::to_string(a.size()) + " records for " +
                                std::to_string(k) + " coefficients",
                            "give more benchmark results");
  }
  // Normal equations (AᵀA) x = Aᵀy in the scaled columns, Gaussian elimination with pivoting.
  std::vector<std::vector<double>> m(k, std::vector<double>(k + 1, 0.0));
  for (size_t r = 0; r < a.size(); ++r) {
    for (size_t i = 0; i < k; ++i) {
      const double ai = a[r][cols[i]] / scale[cols[i]];
      for (size_t j = 0; j < k; ++j) m[i][j] += ai * a[r][cols[j]] / scale[cols[j]];
      m[i][k] += ai * y[r];
    }
  }
  for (size_t c = 0; c < k; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < k; ++r) {
      if (std::fabs(m[r][c]) > std::fabs(m[p][c])) p = r;
    }
    if (std::fabs(m[p][c]) < 1e-12 * static_cast<double>(a.size())) {
      return invalid_argument("least squares: the records do not determine every coefficient",
                              "give results that differ in batch, sequence length and model");
    }
    std::swap(m[p], m[c]);
    for (size_t r = 0; r < k; ++r) {
      if (r == c) continue;
      const double f = m[r][c] / m[c][c];
      for (size_t j = c; j <= k; ++j) m[r][j] -= f * m[c][j];
    }
  }
  std::vector<double> x(n, 0.0);
  for (size_t i = 0; i < k; ++i) x[cols[i]] = m[i][k] / m[i][i] / scale[cols[i]];
  return x;
}

double predict_cpu_rss(const std::vector<double>& f, const PredictorCoefficients& m) {
  const CpuMemoryCoefficients& c = m.cpu_memory;
  const auto at = [&](size_t i) { return i < f.size() ? f[i] : 0.0; };  // older records: fewer
  double r = c.reserved_factor * at(0) + m.host.baseline_rss_bytes * at(1) +
             c.per_node_bytes * at(2) + c.per_param_bytes * at(3) + c.gemm_pack_bytes * at(4);
  if (f.size() >= kCpuMemoryFeatures) r += f[5] + c.gemm_buffer_factor * f[6];
  return r;
}

std::vector<double> cpu_memory_errors(const std::vector<MemoryRecord>& records,
                                      const PredictorCoefficients& m) {
  std::vector<double> e;
  for (const auto& r : records)
    e.push_back(std::fabs(predict_cpu_rss(r.features, m) - r.measured_bytes) / r.measured_bytes);
  return e;
}

StatusOr<MemoryFit> fit_cpu_memory(const std::vector<MemoryRecord>& records,
                                   const PredictorCoefficients& base, bool per_node_term) {
  // Everything priced from its cause stays as priced (factors 1): the fit is the residual
  // constant, with --per-node-term also bytes per graph node, and the GEMM packing step where
  // the GEMM buffers are not modelled (hosts without AVX-512).
  std::vector<std::vector<double>> a;
  std::vector<double> y;
  const CpuMemoryCoefficients& c = base.cpu_memory;
  for (const auto& r : records) {
    if (r.features.size() != kCpuMemoryFeatures || !(r.measured_bytes > 0))
      return invalid_argument("a result record has no plan features of this ljperf (" +
                                  std::to_string(kCpuMemoryFeatures) + ") or no measured peak RSS",
                              "rerun the benchmarks with this ljperf's benchmark --out");
    const auto& f = r.features;
    a.push_back({1.0, per_node_term ? f[2] : 0.0, f[4]});
    y.push_back(r.measured_bytes - c.reserved_factor * f[0] - f[5] - c.gemm_buffer_factor * f[6]);
  }
  LJ_ASSIGN_OR_RETURN(std::vector<double> x, least_squares(a, y));
  MemoryFit fit;
  fit.model = base;
  fit.model.host.baseline_rss_bytes = x[0];
  fit.model.cpu_memory.per_node_bytes = x[1];
  fit.model.cpu_memory.per_param_bytes = 0;
  bool packs = false;
  for (const auto& row : a) packs = packs || row[2] != 0;
  if (packs) fit.model.cpu_memory.gemm_pack_bytes = x[2];  // else kept
  fit.model.fitted_records = static_cast<int>(records.size());
  std::vector<double> e = cpu_memory_errors(records, fit.model);
  std::sort(e.begin(), e.end());
  fit.median_rel_error = e[e.size() / 2];
  fit.max_rel_error = e.back();
  return fit;
}

}  // namespace lj
