#include "cli/data_sample.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "tokenize/tokenizer.h"

namespace lj::cli {

std::string escape_control_chars(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  return out;
}

StatusOr<std::string> decoded_sample(const std::string& tokenizer_path, const TokenFile& data,
                                     int64_t offset, int64_t count, size_t max_chars) {
  LJ_ASSIGN_OR_RETURN(auto tok, tok::Tokenizer::load(tokenizer_path));
  const int64_t begin = std::clamp<int64_t>(offset, 0, data.size());
  const int64_t end = std::min(data.size(), begin + std::max<int64_t>(count, 0));
  std::vector<uint32_t> ids;
  for (int64_t i = begin; i < end; ++i) {
    const uint32_t id = data[i];
    if (id >= tok->vocab_size()) {
      return invalid_argument(
          fmt::format("{} holds token id {} at position {}, past the tokenizer's vocabulary of {}",
                      data.path(), id, i, tok->vocab_size()),
          "give the tokenizer these tokens were made with (--tokenizer)");
    }
    ids.push_back(id);
  }
  LJ_ASSIGN_OR_RETURN(std::string text, tok->decode(ids, /*skip_special_tokens=*/false));
  std::string line = escape_control_chars(text);
  if (line.size() > max_chars) {
    // Cut on a UTF-8 boundary: never in the middle of a multi-byte character.
    size_t cut = max_chars;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
    line = line.substr(0, cut) + "…";
  }
  return line;
}

}  // namespace lj::cli
