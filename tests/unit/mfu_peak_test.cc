// cli/mfu_peak.h: the summary divides by the higher of the probes before and after the steps.
#include "cli/mfu_peak.h"

#include <gtest/gtest.h>

namespace lj::cli {
namespace {

TEST(MfuPeakTest, TheHigherMeasuredProbeIsTheDenominator) {
  const MfuPeak before{117.5e9, "117.5 GFLOP/s fp32, measured", true};
  const MfuPeak after{231.0e9, "231.0 GFLOP/s fp32, measured", true};
  const MfuPeak r = higher_peak(before, after, "the probes before and after the steps");
  EXPECT_DOUBLE_EQ(r.flops, 231.0e9);
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.name,
            "231.0 GFLOP/s fp32, measured; the higher of the probes before and after the steps");
  EXPECT_DOUBLE_EQ(higher_peak(after, before, "x").flops, 231.0e9);
}

TEST(MfuPeakTest, AnUnmeasuredFigureNeverReplacesAMeasuredOne) {
  const MfuPeak measured{200e9, "200.0 GFLOP/s fp32, measured", true};
  const MfuPeak nominal{332e9, "332.0 GFLOP/s fp32 nominal", false};
  EXPECT_EQ(higher_peak(measured, nominal, "x").name, measured.name);
  EXPECT_EQ(higher_peak(nominal, measured, "x").name, measured.name);
  EXPECT_EQ(higher_peak(nominal, nominal, "x").name, nominal.name);
}

}  // namespace
}  // namespace lj::cli
