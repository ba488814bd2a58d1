// The text a tokenizer pipeline passes between its stages: the pieces of one segment (the text
// between two added tokens) as spans over one buffer, and each thread's scratch space.
// Invariant: spans are non-empty, ordered, and lie inside `text`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenize/regex.h"

namespace lj::tok {

struct Span {
  uint32_t begin = 0, end = 0;
  // The piece starts at offset 0 of the original input (what Metaspace's prepend_scheme
  // "first" asks).
  bool first = false;
};

struct Pieces {
  std::string text;
  std::vector<Span> spans;

  void clear() {
    text.clear();
    spans.clear();
  }
  std::string_view view(const Span& s) const {
    return std::string_view(text).substr(s.begin, s.end - s.begin);
  }
  // Appends `s` as a new piece (nothing when empty).
  void add(std::string_view s, bool first) {
    if (s.empty()) return;
    const auto b = static_cast<uint32_t>(text.size());
    text.append(s);
    spans.push_back({b, static_cast<uint32_t>(text.size()), first});
  }
};

// Per-thread buffers reused across calls (never shared between threads).
struct Scratch {
  RegexScratch regex;
  Pieces tmp;
  std::vector<std::pair<uint32_t, uint32_t>> matches;
  std::string str;
};

}  // namespace lj::tok
