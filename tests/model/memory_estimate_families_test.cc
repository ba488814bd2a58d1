// The memory predictor on the families beside Llama: the dry run counts Qwen2's q/k/v biases,
// Qwen3's q/k norms and Mistral's windowed attention exactly as a real step allocates them, and
// the published presets' model states follow their parameter counts.
#include <gtest/gtest.h>

#include "models/llama.h"
#include "plan/graph_figures.h"
#include "train/train_step.h"

namespace lj {
namespace {

// `tiny`'s shapes as each family (Mistral with a window shorter than T).
LlamaConfig tiny_as(ModelFamily family) {
  LlamaConfig c = *llama_preset("tiny");
  c.family = family;
  c.qkv_bias = family == ModelFamily::qwen2;
  c.qk_norm = family == ModelFamily::qwen3;
  c.sliding_window = family == ModelFamily::mistral ? 16 : 0;
  return c;
}

TEST(MemoryEstimateFamilies, DryRunMatchesARealStepByCategory) {
  for (ModelFamily family : {ModelFamily::qwen2, ModelFamily::qwen3, ModelFamily::mistral}) {
    const LlamaConfig model = tiny_as(family);
    SCOPED_TRACE(static_cast<int>(family));
    const int64_t B = 2, T = 48;
    auto est = graph_figures(model, B, T);
    ASSERT_TRUE(est.ok()) << est.status().to_string();
    // f32 weights: 4 bytes per parameter, biases and norms too, plus each tensor's allocator
    // block overhead (runtime/malloc_policy.h: a 16-byte header and up to 64 + 32 bytes of
    // alignment slack). Observed: 1280 to 3328 bytes over 21 to 28 tensors.
    const int64_t tensors = static_cast<int64_t>(llama_param_specs(model).size());
    const int64_t weights = est->stats.peak(MemCategory::weights);
    EXPECT_GE(weights, 4 * model.num_params());
    EXPECT_LT(weights - 4 * model.num_params(), 128 * tensors);

    Device dev(2);
    auto trainer = TrainStep::create(model, TrainStepConfig{}, dev);
    ASSERT_TRUE(trainer.ok()) << trainer.status().to_string();
    Tensor tokens = Tensor::zeros(dev, DType::i32, {B, T}, MemCategory::temporaries);
    Tensor targets = Tensor::zeros(dev, DType::i32, {B, T}, MemCategory::temporaries);
    auto r = (*trainer)->step(tokens, targets, 1e-3);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const MemoryStats& real = dev.memory();
    for (auto c : {MemCategory::weights, MemCategory::grads, MemCategory::optimizer,
                   MemCategory::activations, MemCategory::temporaries}) {
      EXPECT_EQ(est->stats.peak(c), real.peak(c)) << mem_category_name(c);
    }
  }
}

// A mixture of experts allocates the same bytes whatever the routing: the routed rows (tokens x
// k) are static, so the dry run (which routes nothing) matches a real step exactly, eager and
// compiled. Random tokens, so the experts get uneven groups.
TEST(MemoryEstimateFamilies, MoeDryRunMatchesARealStepByCategory) {
  for (bool compile : {false, true}) {
    const LlamaConfig model = *llama_preset("tiny-moe");
    SCOPED_TRACE(compile ? "compiled" : "eager");
    const int64_t B = 2, T = 48;
    GraphOptions options;
    options.compile = compile;
    auto est = graph_figures(model, B, T, options);
    ASSERT_TRUE(est.ok()) << est.status().to_string();
    Device dev(2);
    TrainStepConfig tc;
    tc.graph.compile = compile;
    auto trainer = TrainStep::create(model, tc, dev);
    ASSERT_TRUE(trainer.ok()) << trainer.status().to_string();
    Tensor tokens = Tensor::zeros(dev, DType::i32, {B, T}, MemCategory::temporaries);
    Tensor targets = Tensor::zeros(dev, DType::i32, {B, T}, MemCategory::temporaries);
    for (int64_t i = 0; i < B * T; ++i) {
      tokens.data<int32_t>()[i] = static_cast<int32_t>((i * 37 + 11) % model.vocab_size);
      targets.data<int32_t>()[i] = static_cast<int32_t>((i * 53 + 7) % model.vocab_size);
    }
    auto r = (*trainer)->step(tokens, targets, 1e-3);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const MemoryStats& real = dev.memory();
    for (auto c : {MemCategory::weights, MemCategory::grads, MemCategory::optimizer,
                   MemCategory::activations, MemCategory::temporaries}) {
      EXPECT_EQ(est->stats.peak(c), real.peak(c)) << mem_category_name(c);
    }
  }
}

TEST(MemoryEstimateFamilies, PublishedPresetsModelStates) {
  // AdamW's m and v in f32: 8 bytes per parameter (transformers 5.24's counts, see
  // hf_config_families_test.cc).
  for (const auto& [name, params] : {std::pair{"qwen3-8b", int64_t{8'190'735'360}},
                                     std::pair{"mistral-7b", int64_t{7'248'023'552}}}) {
    auto model = llama_preset(name);
    ASSERT_TRUE(model.ok());
    auto est = graph_figures(*model, 1, 256);
    ASSERT_TRUE(est.ok()) << est.status().to_string();
    EXPECT_EQ(est->stats.peak(MemCategory::optimizer), 8 * params) << name;
  }
}

}  // namespace
}  // namespace lj
