#include "probe/full_speed.h"

#include "runtime/peak_probe.h"

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

}  // namespace lj
