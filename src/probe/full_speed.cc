#include "probe/full_speed.h"

namespace lj {

SpeedWatch::SpeedWatch(int threads, double floor_flops)
    : probe_([threads]() -> StatusOr<double> {
        LJ_ASSIGN_OR_RETURN(PeakMeasurement m, measure_peak_flops(DType::f32, threads, 0.02));
        return m.flops;
      }),
      best_(floor_flops) {}

StatusOr<double> SpeedWatch::probe() {
  LJ_ASSIGN_OR_RETURN(double s, probe_());
  best_ = std::max(best_, s);
  return s;
}

StatusOr<PeakMeasurement> peak_at_full_speed(
    const std::function<StatusOr<PeakMeasurement>()>& probe, double floor_flops, int* repeated) {
  LJ_ASSIGN_OR_RETURN(PeakMeasurement best, probe());
  int again = 0;
  for (int t = 1; t < kFullSpeedTries && best.flops < kSlowShare * floor_flops; ++t, ++again) {
    LJ_ASSIGN_OR_RETURN(PeakMeasurement m, probe());
    if (m.flops > best.flops) best = m;
  }
  if (repeated != nullptr) *repeated = again;
  return best;
}

}  // namespace lj
