#include "models/hf_config.h"

#include "core/json_read.h"
#include "core/log.h"
#include "core/text_file.h"
#include "models/families.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lj {
namespace {

using json = nlohmann::json;

Status bad(const std::string& src, const std::string& what, const std::string& hint = "") {
  return invalid_argument(src + ": " + what, hint.empty() ? "check the model's config.json" : hint);
}

Status get_int(const json& j, const std::string& src, const char* key, int64_t* out,
               bool required) {
  const json& v = json_member(j, key);
  if (v.is_null()) return required ? bad(src, std::string("missing '") + key + "'") : ok_status();
  const std::optional<int64_t> i = json_int_if(v);
  if (!i) return bad(src, std::string("'") + key + "' is not an integer");
  *out = *i;
  return ok_status();
}

Status get_num(const json& j, const std::string& src, const char* key, double* out) {
  const json& v = json_member(j, key);
  if (v.is_null()) return ok_status();
  const std::optional<double> d = json_number_if(v);
  if (!d) return bad(src, std::string("'") + key + "' is not a number");
  *out = *d;
  return ok_status();
}

// Every key a Llama config.json holds as transformers writes it (LlamaConfig and the
// PretrainedConfig attributes it saves), read or not: any other key is named in a warning, with
// the known key it is closest to, so a misspelt one (rms_norm_epsilon) is not silently ignored.
// The last five are Qwen2's, Qwen3's and Mistral's.
constexpr const char* kKnownKeys[] = {"architectures",
                                      "model_type",
                                      "vocab_size",
                                      "hidden_size",
                                      "intermediate_size",
                                      "num_hidden_layers",
                                      "num_attention_heads",
                                      "num_key_value_heads",
                                      "head_dim",
                                      "max_position_embeddings",
                                      "rms_norm_eps",
                                      "rope_theta",
                                      "rope_scaling",
                                      "rope_parameters",
                                      "initializer_range",
                                      "tie_word_embeddings",
                                      "attention_bias",
                                      "mlp_bias",
                                      "hidden_act",
                                      "torch_dtype",
                                      "dtype",
                                      "attention_dropout",
                                      "pretraining_tp",
                                      "use_cache",
                                      "bos_token_id",
                                      "eos_token_id",
                                      "pad_token_id",
                                      "transformers_version",
                                      "_name_or_path",
                                      "output_attentions",
                                      "output_hidden_states",
                                      "return_dict",
                                      "is_decoder",
                                      "is_encoder_decoder",
                                      "id2label",
                                      "label2id",
                                      "tokenizer_class",
                                      "prefix",
                                      "sep_token_id",
                                      "decoder_start_token_id",
                                      "task_specific_params",
                                      "problem_type",
                                      "chunk_size_feed_forward",
                                      "add_cross_attention",
                                      "tie_encoder_decoder",
                                      "finetuning_task",
                                      "use_return_dict",
                                      "quantization_config",
                                      "_attn_implementation",
                                      "attn_implementation",
                                      "max_length",
                                      "tf_legacy_loss",
                                      "use_bfloat16",
                                      "torchscript",
                                      "pruned_heads",
                                      "cross_attention_hidden_size",
                                      "auto_map",
                                      "keys_to_ignore_at_inference",
                                      "sliding_window",
                                      "use_sliding_window",
                                      "max_window_layers",
                                      "layer_types",
                                      "use_mrope",
                                      "num_local_experts",
                                      "num_experts",
                                      "num_experts_per_tok",
                                      "moe_intermediate_size",
                                      "norm_topk_prob",
                                      "decoder_sparse_step",
                                      "mlp_only_layers",
                                      "output_router_logits",
                                      "router_aux_loss_coef",
                                      "router_jitter_noise"};

// Edit distance, for the nearest known key to an unknown one.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The warnings for keys no Llama config.json has.
std::vector<std::string> unknown_key_warnings(const json& j, const std::string& src) {
  std::vector<std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const auto known = std::find_if(std::begin(kKnownKeys), std::end(kKnownKeys),
                                    [&](const char* k) { return key == k; });
    if (known != std::end(kKnownKeys)) continue;
    std::string nearest;
    size_t best = key.size() / 3 + 1;  // closer than a third of the key: a likely misspelling
    for (const char* k : kKnownKeys) {
      const size_t d = edit_distance(key, k);
      if (d < best) best = d, nearest = k;
    }
    out.push_back(src + ": unknown key '" + key + "' ignored" +
                  (nearest.empty() ? "" : " (did you mean '" + nearest + "'?)"));
  }
  return out;
}

