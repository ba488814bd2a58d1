// HF model folders of the families beside Llama: what ljperf writes for Qwen2 (q/k/v biases),
// Qwen3 (q/k norms) and Mistral (sliding window) reads back to the same config and weights, and
// a folder whose weights lack a family's tensor is refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "models/hf_config.h"
#include "train/hf_model.h"
#include "train/train_step.h"

namespace lj {
namespace {

namespace fs = std::filesystem;

// `tiny`'s shapes as each family.
LlamaConfig tiny_as(ModelFamily family) {
  LlamaConfig c = *llama_preset("tiny");
  c.family = family;
  c.rope_scaling = RopeScaling{};
  c.qkv_bias = family == ModelFamily::qwen2;
  c.qk_norm = family == ModelFamily::qwen3;
  c.sliding_window = family == ModelFamily::mistral ? 7 : 0;
  return c;
}

TEST(HfFolderFamilies, RoundTripKeepsFamilyTensorsAndConfig) {
  Device dev(1);
  for (ModelFamily family : {ModelFamily::qwen2, ModelFamily::qwen3, ModelFamily::mistral}) {
    const LlamaConfig c = tiny_as(family);
    const auto specs = llama_param_specs(c);
    auto params = init_llama_params(dev, specs, 0.02, 11);
    // Biases start at zero: give them values, so the round trip is tested on data.
    for (size_t i = 0; i < specs.size(); ++i) {
      if (!specs[i].is_bias) continue;
      for (int64_t k = 0; k < params[i].numel(); ++k) params[i].data<float>()[k] = 0.01f * k;
    }
    const std::string dir = testing::TempDir() + "hf_family_" +
                            std::to_string(static_cast<int>(family)) + "_" +
                            std::to_string(::getpid());
    fs::remove_all(dir);
    ASSERT_TRUE(save_hf_model(dir, c, specs, params, {}).ok());
    auto m = load_hf_model(dir, dev);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m->config.family, family);
    EXPECT_EQ(m->config.qkv_bias, c.qkv_bias);
    EXPECT_EQ(m->config.qk_norm, c.qk_norm);
    EXPECT_EQ(m->config.sliding_window, c.sliding_window);
    ASSERT_EQ(m->specs.size(), specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(m->specs[i].name, specs[i].name);
      ASSERT_EQ(std::memcmp(m->params[i].raw(), params[i].raw(), params[i].bytes()), 0)
          << specs[i].name;
    }
    fs::remove_all(dir);
  }
}

TEST(HfFolderFamilies, MissingFamilyTensorIsRefusedByName) {
  Device dev(1);
  // Qwen2 weights written as Llama (no biases), read with a Qwen2 config.json.
  const LlamaConfig llama = tiny_as(ModelFamily::llama);
  const LlamaConfig qwen2 = tiny_as(ModelFamily::qwen2);
  const auto specs = llama_param_specs(llama);
  const auto params = init_llama_params(dev, specs, 0.02, 11);
  const std::string dir = testing::TempDir() + "hf_family_missing_" + std::to_string(::getpid());
  fs::remove_all(dir);
  ASSERT_TRUE(save_hf_model(dir, llama, specs, params, {}).ok());
  {
    std::FILE* f = std::fopen((dir + "/config.json").c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string json = hf_config_json(qwen2);
    std::fwrite(json.data(), 1, json.size(), f);
    std::fclose(f);
  }
  auto m = load_hf_model(dir, dev);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("model.layers.0.self_attn.q_proj.bias"), std::string::npos)
      << m.status().to_string();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lj
