// SpeedWatch and peak_at_full_speed (probe/full_speed.h) with scripted probes: a measurement
// whose bracketing probes ran in a slow window is repeated, the one taken at the highest speed is
// kept, the tries are bounded, and the host's known peak counts as a speed seen.
#include "probe/full_speed.h"

#include <gtest/gtest.h>

#include <vector>

namespace lj {
namespace {

// A probe that reads `speeds` in turn (the last one repeated).
SpeedWatch::Probe scripted(std::vector<double> speeds) {
  return [speeds, i = size_t{0}]() mutable -> StatusOr<double> {
    const double s = speeds[std::min(i, speeds.size() - 1)];
    ++i;
    return s;
  };
}

// A measurement that returns 1, 2, 3, ... on successive calls.
struct Counter {
  int calls = 0;
  StatusOr<int> operator()() { return ++calls; }
};

TEST(SpeedWatch, AMeasurementAtFullSpeedIsTakenOnce) {
  SpeedWatch w(scripted({100, 100}), 0);
  Counter c;
  double speed = 0;
  auto m = w.measure<int>([&] { return c(); }, &speed);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, 1);
  EXPECT_EQ(c.calls, 1);
  EXPECT_EQ(w.repeated(), 0);
  EXPECT_EQ(speed, 100);
}

TEST(SpeedWatch, ASlowWindowIsRepeatedAndTheFastMeasurementKept) {
  // The host's peak 100; the first try's probes read 50 and 60, the second's 95 and 99.
  SpeedWatch w(scripted({50, 60, 95, 99}), 100);
  Counter c;
  double speed = 0;
  auto m = w.measure<int>([&] { return c(); }, &speed);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, 2);
  EXPECT_EQ(c.calls, 2);
  EXPECT_EQ(w.repeated(), 1);
  EXPECT_EQ(speed, 95);  // the lower of the bracketing probes
}

TEST(SpeedWatch, ASlowProbeAfterTheMeasurementCountsToo) {
  // Before 100, after 40: the window may have opened during the measurement.
  SpeedWatch w(scripted({100, 40, 100, 100}), 0);
  Counter c;
  auto m = w.measure<int>([&] { return c(); });
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, 2);
  EXPECT_EQ(w.repeated(), 1);
}

TEST(SpeedWatch, TriesAreBoundedAndTheFastestOfThemIsKept) {
  // Slow throughout: three tries, the second's probes the highest.
  SpeedWatch w(scripted({50, 50, 70, 60, 55, 55}), 100);
  Counter c;
  double speed = 0;
  auto m = w.measure<int>([&] { return c(); }, &speed);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(c.calls, kFullSpeedTries);
  EXPECT_EQ(*m, 2);
  EXPECT_EQ(speed, 60);
  EXPECT_EQ(w.repeated(), kFullSpeedTries - 1);
}

TEST(SpeedWatch, TheBestSpeedRisesWithTheProbes) {
  // No known peak: the first measurement's probes set the best, and a later slow one repeats.
  SpeedWatch w(scripted({100, 100, 50, 50, 100, 100}), 0);
  Counter c;
  ASSERT_TRUE(w.measure<int>([&] { return c(); }).ok());
  EXPECT_EQ(w.best(), 100);
  auto m = w.measure<int>([&] { return c(); });
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, 3);
  EXPECT_EQ(w.repeated(), 1);
}

TEST(SpeedWatch, AFailedMeasurementIsItsStatus) {
  SpeedWatch w(scripted({100}), 0);
  auto m = w.measure<int>([]() -> StatusOr<int> { return invalid_argument("bad shape"); });
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().to_string().find("bad shape"), std::string::npos);
}

// Peak readings in turn (the last repeated), as measure_peak_flops would return them.
std::function<StatusOr<PeakMeasurement>()> peaks(std::vector<double> flops, int* calls) {
  return [flops, calls]() -> StatusOr<PeakMeasurement> {
    PeakMeasurement m;
    m.flops = flops[std::min(static_cast<size_t>(*calls), flops.size() - 1)];
    ++*calls;
    return m;
  };
}

TEST(PeakAtFullSpeed, AReadingNearTheCachedFigureIsTakenOnce) {
  int calls = 0, repeated = -1;
  auto m = peak_at_full_speed(peaks({90, 200}, &calls), 100, &repeated);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->flops, 90);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(repeated, 0);
}

TEST(PeakAtFullSpeed, ASlowReadingIsTakenAgainAndTheHighestKept) {
  int calls = 0, repeated = -1;
  auto m = peak_at_full_speed(peaks({50, 95, 60}, &calls), 100, &repeated);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->flops, 95);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(repeated, 1);
}

TEST(PeakAtFullSpeed, ReadingsAreBoundedAndWithoutACachedFigureNotRepeated) {
  int calls = 0, repeated = -1;
  auto m = peak_at_full_speed(peaks({50, 70, 60, 99}, &calls), 100, &repeated);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->flops, 70);
  EXPECT_EQ(calls, kFullSpeedTries);
  EXPECT_EQ(repeated, kFullSpeedTries - 1);
  calls = 0;
  auto first = peak_at_full_speed(peaks({50, 99}, &calls), 0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->flops, 50);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace lj
