// AdamW's fused update (train/adamw.h): clipping folded into the pass gives the bits of a
// separate scaling pass followed by the update, for any thread count; and the benchmark's
// profile table shows the optimizer and the time outside kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cli/report.h"
#include "core/random.h"
#include "train/adamw.h"

namespace lj {
namespace {

struct State {
  std::vector<float> p, g, m, v;
};

State random_state(int64_t n) {
  State s;
  for (int64_t k = 0; k < n; ++k) {
    const auto u = static_cast<uint64_t>(k);
    s.p.push_back(static_cast<float>(random_normal01(1, u)));
    s.g.push_back(static_cast<float>(0.1 * random_normal01(2, u)));
    s.m.push_back(static_cast<float>(0.01 * random_normal01(3, u)));
    s.v.push_back(static_cast<float>(std::abs(1e-4 * random_normal01(4, u))));
  }
  return s;
}

AdamWStepConstants constants(int64_t step) {
  AdamWStepConstants c;
  c.beta1 = 0.9f;
  c.beta2 = 0.95f;
  c.eps = 1e-8f;
  c.step_size = static_cast<float>(3e-4 / (1.0 - std::pow(0.9, step)));
  c.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(0.95, step)));
  c.decay = static_cast<float>(1.0 - 3e-4 * 0.1);
  return c;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(AdamW, FoldedGradScaleEqualsAScalingPassBitwise) {
  const int64_t n = 200003;  // above the threading threshold, not a multiple of the vector width
  const float scale = 0.37f;
  for (int threads : {1, 2}) {
    State a = random_state(n), b = random_state(n);
    for (float& g : b.g) g *= scale;  // clipping as a separate pass (the old trainer)
    AdamWStepConstants ca = constants(3), cb = constants(3);
    ca.grad_scale = scale;
    adamw_update(ca, a.p.data(), a.g.data(), a.m.data(), a.v.data(), n, threads);
    adamw_update(cb, b.p.data(), b.g.data(), b.m.data(), b.v.data(), n, threads);
    EXPECT_TRUE(same_bits(a.p, b.p)) << threads << " threads: parameters differ";
    EXPECT_TRUE(same_bits(a.m, b.m)) << threads << " threads: m differs";
    EXPECT_TRUE(same_bits(a.v, b.v)) << threads << " threads: v differs";
  }
}

// Every element goes through the same instructions wherever it sits (ZeRO updates slices of a
// parameter): two slices cut off the vector width give the bits of one call; the 16-bit copies
// are the casts of the updated parameters, NaN included; an infinite v leaves only the decay, as
// the division by an infinite denominator does.
TEST(AdamW, SlicesCopiesAndEdgesAreElementwise) {
  const int64_t n = 100003, cut = 40009;  // neither a multiple of 16
  State whole = random_state(n), parts = random_state(n);
  whole.p[5] = parts.p[5] = std::nanf("");
  whole.v[7] = parts.v[7] = std::numeric_limits<float>::infinity();
  const float p7 = whole.p[7];
  const AdamWStepConstants c = constants(2);
  std::vector<uint16_t> bf16(n), f16(n);
  adamw_update(c, whole.p.data(), whole.g.data(), whole.m.data(), whole.v.data(), n, 2,
               LowCopy{bf16.data(), DType::bf16});
  adamw_update(c, parts.p.data(), parts.g.data(), parts.m.data(), parts.v.data(), cut, 1);
  adamw_update(c, parts.p.data() + cut, parts.g.data() + cut, parts.m.data() + cut,
               parts.v.data() + cut, n - cut, 2, LowCopy{f16.data() + cut, DType::f16});
  EXPECT_TRUE(same_bits(whole.p, parts.p));
  EXPECT_TRUE(same_bits(whole.m, parts.m));
  EXPECT_TRUE(same_bits(whole.v, parts.v));
  for (int64_t k = 0; k < n; ++k) {
    ASSERT_EQ(bf16[static_cast<size_t>(k)], round_to_bf16(whole.p[static_cast<size_t>(k)])) << k;
    if (k >= cut) {
      ASSERT_EQ(f16[static_cast<size_t>(k)], f32_to_f16(whole.p[static_cast<size_t>(k)])) << k;
    }
  }
  EXPECT_TRUE(std::isnan(whole.p[5]));
  EXPECT_EQ(whole.p[7], p7 * c.decay);
}

TEST(AdamW, UpdateIsTorchsFormula) {
  // One element against torch.optim.AdamW's arithmetic written out in double: f32 rounding of
  // a few operations and of the constants (0.9f and 1 - 0.9f against 0.9 and 0.1, which shows
  // most where m's two terms nearly cancel). Observed relative error: p 5.9e-8, m 7.0e-7,
  // v 2.4e-7; bound 1e-6.
  State s = random_state(7);
  const AdamWStepConstants c = constants(1);
  State want = s;
  adamw_update(c, s.p.data(), s.g.data(), s.m.data(), s.v.data(), 7, 1);
  for (size_t k = 0; k < 7; ++k) {
    const double g = want.g[k];
    const double m = 0.9 * want.m[k] + 0.1 * g;
    const double v = 0.95 * want.v[k] + 0.05 * g * g;
    const double p =
        want.p[k] * (1.0 - 3e-4 * 0.1) - (3e-4 / 0.1) * m / (std::sqrt(v) / std::sqrt(0.05) + 1e-8);
    EXPECT_NEAR(s.m[k], m, 1e-6 * std::abs(m) + 1e-12) << k;
    EXPECT_NEAR(s.v[k], v, 1e-6 * std::abs(v) + 1e-14) << k;
    EXPECT_NEAR(s.p[k], p, 1e-6 * std::abs(p) + 1e-9) << k;
  }
}

TEST(ProfileTable, ShowsTheOptimizerAndTheTimeOutsideKernels) {
  std::vector<OpProfile> prof{{Op::matmul, Phase::forward, 4, 0.6, 6e9},
                              {Op::add, Phase::backward, 8, 0.2, 1e6}};
  // 2 steps of 0.5 s: 0.4 s kernels and 0.05 s optimizer per step leave 0.05 s outside.
  const std::string t = cli::profile_table(prof, 2, cli::HostTimes{0.1, 1.0, 2});
  EXPECT_NE(t.find("optimizer"), std::string::npos) << t;
  EXPECT_NE(t.find("50.00"), std::string::npos) << "optimizer ms per step\n" << t;
  EXPECT_NE(t.find("outside"), std::string::npos) << t;
  EXPECT_NE(t.find("step 500.00 ms wall"), std::string::npos) << t;
  EXPECT_NE(t.find("60.0%"), std::string::npos) << "matmul's share of the step\n" << t;
}

TEST(ProfileTable, GemmBoundMfuScalesMfuByTheProductsShare) {
  // 2 steps; matmul 0.5 s, linear_cross_entropy 0.2 s and the two attention kernels 0.1 s in
  // all: 0.4 s a step of the products the MFU counts.
  const std::vector<OpProfile> prof{{Op::matmul, Phase::forward, 4, 0.5, 6e9},
                                    {Op::linear_cross_entropy, Phase::forward, 2, 0.2, 2e9},
                                    {Op::sdpa, Phase::forward, 2, 0.04, 1e9},
                                    {Op::sdpa_backward, Phase::backward, 2, 0.06, 2e9},
                                    {Op::add, Phase::backward, 8, 0.2, 1e6}};
  // MFU 40% at a 0.5 s step: those kernels alone (0.4 s) would give 50%; without attention's
  // 0.05 s a step the figure would read 57.1%, a ceiling the step's own FLOPs could not reach.
  EXPECT_NEAR(cli::gemm_bound_mfu(prof, 2, 0.40, 0.5), 0.50, 1e-12);
  EXPECT_EQ(cli::gemm_bound_mfu({{Op::add, Phase::forward, 1, 0.1, 0}}, 1, 0.4, 0.5), 0.0);
}

}  // namespace
}  // namespace lj
