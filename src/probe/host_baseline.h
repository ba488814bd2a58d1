// The resident memory of an ljperf training process before its tensors: the binary and the
// libraries it touches, the OpenMP threads' stacks, oneDNN's JIT kernels, the graph, the
// executor and the heap's small blocks. It differs by host (14.2 MiB fitted on an AMD EPYC,
// 18.9 MiB measured on an Intel Xeon with the same binary), so it is measured, not fitted: a
// child ljperf trains the tiny preset for two steps (batch 1 x seq 32) and the baseline is its
// peak RSS minus what the planner prices itself (the allocator's blocks, oneDNN's GEMM buffers).
// About a second, once per host: cached like the peak FLOP/s (probe/host_peak.h) in
// $XDG_CACHE_HOME/ljperf/host_baseline.json (else ~/.cache/ljperf/), one entry per (CPU model,
// hostname, threads, ljperf binary: size and modification time, oneDNN's ISA); `calibrate
// --measure` remeasures. A missing, unreadable or foreign cache is never an error.
#pragma once

#include <string>

#include "core/status.h"

namespace lj {

// Set in the probe's child: it prices itself with baseline 0 and never probes again.
inline constexpr const char* kBaselineProbeEnv = "LJPERF_BASELINE_PROBE";

struct HostBaseline {
  double bytes = 0;
  int threads = 0;
  bool measured = false;  // false: no figure (the probe's child, or probing not allowed)
  bool cached = false;    // read from the cache (false: measured by this call)
  double probe_seconds = 0;
};

std::string host_baseline_cache_path();

// The ljperf command line calls this in main: only then may host_baseline() probe, by spawning
// this same executable (whatever its file is named) as `benchmark --model tiny`.
void allow_baseline_probe();

// The baseline for `threads` (0: all hardware threads): cached, or measured and cached. 0 (not
// `measured`) in the probe's own child, and without a cached figure where probing is not
// allowed: `may_probe` false (one rank of several: the child would share the launcher's cores
// and environment) or a process whose main never called allow_baseline_probe (a test binary
// that links the planner).
StatusOr<HostBaseline> host_baseline(int threads = 0, bool remeasure = false,
                                     bool may_probe = true);

}  // namespace lj
