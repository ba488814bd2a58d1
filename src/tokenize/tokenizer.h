// An HF tokenizers file (tokenizer.json) read into an encoder and decoder that give the same ids
// as HF tokenizers. Encoding runs HF's pipeline: split out added tokens (unnormalized ones in the
// raw text), normalize the rest, split out normalized added tokens, pre-tokenize, BPE each
// piece, then the post-processor's template (BOS/EOS) when special tokens are asked for.
//
// What is read: normalizers Sequence/Prepend/Replace/Strip; pre-tokenizers Sequence/Split/
// ByteLevel/Metaspace; model BPE (byte_fallback, unk, fuse_unk, ignore_merges); post-processors
// TemplateProcessing/ByteLevel/Sequence; decoders ByteLevel/Metaspace/Replace/ByteFallback/Fuse/
// Strip/Sequence. Anything else is a Status naming the component. "truncation" and "padding"
// are ignored: they shape model inputs at inference, not pretraining corpora.
//
// A Tokenizer is immutable and shared by threads; each thread encodes through its own
// TokenizerSession (regex match data, BPE buffers, a word cache).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenize/added_vocab.h"
#include "tokenize/bpe.h"
#include "tokenize/decoder.h"
#include "tokenize/normalizer.h"
#include "tokenize/pre_tokenizer.h"

namespace lj::tok {

// Hostile files: tokenizer.json larger than this is refused before parsing (the largest
// released ones are ~35 MB).
constexpr uint64_t kMaxTokenizerFileBytes = 512ull << 20;
// The longest text one encode() takes: pieces are addressed with 32-bit offsets, and ByteLevel
// can double a text's size.
constexpr uint64_t kMaxEncodeBytes = 1ull << 30;

class Tokenizer {
 public:
  // `path`: a tokenizer.json file, or a folder holding one.
  static StatusOr<std::shared_ptr<const Tokenizer>> load(const std::string& path);
  // `json`: the file's text; `source` names it in errors.
  static StatusOr<std::shared_ptr<const Tokenizer>> from_json(std::string_view json,
                                                              const std::string& source);

  // One past the largest id the tokenizer can produce.
  uint32_t vocab_size() const { return vocab_size_; }
  std::optional<uint32_t> token_to_id(std::string_view token) const;
  // The ids the post-processor puts before and after a single sequence.
  std::span<const uint32_t> template_prefix() const { return prefix_; }
  std::span<const uint32_t> template_suffix() const { return suffix_; }

  // HF's decode(ids, skip_special_tokens).
  StatusOr<std::string> decode(std::span<const uint32_t> ids, bool skip_special_tokens) const;

 private:
  friend class TokenizerSession;
  Tokenizer() = default;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::optional<Bpe> model_;
  std::unique_ptr<Decoder> decoder_;
  std::vector<AddedToken> added_;             // as the file gives them
  std::vector<AddedToken> added_normalized_;  // normalized=true ones, content normalized
  AddedTokenMatcher raw_matcher_, normalized_matcher_;
  std::unordered_map<uint32_t, const AddedToken*> added_by_id_;
  std::vector<uint32_t> prefix_, suffix_;
  uint32_t vocab_size_ = 0;
};

class TokenizerSession {
 public:
  explicit TokenizerSession(const Tokenizer& tokenizer) : t_(&tokenizer) {}

  // Appends the ids of `text` to *ids. Invalid UTF-8 is an error (HF takes Python str, which
  // cannot hold it); `add_special_tokens` applies the post-processor's template.
  Status encode(std::string_view text, bool add_special_tokens, std::vector<uint32_t>* ids);

 private:
  Status encode_segment(std::string_view text, bool first, std::vector<uint32_t>* ids);

  const Tokenizer* t_;
  Scratch scratch_;
  BpeScratch bpe_;
  Pieces pieces_;
  std::string normalized_;
  std::vector<AddedSplit> raw_splits_, norm_splits_;
  // Words already encoded (HF caches them too); cleared when it grows past a bound.
  std::unordered_map<std::string, std::vector<uint32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace lj::tok
