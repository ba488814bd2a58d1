// The denominator of MFU, named: the host's measured peak (probe/host_peak.h) on the cores the run
// uses, times the hosts of a multi-process run; the nominal figure (cores × clock × FLOPs per
// cycle) only when nothing was measured, and then said so.
#pragma once

#include <string>

#include "core/dtype.h"

namespace lj {
struct DeviceProfile;
}

namespace lj::cli {

struct MfuPeak {
  double flops = 0;  // FLOP/s of every device of the run
  std::string name;  // "232.1 GFLOP/s fp32, measured", as the summary prints it
  bool measured = false;
};

// dtype: the compute precision (bf16 falls back to the fp32 figure where the host has no bf16
// probe, and says so). threads_per_rank × ranks_on_host threads, at most the host's cores, on
// world_size / ranks_on_host hosts. may_probe: the probe runs now (about 0.3 s; the figure is
// cached for what must not probe); false for a rank of several (the ranks share the cores, so a
// probe would measure them fighting): only a cached figure is read then.
MfuPeak mfu_peak(DType dtype, int threads_per_rank, int ranks_on_host, int world_size,
                 bool may_probe);

// The higher of two measured peaks of the same cores, its name followed by "; the higher of
// <which>" (say "the probes before and after the steps"); `a` when `b` was not measured. A probe
// is a fraction of a second: on a shared virtual machine a neighbour on the cores' other hardware
// threads can halve it. Session 10's AMD guest once measured 117.5 GFLOP/s on 2 cores before a
// run whose steps then reached 175 (MFU 149%); its other runs measured 227-235.
MfuPeak higher_peak(const MfuPeak& a, const MfuPeak& b, const std::string& which);

// A GPU run's: the catalog's dense bf16 peak (plan/device_catalog.h) of the GPU named
// `device_name` ("NVIDIA H200": the entry whose id appears in it) times world_size; flops 0 and
// the name "n/a (...)" when the catalog has no such GPU.
MfuPeak gpu_mfu_peak(const std::string& device_name, int world_size);
// That catalog entry; nullptr when there is none.
const DeviceProfile* gpu_catalog_entry(const std::string& device_name);

}  // namespace lj::cli
