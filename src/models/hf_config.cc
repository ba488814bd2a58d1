#include "models/hf_config.h"

#include "core/json_read.h"
#include "core/text_file.h"

#include <nlohmann/json.hpp>

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

}  // namespace

StatusOr<LlamaConfig> parse_hf_config(const std::string& text, const std::string& src) {
  LJ_RETURN_IF_ERROR(check_input_size(text.size(), kMaxHfConfigBytes, src));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad(src, "not valid JSON");
  if (!j.is_object()) return bad(src, "not a JSON object");
  if (j.contains("architectures") && j["architectures"].is_array()) {
    bool llama = false;
    std::string names;
    for (const auto& a : j["architectures"]) {
      const std::string* name = json_string_if(a);
      if (name == nullptr) continue;
      names += (names.empty() ? "" : ", ") + *name;
      llama = llama || *name == "LlamaForCausalLM";
    }
    if (!llama)
      return unimplemented(src + ": architecture " + names + " is not supported",
                           "ljperf trains LlamaForCausalLM models");
  }
  if (j.contains("model_type") && j["model_type"] != "llama") {
    return unimplemented(src + ": model_type '" + j["model_type"].dump() + "' is not supported",
                         "ljperf trains Llama models");
  }
  LlamaConfig c;
  c.name = src;
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
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (json_bool_if(json_member(j, key)).value_or(false)) {
      return unimplemented(src + ": '" + key + "' = true is not supported",
                           "Llama 3 has no biases");
    }
  }
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
                         "Llama uses silu");
  }
  LJ_RETURN_IF_ERROR(c.validate());
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
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
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
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["torch_dtype"] = hf_dtype_name(c.torch_dtype);
  return j.dump(2) + "\n";
}

}  // namespace lj
