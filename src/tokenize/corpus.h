// Reading a text corpus as documents, streaming: .txt (one document per line) and .jsonl (one
// JSON object per line, the text under a key), each plain or gzipped (zlib reads both, so a .gz
// suffix is not needed). Lines are cut at '\n'; a trailing '\r' stays part of the text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace lj::tok {

enum class InputKind { text_lines, jsonl };
// .jsonl / .json / .ndjson (optionally .gz) -> jsonl, anything else -> text lines.
InputKind input_kind(const std::string& path);

class LineReader {
 public:
  static StatusOr<LineReader> open(const std::string& path, uint64_t max_line_bytes);
  LineReader(LineReader&& o) noexcept;
  LineReader& operator=(LineReader&&) = delete;
  LineReader(const LineReader&) = delete;
  ~LineReader();

  // The next line without its '\n' into *line; false at the end of the file. A line longer than
  // max_line_bytes is an error (*too_long set) unless `skip_long` drops it (it is then returned
  // empty with *too_long set).
  StatusOr<bool> next(std::string* line, bool skip_long, bool* too_long);
  // Bytes of the file (compressed, for .gz) consumed so far: for progress.
  uint64_t file_offset() const;
  uint64_t line_number() const { return line_number_; }

 private:
  LineReader() = default;
  Status fill();
  void* gz_ = nullptr;
  std::string path_;
  uint64_t max_line_bytes_ = 0;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  uint64_t line_number_ = 0;
};

// jsonl: the string under `key` in one line's object; errors say what is wrong with the line.
// Empty `line` -> *text empty.
Status extract_json_text(std::string_view line, const std::string& key, std::string* text);

}  // namespace lj::tok
