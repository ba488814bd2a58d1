#include <cmath>
#include <numbers>
#include <optional>

#include "core/check.h"
#include "core/checked_math.h"
#include "models/config.h"

namespace lj {
namespace {

LlamaConfig llama3_base() {
  LlamaConfig c;
  c.vocab_size = 128256;
  c.num_key_value_heads = 8;
  c.rope_theta = 500000.0;
  c.rms_norm_eps = 1e-5;
  c.torch_dtype = DType::bf16;  // Meta's published Llama 3 configs
  c.max_position_embeddings = 131072;
  return c;
}

// Qwen2.5 and Qwen3: Qwen's 151k vocabulary, rope theta 1e6, RMSNorm eps 1e-6, bf16; their
// config.json's sliding_window is off (use_sliding_window false).
LlamaConfig qwen_base(ModelFamily family) {
  LlamaConfig c;
  c.family = family;
  c.qkv_bias = family == ModelFamily::qwen2;
  c.qk_norm = family == ModelFamily::qwen3;
  c.vocab_size = 151936;
  c.rope_theta = 1000000.0;
  c.rms_norm_eps = 1e-6;
  c.torch_dtype = DType::bf16;
  return c;
}

// The presets of the families beside Llama, each from the config.json its comment names;
// hidden_size 0 when `name` is none of them.
LlamaConfig make_other_preset(const std::string& name) {
  LlamaConfig c;
  if (name == "qwen2.5-0.5b") {
    // Qwen/Qwen2.5-0.5B config.json: tied embeddings, 14 q heads of 64 over 2 kv heads.
    c = qwen_base(ModelFamily::qwen2);
    c.hidden_size = 896, c.intermediate_size = 4864, c.num_hidden_layers = 24;
    c.num_attention_heads = 14, c.num_key_value_heads = 2, c.head_dim = 64;
    c.max_position_embeddings = 32768, c.tie_word_embeddings = true;
  } else if (name == "qwen2.5-7b") {
    // Qwen/Qwen2.5-7B config.json: vocab_size 152064, 28 q heads of 128 over 4 kv heads.
    c = qwen_base(ModelFamily::qwen2);
    c.vocab_size = 152064, c.hidden_size = 3584, c.intermediate_size = 18944;
    c.num_hidden_layers = 28, c.num_attention_heads = 28, c.num_key_value_heads = 4;
    c.head_dim = 128, c.max_position_embeddings = 131072;
  } else if (name == "qwen3-0.6b") {
    // Qwen/Qwen3-0.6B config.json: explicit head_dim 128 (16 heads x 128 != hidden 1024), tied.
    c = qwen_base(ModelFamily::qwen3);
    c.hidden_size = 1024, c.intermediate_size = 3072, c.num_hidden_layers = 28;
    c.num_attention_heads = 16, c.num_key_value_heads = 8, c.head_dim = 128;
    c.max_position_embeddings = 40960, c.tie_word_embeddings = true;
  } else if (name == "qwen3-8b") {
    // Qwen/Qwen3-8B config.json.
    c = qwen_base(ModelFamily::qwen3);
    c.hidden_size = 4096, c.intermediate_size = 12288, c.num_hidden_layers = 36;
    c.num_attention_heads = 32, c.num_key_value_heads = 8, c.head_dim = 128;
    c.max_position_embeddings = 40960;
  } else if (name == "mistral-7b") {
    // mistralai/Mistral-7B-v0.3 config.json: vocab 32768, rope theta 1e6, sliding_window null.
    c.family = ModelFamily::mistral;
    c.vocab_size = 32768, c.hidden_size = 4096, c.intermediate_size = 14336;
    c.num_hidden_layers = 32, c.num_attention_heads = 32, c.num_key_value_heads = 8;
    c.head_dim = 128, c.max_position_embeddings = 32768, c.rope_theta = 1000000.0;
    c.rms_norm_eps = 1e-5, c.torch_dtype = DType::bf16;
  } else if (name == "mixtral-8x7b") {
    // mistralai/Mixtral-8x7B-v0.1 config.json: 8 experts of 14336, top 2, router_aux_loss_coef
    // 0.02, output_router_logits false, sliding_window null.
    c.family = ModelFamily::mixtral;
    c.vocab_size = 32000, c.hidden_size = 4096, c.intermediate_size = 14336;
    c.num_hidden_layers = 32, c.num_attention_heads = 32, c.num_key_value_heads = 8;
    c.head_dim = 128, c.max_position_embeddings = 32768, c.rope_theta = 1000000.0;
    c.rms_norm_eps = 1e-5, c.torch_dtype = DType::bf16;
    c.moe = MoeConfig{
        .num_experts = 8, .top_k = 2, .moe_intermediate_size = 14336, .router_aux_loss_coef = 0.02};
  } else if (name == "qwen3-30b-a3b") {
    // Qwen/Qwen3-30B-A3B config.json: 128 experts of 768, top 8, norm_topk_prob true,
    // decoder_sparse_step 1, mlp_only_layers [], router_aux_loss_coef 0.001.
    c = qwen_base(ModelFamily::qwen3_moe);
    c.qk_norm = true;
    c.hidden_size = 2048, c.intermediate_size = 6144, c.num_hidden_layers = 48;
    c.num_attention_heads = 32, c.num_key_value_heads = 4, c.head_dim = 128;
    c.max_position_embeddings = 40960;
    c.moe = MoeConfig{.num_experts = 128, .top_k = 8, .moe_intermediate_size = 768};
  } else if (name == "tiny-moe") {
    // For tests and CPU benchmarks: a Mixtral of 8 experts, top 2, at a size that runs in
    // milliseconds, with the load-balancing loss on.
    c.family = ModelFamily::mixtral;
    c.vocab_size = 256, c.hidden_size = 64, c.intermediate_size = 128, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 16;
    c.max_position_embeddings = 256, c.rope_theta = 10000.0;
    c.moe = MoeConfig{.num_experts = 8,
                      .top_k = 2,
                      .moe_intermediate_size = 128,
                      .output_router_logits = true,
                      .router_aux_loss_coef = 0.02};
  }
  c.name = name;
  return c;
}

LlamaConfig make_preset(const std::string& name) {
  LlamaConfig c = llama3_base();
  c.name = name;
  if (LlamaConfig other = make_other_preset(name); other.hidden_size != 0) return other;
  if (name == "llama3-8b") {
    c.hidden_size = 4096, c.intermediate_size = 14336, c.num_hidden_layers = 32;
    c.num_attention_heads = 32, c.head_dim = 128, c.max_position_embeddings = 8192;
  } else if (name == "llama3.1-70b") {
    c.hidden_size = 8192, c.intermediate_size = 28672, c.num_hidden_layers = 80;
    c.num_attention_heads = 64, c.head_dim = 128;
    c.rope_scaling = RopeScaling{true, 8.0, 1.0, 4.0, 8192};
  } else if (name == "llama3.2-1b") {
    c.hidden_size = 2048, c.intermediate_size = 8192, c.num_hidden_layers = 16;
    c.num_attention_heads = 32, c.head_dim = 64, c.tie_word_embeddings = true;
    c.rope_scaling = RopeScaling{true, 32.0, 1.0, 4.0, 8192};
  } else if (name == "llama3.2-3b") {
    c.hidden_size = 3072, c.intermediate_size = 8192, c.num_hidden_layers = 28;
    c.num_attention_heads = 24, c.head_dim = 128, c.tie_word_embeddings = true;
    c.rope_scaling = RopeScaling{true, 32.0, 1.0, 4.0, 8192};
  } else if (name == "small") {
    // The default CPU benchmark: llama2.c's 15M shape (C=288, 6 layers, 6 heads, FFN 768) with
    // GQA (2 kv heads) and a 32000 vocabulary: 23.7M parameters, 14.5M without the input
    // embedding. Big enough that GEMMs dominate as on a real model, small enough that a step
    // at B=4, T=256 runs in about a second on two cores.
    c.vocab_size = 32000, c.hidden_size = 288, c.intermediate_size = 768, c.num_hidden_layers = 6;
    c.num_attention_heads = 6, c.num_key_value_heads = 2, c.head_dim = 48;
    c.max_position_embeddings = 1024, c.rope_theta = 10000.0;
    c.torch_dtype = DType::f32;
  } else if (name == "tiny") {
    // For tests: every feature (GQA, llama3 rope scaling) at a size that runs in milliseconds.
    c.vocab_size = 256, c.hidden_size = 64, c.intermediate_size = 128, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 16;
    c.max_position_embeddings = 256, c.rope_theta = 10000.0;
    c.rope_scaling = RopeScaling{true, 8.0, 1.0, 4.0, 64};
    c.torch_dtype = DType::f32;
  } else {
    c.hidden_size = 0;
  }
  return c;
}

}  // namespace

std::vector<std::string> llama_preset_names() {
  return {"tiny",         "small",        "llama3.2-1b",   "llama3.2-3b", "llama3-8b",
          "llama3.1-70b", "qwen2.5-0.5b", "qwen2.5-7b",    "qwen3-0.6b",  "qwen3-8b",
          "mistral-7b",   "mixtral-8x7b", "qwen3-30b-a3b", "tiny-moe"};
}

StatusOr<LlamaConfig> llama_preset(const std::string& name) {
  LlamaConfig c = make_preset(name);
  if (c.hidden_size == 0) {
    std::string names;
    for (const auto& n : llama_preset_names()) names += (names.empty() ? "" : ", ") + n;
    return not_found("unknown model preset '" + name + "'",
                     "presets: " + names + "; or a path to a config.json");
  }
  return c;
}

namespace {

// The parameter count (with the input embedding or without it; with every expert or with the
// top_k a token uses), or nothing when a product of the config's sizes overflows int64
// (validate() refuses such a config).
std::optional<int64_t> param_count(const LlamaConfig& c, bool with_embedding, bool active = false) {
  const int64_t C = c.hidden_size, D = c.head_dim;
  const auto q = checked_product<int64_t>({C, c.num_attention_heads, D, 2});
  const auto kv = checked_product<int64_t>({C, c.num_key_value_heads, D, 2});
  const auto mlp = checked_product<int64_t>({3, C, c.intermediate_size});
  const auto embed = checked_mul(c.vocab_size, C);
  // A sparse MLP: the router (E, C) and E (or k) experts of 3 * C * F.
  std::optional<int64_t> moe = 0;
  if (c.is_moe()) {
    const int64_t experts = active ? c.moe.top_k : c.moe.num_experts;
    const auto router = checked_mul(c.moe.num_experts, C);
    const auto ffn = checked_product<int64_t>({experts, 3, C, c.moe.moe_intermediate_size});
    moe = router && ffn ? checked_add(*router, *ffn) : std::nullopt;
  }
  if (!q || !kv || !mlp || !embed || !moe) return std::nullopt;
  std::optional<int64_t> per_layer = checked_add(*q, *kv);
  if (per_layer) per_layer = checked_add(*per_layer, 2 * C);
  const auto bias =
      checked_product<int64_t>({c.num_attention_heads + 2 * c.num_key_value_heads, D});
  if (!bias) return std::nullopt;
  if (per_layer && c.qkv_bias) per_layer = checked_add(*per_layer, *bias);  // q, k, v biases
  if (per_layer && c.qk_norm) per_layer = checked_add(*per_layer, 2 * D);   // q_norm, k_norm
  std::optional<int64_t> n = per_layer ? checked_mul(c.num_hidden_layers, *per_layer) : per_layer;
  const int64_t sparse = c.num_sparse_layers();
  for (const auto& [layers, each] :
       {std::pair{sparse, *moe}, std::pair{c.num_hidden_layers - sparse, *mlp}}) {
    const auto part = checked_mul(layers, each);
    n = n && part ? checked_add(*n, *part) : std::nullopt;
  }
  if (n) n = checked_add(*n, C);       // final norm
  if (n) n = checked_add(*n, *embed);  // LM head
  if (n && with_embedding && !c.tie_word_embeddings) n = checked_add(*n, *embed);
  return n;
}

}  // namespace

int64_t LlamaConfig::num_params_without_embedding() const {
  const std::optional<int64_t> n = param_count(*this, false);
  LJ_CHECK(n.has_value()) << "model '" << name << "': sizes overflow (validate() refuses them)";
  return *n;
}

int64_t LlamaConfig::num_active_params_without_embedding() const {
  const std::optional<int64_t> n = param_count(*this, false, /*active=*/true);
  LJ_CHECK(n.has_value()) << "model '" << name << "': sizes overflow (validate() refuses them)";
  return *n;
}

double LlamaConfig::flops_per_token(int64_t seq_len) const {
  return 6.0 * static_cast<double>(num_active_params_without_embedding()) +
         12.0 * static_cast<double>(num_hidden_layers * num_attention_heads * head_dim) *
             static_cast<double>(seq_len);
}

int64_t LlamaConfig::num_params() const {
  const std::optional<int64_t> n = param_count(*this, true);
  LJ_CHECK(n.has_value()) << "model '" << name << "': sizes overflow (validate() refuses them)";
  return *n;
}

Status LlamaConfig::validate() const {
  auto bad = [&](const std::string& what) {
    return invalid_argument("model '" + name + "': " + what, "check the config.json or preset");
  };
  if (vocab_size <= 0 || hidden_size <= 0 || intermediate_size <= 0 || num_hidden_layers <= 0) {
    return bad("sizes must be positive");
  }
  if (num_hidden_layers > kMaxHiddenLayers) {
    return bad("num_hidden_layers " + std::to_string(num_hidden_layers) + " is past the limit of " +
               std::to_string(kMaxHiddenLayers) + " (docs/limits.md)");
  }
  if (num_attention_heads <= 0 || num_key_value_heads <= 0 || head_dim <= 0)
    return bad("heads must be positive");
  if (num_attention_heads % num_key_value_heads != 0) {
    return bad("num_attention_heads (" + std::to_string(num_attention_heads) +
               ") is not a multiple of num_key_value_heads (" +
               std::to_string(num_key_value_heads) + ")");
  }
  if (head_dim % 2 != 0) return bad("head_dim must be even for rotary embeddings");
  if (!param_count(*this, true))
    return bad("the sizes overflow a 64-bit parameter count (vocab_size x hidden_size, ...)");
  if (rms_norm_eps <= 0) return bad("rms_norm_eps must be positive");
  if (rope_theta <= 0) return bad("rope_theta must be positive");
  if (sliding_window < 0) return bad("sliding_window must be positive (0: full attention)");
  if (max_window_layers < 0) return bad("max_window_layers must not be negative");
  return validate_moe();
}

std::vector<float> rope_inv_freq(const LlamaConfig& c) {
  const int64_t half = c.head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    // HF: 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), in f32.
    const float expo = static_cast<float>(2 * i) / static_cast<float>(c.head_dim);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(static_cast<float>(c.rope_theta), expo);
  }
  if (!c.rope_scaling.llama3) return inv;
  // HF's _compute_llama3_parameters, in f32 as torch computes it.
  const RopeScaling& s = c.rope_scaling;
  const auto factor = static_cast<float>(s.factor);
  const auto low_ff = static_cast<float>(s.low_freq_factor);
  const auto high_ff = static_cast<float>(s.high_freq_factor);
  const auto orig = static_cast<float>(s.original_max_position_embeddings);
  const float low_wl = orig / low_ff;
  const float high_wl = orig / high_ff;
  for (auto& f : inv) {
    const float wl = static_cast<float>(2.0 * std::numbers::pi) / f;
    if (wl < high_wl) continue;
    if (wl > low_wl) {
      f = f / factor;
      continue;
    }
    const float smooth = (orig / wl - low_ff) / (high_ff - low_ff);
    f = (1.0f - smooth) * f / factor + smooth * f;
  }
  return inv;
}

void rope_tables(const LlamaConfig& c, int64_t seq_len, std::vector<float>* cos,
                 std::vector<float>* sin) {
  const std::vector<float> inv = rope_inv_freq(c);
  const int64_t D = c.head_dim, half = D / 2;
  cos->resize(static_cast<size_t>(seq_len * D));
  sin->resize(static_cast<size_t>(seq_len * D));
  for (int64_t t = 0; t < seq_len; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float f = static_cast<float>(t) * inv[static_cast<size_t>(i)];
      const float cf = std::cos(f), sf = std::sin(f);
      for (int64_t k : {i, i + half}) {
        (*cos)[static_cast<size_t>(t * D + k)] = cf;
        (*sin)[static_cast<size_t>(t * D + k)] = sf;
      }
    }
  }
}

}  // namespace lj
