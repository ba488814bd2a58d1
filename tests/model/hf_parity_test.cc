// Tier 3: the whole Llama against HF transformers (fixtures by tools/ref/make_fixtures.py):
// logits, loss, every parameter gradient, and 5 AdamW steps (10 for the mixture-of-experts
// fixtures) with warmup, cosine decay and clipping. Errors are printed per quantity so the issue
// note can quote them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <tuple>

#include "model/hf_fixture.h"
#include "model/model_test_util.h"
#include "train/lr_schedule.h"
#include "train/train_step.h"

namespace lj {
namespace {

using testing_util::max_error;
using testing_util::MaxError;

// (fixture, compile): every check runs on the eager step and on the compiled one.
class HfParity : public ::testing::TestWithParam<std::tuple<std::string, bool>> {
 protected:
  static std::string fixture() { return std::get<0>(GetParam()); }
  static bool compiled() { return std::get<1>(GetParam()); }
  static std::string label() { return fixture() + (compiled() ? "/compiled" : "/eager"); }

  void SetUp() override {
    file_ = std::make_unique<testing_util::HfFixture>(fixture() + ".safetensors");
    ASSERT_TRUE(file_->ok());
    config_ = testing_util::fixture_config(*file_, fixture());
    train_ = nlohmann::json::parse(file_->metadata("train"));
  }

  std::vector<float> read(const std::string& name) { return file_->read(name); }

  std::unique_ptr<TrainStep> make_trainer(Device& dev, bool logits) {
    TrainStepConfig tc;
    tc.graph.output_logits = logits;
    tc.graph.compile = compiled();
    tc.grad_clip = train_["grad_clip"].get<double>();
    tc.adamw.beta1 = train_["beta1"].get<double>();
    tc.adamw.beta2 = train_["beta2"].get<double>();
    tc.adamw.eps = train_["eps"].get<double>();
    tc.adamw.weight_decay = train_["weight_decay"].get<double>();
    auto t = TrainStep::create(config_, tc, dev);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    if (!t.ok()) return nullptr;
    auto trainer = std::move(t).value();
    file_->load_params(*trainer);
    return trainer;
  }

