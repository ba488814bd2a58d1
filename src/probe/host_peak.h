// The peak FLOP/s that MFU divides by on this host: measured by runtime/peak_probe (an FMA loop
// on the threads the run uses) and cached per host. benchmark, train and ablation remeasure it at
// each run (a host's speed moves; cli/mfu_peak.h); the cache serves what must not probe (one rank
// of several) and doctor.
// GPUs use the catalog's published dense peaks instead (plan/device_catalog.h).
//
// Cache: $XDG_CACHE_HOME/ljperf/host_peak.json (else ~/.cache/ljperf/host_peak.json), one entry
// per (CPU model, hostname, threads, dtype, ISA the probe ran); `calibrate --measure` remeasures.
// A missing, unreadable or foreign cache is never an error: the probe runs and the cache is
// rewritten (atomically).
// A reading under 80% of the cached figure, as a slow window gives (probe/full_speed.h), is taken
// again up to twice and the highest kept.
#pragma once

#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace lj {

struct HostPeak {
  DType dtype = DType::f32;
  double flops = 0;  // FLOP/s on `threads` threads
  int threads = 0;
  std::string isa;           // what the probe ran ("avx512 fma", "avx512_bf16 dot")
  bool cached = false;       // read from the cache (false: measured by this process)
  double nominal_flops = 0;  // cores × clock × FLOPs per cycle, as assumed before (f32 only)
  // "540.3 GFLOP/s fp32, measured" — the denominator, named.
  std::string describe() const;
};

std::string host_peak_cache_path();

// The peak for `dtype` on `threads` threads (0: all): from the cache, or measured (and cached)
// when the cache has no entry for this host or `remeasure` is set.
StatusOr<HostPeak> host_peak(DType dtype, int threads, bool remeasure = false);
// The cached figure only (nullopt when this host has none): for a process that must not probe,
// e.g. one rank of several sharing the cores.
std::optional<HostPeak> cached_host_peak(DType dtype, int threads);

}  // namespace lj