Status parse_rope(const json& r, const std::string& src, LlamaConfig* c) {
  if (r.is_null()) return ok_status();
  if (!r.is_object()) return bad(src, "rope scaling block is not an object");
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    if (const std::string* t = json_string_if(json_member(r, key))) type = *t;
  }
  LJ_RETURN_IF_ERROR(get_num(r, src, "rope_theta", &c->rope_theta));
  if (type == "default") return ok_status();
  if (type != "llama3") {
    return unimplemented(src + ": rope type '" + type + "' is not supported",
                         "supported: default, llama3");
  }
  RopeScaling& s = c->rope_scaling;
  s.llama3 = true;
  LJ_RETURN_IF_ERROR(get_num(r, src, "factor", &s.factor));
  LJ_RETURN_IF_ERROR(get_num(r, src, "low_freq_factor", &s.low_freq_factor));
  LJ_RETURN_IF_ERROR(get_num(r, src, "high_freq_factor", &s.high_freq_factor));
  LJ_RETURN_IF_ERROR(get_int(r, src, "original_max_position_embeddings",
                             &s.original_max_position_embeddings, false));
  if (s.factor <= 0 || s.low_freq_factor <= 0 || s.high_freq_factor <= s.low_freq_factor) {
    return bad(src,
               "llama3 rope scaling needs factor > 0 and high_freq_factor > low_freq_factor > 0");
  }
  return ok_status();
}

// The family from "architectures" (the first entry ljperf reads) or else "model_type"; a
// known but unsupported one is refused with the reason, an unknown one with the supported list.
StatusOr<const FamilyInfo*> read_family(const json& j, const std::string& src) {
  const std::string hint = "ljperf trains " + supported_architectures();
  const FamilyInfo* family = nullptr;
  const json& archs = json_member(j, "architectures");
  if (archs.is_array()) {
    std::string names;
    for (const auto& a : archs) {
      const std::string* name = json_string_if(a);
      if (name == nullptr) continue;
      names += (names.empty() ? "" : ", ") + *name;
      if (family == nullptr) family = family_by_architecture(*name);
    }
    if (family == nullptr) {
      for (const auto& a : archs) {
        const std::string* name = json_string_if(a);
        const char* why = name == nullptr ? nullptr : refused_architecture_reason(*name);
        if (why != nullptr) {
          return unimplemented(src + ": architecture " + names + " is not supported: " + why, hint);
        }
      }
      if (!names.empty())
        return unimplemented(src + ": architecture " + names + " is not supported", hint);
    }
  }
  const json& type = json_member(j, "model_type");
  if (!type.is_null()) {
    const std::string* t = json_string_if(type);
    const FamilyInfo* by_type = t == nullptr ? nullptr : family_by_model_type(*t);
    if (by_type == nullptr) {
      const char* why = t == nullptr ? nullptr : refused_architecture_reason(*t);
      return unimplemented(src + ": model_type " + type.dump() + " is not supported" +
                               (why == nullptr ? "" : std::string(": ") + why),
                           hint);
    }
    if (family != nullptr && family != by_type) {
      return bad(src,
                 std::string("model_type ") + type.dump() + " does not match architecture " +
                     family->architecture,
                 std::string("a ") + family->architecture + " has model_type \"" +
                     family->model_type + "\"");
    }
    family = by_type;
  }
  return family != nullptr ? family : &family_info(ModelFamily::llama);
}

// A sliding window's size: a positive integer, or null (none).
Status read_window(const json& j, const std::string& src, int64_t* window) {
  const json& w = json_member(j, "sliding_window");
  *window = 0;
  if (w.is_null()) return ok_status();
  const std::optional<int64_t> v = json_int_if(w);
  if (!v || *v <= 0) {
    return bad(src, "'sliding_window' is " + w.dump(),
               "a positive number of tokens, or null for full attention");
  }
  *window = *v;
  return ok_status();
}

// Qwen's sliding window: transformers sets sliding_window to None unless use_sliding_window is
// true (so a window given with use_sliding_window false is ignored); switched on, it covers the
// layers from max_window_layers on (Qwen2Config's and Qwen3Config's default: 28).
Status read_qwen_window(const json& j, const std::string& src, LlamaConfig* c) {
  if (!json_bool_if(json_member(j, "use_sliding_window")).value_or(false)) return ok_status();
  LJ_RETURN_IF_ERROR(read_window(j, src, &c->sliding_window));
  c->max_window_layers = 28;
  LJ_RETURN_IF_ERROR(get_int(j, src, "max_window_layers", &c->max_window_layers, false));
  if (c->max_window_layers < 0) return bad(src, "'max_window_layers' is negative");
  return ok_status();
}

