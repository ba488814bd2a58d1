// The dense families beside Llama (Qwen2/2.5, Qwen3, Mistral): their published config.json
// files read to the presets, what transformers ignores is ignored, the architectures ljperf does
// not train are refused by name with what it does train, and the presets' parameter counts are
// the published models'.
#include <gtest/gtest.h>

#include <string>

#include "models/families.h"
#include "models/hf_config.h"
#include "models/llama.h"

namespace lj {
namespace {

// Qwen/Qwen2.5-0.5B config.json: sliding_window 32768 with use_sliding_window false.
constexpr const char* kQwen25 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1", "use_cache": true, "use_mrope": false,
  "use_sliding_window": false, "vocab_size": 151936})";

// Qwen/Qwen3-0.6B config.json: head_dim 128 with hidden 1024 over 16 heads.
constexpr const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// mistralai/Mistral-7B-v0.3 config.json.
constexpr const char* kMistral = R"({
  "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.42.0.dev0",
  "use_cache": true, "vocab_size": 32768})";

// Every field that changes the computation.
void expect_same_model(const LlamaConfig& a, const LlamaConfig& b) {
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.max_window_layers, b.max_window_layers);
  EXPECT_EQ(a.torch_dtype, b.torch_dtype);
  EXPECT_EQ(a.num_params(), b.num_params());
}

TEST(HfConfigFamilies, PublishedConfigsReadAsThePresets) {
  const std::pair<const char*, const char*> cases[] = {
      {kQwen25, "qwen2.5-0.5b"}, {kQwen3, "qwen3-0.6b"}, {kMistral, "mistral-7b"}};
  for (const auto& [json, preset] : cases) {
    std::vector<std::string> warnings;
    auto c = parse_hf_config(json, "config.json", &warnings);
    ASSERT_TRUE(c.ok()) << preset << ": " << c.status().to_string();
    EXPECT_TRUE(warnings.empty()) << preset << ": " << warnings[0];
    auto p = llama_preset(preset);
    ASSERT_TRUE(p.ok());
    SCOPED_TRACE(preset);
    expect_same_model(*c, *p);
  }
  auto qwen = parse_hf_config(kQwen25, "config.json");
  EXPECT_TRUE(qwen->qkv_bias);
  EXPECT_EQ(qwen->sliding_window, 0) << "use_sliding_window false: the window is ignored";
  EXPECT_TRUE(parse_hf_config(kQwen3, "config.json")->qk_norm);
}

TEST(HfConfigFamilies, MistralWindowAndRoundTrip) {
  std::string windowed = kMistral;
  windowed.replace(windowed.find("\"sliding_window\": null"), 22, "\"sliding_window\": 4096");
  auto c = parse_hf_config(windowed, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->sliding_window, 4096);
  // What ljperf writes reads back to the same model, for every preset of every family.
  for (const std::string& name : llama_preset_names()) {
    auto p = llama_preset(name);
    ASSERT_TRUE(p.ok());
    std::vector<std::string> warnings;
    auto back = parse_hf_config(hf_config_json(*p), name, &warnings);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().to_string();
    EXPECT_TRUE(warnings.empty()) << name << ": " << warnings[0];
    SCOPED_TRACE(name);
    expect_same_model(*back, *p);
  }
  auto back = parse_hf_config(hf_config_json(*c), "x");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->sliding_window, 4096);
}

TEST(HfConfigFamilies, QwenSlidingWindowFromMaxWindowLayersOn) {
  std::string on = kQwen25;
  on.replace(on.find("\"use_sliding_window\": false"), 27, "\"use_sliding_window\": true");
  on.replace(on.find("\"max_window_layers\": 24"), 23, "\"max_window_layers\": 20");
  auto c = parse_hf_config(on, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->sliding_window, 32768);
  EXPECT_EQ(c->max_window_layers, 20);
  EXPECT_EQ(c->window_of_layer(19), 0);
  EXPECT_EQ(c->window_of_layer(20), 32768);
  auto back = parse_hf_config(hf_config_json(*c), "x");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  expect_same_model(*back, *c);
  // transformers 5 writes the layer_types it derives: accepted when they agree.
  std::string types = "\"layer_types\": [";
  for (int l = 0; l < 24; ++l) {
    types +=
        std::string(l ? ", " : "") + (l >= 20 ? "\"sliding_attention\"" : "\"full_attention\"");
  }
  std::string with_types = on;
  with_types.replace(with_types.find("\"use_cache\": true"), 17, types + "]");
  EXPECT_TRUE(parse_hf_config(with_types, "config.json").ok());
  // A Mistral window covers every layer.
  std::string mistral = kMistral;
  mistral.replace(mistral.find("\"sliding_window\": null"), 22, "\"sliding_window\": 4096");
  EXPECT_EQ(parse_hf_config(mistral, "config.json")->window_of_layer(0), 4096);
}

