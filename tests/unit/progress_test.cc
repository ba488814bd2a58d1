// Tier 1: the progress line of `ljperf eval` and `ljperf benchmark` (cli/progress.h): rate and
// ETA while running, "eta —" while the rate is unknown, no ETA once the work is done.
#include <gtest/gtest.h>

#include "cli/progress.h"

namespace lj::cli {
namespace {

TEST(ProgressLine, PlainLines) {
  EXPECT_EQ(format_progress_line({"eval", "batches", 3, 8, 2.5, false}),
            "eval: 3/8 batches (2.5 batches/s, eta 2.00 s)");
  // The first report, before any batch finished: the rate is unknown, so is the ETA.
  EXPECT_EQ(format_progress_line({"eval", "batches", 0, 8, 0, false}), "eval: 0/8 batches (eta —)");
  // Done: no ETA at all (it used to print "eta 0 us").
  EXPECT_EQ(format_progress_line({"eval", "batches", 8, 8, 2.5, false}),
            "eval: 8/8 batches (2.5 batches/s)");
  EXPECT_EQ(format_progress_line({"eval", "batches", 0, 0, 0, false}), "eval: 0/0 batches");
}

TEST(ProgressLine, BarLines) {
  EXPECT_EQ(format_progress_line({"benchmark", "steps", 5, 10, 1.0, true}),
            "benchmark [###############...............] 5/10 steps  1.0 steps/s  eta 5.00 s");
  EXPECT_EQ(format_progress_line({"benchmark", "steps", 1, 10, 0, true}),
            "benchmark [###...........................] 1/10 steps  eta —");
  EXPECT_EQ(format_progress_line({"benchmark", "steps", 10, 10, 2.0, true}),
            "benchmark [##############################] 10/10 steps  2.0 steps/s");
}

}  // namespace
}  // namespace lj::cli