// transformers v5 writes layer_types (Qwen2, Qwen3): each layer's attention, which it derives
// from the window settings read above; a list that says otherwise is not supported.
Status check_layer_types(const json& j, const std::string& src, const LlamaConfig& c) {
  const json& types = json_member(j, "layer_types");
  if (types.is_null()) return ok_status();
  if (!types.is_array()) return bad(src, "'layer_types' is not a list");
  for (size_t l = 0; l < types.size(); ++l) {
    const bool sliding = c.sliding_window > 0 && static_cast<int64_t>(l) >= c.max_window_layers;
    if (types[l] != (sliding ? "sliding_attention" : "full_attention")) {
      return unimplemented(
          src + ": layer_types[" + std::to_string(l) + "] is " + types[l].dump() +
              ", which the sliding window settings do not give",
          "ljperf windows the layers from max_window_layers on when use_sliding_window is true");
    }
  }
  return ok_status();
}

// The mixture-of-experts settings, with transformers' defaults for the keys a config.json omits
// (MixtralConfig: 8 experts, top 2; Qwen3MoeConfig: 128 experts of 768, top 8). Mixtral's
// experts have intermediate_size and always renormalise the chosen probabilities. transformers 5
// writes num_local_experts for Qwen3-MoE too, so both spellings are read for both families.
Status read_moe(const json& j, const std::string& src, LlamaConfig* c) {
  MoeConfig& m = c->moe;
  const bool mixtral = c->family == ModelFamily::mixtral;
  m.num_experts = mixtral ? 8 : 128;
  m.top_k = mixtral ? 2 : 8;
  m.moe_intermediate_size = mixtral ? c->intermediate_size : 768;
  m.norm_topk_prob = mixtral;
  for (const char* key : {"num_local_experts", "num_experts"}) {
    LJ_RETURN_IF_ERROR(get_int(j, src, key, &m.num_experts, false));
  }
  LJ_RETURN_IF_ERROR(get_int(j, src, "num_experts_per_tok", &m.top_k, false));
  if (!mixtral) {
    LJ_RETURN_IF_ERROR(get_int(j, src, "moe_intermediate_size", &m.moe_intermediate_size, false));
    LJ_RETURN_IF_ERROR(get_int(j, src, "decoder_sparse_step", &m.decoder_sparse_step, false));
    m.norm_topk_prob = json_bool_if(json_member(j, "norm_topk_prob")).value_or(false);
    const json& dense = json_member(j, "mlp_only_layers");
    if (!dense.is_null() && !dense.is_array()) return bad(src, "'mlp_only_layers' is not a list");
    for (const json& l : dense.is_array() ? dense : json::array()) {
      const std::optional<int64_t> i = json_int_if(l);
      if (!i) return bad(src, "'mlp_only_layers' holds " + l.dump() + ", not a layer index");
      m.mlp_only_layers.push_back(*i);
    }
  }
  m.output_router_logits = json_bool_if(json_member(j, "output_router_logits")).value_or(false);
  LJ_RETURN_IF_ERROR(get_num(j, src, "router_aux_loss_coef", &m.router_aux_loss_coef));
  double jitter = 0;
  LJ_RETURN_IF_ERROR(get_num(j, src, "router_jitter_noise", &jitter));
  if (jitter != 0) {
    return unimplemented(src + ": router_jitter_noise " + std::to_string(jitter) +
                             " (random noise on the router's input) is not supported",
                         "set router_jitter_noise to 0, as the published Mixtral configs do");
  }
  return ok_status();
}

