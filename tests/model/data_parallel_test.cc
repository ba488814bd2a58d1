// Data parallelism with one process (SelfCommunicator): every ZeRO stage computes bit for bit
// what TrainStep computes without a communicator, and stages 1-3 keep flat shard states.
// The multi-process equivalence runs under mpirun in tests/dist/.
#include <gtest/gtest.h>

#include <cstring>

#include "dist/communicator.h"
#include "train/train_step.h"

namespace lj {
namespace {

Tensor tokens_of(Device& dev, int64_t B, int64_t T, int64_t offset, int64_t vocab) {
  Tensor t = Tensor::empty(dev, DType::i32, {B, T}, MemCategory::temporaries);
  for (int64_t i = 0; i < B * T; ++i)
    t.data<int32_t>()[i] = static_cast<int32_t>((i * 37 + offset * 11 + offset * offset) % vocab);
  return t;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

class OneRank : public ::testing::TestWithParam<int> {};

TEST_P(OneRank, EveryStageMatchesNoCommunicatorBitwise) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  const int64_t T = 16, V = model->vocab_size;
  TrainStepConfig plain;
  plain.grad_clip = 0.5;  // below the tiny model's norm: clipping runs
  TrainStepConfig dp = plain;
  SelfCommunicator self;
  // Small odd buckets: many collectives, cut inside parameters.
  dp.data_parallel = {
      &self,
      ZeroConfig{.stage = GetParam(), .reduce_bucket_size = 1001, .allgather_bucket_size = 777}};
  Device dev_a(1), dev_b(1);
  auto a = TrainStep::create(*model, plain, dev_a);
  auto b = TrainStep::create(*model, dp, dev_b);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().to_string();
  for (int64_t step = 0; step < 3; ++step) {
    std::vector<TrainStep::Batch> mb_a, mb_b;
    for (int64_t m = 0; m < 2; ++m) {
      const int64_t k = step * 2 + m;
      mb_a.push_back({tokens_of(dev_a, 1, T, k, V), tokens_of(dev_a, 1, T, k + 100, V)});
      mb_b.push_back({tokens_of(dev_b, 1, T, k, V), tokens_of(dev_b, 1, T, k + 100, V)});
    }
    auto ra = (*a)->step(mb_a, 1e-2);
    auto rb = (*b)->step(mb_b, 1e-2);
    ASSERT_TRUE(ra.ok() && rb.ok()) << rb.status().to_string();
    EXPECT_EQ(ra->loss, rb->loss);
    EXPECT_EQ(ra->grad_norm, rb->grad_norm);
    EXPECT_GT(ra->grad_norm, plain.grad_clip);
  }
  ASSERT_TRUE((*b)->gather_params().ok());  // ZeRO-3 keeps only its shard
  for (size_t i = 0; i < (*a)->params().size(); ++i) {
    EXPECT_TRUE(bitwise_equal((*a)->params()[i], (*b)->params()[i])) << i;
  }
  // Stages 1 and 2 hold one flat m and v over the (whole, at one rank) parameter vector.
  int64_t numel = 0;
  for (const Tensor& p : (*a)->params()) numel += p.numel();
  EXPECT_EQ(dev_a.memory().current(MemCategory::optimizer) >= 2 * 4 * numel, true);
  if (GetParam() > 0) {
    ASSERT_EQ((*b)->optimizer().m().size(), 1u);
    EXPECT_EQ((*b)->optimizer().m()[0].numel(), numel);
  }
}

INSTANTIATE_TEST_SUITE_P(ZeroStages, OneRank, ::testing::Values(0, 1, 2, 3));

TEST(DataParallel, AStageAboveThreeIsRefused) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  SelfCommunicator self;
  TrainStepConfig cfg;
  cfg.data_parallel = {&self, ZeroConfig{.stage = 4}};
  Device dev(1);
  auto s = TrainStep::create(*model, cfg, dev);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace lj
