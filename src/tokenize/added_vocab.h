// Added tokens (tokenizer.json "added_tokens"): split out of the input before anything else, as
// HF's AddedVocabulary does. Tokens with normalized=false are matched in the raw input; the
// remaining text is normalized and then split on the normalized=true tokens. Matching is
// leftmost-longest (HF uses Aho-Corasick LeftmostLongest); single_word, lstrip and rstrip follow
// HF's find_matches.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace lj::tok {

struct AddedToken {
  uint32_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// A piece of the input: an added token (id >= 0) or text to tokenize (id < 0).
struct AddedSplit {
  int64_t id;
  uint32_t begin, end;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<const AddedToken*> tokens);
  bool empty() const { return tokens_.empty(); }
  // Splits `s` into added tokens and the text between them (HF's find_matches); empty pieces
  // are left out.
  void split(std::string_view s, std::vector<AddedSplit>* out) const;

 private:
  // A byte trie: node 0 is the root; `token` is the index into tokens_ ending there, or -1.
  struct Node {
    int32_t child[256];
    int32_t token = -1;
  };
  std::vector<const AddedToken*> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

StatusOr<std::vector<AddedToken>> parse_added_tokens(const nlohmann::json& j);

}  // namespace lj::tok
