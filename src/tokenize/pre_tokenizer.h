// Pre-tokenizers of tokenizer.json that Llama 2/3, Mistral and GPT-2 style files use: Sequence,
// Split (Regex or String pattern, every SplitDelimiterBehavior, invert), ByteLevel (prefix
// space, GPT-2 regex, the byte-to-character map) and Metaspace (replacement, prepend_scheme,
// split). Each one maps the pieces of a segment to finer or rewritten pieces, as HF's
// PreTokenizedString::split does: empty pieces are dropped.
#pragma once

#include <array>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/status.h"
#include "tokenize/pieces.h"

namespace lj::tok {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual Status pre_tokenize(Pieces* pieces, Scratch& scratch) const = 0;
};

// null -> nullptr (the segment is one piece).
StatusOr<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const nlohmann::json& j, int depth = 0);

// GPT-2's byte-to-character map (bytes_to_unicode): printable Latin-1 bytes map to themselves,
// the rest to U+0100 onwards, so every byte string becomes a printable string. Each entry is the
// UTF-8 of the byte's character.
const std::array<std::string, 256>& byte_level_chars();
// The inverse: the byte a character stands for, or -1.
int byte_level_byte(uint32_t code_point);

}  // namespace lj::tok
