// Token files, memory-mapped and validated:
//   llm.c .bin   256 x int32 header: magic 20240520 (version 1, uint16 tokens) or 20240801
//                (version 7, uint32 tokens), [2] = token count, then the tokens
//   Megatron     X.bin raw tokens + X.idx (MMIDIDX index; dtype code gives the token width)
//   raw          headerless uint16 (nanoGPT) or uint32
// Every token is read as uint32.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace lj {

enum class TokenFormat { auto_detect, llmc, megatron, raw_u16, raw_u32 };
// "auto", "llmc", "megatron", "u16", "u32"; false when unknown.
bool parse_token_format(const std::string& s, TokenFormat* out);
const char* token_format_name(TokenFormat f);

class TokenFile {
 public:
  // auto_detect: a .idx beside the file -> Megatron; an llm.c magic in the first int32 ->
  // llm.c; otherwise raw uint32 when the size is a multiple of 4, else an error.
  static StatusOr<TokenFile> open(const std::string& path,
                                  TokenFormat format = TokenFormat::auto_detect);
  TokenFile(TokenFile&& o) noexcept;
  TokenFile& operator=(TokenFile&& o) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  int64_t size() const { return num_tokens_; }
  uint32_t operator[](int64_t i) const {
    return width_ == 2 ? static_cast<const uint16_t*>(tokens_)[i]
                       : static_cast<const uint32_t*>(tokens_)[i];
  }
  TokenFormat format() const { return format_; }
  int token_bytes() const { return width_; }
  const std::string& path() const { return path_; }
  // Largest token id (scans the file once).
  uint32_t max_token() const;

 private:
  TokenFile() = default;
  std::string path_;
  TokenFormat format_ = TokenFormat::raw_u32;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* tokens_ = nullptr;
  int64_t num_tokens_ = 0;
  int width_ = 4;
};

}  // namespace lj
