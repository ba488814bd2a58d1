// The denominator of MFU, named: the host's measured peak (plan/host_peak.h) on the cores the run
// uses, times the hosts of a multi-process run; the nominal figure (cores × clock × FLOPs per
// cycle) only when nothing was measured, and then said so.
#pragma once

#include <string>

#include "core/dtype.h"

namespace lj::cli {

struct MfuPeak {
  double flops = 0;  // FLOP/s of every device of the run
  std::string name;  // "232.1 GFLOP/s fp32, measured", as the summary prints it
  bool measured = false;
};

// dtype: the compute precision (bf16 falls back to the fp32 figure where the host has no bf16
// probe, and says so). threads_per_rank × ranks_on_host threads, at most the host's cores, on
// world_size / ranks_on_host hosts. may_probe: false for a rank of several (the ranks share the
// cores, so a probe would measure them fighting): only a cached figure is read then.
MfuPeak mfu_peak(DType dtype, int threads_per_rank, int ranks_on_host, int world_size,
                 bool may_probe);

}  // namespace lj::cli
