// --expert-parallel's checks (train/expert_parallel.h) and the layout of its groups.
#include "train/expert_parallel.h"

#include <gtest/gtest.h>

#include "models/config.h"

namespace lj {
namespace {

LlamaConfig tiny_moe() {
  StatusOr<LlamaConfig> c = llama_preset("tiny-moe");  // 8 experts
  EXPECT_TRUE(c.ok());
  return *c;
}

TEST(ExpertParallel, TakesSizesThatDivideTheExpertsAndTheWorld) {
  const LlamaConfig c = tiny_moe();
  EXPECT_TRUE(check_expert_parallel(1, c, 1).ok());
  EXPECT_TRUE(check_expert_parallel(2, c, 2).ok());
  EXPECT_TRUE(check_expert_parallel(2, c, 6).ok());
  EXPECT_TRUE(check_expert_parallel(8, c, 8).ok());
}

TEST(ExpertParallel, RefusesBadSizesByName) {
  const LlamaConfig c = tiny_moe();
  Status s = check_expert_parallel(3, c, 3);  // 8 experts
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("does not divide the 8 experts of model 'tiny-moe'"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.hint().find("divisor of 8"), std::string::npos);
  s = check_expert_parallel(4, c, 2);  // world 2
  EXPECT_NE(s.message().find("does not divide the world size 2"), std::string::npos) << s.message();
  EXPECT_NE(s.hint().find("mpirun -np 4"), std::string::npos);
  s = check_expert_parallel(0, c, 1);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
}

TEST(ExpertParallel, RefusesADenseModel) {
  StatusOr<LlamaConfig> dense = llama_preset("tiny");
  ASSERT_TRUE(dense.ok());
  EXPECT_TRUE(check_expert_parallel(1, *dense, 2).ok());  // 1: the default, nothing to shard
  const Status s = check_expert_parallel(2, *dense, 2);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("is dense"), std::string::npos) << s.message();
  EXPECT_NE(s.hint().find("tiny-moe"), std::string::npos);
}

TEST(ExpertParallel, LayoutGroupsConsecutiveRanks) {
  // W = 4, N = 2: rank 3 is the second of group {2, 3} and of expert-data group {1, 3}.
  const ExpertParallelLayout l{.size = 2, .world = 4, .rank = 3};
  EXPECT_EQ(l.ep_rank(), 1);
  EXPECT_EQ(l.edp_size(), 2);
  EXPECT_EQ(l.edp_rank(), 1);
  EXPECT_EQ(l.local_experts(8), 4);
  EXPECT_EQ(l.first_local_expert(8), 4);
}

TEST(ExpertParallel, OneProcessGroupsAreItself) {
  SelfCommunicator world;
  StatusOr<ExpertGroups> g = make_expert_groups(world, 1);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->ep->world_size(), 1);
  EXPECT_EQ(g->edp->world_size(), 1);
  EXPECT_FALSE(make_expert_groups(world, 2).ok());
}

}  // namespace
}  // namespace lj
