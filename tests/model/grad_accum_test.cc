// Gradient accumulation: two micro-batches of one sequence give the gradients of one batch of
// two (every target counts, so the mean of the two means is the mean over both).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "model/model_test_util.h"
#include "train/train_step.h"

namespace lj {
namespace {

using testing_util::tokens_of;

Tensor slice_rows(Device& dev, const Tensor& t, int64_t row) {
  const int64_t T = t.dims()[1];
  Tensor out = Tensor::empty(dev, DType::i32, {1, T}, MemCategory::temporaries);
  std::copy(t.data<int32_t>() + row * T, t.data<int32_t>() + (row + 1) * T, out.data<int32_t>());
  return out;
}

TEST(GradAccum, TwoMicroBatchesEqualOneBatchOfTwo) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  const int64_t T = 24, V = model->vocab_size;
  TrainStepConfig cfg;
  cfg.grad_clip = 0;
  Device dev(2);
  auto whole = TrainStep::create(*model, cfg, dev);
  auto accum = TrainStep::create(*model, cfg, dev);
  ASSERT_TRUE(whole.ok() && accum.ok());
  Tensor x = tokens_of(dev, 2, T, 0, V), y = tokens_of(dev, 2, T, 1, V);
  auto r1 = (*whole)->step(x, y, 1e-2);
  std::vector<TrainStep::Batch> micro{{slice_rows(dev, x, 0), slice_rows(dev, y, 0)},
                                      {slice_rows(dev, x, 1), slice_rows(dev, y, 1)}};
  auto r2 = (*accum)->step(micro, 1e-2);
  ASSERT_TRUE(r1.ok() && r2.ok());
  // Observed: loss 5.56422138 vs 5.56422162 (4e-8 relative), gradient norms equal to 9 digits:
  // fp32 sums in another order.
  EXPECT_NEAR(r1->loss, r2->loss, 1e-5 * r1->loss);
  EXPECT_NEAR(r1->grad_norm, r2->grad_norm, 1e-5 * r1->grad_norm);
  double max_diff = 0;
  for (size_t i = 0; i < (*whole)->params().size(); ++i) {
    const Tensor& a = (*whole)->params()[i];
    const Tensor& b = (*accum)->params()[i];
    for (int64_t k = 0; k < a.numel(); ++k) {
      max_diff = std::max(max_diff,
                          std::fabs(static_cast<double>(a.data<float>()[k]) - b.data<float>()[k]));
    }
  }
  // Observed 1e-5 after one AdamW step of lr 1e-2: Adam's first step moves each element by about
  // lr * sign(g), so an element whose gradient is near zero differs on rounding alone.
  EXPECT_LT(max_diff, 1e-4);
  std::printf("loss %.9g vs %.9g, norm %.9g vs %.9g, params max diff %.3g\n", r1->loss, r2->loss,
              r1->grad_norm, r2->grad_norm, max_diff);
}

}  // namespace
}  // namespace lj
