// Calibration's fit: least-squares refits of the CPU memory coefficients from measured runs
// (`ljperf calibrate --results`). What calibrate measures of the host is probe/host_measure.h.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "plan/coefficients.h"

namespace lj {

// Ordinary least squares: the x minimising |A x - y|² (rows of A are records). Columns that
// are constant zero get coefficient 0. An error when there are fewer rows than columns or the
// system is singular.
StatusOr<std::vector<double>> least_squares(const std::vector<std::vector<double>>& a,
                                            const std::vector<double>& y);

// One measured run for the CPU memory fit: the dry-run features (memory_model.h
// cpu_memory_features order) and the process's measured peak RSS.
struct MemoryRecord {
  std::vector<double> features;
  double measured_bytes = 0;
};
struct MemoryFit {
  PredictorCoefficients model;  // `base` with the fitted CPU memory terms replaced
  double median_rel_error = 0, max_rel_error = 0;  // over the records fitted
};
// Fits what the causes leave: measured − (allocator blocks' resident peak + measured process
// baseline + oneDNN's GEMM buffers) = residual [+ per_node · nodes] [+ gemm_pack · packing, on
// hosts whose GEMM buffers are not modelled]. The per-node term only with `per_node_term`.
// Records from before the resident pricing (5 features) are refused.
StatusOr<MemoryFit> fit_cpu_memory(const std::vector<MemoryRecord>& records,
                                   const PredictorCoefficients& base, bool per_node_term = false);
// The model's peak RSS for one record's features.
double predict_cpu_rss(const std::vector<double>& features, const PredictorCoefficients& m);
// Relative errors |predicted - measured| / measured of `m` on the records.
std::vector<double> cpu_memory_errors(const std::vector<MemoryRecord>& records,
                                      const PredictorCoefficients& m);

}  // namespace lj
