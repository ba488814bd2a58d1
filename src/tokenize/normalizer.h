// Normalizers of tokenizer.json that Llama 2/3, Mistral and Qwen-style files use: Sequence,
// Prepend, Replace (String or Regex pattern), Strip, and the Unicode forms NFC (Qwen's), NFD,
// NFKC and NFKD. Each one rewrites a whole segment (the text
// between two added tokens), as HF does: Llama 2's Prepend("▁") therefore applies after every
// special token, not just at the start of the input.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/status.h"
#include "tokenize/pieces.h"

namespace lj::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual Status normalize(std::string* s, Scratch& scratch) const = 0;
};

// null -> nullptr (no normalizer).
StatusOr<std::unique_ptr<Normalizer>> parse_normalizer(const nlohmann::json& j, int depth = 0);

// A Replace pattern: {"String": s} or {"Regex": r}. Shared by the Replace normalizer and decoder.
class ReplacePattern {
 public:
  static StatusOr<ReplacePattern> parse(const nlohmann::json& pattern, const std::string& where);
  // Every non-overlapping occurrence of the pattern in `in`, replaced by `content`, into *out.
  Status replace(std::string_view in, const std::string& content, Scratch& scratch,
                 std::string* out) const;
  const std::string& literal() const { return literal_; }
  bool is_literal() const { return regex_ == nullptr; }

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

}  // namespace lj::tok
