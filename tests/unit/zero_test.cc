// ZeRO's layout and buckets (dist/zero.h), the rank's slice of the data (dist/batch_shard.h) and
// the communicator factory's decisions (dist/communicator.h), all without MPI.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "dist/batch_shard.h"
#include "dist/build_info.h"
#include "dist/communicator.h"
#include "dist/zero.h"

namespace lj {
namespace {

CommEnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(FlatLayout, PadsToAMultipleOfTheWorldSize) {
  const FlatLayout l({5, 3, 2}, 4);  // 10 elements -> 12, shards of 3
  EXPECT_EQ(l.numel(), 10);
  EXPECT_EQ(l.numel_padded(), 12);
  EXPECT_EQ(l.shard_numel(), 3);
  EXPECT_EQ(l.shard(0), (FlatRange{0, 3}));
  EXPECT_EQ(l.shard(3), (FlatRange{9, 12}));
  EXPECT_EQ(FlatLayout({6}, 3).numel_padded(), 6);  // already a multiple: no padding
  EXPECT_EQ(FlatLayout({6}, 1).shard(0), (FlatRange{0, 6}));
}

TEST(FlatLayout, PiecesCutParametersWhereShardsFall) {
  const FlatLayout l({5, 3, 2}, 4);
  // Shard 1 = [3, 6): the end of parameter 0 and the start of parameter 1.
  EXPECT_EQ(l.pieces(l.shard(1)), (std::vector<FlatPiece>{{0, 3, 3, 2}, {1, 0, 5, 1}}));
  // Shard 3 = [9, 12): the last element of parameter 2, then padding (no piece).
  EXPECT_EQ(l.pieces(l.shard(3)), (std::vector<FlatPiece>{{2, 1, 9, 1}}));
  EXPECT_TRUE(l.pieces({10, 12}).empty());
  // Empty parameters are skipped.
  const FlatLayout e({2, 0, 2}, 1);
  EXPECT_EQ(e.pieces({0, 4}), (std::vector<FlatPiece>{{0, 0, 0, 2}, {2, 0, 2, 2}}));
}

// The one answer to "what does a rank hold at stage s" (llm.c's multi_gpu_get_shard_offset):
// each kind of state is whole below the stage that shards it and the rank's shard from it on.
TEST(FlatLayout, HeldIsTheShardFromTheStageThatShardsIt) {
  const FlatLayout l({5, 3, 2}, 4);  // 10 elements -> 12, shards of 3
  struct Row {
    ZeroSharded what;
    int first_sharded_stage;
  };
  for (const Row r : {Row{ZeroSharded::optimizer_states, 1}, Row{ZeroSharded::gradients, 2},
                      Row{ZeroSharded::parameters, 3}}) {
    for (int stage = 0; stage <= 3; ++stage) {
      SCOPED_TRACE("stage " + std::to_string(stage) + ", first sharded at " +
                   std::to_string(r.first_sharded_stage));
      if (stage < r.first_sharded_stage) {
        EXPECT_EQ(l.held(2, stage, r.what), (FlatRange{0, 10}));
        EXPECT_EQ(l.held_numel(stage, r.what), 10);
      } else {
        EXPECT_EQ(l.held(1, stage, r.what), (FlatRange{3, 6}));
        // Rank 3's shard [9, 12) reaches into the padding: it holds [9, 10) of the parameters
        // but allocates the whole shard.
        EXPECT_EQ(l.held(3, stage, r.what), (FlatRange{9, 10}));
        EXPECT_EQ(l.held_numel(stage, r.what), 3);
      }
    }
  }
  // A shard all in the padding holds nothing: 2 elements over 4 ranks, shards of 1.
  EXPECT_EQ(FlatLayout({2}, 4).held(3, 1, ZeroSharded::optimizer_states), (FlatRange{2, 2}));
}

// What a rank holds beside the parameters, stage by stage (the memory predictor replays it).
TEST(ZeroMemory, EachStageHoldsWhatItShards) {
  const FlatLayout l({5, 3, 2}, 4);  // 10 elements, shards of 3
  ZeroConfig z;
  z.reduce_bucket_size = 6;     // all-reduce buffer min(6, 10) = 6; reduce-scatter 1 x 4 = 4
  z.allgather_bucket_size = 8;  // gather send min(8 / 4, 3) = 2, receive 2 x 4 = 8
  struct Want {
    int64_t adam, grad_shard, param_shard, reduce, send, recv;
    bool frees_full_grads;
  };
  const Want want[4] = {{10, 0, 0, 6, 0, 0, false},
                        {3, 0, 0, 6, 2, 8, false},
                        {3, 3, 0, 4, 2, 8, true},
                        {3, 3, 3, 0, 0, 0, false}};
  for (int stage = 0; stage <= 3; ++stage) {
    z.stage = stage;
    const ZeroMemory m = zero_memory(l, z);
    const Want& w = want[stage];
    SCOPED_TRACE("stage " + std::to_string(stage));
    EXPECT_EQ(m.adam_state_numel, w.adam);
    EXPECT_EQ(m.grad_shard_numel, w.grad_shard);
    EXPECT_EQ(m.param_shard_numel, w.param_shard);
    EXPECT_EQ(m.reduce_buffer_numel, w.reduce);
    EXPECT_EQ(m.gather_send_numel, w.send);
    EXPECT_EQ(m.gather_recv_numel, w.recv);
    EXPECT_EQ(m.frees_full_grads, w.frees_full_grads);
  }
}

TEST(ZeroBuckets, SplitIntoRangesOfAtMostTheBucketSize) {
  EXPECT_EQ(split_buckets({0, 10}, 4), (std::vector<FlatRange>{{0, 4}, {4, 8}, {8, 10}}));
  EXPECT_EQ(split_buckets({3, 5}, 500'000'000), (std::vector<FlatRange>{{3, 5}}));
  EXPECT_TRUE(split_buckets({7, 7}, 4).empty());
  EXPECT_EQ(per_rank_bucket(10, 3), 3);  // a collective moves at most 9 <= 10 in total
  EXPECT_EQ(per_rank_bucket(2, 3), 1);   // never below one element per rank
}

TEST(ZeroBuckets, PackAndUnpackFollowTheLayout) {
  Device dev(1);
  std::vector<Tensor> t;
  t.push_back(Tensor::from_doubles(dev, DType::f32, {2}, std::vector<double>{1, 2}));
  t.push_back(Tensor::from_doubles(dev, DType::f32, {3}, std::vector<double>{3, 4, 5}));
  const FlatLayout l = FlatLayout::of(t, 4);  // 5 -> 8
  std::vector<float> buf(4, -1.0f);
  pack_flat(l, t, {1, 5}, buf.data());
  EXPECT_EQ(buf, (std::vector<float>{2, 3, 4, 5}));
  pack_flat(l, t, {4, 8}, buf.data());
  EXPECT_EQ(buf, (std::vector<float>{5, 0, 0, 0}));  // padding reads as zeros
  const std::vector<float> in{10, 20, 30, 40};
  unpack_flat(l, in.data(), 0.5f, {3, 7}, t);
  EXPECT_EQ(t[1].to_doubles(), (std::vector<double>{3, 5, 10}));
}

TEST(ZeroConfig, Validates) {
  EXPECT_TRUE((ZeroConfig{.stage = 2}).validate().ok());
  EXPECT_TRUE((ZeroConfig{.stage = 3}).validate().ok());
  EXPECT_EQ((ZeroConfig{.stage = 4}).validate().code(), StatusCode::invalid_argument);
  EXPECT_EQ((ZeroConfig{.stage = 1, .reduce_bucket_size = 0}).validate().code(),
            StatusCode::invalid_argument);
}

TEST(SelfCommunicator, CollectivesAreCopies) {
  SelfCommunicator c;
  EXPECT_EQ(c.world_size(), 1);
  std::vector<float> a{1, 2, 3}, b(3);
  ASSERT_TRUE(c.all_reduce_sum(std::span<const float>(a), std::span<float>(b)).ok());
  EXPECT_EQ(a, b);
  CommHandle h = c.iall_gather(std::span<const float>(a), std::span<float>(b));
  EXPECT_TRUE(h.test());
  EXPECT_TRUE(h.wait().ok());
  EXPECT_FALSE(c.all_gather(std::span<const float>(a), std::span<float>(b.data(), 2)).ok());
  EXPECT_DOUBLE_EQ(*c.all_reduce_sum(2.5), 2.5);
  EXPECT_TRUE(c.barrier().ok());
  EXPECT_FALSE(c.broadcast({}, 1).ok());
}

TEST(SelfCommunicator, AllToAllIsACopyAndSplitIsItself) {
  SelfCommunicator c;
  std::vector<float> a{1, 2, 3}, b(3);
  const std::vector<int64_t> three{3}, two{2};
  ASSERT_TRUE(c.all_to_all(a, three, b, three).ok());
  EXPECT_EQ(a, b);
  EXPECT_FALSE(c.all_to_all(a, two, b, two).ok());  // counts disagree with the buffers
  EXPECT_FALSE(c.all_to_all(a, three, std::span<float>(b.data(), 2), two).ok());
  std::vector<int64_t> n{7}, m(1);
  ASSERT_TRUE(c.all_to_all(n, m).ok());
  EXPECT_EQ(m[0], 7);
  auto g = c.split(3, 0);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)->world_size(), 1);
  EXPECT_STREQ((*g)->backend_name(), "self");
}

