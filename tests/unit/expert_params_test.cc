// Expert parallelism's weights in one process (train/expert_params.h; the collectives are
// checked by tests/e2e/dist_moe_test.sh): a rank's specs hold its E / N experts, its experts
// start as their slice of the whole tensor (so every N trains from the same weights), and the
// dense parameters' ZeRO-3 shard is initialised as their slice of the dense flat vector.
#include "train/expert_params.h"

#include <gtest/gtest.h>

#include <cstring>

#include "models/moe.h"
#include "train/train_step.h"

namespace lj {
namespace {

LlamaConfig tiny_moe() {
  auto m = llama_preset("tiny-moe");  // 8 experts, top 2, moe_intermediate 128, hidden 64
  EXPECT_TRUE(m.ok());
  return *m;
}

TEST(ExpertParams, ARanksSpecsHoldItsExperts) {
  const LlamaConfig m = tiny_moe();
  const std::vector<ParamSpec> whole = llama_param_specs(m);
  const std::vector<ParamSpec> rank1 = llama_param_specs(m, ExpertShard{.size = 2, .rank = 1});
  ASSERT_EQ(whole.size(), rank1.size());
  int experts = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(whole[i].name, rank1[i].name);
    EXPECT_EQ(is_expert_param(whole[i].name), rank1[i].is_expert) << whole[i].name;
    if (!rank1[i].is_expert) {
      EXPECT_EQ(whole[i].dims, rank1[i].dims) << whole[i].name;
      continue;
    }
    ++experts;
    // Experts [4, 8) of 8: half the rows of the whole tensor, from its middle.
    std::vector<int64_t> half = whole[i].dims;
    half[0] = 4;
    EXPECT_EQ(rank1[i].dims, half) << whole[i].name;
    EXPECT_EQ(rank1[i].expert_offset, numel_of(whole[i].dims) / 2) << whole[i].name;
  }
  EXPECT_EQ(experts, 2 * 2);  // 2 sparse layers x (gate_up_proj, down_proj)
  const ParamSplit split = ParamSplit::of(rank1);
  EXPECT_EQ(split.experts.size(), 4u);
  EXPECT_EQ(split.dense.size() + split.experts.size(), whole.size());
}

TEST(ExpertParams, EachRanksExpertsStartAsTheirSliceOfTheWholeTensor) {
  const LlamaConfig m = tiny_moe();
  Device dev(1);
  const std::vector<ParamSpec> whole = llama_param_specs(m);
  const std::vector<Tensor> all = init_llama_params(dev, whole, 0.02, 7);
  for (int n : {2, 4}) {
    for (int r = 0; r < n; ++r) {
      const std::vector<ParamSpec> local = llama_param_specs(m, ExpertShard{.size = n, .rank = r});
      const std::vector<Tensor> mine = init_llama_params(dev, local, 0.02, 7);
      for (size_t i = 0; i < local.size(); ++i) {
        const float* want = all[i].data<float>() + local[i].expert_offset;
        ASSERT_EQ(std::memcmp(mine[i].data<float>(), want, mine[i].bytes()), 0)
            << local[i].name << " at N " << n << " rank " << r;
      }
    }
  }
}

TEST(ExpertParams, TheDenseShardIsTheSliceOfTheDenseFlatVector) {
  const LlamaConfig m = tiny_moe();
  Device dev(1);
  const std::vector<ParamSpec> local = llama_param_specs(m, ExpertShard{.size = 2, .rank = 0});
  const ParamSplit split = ParamSplit::of(local);
  const std::vector<Tensor> dense =
      ParamSplit::pick(init_llama_params(dev, local, 0.02, 7), split.dense);
  const FlatLayout layout = FlatLayout::of(dense, 3);
  for (int r = 0; r < 3; ++r) {
    const Tensor shard = init_llama_shard(dev, local, 0.02, 7, layout, r, split.dense);
    std::vector<float> want(static_cast<size_t>(layout.shard_numel()));
    pack_flat(layout, dense, layout.shard(r), want.data());
    EXPECT_EQ(std::memcmp(shard.data<float>(), want.data(), want.size() * sizeof(float)), 0)
        << "rank " << r;
  }
}

}  // namespace
}  // namespace lj
