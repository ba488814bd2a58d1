#include "tokenize/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace lj::tok {
namespace {

constexpr size_t kJitStackBytes = 1 << 20;  // deep enough for \s+(?!\S) on long runs
// Matching is linear for the patterns tokenizers ship; the limit only bounds a hostile one.
constexpr uint32_t kMatchLimit = 10'000'000;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string adapt_oniguruma_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      ++i;
      if (n == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (n == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else {
        out += '\\';
        out += n;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a literal ] first
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

RegexScratch::RegexScratch() {
  match_data_ = pcre2_match_data_create(1, nullptr);
  match_context_ = pcre2_match_context_create(nullptr);
  jit_stack_ = pcre2_jit_stack_create(32 * 1024, kJitStackBytes, nullptr);
  auto* mc = static_cast<pcre2_match_context*>(match_context_);
  pcre2_jit_stack_assign(mc, nullptr, jit_stack_);
  pcre2_set_match_limit(mc, kMatchLimit);
}

RegexScratch::~RegexScratch() {
  pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_));
  pcre2_match_context_free(static_cast<pcre2_match_context*>(match_context_));
  pcre2_jit_stack_free(static_cast<pcre2_jit_stack*>(jit_stack_));
}

StatusOr<std::shared_ptr<const Regex>> Regex::compile(const std::string& pattern, bool literal) {
  const std::string adapted = literal ? pattern : adapt_oniguruma_pattern(pattern);
  // PCRE2_LITERAL refuses PCRE2_UCP (it has no classes to apply it to).
  const uint32_t options = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(adapted.data()), adapted.size(),
                                   options, &err, &err_offset, nullptr);
  if (code == nullptr) {
    return invalid_argument("tokenizer regex /" + pattern + "/ does not compile at offset " +
                                std::to_string(err_offset) + ": " + pcre2_message(err),
                            "the pattern must be valid Oniguruma/PCRE2 syntax");
  }
  // JIT is an optimization: without it (an unsupported CPU) the interpreter gives the same
  // matches.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::shared_ptr<Regex> r(new Regex());
  r->pattern_ = pattern;
  r->code_ = code;
  return std::shared_ptr<const Regex>(std::move(r));
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

Status Regex::find_all(std::string_view s, RegexScratch& scratch,
                       std::vector<std::pair<uint32_t, uint32_t>>* out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  auto* md = static_cast<pcre2_match_data*>(scratch.match_data_);
  auto* mc = static_cast<pcre2_match_context*>(scratch.match_context_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  PCRE2_SIZE start = 0;
  while (start <= s.size()) {
    const int rc = pcre2_match(code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, md, mc);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return resource_exhausted("tokenizer regex /" + pattern_ + "/ failed: " + pcre2_message(rc),
                                "the input has a pathological run for this pattern");
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const PCRE2_SIZE b = ov[0], e = ov[1];
    if (e > b) {
      out->emplace_back(static_cast<uint32_t>(b), static_cast<uint32_t>(e));
      start = e;
    } else {
      // An empty match: step over one UTF-8 character.
      start = e + 1;
      while (start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) ++start;
    }
  }
  return ok_status();
}

}  // namespace lj::tok
