// Measurements taken at the host's full speed. On the 2-vCPU KVM guests these figures come from,
// whole seconds run at half speed with no load, steal or lost CPU time to show it (a sibling
// hyperthread busy outside the guest, as it looks): in one of four `ljperf calibrate --measure`
// runs in a row the f32 and bf16 peaks read 117.6 and 235.2 GFLOP/s against 227-234 and 465-469
// in the others, and a time model calibrated in such a window priced the wide model's bf16 step
// 10.9% long (AMD EPYC, 2026-12-04). A SpeedWatch brackets each measurement with a short FMA
// probe (runtime/peak_probe.h) and repeats a measurement whose probes ran under kSlowShare of the
// fastest probe seen (or of the host's cached peak), keeping the one taken at the highest speed;
// the peak probe's own reading is retried against the cached peak (peak_at_full_speed).
#pragma once

#include <algorithm>
#include <functional>
#include <utility>

#include "core/status.h"
#include "runtime/peak_probe.h"

namespace lj {

// A probe under this share of the best speed seen marks a slow window.
inline constexpr double kSlowShare = 0.8;
// Tries per measurement, the first included.
inline constexpr int kFullSpeedTries = 3;

class SpeedWatch {
 public:
  using Probe = std::function<StatusOr<double>()>;
  // `floor_flops`: a speed the host is known to reach (its cached peak; 0 for none). The probe
  // is an f32 FMA loop of about 20 ms on `threads` threads.
  SpeedWatch(int threads, double floor_flops);
  // Any probe (tests).
  SpeedWatch(Probe probe, double floor_flops) : probe_(std::move(probe)), best_(floor_flops) {}

  // The probe's speed now; the best seen rises with it.
  StatusOr<double> probe();
  double best() const { return best_; }
  // Measurements repeated because their probes ran in a slow window, so far.
  int repeated() const { return repeated_; }

  // Runs `fn` until its bracketing probes (the lower of the two) reach kSlowShare of the best
  // speed seen, at most kFullSpeedTries times; returns the measurement taken at the highest
  // speed. `speed`, when given, receives that measurement's probe speed.
  template <class T>
  StatusOr<T> measure(const std::function<StatusOr<T>()>& fn, double* speed = nullptr) {
    StatusOr<T> kept = internal_error("SpeedWatch: no measurement");
    double kept_speed = -1;
    for (int t = 0; t < kFullSpeedTries; ++t) {
      if (t > 0) ++repeated_;
      LJ_ASSIGN_OR_RETURN(double before, probe());
      StatusOr<T> m = fn();
      LJ_RETURN_IF_ERROR(m.status());
      LJ_ASSIGN_OR_RETURN(double after, probe());
      const double s = std::min(before, after);
      if (s > kept_speed) {
        kept = std::move(m);
        kept_speed = s;
      }
      if (kept_speed >= kSlowShare * best_) break;
    }
    if (speed != nullptr) *speed = kept_speed;
    return kept;
  }

 private:
  Probe probe_;
  double best_;
  int repeated_ = 0;
};

// The peak probe itself at full speed: a reading under kSlowShare of `floor_flops` (the figure
// this host reached before; 0: none) is taken again, at most kFullSpeedTries readings in all, and
// the highest is returned. `repeated`, when given, receives the readings taken again.
StatusOr<PeakMeasurement> peak_at_full_speed(
    const std::function<StatusOr<PeakMeasurement>()>& probe, double floor_flops,
    int* repeated = nullptr);

}  // namespace lj
