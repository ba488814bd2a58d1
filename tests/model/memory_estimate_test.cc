// The dry-run memory estimate against ljperf's own accounting of a real step: every category
// except kernel workspace must match to the byte (same graph, same allocator policy).
#include <gtest/gtest.h>

#include "train/memory_estimate.h"
#include "train/train_step.h"

namespace lj {
namespace {

TEST(MemoryEstimate, DryRunMatchesARealStepByCategory) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  const int64_t B = 2, T = 48;
  auto est = estimate_train_memory(*model, B, T);
  ASSERT_TRUE(est.ok()) << est.status().to_string();

  Device dev(2);
  auto trainer = TrainStep::create(*model, TrainStepConfig{}, dev);
  ASSERT_TRUE(trainer.ok());
  Tensor tokens = Tensor::zeros(dev, DType::i32, {B, T}, MemCategory::temporaries);
  Tensor targets = Tensor::zeros(dev, DType::i32, {B, T}, MemCategory::temporaries);
  auto r = (*trainer)->step(tokens, targets, 1e-3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const MemoryStats& real = dev.memory();
  for (auto c : {MemCategory::weights, MemCategory::grads, MemCategory::optimizer,
                 MemCategory::activations, MemCategory::temporaries}) {
    EXPECT_EQ(est->stats.peak(c), real.peak(c)) << mem_category_name(c);
  }
  // The total differs only by kernel workspace (attention tiles, loss rows).
  EXPECT_LE(est->bytes_peak, real.bytes_total_peak);
  EXPECT_GE(est->bytes_peak + real.peak(MemCategory::workspace), real.bytes_total_peak);
}

TEST(MemoryEstimate, Llama8BNeedsMoreThanThisMachineAndAllocatesNothing) {
  auto model = llama_preset("llama3-8b");
  ASSERT_TRUE(model.ok());
  auto est = estimate_train_memory(*model, 1, 1024);
  ASSERT_TRUE(est.ok()) << est.status().to_string();
  // fp32 weights + grads + AdamW m, v: 16 bytes x 8.03e9 parameters = 128.5 GB before activations.
  EXPECT_GT(est->bytes_peak, int64_t{16} * 8'030'261'248);
  EXPECT_EQ(est->stats.peak(MemCategory::optimizer), int64_t{8} * 8'030'261'248);
}

}  // namespace
}  // namespace lj