  std::unique_ptr<testing_util::HfFixture> file_;
  LlamaConfig config_;
  nlohmann::json train_;
};

TEST_P(HfParity, LogitsLossAndGradients) {
  Device dev(2);
  auto trainer = make_trainer(dev, /*logits=*/true);
  ASSERT_NE(trainer, nullptr);
  Tensor tokens, targets;
  file_->batch(dev, &tokens, &targets);
  auto fb = trainer->forward_backward(tokens, targets);
  ASSERT_TRUE(fb.ok()) << fb.status().to_string();

  const auto ref_logits = read("logits");
  const MaxError logits = max_error(fb->logits.data<float>(), ref_logits.data(),
                                    static_cast<int64_t>(ref_logits.size()));
  const double ref_loss = read("loss")[0];
  const double loss_rel = std::fabs(fb->loss - ref_loss) / std::fabs(ref_loss);
  std::printf("[%s] logits: max abs %.3g rel %.3g | loss: ljperf %.7f hf %.7f rel %.3g\n",
              label().c_str(), logits.diff, logits.rel(), fb->loss, ref_loss, loss_rel);
  // Observed (7 fixtures): logits rel <= 3.8e-7, loss rel <= 1e-7: fp32 rounding in another
  // summation order.
  EXPECT_LT(logits.rel(), 1e-5);
  EXPECT_LT(loss_rel, 1e-5);

  MaxError worst;
  std::string worst_name;
  const auto& specs = trainer->param_specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto ref = read("grad." + specs[i].name);
    const MaxError e =
        max_error(fb->grads[i].data<float>(), ref.data(), static_cast<int64_t>(ref.size()));
    // Observed: worst gradient rel error 2.1e-6 (qwen2_window's k_proj.bias, a noise-level
    // gradient: see AdamWSteps), 7.6e-7 elsewhere, over 161 gradients.
    EXPECT_LT(e.rel(), 1e-4) << specs[i].name << " abs " << e.diff;
    if (e.rel() > worst.rel()) worst = e, worst_name = specs[i].name;
  }
  std::printf("[%s] gradients (%zu): worst rel %.3g (abs %.3g) at %s\n", label().c_str(),
              specs.size(), worst.rel(), worst.diff, worst_name.c_str());
}

TEST_P(HfParity, AdamWSteps) {
  Device dev(2);
  auto trainer = make_trainer(dev, /*logits=*/false);
  ASSERT_NE(trainer, nullptr);
  Tensor tokens, targets;
  file_->batch(dev, &tokens, &targets);
  LrSchedule sched;
  sched.max_lr = train_["max_lr"].get<double>();
  sched.min_lr = train_["min_lr"].get<double>();
  sched.warmup_steps = train_["warmup_steps"].get<int64_t>();
  sched.total_steps = train_["total_steps"].get<int64_t>();
  const auto ref_losses = read("losses");
  double worst_loss = 0;
  for (int64_t s = 0; s < sched.total_steps; ++s) {
    auto r = trainer->step(tokens, targets, sched.at(s));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const double rel = std::fabs(r->loss - ref_losses[static_cast<size_t>(s)]) /
                       ref_losses[static_cast<size_t>(s)];
    worst_loss = std::max(worst_loss, rel);
    // Observed: <= 3e-7 over 5 steps.
    EXPECT_LT(rel, 1e-5) << "step " << s;
  }
  // Parameters after the last step, compared through the update each one received (pS - p0): the
  // norm-wise relative error of the update, and the largest element error against the peak lr.
  // An element-wise relative error is ill-conditioned here: Adam divides by sqrt(v), so where a
  // gradient is tiny, fp32 rounding of that gradient becomes an lr-sized update difference.
  double worst_update_rel = 0, worst_abs = 0, worst_k_bias_rel = 0;
  std::string worst_name;
  const auto& specs = trainer->param_specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto ref = read("step" + std::to_string(sched.total_steps) + "." + specs[i].name);
    const auto p0 = read(specs[i].name);
    const float* p = trainer->params()[i].data<float>();
    double diff2 = 0, upd2 = 0, max_abs = 0;
    for (size_t k = 0; k < ref.size(); ++k) {
      const double d = static_cast<double>(p[k]) - ref[k];
      const double u = static_cast<double>(ref[k]) - p0[k];
      diff2 += d * d;
      upd2 += u * u;
      max_abs = std::max(max_abs, std::fabs(d));
    }
    const double update_rel = std::sqrt(diff2 / upd2);
    // Qwen2's k_proj.bias is the ill-conditioned case above as a whole tensor: a bias added to
    // every key shifts each query's scores by a constant, which softmax ignores, except through
    // RoPE's rotation; in the head dims RoPE barely turns over T = 16 (theta 1e6) its gradient is
    // fp32 rounding noise, which Adam scales to lr-sized steps. Only the element bound holds it.
    const bool noise_gradient = specs[i].name.ends_with("k_proj.bias");
    if (noise_gradient) {
      worst_k_bias_rel = std::max(worst_k_bias_rel, update_rel);
    } else {
      // Observed: norm-wise update error <= 4.4e-5 over the 7 fixtures' other parameters
      // (mistral_window's post_attention_layernorm; the 3 Llama fixtures <= 1.4e-5).
      EXPECT_LT(update_rel, 1e-4) << specs[i].name;
      if (update_rel > worst_update_rel) worst_update_rel = update_rel, worst_name = specs[i].name;
    }
    // Observed: worst element 4.1e-5 = 4.1e-3 x max_lr (qwen2_window compiled; Llama fixtures
    // 1.9e-5).
    EXPECT_LT(max_abs, 1e-2 * sched.max_lr) << specs[i].name;
    worst_abs = std::max(worst_abs, max_abs);
  }
  std::printf(
      "[%s] %lld steps: worst loss rel %.3g; update norm-wise rel err worst %.3g at %s; max abs "
      "%.3g\n",
      label().c_str(), static_cast<long long>(sched.total_steps), worst_loss, worst_update_rel,
      worst_name.c_str(), worst_abs);
  // Observed: at most 7.6e-4 (qwen2 compiled).
  if (worst_k_bias_rel > 0) {
    std::printf("[%s] k_proj.bias update norm-wise rel err %.3g (noise-level gradient)\n",
                label().c_str(), worst_k_bias_rel);
  }
}

// Compiled (pattern fusion, fused VJPs), observed within the eager figures quoted above: logits
// rel 3.6e-7, gradients 5.9e-7, 5-step updates 6.5e-6.
INSTANTIATE_TEST_SUITE_P(Fixtures, HfParity,
                         ::testing::Combine(::testing::Values("gqa_llama3", "tied", "head_dim",
                                                              "qwen2", "qwen2_window", "qwen3",
                                                              "mistral_window", "mixtral",
                                                              "qwen3_moe", "qwen3_moe_step"),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<HfParity::ParamType>& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) ? "_compiled" : "_eager");
                         });

}  // namespace
}  // namespace lj
