// UTF-8 helpers for the tokenizer: validation, code point decoding and encoding, and the lossy
// conversion HF tokenizers applies when decoded bytes are not UTF-8 (Rust's
// String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lj::tok {

// Length of the valid UTF-8 sequence starting at s[i] (1-4), or 0 when it is invalid there;
// *prefix gets the number of bytes that still form a valid prefix (at least 1).
int utf8_sequence_length(std::string_view s, size_t i, size_t* prefix);

// True when all of `s` is UTF-8; otherwise *bad_offset is the first bad byte.
bool utf8_valid(std::string_view s, size_t* bad_offset = nullptr);

// The code point at s[*i] (which must be valid UTF-8); advances *i past it.
uint32_t next_code_point(std::string_view s, size_t* i);

void append_utf8(std::string* out, uint32_t cp);

// Rust's from_utf8_lossy.
std::string utf8_lossy(std::string_view bytes);

// Rust's char::is_whitespace (the Unicode White_Space property).
bool is_unicode_whitespace(uint32_t cp);

}  // namespace lj::tok
