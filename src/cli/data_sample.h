// "What am I training on?": a few tokens of a token file decoded by the model's own tokenizer
// (`--tokenizer` of train and eval), printed as one line so users see their data as text.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "io/tokens.h"

namespace lj::cli {

// Up to `count` tokens from `offset` of `data`, decoded by the tokenizer at `tokenizer_path`
// (a tokenizer.json or a folder holding one), special tokens kept, as one line: newlines and
// other control characters escaped, cut at `max_chars` with "…". An error when the tokenizer
// cannot be read, or when the data holds ids the tokenizer does not know (the wrong tokenizer
// for this data, most likely: the hint says so).
StatusOr<std::string> decoded_sample(const std::string& tokenizer_path, const TokenFile& data,
                                     int64_t offset = 0, int64_t count = 64,
                                     size_t max_chars = 240);

// Newlines as "\n", tabs as "\t", other control characters as "\xNN"; the rest as it is.
std::string escape_control_chars(const std::string& text);

}  // namespace lj::cli