// The fields that only some families have: Qwen2's q/k/v biases, Qwen3's q/k norms, the sliding
// windows of Mistral and Qwen, and the biases a family does not have.
Status read_family_fields(const json& j, const std::string& src, LlamaConfig* c) {
  const auto flag = [&](const char* key) {
    return json_bool_if(json_member(j, key)).value_or(false);
  };
  switch (c->family) {
    case ModelFamily::llama:
      for (const char* key : {"attention_bias", "mlp_bias"}) {
        if (flag(key)) {
          return unimplemented(src + ": '" + key + "' = true is not supported",
                               "Llama 3 has no biases");
        }
      }
      return ok_status();
    case ModelFamily::qwen2:
      // Qwen2Attention: q, k, v projections always with bias, o_proj without.
      c->qkv_bias = true;
      LJ_RETURN_IF_ERROR(read_qwen_window(j, src, c));
      return check_layer_types(j, src, *c);
    case ModelFamily::qwen3:
      if (flag("attention_bias")) {
        return unimplemented(src + ": 'attention_bias' = true is not supported for Qwen3",
                             "published Qwen3 configs have attention_bias false");
      }
      c->qk_norm = true;
      LJ_RETURN_IF_ERROR(read_qwen_window(j, src, c));
      return check_layer_types(j, src, *c);
    case ModelFamily::mistral:
      // Every layer windowed (transformers 5 warns on a Mistral config with layer_types).
      LJ_RETURN_IF_ERROR(read_window(j, src, &c->sliding_window));
      return check_layer_types(j, src, *c);
    case ModelFamily::mixtral:  // Mistral's attention
      LJ_RETURN_IF_ERROR(read_window(j, src, &c->sliding_window));
      LJ_RETURN_IF_ERROR(check_layer_types(j, src, *c));
      return read_moe(j, src, c);
    case ModelFamily::qwen3_moe:  // Qwen3's attention
      if (flag("attention_bias")) {
        return unimplemented(src + ": 'attention_bias' = true is not supported for Qwen3-MoE",
                             "published Qwen3-MoE configs have attention_bias false");
      }
      c->qk_norm = true;
      LJ_RETURN_IF_ERROR(read_qwen_window(j, src, c));
      LJ_RETURN_IF_ERROR(check_layer_types(j, src, *c));
      return read_moe(j, src, c);
  }
  return ok_status();
}

}  // namespace

StatusOr<LlamaConfig> parse_hf_config(const std::string& text, const std::string& src,
                                      std::vector<std::string>* warnings) {
  LJ_RETURN_IF_ERROR(check_input_size(text.size(), kMaxHfConfigBytes, src));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad(src, "not valid JSON");
  if (!j.is_object()) return bad(src, "not a JSON object");
  LJ_ASSIGN_OR_RETURN(const FamilyInfo* family, read_family(j, src));
  LlamaConfig c;
  c.name = src;
  c.family = family->family;
  c.rope_theta = 10000.0;
  LJ_RETURN_IF_ERROR(get_int(j, src, "vocab_size", &c.vocab_size, true));
  LJ_RETURN_IF_ERROR(get_int(j, src, "hidden_size", &c.hidden_size, true));
  LJ_RETURN_IF_ERROR(get_int(j, src, "intermediate_size", &c.intermediate_size, true));
  LJ_RETURN_IF_ERROR(get_int(j, src, "num_hidden_layers", &c.num_hidden_layers, true));
  LJ_RETURN_IF_ERROR(get_int(j, src, "num_attention_heads", &c.num_attention_heads, true));
  c.num_key_value_heads = c.num_attention_heads;
  LJ_RETURN_IF_ERROR(get_int(j, src, "num_key_value_heads", &c.num_key_value_heads, false));
  c.max_position_embeddings = 2048;
  LJ_RETURN_IF_ERROR(get_int(j, src, "max_position_embeddings", &c.max_position_embeddings, false));
  LJ_RETURN_IF_ERROR(get_num(j, src, "rms_norm_eps", &c.rms_norm_eps));
  LJ_RETURN_IF_ERROR(get_num(j, src, "rope_theta", &c.rope_theta));
  LJ_RETURN_IF_ERROR(get_num(j, src, "initializer_range", &c.initializer_range));
  if (c.num_attention_heads <= 0) return bad(src, "num_attention_heads must be positive");
  c.head_dim = c.hidden_size / c.num_attention_heads;
  LJ_RETURN_IF_ERROR(get_int(j, src, "head_dim", &c.head_dim, false));
  if (const std::optional<bool> tie = json_bool_if(json_member(j, "tie_word_embeddings"))) {
    c.tie_word_embeddings = *tie;
  }
  if (j.contains("rope_parameters")) LJ_RETURN_IF_ERROR(parse_rope(j["rope_parameters"], src, &c));
  if (j.contains("rope_scaling")) LJ_RETURN_IF_ERROR(parse_rope(j["rope_scaling"], src, &c));
  LJ_RETURN_IF_ERROR(read_family_fields(j, src, &c));
  // transformers v4 writes torch_dtype, v5 dtype; "auto" or absent: f32.
  for (const char* key : {"torch_dtype", "dtype"}) {
    const json& v = json_member(j, key);
    if (v.is_null()) continue;
    const std::string* dtype = json_string_if(v);
    if (dtype == nullptr) return bad(src, std::string("'") + key + "' is not a string");
    const std::string name = *dtype;
    DType t = DType::f32;
    if (name != "auto" &&
        (!parse_dtype(name, &t) || !(t == DType::f32 || t == DType::bf16 || t == DType::f16))) {
      return bad(src, std::string("'") + key + "' is '" + name + "'",
                 "use float32, bfloat16 or float16");
    }
    c.torch_dtype = t;
  }
  if (j.contains("hidden_act") && j["hidden_act"] != "silu") {
    return unimplemented(src + ": hidden_act " + j["hidden_act"].dump() + " is not supported",
                         "Llama, Qwen and Mistral use silu");
  }
  LJ_RETURN_IF_ERROR(c.validate());
  for (std::string& w : unknown_key_warnings(j, src)) {
    if (warnings != nullptr) {
      warnings->push_back(std::move(w));
    } else {
      LJ_LOG(warning) << w;
    }
  }
  return c;
}

