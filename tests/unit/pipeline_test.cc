// passes/pipeline: the pass order is checked in code, and the driver's own lists pass the check.
#include "passes/pipeline/pipeline.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lj {
namespace {

TEST(Pipeline, CompiledOrderWithRematIsTheDocumentedOne) {
  PipelineOptions o;
  o.compile = true;
  o.recompute = RecomputeConfig{RecomputePolicy::full, 1, RecomputeMethod::uniform};
  o.num_layers = 2;
  const std::vector<std::string> want{"rope_fusion",
                                      "swiglu_fusion",
                                      "rms_norm_fusion",
                                      "linear_cross_entropy_fusion",
                                      "matmul_add_fusion",
                                      "autodiff",
                                      "simplify",
                                      "cse",
                                      "remat",
                                      "dce",
                                      "pointwise_fusion",
                                      "dce",
                                      "schedule"};
  EXPECT_EQ(pipeline_pass_names(o), want);
  EXPECT_TRUE(check_pass_order(want).ok());
}

TEST(Pipeline, EagerRunsOnlyAutodiffAndRemat) {
  PipelineOptions o;
  EXPECT_EQ(pipeline_pass_names(o), std::vector<std::string>{"autodiff"});
  o.recompute = RecomputeConfig{RecomputePolicy::selective, 1, RecomputeMethod::uniform};
  o.num_layers = 2;
  EXPECT_EQ(pipeline_pass_names(o), (std::vector<std::string>{"autodiff", "remat"}));
}

TEST(Pipeline, CseAfterRematIsRefused) {
  const std::vector<std::string> names{"autodiff", "remat", "cse", "schedule"};
  const Status s = check_pass_order(names);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cse must not run after remat"), std::string::npos) << s.message();
}

TEST(Pipeline, ScheduleMustBeLast) {
  const std::vector<std::string> names{"autodiff", "cse", "schedule", "dce"};
  const Status s = check_pass_order(names);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("schedule must run last"), std::string::npos) << s.message();
  const std::vector<std::string> twice{"autodiff", "schedule", "schedule"};
  EXPECT_FALSE(check_pass_order(twice).ok());
}

TEST(Pipeline, FusionOnTheWrongSideOfAutodiffIsRefused) {
  const std::vector<std::string> late_pattern{"autodiff", "rms_norm_fusion"};
  EXPECT_FALSE(check_pass_order(late_pattern).ok());
  const std::vector<std::string> early_pointwise{"pointwise_fusion", "autodiff"};
  EXPECT_FALSE(check_pass_order(early_pointwise).ok());
  const std::vector<std::string> fused_before_remat{"autodiff", "pointwise_fusion", "remat"};
  EXPECT_FALSE(check_pass_order(fused_before_remat).ok());
}

}  // namespace
}  // namespace lj
