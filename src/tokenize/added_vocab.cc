#include "tokenize/added_vocab.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tokenize/component.h"
#include "tokenize/regex.h"
#include "tokenize/utf8.h"

namespace lj::tok {
namespace {

constexpr size_t kMaxAddedTokens = 1 << 20;
constexpr size_t kMaxAddedTokenBytes = 4096;
// The trie's nodes (256 links each): bounds its memory to 256 MiB for a hostile file.
constexpr size_t kMaxTrieNodes = 1 << 18;

// Rust's char::is_alphanumeric (Alphabetic or Numeric) for the first character of `s`; only
// single_word tokens ask.
bool is_word_char(std::string_view ch) {
  static const auto regex = Regex::compile(R"(^[\p{Alphabetic}\p{N}])");
  LJ_CHECK(regex.ok()) << regex.status().to_string();
  RegexScratch scratch;
  std::vector<std::pair<uint32_t, uint32_t>> m;
  return (*regex)->find_all(ch, scratch, &m).ok() && !m.empty();
}
bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return is_word_char(s.substr(start));
}
bool starts_with_word(std::string_view s) {
  size_t i = 0;
  if (s.empty()) return false;
  next_code_point(s, &i);
  return is_word_char(s.substr(0, i));
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<const AddedToken*> tokens)
    : tokens_(std::move(tokens)) {
  nodes_.emplace_back();
  std::memset(nodes_[0].child, -1, sizeof nodes_[0].child);
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& c = tokens_[t]->content;
    first_byte_[static_cast<unsigned char>(c[0])] = true;
    int32_t n = 0;
    for (const char ch : c) {
      const auto b = static_cast<unsigned char>(ch);
      if (nodes_[static_cast<size_t>(n)].child[b] < 0) {
        nodes_[static_cast<size_t>(n)].child[b] = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        std::memset(nodes_.back().child, -1, sizeof nodes_.back().child);
      }
      n = nodes_[static_cast<size_t>(n)].child[b];
    }
    // Two tokens with the same content: the first wins (Aho-Corasick reports the first pattern).
    if (nodes_[static_cast<size_t>(n)].token < 0)
      nodes_[static_cast<size_t>(n)].token = static_cast<int32_t>(t);
  }
}

void AddedTokenMatcher::split(std::string_view s, std::vector<AddedSplit>* out) const {
  const auto n = static_cast<uint32_t>(s.size());
  uint32_t start_offset = 0;  // end of the last match (HF's start_offset)
  uint32_t pos = 0;           // where the search resumes (the raw end of the last match)
  while (pos < n) {
    // Leftmost start with any match, then the longest match there.
    int32_t token = -1;
    uint32_t start = pos, stop = pos;
    for (; start < n; ++start) {
      if (!first_byte_[static_cast<unsigned char>(s[start])]) continue;
      int32_t node = 0;
      for (uint32_t k = start; k < n; ++k) {
        node = nodes_[static_cast<size_t>(node)].child[static_cast<unsigned char>(s[k])];
        if (node < 0) break;
        if (nodes_[static_cast<size_t>(node)].token >= 0) {
          token = nodes_[static_cast<size_t>(node)].token;
          stop = k + 1;
        }
      }
      if (token >= 0) break;
    }
    if (token < 0) break;
    pos = stop;
    const AddedToken& t = *tokens_[static_cast<size_t>(token)];
    if (t.single_word) {
      const bool start_space = start == 0 || !ends_with_word(s.substr(0, start));
      const bool stop_space = stop == n || !starts_with_word(s.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      uint32_t b = start;
      while (b > 0) {
        uint32_t cs = b - 1;
        while (cs > 0 && (static_cast<unsigned char>(s[cs]) & 0xC0) == 0x80) --cs;
        size_t i = cs;
        if (!is_unicode_whitespace(next_code_point(s, &i))) break;
        b = cs;
      }
      start = std::max(b, start_offset);
    }
    if (t.rstrip) {
      while (stop < n) {
        size_t i = stop;
        if (!is_unicode_whitespace(next_code_point(s, &i))) break;
        stop = static_cast<uint32_t>(i);
      }
    }
    if (start > start_offset) out->push_back({-1, start_offset, start});
    out->push_back({static_cast<int64_t>(t.id), start, stop});
    start_offset = stop;
  }
  if (start_offset < n) out->push_back({-1, start_offset, n});
}

StatusOr<std::vector<AddedToken>> parse_added_tokens(const nlohmann::json& j) {
  std::vector<AddedToken> out;
  if (j.is_null()) return out;
  if (!j.is_array()) return invalid_argument("tokenizer.json: added_tokens must be an array");
  if (j.size() > kMaxAddedTokens)
    return out_of_range("tokenizer.json: more than " + std::to_string(kMaxAddedTokens) +
                        " added tokens");
  size_t trie_bytes = 0;
  for (const auto& a : j) {
    AddedToken t;
    LJ_ASSIGN_OR_RETURN(const int64_t id, get_int(a, "id", "an added token"));
    if (id < 0 || id >= (1 << 24))
      return invalid_argument("tokenizer.json: added token id " + std::to_string(id) +
                              " is out of range");
    t.id = static_cast<uint32_t>(id);
    LJ_ASSIGN_OR_RETURN(t.content, get_string(a, "content", "an added token"));
    if (t.content.empty() || t.content.size() > kMaxAddedTokenBytes)
      return invalid_argument("tokenizer.json: added token " + std::to_string(id) +
                              " is empty or longer than " + std::to_string(kMaxAddedTokenBytes) +
                              " bytes");
    trie_bytes += t.content.size();
    if (trie_bytes > kMaxTrieNodes)
      return out_of_range("tokenizer.json: the added tokens hold too many bytes");
    LJ_ASSIGN_OR_RETURN(t.special, get_bool(a, "special", false, "an added token"));
    LJ_ASSIGN_OR_RETURN(t.single_word, get_bool(a, "single_word", false, "an added token"));
    LJ_ASSIGN_OR_RETURN(t.lstrip, get_bool(a, "lstrip", false, "an added token"));
    LJ_ASSIGN_OR_RETURN(t.rstrip, get_bool(a, "rstrip", false, "an added token"));
    LJ_ASSIGN_OR_RETURN(t.normalized, get_bool(a, "normalized", !t.special, "an added token"));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace lj::tok
