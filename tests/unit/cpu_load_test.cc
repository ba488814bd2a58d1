// runtime/cpu_load.h: the share of the cores other processes used between two marks.
#include "runtime/cpu_load.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lj {
namespace {

CpuLoadMark mark(double wall, double busy, double self, int cores = 2, double steal = 0) {
  CpuLoadMark m;
  m.wall = wall;
  m.busy = busy;
  m.steal = steal;
  m.self = self;
  m.cores = cores;
  m.valid = true;
  return m;
}

TEST(CpuLoadTest, OtherShareIsBusyTimeLessOurOwnOverTheCores) {
  // 10 s on 2 cores; the host was busy 15 CPU-s, 5 of them ours: others used 10 of 20.
  EXPECT_DOUBLE_EQ(other_cpu_share(mark(0, 100, 1), mark(10, 115, 6)), 0.5);
  // Only we ran: nobody else.
  EXPECT_DOUBLE_EQ(other_cpu_share(mark(0, 100, 1), mark(10, 120, 21)), 0.0);
  // Clock-tick rounding can make our own time exceed the host's busy time: clamped at 0.
  EXPECT_DOUBLE_EQ(other_cpu_share(mark(0, 100, 1), mark(1, 100.5, 1.6)), 0.0);
  // More than the cores (clamped at 1).
  EXPECT_DOUBLE_EQ(other_cpu_share(mark(0, 0, 0, 1), mark(1, 3, 0, 1)), 1.0);
}

TEST(CpuLoadTest, StealIsTheHypervisorsPartOfTheOthersShare) {
  // 10 s on 2 cores: others held 10 CPU-s, 3 of them stolen by the hypervisor.
  const CpuLoadMark a = mark(0, 100, 1, 2, 40), b = mark(10, 115, 6, 2, 43);
  EXPECT_DOUBLE_EQ(other_cpu_share(a, b), 0.5);
  EXPECT_DOUBLE_EQ(steal_share(a, b), 0.15);
  EXPECT_DOUBLE_EQ(steal_share(a, mark(10, 115, 6, 2, 40)), 0.0);  // bare metal: no steal
  EXPECT_DOUBLE_EQ(steal_share(mark(0, 0, 0, 1), mark(1, 3, 0, 1, 2)), 1.0);  // clamped
  CpuLoadMark bad = b;
  bad.valid = false;
  EXPECT_TRUE(std::isnan(steal_share(a, bad)));
  EXPECT_TRUE(std::isnan(steal_share(a, mark(0, 101, 1, 2, 41))));  // no time passed
}

TEST(CpuLoadTest, UnknownWithoutTwoValidMarksOrElapsedTime) {
  CpuLoadMark bad = mark(10, 115, 6);
  bad.valid = false;
  EXPECT_TRUE(std::isnan(other_cpu_share(mark(0, 100, 1), bad)));
  EXPECT_TRUE(std::isnan(other_cpu_share(mark(5, 100, 1), mark(5, 101, 1))));
}

TEST(CpuLoadTest, ThisHostsMarksAreReadable) {
  const CpuLoadMark a = cpu_load_mark();
  ASSERT_TRUE(a.valid);  // /proc/stat on Linux
  EXPECT_GT(a.cores, 0);
  EXPECT_GT(a.busy, 0.0);
  volatile double x = 0;
  for (int i = 0; i < 20000000; ++i) x = x + 1e-9 * i;  // some CPU time of our own
  const CpuLoadMark b = cpu_load_mark();
  EXPECT_GT(b.self, a.self);
  const double share = other_cpu_share(a, b);
  EXPECT_GE(share, 0.0);
  EXPECT_LE(share, 1.0);
  EXPECT_GE(b.steal, a.steal);
  const double steal = steal_share(a, b);
  EXPECT_GE(steal, 0.0);
  EXPECT_LE(steal, 1.0);
  EXPECT_GT(load_per_core(), -1e-9);  // /proc/loadavg: a number, not NaN
}

}  // namespace
}  // namespace lj
