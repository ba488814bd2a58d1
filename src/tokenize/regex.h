// Regular expressions of tokenizer.json (written for Oniguruma, which HF tokenizers uses) run
// through PCRE2 with JIT, UTF and UCP. The one difference that matters for the patterns
// tokenizers ship: Oniguruma's \s also matches U+0085 (NEL); compile() rewrites \s and \S so
// PCRE2 agrees. A compiled Regex is immutable and shared by threads; each thread passes its own
// RegexScratch (match data and JIT stack).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace lj::tok {

class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;

 private:
  friend class Regex;
  void* match_data_;
  void* match_context_;
  void* jit_stack_;
};

class Regex {
 public:
  // `pattern` as tokenizer.json writes it; `literal` escapes it (a Split/Replace "String").
  static StatusOr<std::shared_ptr<const Regex>> compile(const std::string& pattern,
                                                        bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every non-overlapping match of `s` (valid UTF-8) as [begin, end) byte offsets, left to
  // right, appended to *out. An empty match advances by one character.
  Status find_all(std::string_view s, RegexScratch& scratch,
                  std::vector<std::pair<uint32_t, uint32_t>>* out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;
};

// The Oniguruma -> PCRE2 rewrite (exposed for tests).
std::string adapt_oniguruma_pattern(std::string_view pattern);

}  // namespace lj::tok