TEST(MakeCommunicator, OneProcessWithoutALauncher) {
  auto c = make_communicator(fake_env({}));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_STREQ((*c)->backend_name(), "self");
  EXPECT_TRUE(make_communicator(fake_env({{"WORLD_SIZE", "1"}, {"RANK", "0"}})).ok());
}

TEST(MakeCommunicator, RefusesSeveralProcessesItCannotConnect) {
  // torchrun-style variables alone: no MPI launcher to connect the ranks.
  auto c = make_communicator(fake_env({{"WORLD_SIZE", "2"}, {"RANK", "1"}}));
  ASSERT_FALSE(c.ok());
  if (!built_with_mpi()) {
    EXPECT_NE(c.status().message().find("built without MPI"), std::string::npos);
    EXPECT_NE(c.status().hint().find("libopenmpi-dev"), std::string::npos);
    auto under_mpirun = make_communicator(fake_env({{"OMPI_COMM_WORLD_SIZE", "2"}}));
    ASSERT_FALSE(under_mpirun.ok());
    EXPECT_NE(under_mpirun.status().message().find("built without MPI"), std::string::npos);
  } else {
    EXPECT_NE(c.status().message().find("no MPI launcher"), std::string::npos);
  }
}

TEST(CheckTorchrunVars, MismatchNamesTheVariable) {
  EXPECT_TRUE(check_torchrun_vars(fake_env({}), 1, 2, 1).ok());
  EXPECT_TRUE(check_torchrun_vars(fake_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}}), 1, 2, 1).ok());
  const Status s = check_torchrun_vars(fake_env({{"WORLD_SIZE", "4"}}), 1, 2, 1);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("WORLD_SIZE=4 but MPI says 2"), std::string::npos) << s.message();
  EXPECT_FALSE(check_torchrun_vars(fake_env({{"LOCAL_RANK", "x"}}), 0, 1, 0).ok());
}

TEST(RankMicroBatches, DisjointAndInTheSingleProcessOrder) {
  // 3 ranks x 2 accumulation steps = step 1 covers global micro-batches 6..11.
  EXPECT_EQ(rank_micro_batches(1, 2, 0, 3), (std::vector<int64_t>{6, 9}));
  EXPECT_EQ(rank_micro_batches(1, 2, 2, 3), (std::vector<int64_t>{8, 11}));
  std::vector<int> seen(12, 0);
  for (int64_t step = 0; step < 2; ++step)
    for (int r = 0; r < 3; ++r)
      for (int64_t m : rank_micro_batches(step, 2, r, 3)) ++seen[static_cast<size_t>(m)];
  for (int n : seen) EXPECT_EQ(n, 1);
  EXPECT_EQ(rank_micro_batches(4, 3, 0, 1), (std::vector<int64_t>{12, 13, 14}));
}

}  // namespace
}  // namespace lj
