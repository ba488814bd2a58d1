#include "tokenize/component.h"

namespace lj::tok {

Status unsupported_component(const std::string& kind, const std::string& type) {
  return unimplemented("unsupported tokenizer component: " + kind + " \"" + type + "\"",
                       "ljperf reads byte-level and SentencePiece-style BPE tokenizers (Llama 2, "
                       "Llama 3, Mistral, GPT-2); see ljperf tokenize --help");
}

StatusOr<std::string> component_type(const nlohmann::json& j, const std::string& kind) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return invalid_argument("tokenizer.json: a " + kind + " without a \"type\" string",
                            "the file does not look like an HF tokenizers file");
  return j["type"].get<std::string>();
}

StatusOr<std::string> get_string(const nlohmann::json& j, const char* key,
                                 const std::string& where) {
  if (!j.contains(key) || !j[key].is_string())
    return invalid_argument("tokenizer.json: " + where + " needs a string \"" + key + "\"");
  return j[key].get<std::string>();
}

StatusOr<bool> get_bool(const nlohmann::json& j, const char* key, bool fallback,
                        const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean())
    return invalid_argument("tokenizer.json: " + where + " \"" + key + "\" must be true or false");
  return j[key].get<bool>();
}

StatusOr<int64_t> get_int(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number_integer())
    return invalid_argument("tokenizer.json: " + where + " needs an integer \"" + key + "\"");
  return j[key].get<int64_t>();
}

}  // namespace lj::tok
