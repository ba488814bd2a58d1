#include "tokenize/component.h"

#include "core/json_read.h"

namespace lj::tok {

Status unsupported_component(const std::string& kind, const std::string& type) {
  return unimplemented("unsupported tokenizer component: " + kind + " \"" + type + "\"",
                       "ljperf reads byte-level and SentencePiece-style BPE tokenizers (Llama 2, "
                       "Llama 3, Mistral, Qwen, GPT-2); see ljperf tokenize --help");
}

StatusOr<std::string> component_type(const nlohmann::json& j, const std::string& kind) {
  const std::string* type = json_string_if(json_member(j, "type"));
  if (type == nullptr)
    return invalid_argument("tokenizer.json: a " + kind + " without a \"type\" string",
                            "the file does not look like an HF tokenizers file");
  return *type;
}

StatusOr<std::string> get_string(const nlohmann::json& j, const char* key,
                                 const std::string& where) {
  const std::string* s = json_string_if(json_member(j, key));
  if (s == nullptr)
    return invalid_argument("tokenizer.json: " + where + " needs a string \"" + key + "\"");
  return *s;
}

StatusOr<bool> get_bool(const nlohmann::json& j, const char* key, bool fallback,
                        const std::string& where) {
  const Json& v = json_member(j, key);
  if (v.is_null()) return fallback;
  const std::optional<bool> b = json_bool_if(v);
  if (!b)
    return invalid_argument("tokenizer.json: " + where + " \"" + key + "\" must be true or false");
  return *b;
}

StatusOr<int64_t> get_int(const nlohmann::json& j, const char* key, const std::string& where) {
  const std::optional<int64_t> i = json_int_if(json_member(j, key));
  if (!i) return invalid_argument("tokenizer.json: " + where + " needs an integer \"" + key + "\"");
  return *i;
}

}  // namespace lj::tok
