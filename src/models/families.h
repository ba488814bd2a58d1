// The HF architectures ljperf reads, and the ones it knows and refuses, in one table that
// config.json parsing and writing (hf_config.cc), the presets and the CLI's hints all read.
#pragma once

#include <string>
#include <string_view>

#include "models/config.h"

namespace lj {

struct FamilyInfo {
  ModelFamily family;
  const char* architecture;  // config.json "architectures": "Qwen2ForCausalLM"
  const char* model_type;    // config.json "model_type": "qwen2"
};

const FamilyInfo& family_info(ModelFamily f);
// The family of an architecture or model_type name, or null when ljperf does not read it.
const FamilyInfo* family_by_architecture(std::string_view architecture);
const FamilyInfo* family_by_model_type(std::string_view model_type);
// "LlamaForCausalLM, Qwen2ForCausalLM, ..., Qwen3MoeForCausalLM", for hints.
std::string supported_architectures();
// Why a known architecture (or model_type) is not supported, e.g. "Gemma's GeGLU MLP, ... are not
// supported"; null for one ljperf does not know.
const char* refused_architecture_reason(std::string_view name);

}  // namespace lj
