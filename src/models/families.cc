#include "models/families.h"

#include <algorithm>
#include <iterator>

namespace lj {
namespace {

constexpr FamilyInfo kFamilies[] = {
    {ModelFamily::llama, "LlamaForCausalLM", "llama"},
    {ModelFamily::qwen2, "Qwen2ForCausalLM", "qwen2"},
    {ModelFamily::qwen3, "Qwen3ForCausalLM", "qwen3"},
    {ModelFamily::mistral, "MistralForCausalLM", "mistral"},
    {ModelFamily::mixtral, "MixtralForCausalLM", "mixtral"},
    {ModelFamily::qwen3_moe, "Qwen3MoeForCausalLM", "qwen3_moe"},
};

struct Refused {
  const char* architecture;
  const char* model_type;
  const char* reason;
};

constexpr Refused kRefused[] = {
    {"Qwen2MoeForCausalLM", "qwen2_moe",
     "Qwen2-MoE's shared expert and its sigmoid gate are not supported (Qwen3-MoE is)"},
    {"DeepseekV2ForCausalLM", "deepseek_v2",
     "multi-head latent attention (MLA) and shared experts are not supported"},
    {"DeepseekV3ForCausalLM", "deepseek_v3",
     "multi-head latent attention (MLA) and shared experts are not supported"},
    {"GemmaForCausalLM", "gemma",
     "Gemma's GeGLU MLP, scaled embeddings and (1 + weight) norms are not supported"},
    {"Gemma2ForCausalLM", "gemma2",
     "Gemma 2's GeGLU MLP, logit soft-capping and alternating attention are not supported"},
    {"Gemma3ForCausalLM", "gemma3_text",
     "Gemma 3's GeGLU MLP, q/k norms with (1 + weight) and alternating attention are not "
     "supported"},
};

}  // namespace

const FamilyInfo& family_info(ModelFamily f) {
  for (const FamilyInfo& i : kFamilies) {
    if (i.family == f) return i;
  }
  return kFamilies[0];
}

const FamilyInfo* family_by_architecture(std::string_view architecture) {
  const auto* it =
      std::find_if(std::begin(kFamilies), std::end(kFamilies),
                   [&](const FamilyInfo& i) { return architecture == i.architecture; });
  return it == std::end(kFamilies) ? nullptr : it;
}

const FamilyInfo* family_by_model_type(std::string_view model_type) {
  const auto* it = std::find_if(std::begin(kFamilies), std::end(kFamilies),
                                [&](const FamilyInfo& i) { return model_type == i.model_type; });
  return it == std::end(kFamilies) ? nullptr : it;
}

std::string supported_architectures() {
  std::string out;
  for (const FamilyInfo& i : kFamilies)
    out += (out.empty() ? "" : ", ") + std::string(i.architecture);
  return out;
}

const char* refused_architecture_reason(std::string_view name) {
  for (const Refused& r : kRefused) {
    if (name == r.architecture || name == r.model_type) return r.reason;
  }
  return nullptr;
}

}  // namespace lj
