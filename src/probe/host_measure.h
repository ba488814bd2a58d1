// calibrate's quick measurement of this host: GEMM FLOP/s through the matmul kernel and memory
// bandwidth through an elementwise kernel, written to the coefficients file's host profile
// (plan/coefficients.h HostProfile) by `ljperf calibrate`.
#pragma once

#include "core/status.h"

namespace lj {

struct HostMeasurement {
  double gemm_flops = 0;     // best of a few (n x n) @ (n x n) f32 matmuls
  double mem_bandwidth = 0;  // best of a few elementwise adds over arrays far above the caches
  int threads = 0;
};
// Runs for about a second; `threads` 0: all hardware threads.
StatusOr<HostMeasurement> measure_host(int threads = 0);

}  // namespace lj