StatusOr<LlamaConfig> load_hf_config(const std::string& path) {
  LJ_ASSIGN_OR_RETURN(
      std::string text,
      read_text_file(path, "give a model folder holding config.json, or a preset name",
                     kMaxHfConfigBytes));
  return parse_hf_config(text, path);
}

const char* hf_dtype_name(DType t) {
  switch (t) {
    case DType::bf16:
      return "bfloat16";
    case DType::f16:
      return "float16";
    default:
      return "float32";
  }
}

std::string hf_config_json(const LlamaConfig& c) {
  nlohmann::ordered_json j;
  const FamilyInfo& family = family_info(c.family);
  j["architectures"] = {family.architecture};
  j["model_type"] = family.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.llama3) {
    j["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", c.rope_scaling.factor},
        {"low_freq_factor", c.rope_scaling.low_freq_factor},
        {"high_freq_factor", c.rope_scaling.high_freq_factor},
        {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["initializer_range"] = c.initializer_range;
  j["hidden_act"] = "silu";
  switch (c.family) {
    case ModelFamily::llama:
      j["attention_bias"] = false;
      j["mlp_bias"] = false;
      break;
    case ModelFamily::qwen3:
      j["attention_bias"] = false;  // q_proj ... o_proj without biases
      [[fallthrough]];
    case ModelFamily::qwen2:  // q, k, v biases are implied by the architecture
      j["use_sliding_window"] = c.sliding_window > 0;
      if (c.sliding_window > 0) {
        j["sliding_window"] = c.sliding_window;
        j["max_window_layers"] = c.max_window_layers;
      } else {
        j["sliding_window"] = nullptr;
        j["max_window_layers"] = c.num_hidden_layers;
      }
      break;
    case ModelFamily::mistral:
    case ModelFamily::mixtral:
      if (c.sliding_window > 0) {
        j["sliding_window"] = c.sliding_window;
      } else {
        j["sliding_window"] = nullptr;
      }
      break;
    case ModelFamily::qwen3_moe:
      j["attention_bias"] = false;
      j["use_sliding_window"] = c.sliding_window > 0;
      j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
      j["max_window_layers"] = c.sliding_window > 0 ? c.max_window_layers : c.num_hidden_layers;
      break;
  }
  if (c.is_moe()) {
    const MoeConfig& m = c.moe;
    j[c.family == ModelFamily::mixtral ? "num_local_experts" : "num_experts"] = m.num_experts;
    j["num_experts_per_tok"] = m.top_k;
    if (c.family == ModelFamily::mixtral) {
      j["router_jitter_noise"] = 0.0;
    } else {
      j["moe_intermediate_size"] = m.moe_intermediate_size;
      j["norm_topk_prob"] = m.norm_topk_prob;
      j["decoder_sparse_step"] = m.decoder_sparse_step;
      j["mlp_only_layers"] = m.mlp_only_layers;
    }
    j["output_router_logits"] = m.output_router_logits;
    j["router_aux_loss_coef"] = m.router_aux_loss_coef;
  }
  j["torch_dtype"] = hf_dtype_name(c.torch_dtype);
  return j.dump(2) + "\n";
}

}  // namespace lj
