// Token files written as ljperf's readers read them (io/tokens.h):
//   llmc      256 x int32 header, then the tokens: magic 20240520 / version 1 / uint16 when every
//             id fits 16 bits, else magic 20240801 / version 7 / uint32; [2] = token count
//             (written last, so the writer streams)
//   megatron  PATH.bin raw tokens (uint16, dtype code 8, or int32, code 4) and PATH.idx: one
//             sequence per document, document indices 0..n
// A writer streams into a FileWriter from io/atomic_file.h (a temporary renamed on success);
// memory stays constant: Megatron's per-document lengths go to an unlinked scratch file until
// the index is written.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/atomic_file.h"

namespace lj::tok {

enum class OutputFormat { llmc, megatron };

class TokenWriter {
 public:
  // `index_path`: the Megatron .idx to write at finish() ("" for llm.c).
  static StatusOr<std::unique_ptr<TokenWriter>> create(OutputFormat format, FileWriter* out,
                                                       std::string index_path, bool wide);
  ~TokenWriter();
  TokenWriter(const TokenWriter&) = delete;
  TokenWriter& operator=(const TokenWriter&) = delete;

  // One whole document.
  Status add_document(std::span<const uint32_t> ids);
  // Completes the header (llm.c) or writes the .idx atomically (Megatron).
  Status finish();

  uint64_t tokens() const { return tokens_; }
  uint64_t documents() const { return documents_; }

 private:
  TokenWriter() = default;
  Status flush_lengths();

  OutputFormat format_ = OutputFormat::llmc;
  FileWriter* out_ = nullptr;
  std::string index_path_;
  bool wide_ = false;
  uint64_t tokens_ = 0, documents_ = 0;
  std::vector<uint16_t> narrow_;
  int lengths_fd_ = -1;  // Megatron: int32 length per document
  std::vector<int32_t> lengths_;
};

// The .bin / .idx / _val names: PATH "x/corpus.bin" (or "x/corpus") gives x/corpus.bin, its
// index x/corpus.idx, and for validation x/corpus_val.bin and x/corpus_val.idx.
struct OutputPaths {
  std::string train_bin, train_idx, val_bin, val_idx;
};
OutputPaths output_paths(const std::string& path);

}  // namespace lj::tok
