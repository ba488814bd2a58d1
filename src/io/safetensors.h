// safetensors reading (mmap, fully validated) and writing (temp file, fsync, rename).
// Format (the safetensors specification): u64 little-endian header length N, N bytes of UTF-8 JSON
// mapping names to {"dtype", "shape", "data_offsets": [begin, end)} relative to the data buffer, an
// optional
// "__metadata__" of string -> string, then the data buffer.
// A reader enforces: N <= 100,000,000 and inside the file; valid JSON object; at most 1,000,000
// tensors of rank <= 8; known dtype; shape of non-negative ints; (end - begin) = elements x dtype
// size computed with overflow checks; offsets contiguous from 0 with no gap or overlap; last end =
// buffer length = file length - 8 - N; no duplicate names.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace lj {

// Limits a hostile file cannot exceed (docs/limits.md). The header length is the format's own
// bound; the tensor count and rank are ljperf's (Llama checkpoints hold ~300 tensors of rank <= 2).
// Tensor sizes are bounded by the file: every byte range must lie inside it.
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;
constexpr size_t kSafetensorsMaxTensors = 1'000'000;
constexpr int kSafetensorsMaxRank = 8;

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;  // as in the file: "F32", "BF16", ...
  int dtype_size = 0;      // bytes per element
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // in the data buffer
  uint64_t end = 0;
};

// Parses and validates a whole file image (header + data). `bytes` stays owned by the caller.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in data-offset order
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // 8 + N
};
StatusOr<SafetensorsHeader> parse_safetensors(std::span<const uint8_t> bytes);

// A memory-mapped, validated file.
class SafetensorsFile {
 public:
  static StatusOr<SafetensorsFile> open(const std::string& path);
  SafetensorsFile(SafetensorsFile&& o) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& o) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  const SafetensorsEntry* find(const std::string& name) const;
  std::span<const uint8_t> bytes(const SafetensorsEntry& e) const;
  // Converts a float tensor (F32, F64, BF16, F16) to f32 into `out` (numel elements).
  Status read_f32(const SafetensorsEntry& e, std::span<float> out) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  SafetensorsHeader header_;
};

struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;  // numel x dtype_size bytes, row-major
};

// Writes `path` atomically: a temporary file beside it, fsync, rename, fsync of the directory.
// Always writes __metadata__ {"format": "pt"} plus `metadata`; pads the header with spaces to a
// multiple of 8. Tensors are laid out in the order given.
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// The safetensors name of a dtype ("F32", ...).
const char* safetensors_dtype_name(DType t);

}  // namespace lj
