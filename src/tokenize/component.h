// What the tokenizer.json component parsers share: the error for a component ljperf does not
// implement, and typed field access that returns a Status instead of throwing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace lj::tok {

// `unsupported tokenizer component: normalizer "BertNormalizer"`.
Status unsupported_component(const std::string& kind, const std::string& type);
// The "type" field of a component object, or an error naming `kind`.
StatusOr<std::string> component_type(const nlohmann::json& j, const std::string& kind);

StatusOr<std::string> get_string(const nlohmann::json& j, const char* key,
                                 const std::string& where);
StatusOr<bool> get_bool(const nlohmann::json& j, const char* key, bool fallback,
                        const std::string& where);
StatusOr<int64_t> get_int(const nlohmann::json& j, const char* key, const std::string& where);

// Sequences nest; a hostile file could nest them deeply.
constexpr int kMaxComponentDepth = 8;

}  // namespace lj::tok
