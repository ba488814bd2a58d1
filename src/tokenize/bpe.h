// The BPE model of tokenizer.json: vocab, merges by rank, unk (fused or not), byte_fallback
// (<0xXX> tokens, SentencePiece-derived files) and ignore_merges (Llama 3: a word already in the
// vocab is one token). Merging follows HF's Word::merge_all: always the lowest-rank pair,
// leftmost first, through a priority queue, so long words stay O(n log n).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace lj::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>>;

// Buffers of one thread.
struct BpeScratch {
  struct Symbol {
    uint32_t id;
    int32_t prev, next;
    uint32_t bytes;  // 0 once merged into its left neighbour
  };
  struct Merge {
    uint32_t rank;
    uint32_t pos;
    uint32_t new_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Merge> heap;
};

class Bpe {
 public:
  // `model` is tokenizer.json's "model" object.
  static StatusOr<Bpe> parse(const nlohmann::json& model);

  // Appends the ids of one pre-tokenized piece.
  void tokenize(std::string_view word, BpeScratch& scratch, std::vector<uint32_t>* out) const;

  std::optional<uint32_t> token_to_id(std::string_view token) const;
  // "" when the id is not in the vocab.
  const std::string& id_to_token(uint32_t id) const;
  uint32_t vocab_end() const { return static_cast<uint32_t>(id_to_token_.size()); }

 private:
  struct MergeTarget {
    uint32_t rank;
    uint32_t new_id;
  };
  uint32_t char_id(std::string_view ch, bool* found) const;
  const MergeTarget* find_merge(uint32_t a, uint32_t b) const;

  Vocab vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<uint64_t, MergeTarget> merges_;
  // Ids of one-character tokens with a code point below kDirectChars (-1: absent); a fast path
  // for the first step of every word.
  static constexpr uint32_t kDirectChars = 0x800;
  std::vector<int32_t> direct_char_ids_;
  std::optional<uint32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  int32_t byte_ids_[256];  // <0xXX> tokens, -1 when absent
  bool all_bytes_ = false;
};

}  // namespace lj::tok