TEST(HfConfigFamilies, UnsupportedArchitecturesAreRefusedByName) {
  struct Case {
    const char* json;
    const char* expect;
  };
  const Case cases[] = {
      {R"({"architectures": ["Qwen2MoeForCausalLM"]})",
       "Qwen2MoeForCausalLM is not supported: Qwen2-MoE's shared expert"},
      {R"({"architectures": ["DeepseekV3ForCausalLM"]})", "multi-head latent attention"},
      {R"({"architectures": ["GemmaForCausalLM"]})", "GemmaForCausalLM is not supported"},
      {R"({"model_type": "qwen2_moe"})", "shared expert"},
      {R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "llama"})", "does not match"},
  };
  for (const Case& c : cases) {
    auto r = parse_hf_config(c.json, "config.json");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().to_string();
  }
  // The hint names what ljperf trains.
  auto r = parse_hf_config(R"({"architectures": ["GemmaForCausalLM"]})", "config.json");
  EXPECT_NE(r.status().to_string().find(supported_architectures()), std::string::npos)
      << r.status().to_string();
  EXPECT_NE(supported_architectures().find("Qwen3ForCausalLM"), std::string::npos);
}

TEST(HfConfigFamilies, FeaturesNotImplementedAreRefused) {
  const auto with = [](const char* base, const std::string& from, const std::string& to) {
    std::string s = base;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::pair<std::string, const char*> cases[] = {
      {with(kQwen3, "\"attention_bias\": false", "\"attention_bias\": true"), "attention_bias"},
      {with(kQwen3, "\"use_cache\": true",
            R"("layer_types": ["full_attention", "sliding_attention"])"),
       "layer_types"},
      {with(kMistral, "\"sliding_window\": null", "\"sliding_window\": 0"), "sliding_window"},
      {with(kMistral, "\"sliding_window\": null", "\"sliding_window\": \"4k\""), "sliding_window"},
  };
  for (const auto& [json, expect] : cases) {
    auto r = parse_hf_config(json, "config.json");
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().to_string();
  }
}

TEST(HfConfigFamilies, PresetParameterCountsArePublished) {
  // sum(p.numel() for p in model.parameters()) of transformers 5.24 models built on the meta
  // device from each config.json (tied embeddings counted once).
  EXPECT_EQ(llama_preset("qwen2.5-0.5b")->num_params(), 494032768);
  EXPECT_EQ(llama_preset("qwen2.5-7b")->num_params(), 7615616512);
  EXPECT_EQ(llama_preset("qwen3-0.6b")->num_params(), 596049920);
  EXPECT_EQ(llama_preset("qwen3-8b")->num_params(), 8190735360);
  EXPECT_EQ(llama_preset("mistral-7b")->num_params(), 7248023552);
  // The parameter specs (what is loaded, trained and exported) hold the same count.
  for (const char* name : {"qwen2.5-0.5b", "qwen3-0.6b", "mistral-7b"}) {
    const LlamaConfig c = *llama_preset(name);
    int64_t n = 0;
    for (const ParamSpec& s : llama_param_specs(c)) {
      int64_t e = 1;
      for (int64_t d : s.dims) e *= d;
      n += e;
    }
    EXPECT_EQ(n, c.num_params()) << name;
  }
  const auto specs = llama_param_specs(*llama_preset("qwen2.5-0.5b"));
  const auto has = [&](const std::string& name) {
    for (const ParamSpec& s : specs) {
      if (s.name == name) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_TRUE(has("model.layers.23.self_attn.v_proj.bias"));
  EXPECT_FALSE(has("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_FALSE(has("lm_head.weight"));
}

}  // namespace
}  // namespace lj
