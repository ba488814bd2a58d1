// HF config.json parsing: both rope forms, explicit and derived head_dim, refusals; presets.
#include <gtest/gtest.h>

#include "models/hf_config.h"

namespace lj {
namespace {

constexpr const char* kV4 = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
  "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
  "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "tie_word_embeddings": true, "hidden_act": "silu"})";

TEST(HfConfig, V4RopeScalingMatchesPreset) {
  auto c = parse_hf_config(kV4, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto p = llama_preset("llama3.2-1b");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(c->hidden_size, p->hidden_size);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_TRUE(c->rope_scaling.llama3);
  EXPECT_EQ(c->rope_scaling.factor, 32.0);
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(rope_inv_freq(*c), rope_inv_freq(*p));
  // Published size of Llama 3.2 1B: 1.236B parameters (tied).
  EXPECT_EQ(c->num_params(), 1235814400);
}

TEST(HfConfig, V5RopeParametersAndDerivedHeadDim) {
  auto c =
      parse_hf_config(R"({"vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336,
      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
      "max_position_embeddings": 8192,
      "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}})",
                      "v5.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_FALSE(c->rope_scaling.llama3);
  // Llama 3 8B: 8.030B parameters.
  EXPECT_EQ(c->num_params(), 8030261248);
}

// A misspelt key is a warning naming the nearest known key; a published config has none.
TEST(HfConfig, UnknownKeysAreNamed) {
  std::vector<std::string> warnings;
  ASSERT_TRUE(parse_hf_config(kV4, "config.json", &warnings).ok());
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  std::string typo = kV4;
  typo.replace(typo.find("\"rms_norm_eps\""), 14, "\"rms_norm_epsilon\"");
  ASSERT_TRUE(parse_hf_config(typo, "config.json", &warnings).ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("'rms_norm_epsilon' ignored (did you mean 'rms_norm_eps'?)"),
            std::string::npos)
      << warnings[0];
}

TEST(HfConfig, RoundTripThroughJson) {
  auto p = llama_preset("llama3.1-70b");
  ASSERT_TRUE(p.ok());
  auto c = parse_hf_config(hf_config_json(*p), "x");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->num_params(), p->num_params());
  EXPECT_EQ(rope_inv_freq(*c), rope_inv_freq(*p));
}

TEST(HfConfig, Refusals) {
  struct Case {
    const char* json;
    const char* expect;
  };
  const Case cases[] = {
      {R"({"architectures": ["GPT2LMHeadModel"]})",
       "architecture GPT2LMHeadModel is not supported"},
      {R"({"model_type": "gpt2"})", "model_type"},
      {"{not json", "not valid JSON"},
      {R"({"vocab_size": 10})", "missing 'hidden_size'"},
      {R"({"vocab_size": 10, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
          "num_attention_heads": 3, "num_key_value_heads": 2})",
       "not a multiple"},
      {R"({"vocab_size": 10, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
          "num_attention_heads": 2, "rope_scaling": {"rope_type": "yarn", "factor": 4}})",
       "rope type 'yarn'"},
      {R"({"vocab_size": 10, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
          "num_attention_heads": 2, "attention_bias": true})",
       "attention_bias"},
      {R"({"vocab_size": "many"})", "not an integer"},
  };
  for (const Case& c : cases) {
    auto r = parse_hf_config(c.json, "config.json");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().to_string();
  }
}

TEST(Presets, PublishedSizesAndUnknownName) {
  // Parameter counts of the published models (HF model cards): 8.03B, 70.55B, 3.21B.
  EXPECT_EQ(llama_preset("llama3-8b")->num_params(), 8030261248);
  EXPECT_EQ(llama_preset("llama3.1-70b")->num_params(), 70553706496);
  EXPECT_EQ(llama_preset("llama3.2-3b")->num_params(), 3212749824);
  auto s = llama_preset("small");
  EXPECT_GT(s->num_params(), 15'000'000);
  EXPECT_LT(s->num_params(), 25'000'000);
  auto bad = llama_preset("llama9");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("presets: tiny, small"), std::string::npos);
}

}  // namespace
}  // namespace lj
