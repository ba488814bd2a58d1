// Graph breaks: a host callback (`opaque`) placed inside the model splits the compiled step into
// regions with an eager call between; the compile log says where and why, and results match the
// model without the callback.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "backends/host_callback.h"
#include "model/model_test_util.h"
#include "passes/regions/regions.h"
#include "train/train_step.h"

namespace lj {
namespace {

std::atomic<int> g_forward_calls{0}, g_backward_calls{0};

// An identity callback that counts its calls: the model's results must not change.
void register_counting_identity() {
  register_host_callback("test_identity",
                         HostCallback{[](const TensorView& x, TensorView& y) {
                                        ++g_forward_calls;
                                        std::memcpy(y.data, x.data, x.bytes());
                                        return ok_status();
                                      },
                                      [](const TensorView&, const TensorView& dy, TensorView& dx) {
                                        ++g_backward_calls;
                                        std::memcpy(dx.data, dy.data, dy.bytes());
                                        return ok_status();
                                      }});
}

StatusOr<ForwardBackward> run(const LlamaConfig& model, GraphOptions g, Device& dev,
                              RegionReport* regions = nullptr) {
  TrainStepConfig cfg;
  cfg.graph = g;
  LJ_ASSIGN_OR_RETURN(auto step, TrainStep::create(model, cfg, dev));
  if (regions) *regions = find_regions(step->graph());
  const testing_util::TokenPattern pattern{31, 7};
  return step->forward_backward(testing_util::tokens_of(dev, 2, 16, 0, model.vocab_size, pattern),
                                testing_util::tokens_of(dev, 2, 16, 1, model.vocab_size, pattern));
}

TEST(GraphBreak, CallbackInsideTheModelSplitsRegionsAndKeepsResults) {
  register_counting_identity();
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  Device dev(2);
  auto plain = run(*model, GraphOptions{}, dev);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  for (bool compile : {false, true}) {
    GraphOptions g;
    g.compile = compile;
    g.layer_callback = {"test_identity", 0};
    g_forward_calls = g_backward_calls = 0;
    RegionReport regions;
    auto hooked = run(*model, g, dev, &regions);
    ASSERT_TRUE(hooked.ok()) << hooked.status().to_string();
    EXPECT_EQ(g_forward_calls.load(), 1);
    EXPECT_EQ(g_backward_calls.load(), 1);
    // One break in the forward, one in the backward: three compiled regions.
    ASSERT_EQ(regions.breaks.size(), 2u) << regions.to_string();
    EXPECT_EQ(regions.regions, 3);
    EXPECT_EQ(regions.breaks[0].phase, Phase::forward);
    EXPECT_EQ(regions.breaks[1].phase, Phase::backward);
    EXPECT_NE(regions.to_string().find("host callback 'test_identity'"), std::string::npos)
        << regions.to_string();
    EXPECT_EQ(regions.breaks[0].scope.rfind("model.layers.0", 0), 0u) << regions.breaks[0].scope;
    // The identity callback changes nothing: eager is bitwise equal to the plain model; the
    // compiled step equals it within fp32 rounding (fused kernels sum in another order).
    const double tol = compile ? 1e-5 : 0;
    EXPECT_NEAR(hooked->loss, plain->loss, tol * plain->loss) << "compile " << compile;
    ASSERT_EQ(hooked->grads.size(), plain->grads.size());
    double worst = 0;
    for (size_t i = 0; i < plain->grads.size(); ++i) {
      const Tensor& a = plain->grads[i];
      const Tensor& b = hooked->grads[i];
      double scale = 0;
      for (int64_t k = 0; k < a.numel(); ++k)
        scale = std::max(scale, std::fabs(static_cast<double>(a.data<float>()[k])));
      for (int64_t k = 0; k < a.numel(); ++k) {
        const double d = std::fabs(static_cast<double>(a.data<float>()[k]) - b.data<float>()[k]);
        worst = std::max(worst, d / std::max(scale, 1e-30));
      }
    }
    EXPECT_LE(worst, compile ? 1e-4 : 0.0) << "compile " << compile;
  }
  // Under full recompute the callback still runs once per forward: it is never recomputed.
  GraphOptions g;
  g.layer_callback = {"test_identity", 1};
  g.recompute.policy = RecomputePolicy::full;
  g_forward_calls = g_backward_calls = 0;
  auto recomputed = run(*model, g, dev);
  ASSERT_TRUE(recomputed.ok()) << recomputed.status().to_string();
  EXPECT_EQ(g_forward_calls.load(), 1);
  EXPECT_EQ(g_backward_calls.load(), 1);
  EXPECT_EQ(recomputed->loss, plain->loss);
  unregister_host_callback("test_identity");
}

TEST(GraphBreak, MissingCallbackIsAnErrorNotACrash) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  Device dev(2);
  GraphOptions g;
  g.layer_callback = {"no_such_callback", 1};
  auto r = run(*model, g, dev);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no_such_callback"), std::string::npos);
}

TEST(GraphBreak, CallbackPastTheLastLayerIsRefused) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  Device dev(2);
  GraphOptions g;
  g.layer_callback = {"test_identity", model->num_hidden_layers};
  auto r = run(*model, g, dev);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
}

TEST(GraphBreak, CallbackWithoutBackwardFailsTheBackwardWithAMessage) {
  register_host_callback("test_forward_only", HostCallback{[](const TensorView& x, TensorView& y) {
                                                             std::memcpy(y.data, x.data, x.bytes());
                                                             return ok_status();
                                                           },
                                                           {}});
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  Device dev(2);
  GraphOptions g;
  g.layer_callback = {"test_forward_only", 0};
  auto r = run(*model, g, dev);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("has no backward"), std::string::npos)
      << r.status().to_string();
  unregister_host_callback("test_forward_only");
}

}  // namespace
}  // namespace lj
