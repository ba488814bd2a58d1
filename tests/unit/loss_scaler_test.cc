// train/loss_scaler: DeepSpeed's dynamic loss scaling as a state machine, step by step.
#include "train/loss_scaler.h"

#include <gtest/gtest.h>

#include <vector>

namespace lj {
namespace {

LossScaleConfig dynamic(int64_t power, int64_t window, int64_t hysteresis, double min = 1) {
  LossScaleConfig c;
  c.enabled = true;
  c.initial_scale_power = power;
  c.loss_scale_window = window;
  c.hysteresis = hysteresis;
  c.min_loss_scale = min;
  return c;
}

// Feeds the overflow flags and returns the scale after each update.
std::vector<double> run(LossScaler& s, const std::vector<bool>& overflows) {
  std::vector<double> scales;
  for (bool o : overflows) {
    EXPECT_TRUE(s.update(o).ok());
    scales.push_back(s.scale());
  }
  return scales;
}

TEST(LossScaler, DeepSpeedDefaults) {
  LossScaleConfig c;  // DeepSpeed's: 2^16, window 1000, hysteresis 2, min 1
  EXPECT_EQ(c.initial_scale_power, 16);
  EXPECT_EQ(c.loss_scale_window, 1000);
  EXPECT_EQ(c.hysteresis, 2);
  EXPECT_EQ(c.min_loss_scale, 1);
  c.enabled = true;
  EXPECT_EQ(LossScaler(c).scale(), 65536);
  c.enabled = false;
  EXPECT_EQ(LossScaler(c).scale(), 1);  // f32 / bf16: no scaling
}

TEST(LossScaler, HysteresisAbsorbsOverflowsBeforeTheScaleHalves) {
  LossScaler s(dynamic(10, 1000, 3));
  // Overflows 1 and 2 spend the hysteresis (3 -> 2 -> 1); the third halves; with none left the
  // fourth halves again at once.
  EXPECT_EQ(run(s, {true, true, true, true}), (std::vector<double>{1024, 1024, 512, 256}));
  EXPECT_EQ(s.state().hysteresis_left, 1);
  EXPECT_EQ(s.state().overflows, 4);
  EXPECT_EQ(s.state().last_overflow_iter, 3);
}

TEST(LossScaler, HysteresisOneHalvesOnEveryOverflow) {
  LossScaler s(dynamic(4, 1000, 1));
  EXPECT_EQ(run(s, {true, false, true}), (std::vector<double>{8, 8, 4}));
}

TEST(LossScaler, WindowOfCleanStepsDoublesAndRefillsHysteresis) {
  LossScaler s(dynamic(8, 3, 2));
  // iter 0 overflows (hysteresis 2 -> 1, scale kept). The stable interval of a clean step is the
  // number of clean steps before it since the overflow: at iter 4 it reaches the window (3), so
  // the fourth clean step doubles the scale and refills the hysteresis; the next overflow is
  // absorbed again.
  EXPECT_EQ(run(s, {true, false, false, false, false}),
            (std::vector<double>{256, 256, 256, 256, 512}));
  EXPECT_EQ(s.state().hysteresis_left, 2);
  EXPECT_EQ(run(s, {true, true}), (std::vector<double>{512, 256}));
  // From the start without any overflow: the first doubling comes at iter `window` (stable
  // interval counted from last_overflow_iter = -1).
  LossScaler fresh(dynamic(0, 2, 2));
  EXPECT_EQ(run(fresh, {false, false, false, false, false}), (std::vector<double>{1, 1, 2, 2, 4}));
}

TEST(LossScaler, ConsecutiveHysteresisRefillsOnEveryCleanStep) {
  LossScaleConfig c = dynamic(6, 1000, 2);
  c.consecutive_hysteresis = true;
  LossScaler s(c);
  // overflow (2 -> 1), clean (refilled to 2), overflow (2 -> 1): the scale never halves.
  EXPECT_EQ(run(s, {true, false, true, false, true}), (std::vector<double>{64, 64, 64, 64, 64}));
}

TEST(LossScaler, MinimumScaleIsAFloorAndOverflowingThereIsAnError) {
  LossScaler s(dynamic(2, 1000, 1, /*min=*/2));
  EXPECT_EQ(run(s, {true}), (std::vector<double>{2}));  // 4 -> 2 (the floor)
  const Status st = s.update(true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("minimum loss scale"), std::string::npos) << st.to_string();
  EXPECT_NE(st.hint().find("bf16"), std::string::npos);
}

TEST(LossScaler, StaticScaleNeverChangesButCountsOverflows) {
  LossScaleConfig c = dynamic(16, 1, 1);
  c.loss_scale = 128;
  LossScaler s(c);
  EXPECT_EQ(run(s, {true, false, false, true}), (std::vector<double>{128, 128, 128, 128}));
  EXPECT_EQ(s.state().overflows, 2);
}

TEST(LossScaler, RestoredStateContinuesIdentically) {
  LossScaler a(dynamic(8, 2, 2)), b(dynamic(8, 2, 2));
  const std::vector<bool> flags{true, false, true, true, false, false, false, true, false};
  run(a, std::vector<bool>(flags.begin(), flags.begin() + 4));
  b.restore(a.state());
  EXPECT_EQ(run(a, std::vector<bool>(flags.begin() + 4, flags.end())),
            run(b, std::vector<bool>(flags.begin() + 4, flags.end())));
}

TEST(LossScaler, ConfigValidation) {
  EXPECT_TRUE(dynamic(16, 1000, 2).validate().ok());
  EXPECT_FALSE(dynamic(64, 1000, 2).validate().ok());
  EXPECT_FALSE(dynamic(16, 0, 2).validate().ok());
  EXPECT_FALSE(dynamic(16, 1000, 0).validate().ok());
  EXPECT_FALSE(dynamic(16, 1000, 2, 0).validate().ok());
}

}  // namespace
}  // namespace lj
