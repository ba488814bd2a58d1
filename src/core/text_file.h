// Reading a whole (small) text file: configs, indexes, trainer state.
// Files from other people are bounded: each caller passes its format's limit (the constants live
// next to each parser; docs/limits.md lists them), and a larger file is refused before it is
// read into memory or parsed.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace lj {

// The default bound for a JSON file ljperf reads (config.json, DeepSpeed JSON, checkpoint
// manifests and trainer state): the real ones are a few KiB.
constexpr uint64_t kMaxJsonFileBytes = 16ull << 20;

// The file's bytes, or not_found "cannot read <path>" with `hint`; out_of_range when the file
// holds more than `max_bytes` (it is never read past that bound).
StatusOr<std::string> read_text_file(const std::string& path, const std::string& hint = "",
                                     uint64_t max_bytes = kMaxJsonFileBytes);

// out_of_range "<what> is N bytes, above the M-byte limit" when `size` > `max_bytes`.
Status check_input_size(uint64_t size, uint64_t max_bytes, const std::string& what);

}  // namespace lj
