// The host's peak arithmetic throughput, measured rather than assumed from a clock and a
// guessed number of FMA units: every thread runs a loop of independent fused multiply-adds
// (kPeakChains accumulator chains, enough to hide the FMA latency on two pipes) on the widest
// vectors this build targets. MFU is reported against this figure, named as measured.
// Invariant: the figure counts only the instructions the loop issues (2 FLOPs per f32 FMA lane;
// 2 FLOPs per bf16 pair product of a dot-product instruction), so it can never exceed what the
// silicon does in that time.
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace lj {

inline constexpr int kPeakChains = 12;  // independent accumulators per thread

struct PeakMeasurement {
  DType dtype = DType::f32;
  double flops = 0;  // FLOP/s over all threads
  int threads = 0;
  double seconds = 0;  // wall time the probe took, repeats included
  std::string isa;     // the instructions it ran: "avx512 fma", "avx2 fma", "avx512_bf16 dot", ...
  int rounds = 0;      // timed rounds
  // Rounds in which every thread held a core throughout (CPU time ≈ wall time). The figure is
  // the best of these; with none (a host too busy to measure) it is the sum of the threads'
  // rates per CPU second, and undisturbed() is false.
  int rounds_undisturbed = 0;
  bool undisturbed() const { return rounds_undisturbed > 0; }
};

// Whether this build and host can probe `dtype` (f32 always; bf16 needs AVX512_BF16, compiled in
// with -march=native on such a host).
bool peak_probe_supports(DType dtype);

// Runs the probe on `threads` threads (0: all hardware threads) for about `seconds` in total
// (at most 4× that on a busy host), in rounds of a few milliseconds. unimplemented for a dtype
// peak_probe_supports refuses.
StatusOr<PeakMeasurement> measure_peak_flops(DType dtype, int threads = 0, double seconds = 0.3);

}  // namespace lj
