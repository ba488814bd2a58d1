// HF config.json -> LlamaConfig. Accepts both rope forms: rope_theta + rope_scaling
// (transformers v4) and rope_parameters (v5). head_dim explicit or hidden_size / heads.
// Reads LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM,
// MixtralForCausalLM and Qwen3MoeForCausalLM (models/families.h). Refuses other architectures by
// name (each known one with a reason of its own), and features that change the computation and are
// not implemented (Llama's biases, other activations, other rope types, layer_types other than the
// window settings give), with a clear error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/config.h"

namespace lj {

// Hostile files: a config.json larger than this is refused before parsing (real ones are ~1 KiB).
constexpr uint64_t kMaxHfConfigBytes = 16ull << 20;

// A key no Llama config.json has (a misspelling: rms_norm_epsilon) is a warning naming the
// nearest known key: appended to `warnings`, or logged when it is null.
StatusOr<LlamaConfig> parse_hf_config(const std::string& json_text, const std::string& source_name,
                                      std::vector<std::string>* warnings = nullptr);
StatusOr<LlamaConfig> load_hf_config(const std::string& path);
// torch_dtype's spelling: "float32", "bfloat16", "float16".
const char* hf_dtype_name(DType t);
// The config.json text transformers reads back to the same LlamaConfig.
std::string hf_config_json(const LlamaConfig& c);

}  // namespace lj
