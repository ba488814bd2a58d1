#include "tokenize/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/json_read.h"
#include "tokenize/component.h"
#include "tokenize/utf8.h"

namespace lj::tok {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  std::vector<std::unique_ptr<Normalizer>> parts;
  Status normalize(std::string* s, Scratch& scratch) const override {
    for (const auto& p : parts) LJ_RETURN_IF_ERROR(p->normalize(s, scratch));
    return ok_status();
  }
};

class PrependNormalizer final : public Normalizer {
 public:
  std::string prefix;
  Status normalize(std::string* s, Scratch&) const override {
    if (!s->empty()) s->insert(0, prefix);
    return ok_status();
  }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplacePattern pattern;
  std::string content;
  Status normalize(std::string* s, Scratch& scratch) const override {
    std::string out;
    LJ_RETURN_IF_ERROR(pattern.replace(*s, content, scratch, &out));
    s->swap(out);
    return ok_status();
  }
};

// Rust's trim_start / trim_end over Unicode White_Space.
class StripNormalizer final : public Normalizer {
 public:
  bool left = true, right = true;
  Status normalize(std::string* s, Scratch&) const override {
    size_t b = 0, e = s->size();
    if (left) {
      while (b < e) {
        size_t i = b;
        if (!is_unicode_whitespace(next_code_point(*s, &i))) break;
        b = i;
      }
    }
    if (right) {
      while (e > b) {
        size_t start = e - 1;
        while (start > b && (static_cast<unsigned char>((*s)[start]) & 0xC0) == 0x80) --start;
        size_t i = start;
        if (!is_unicode_whitespace(next_code_point(*s, &i))) break;
        e = start;
      }
    }
    *s = s->substr(b, e - b);
    return ok_status();
  }
};

// Unicode normalization forms, as HF's NFC / NFD / NFKC / NFKD normalizers (Rust's
// unicode-normalization) apply them, through utf8proc (Debian's libutf8proc). The input is valid
// UTF-8 (the tokenizer checks it first).
class UnicodeNormalizer final : public Normalizer {
 public:
  std::string form;
  utf8proc_option_t options{};
  Status normalize(std::string* s, Scratch&) const override {
    if (s->empty()) return ok_status();
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s->data()),
                     static_cast<utf8proc_ssize_t>(s->size()), &out, options);
    if (n < 0) {
      return invalid_argument("tokenizer.json: normalizer " + form + ": " + utf8proc_errmsg(n));
    }
    s->assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
    return ok_status();
  }
};

}  // namespace

StatusOr<ReplacePattern> ReplacePattern::parse(const nlohmann::json& pattern,
                                               const std::string& where) {
  ReplacePattern p;
  if (const std::string* literal = json_string_if(json_member(pattern, "String"))) {
    p.literal_ = *literal;
    if (p.literal_.empty())
      return invalid_argument("tokenizer.json: " + where + " has an empty String pattern");
    return p;
  }
  if (const std::string* regex = json_string_if(json_member(pattern, "Regex"))) {
    LJ_ASSIGN_OR_RETURN(p.regex_, Regex::compile(*regex));
    return p;
  }
  return invalid_argument("tokenizer.json: " + where +
                          " needs a pattern {\"String\": ...} or {\"Regex\": ...}");
}

Status ReplacePattern::replace(std::string_view in, const std::string& content, Scratch& scratch,
                               std::string* out) const {
  out->clear();
  if (regex_ == nullptr) {
    size_t pos = 0;
    for (;;) {
      const size_t hit = in.find(literal_, pos);
      if (hit == std::string_view::npos) break;
      out->append(in.substr(pos, hit - pos));
      out->append(content);
      pos = hit + literal_.size();
    }
    out->append(in.substr(pos));
    return ok_status();
  }
  scratch.matches.clear();
  LJ_RETURN_IF_ERROR(regex_->find_all(in, scratch.regex, &scratch.matches));
  size_t pos = 0;
  for (const auto& [b, e] : scratch.matches) {
    out->append(in.substr(pos, b - pos));
    out->append(content);
    pos = e;
  }
  out->append(in.substr(pos));
  return ok_status();
}

StatusOr<std::unique_ptr<Normalizer>> parse_normalizer(const nlohmann::json& j, int depth) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  if (depth > kMaxComponentDepth)
    return invalid_argument("tokenizer.json: normalizers nest deeper than " +
                            std::to_string(kMaxComponentDepth));
  LJ_ASSIGN_OR_RETURN(const std::string type, component_type(j, "normalizer"));
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      return invalid_argument("tokenizer.json: normalizer Sequence needs \"normalizers\"");
    auto seq = std::make_unique<SequenceNormalizer>();
    for (const auto& part : j["normalizers"]) {
      LJ_ASSIGN_OR_RETURN(auto n, parse_normalizer(part, depth + 1));
      if (n) seq->parts.push_back(std::move(n));
    }
    return std::unique_ptr<Normalizer>(std::move(seq));
  }
  if (type == "Prepend") {
    auto n = std::make_unique<PrependNormalizer>();
    LJ_ASSIGN_OR_RETURN(n->prefix, get_string(j, "prepend", "normalizer Prepend"));
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Replace") {
    auto n = std::make_unique<ReplaceNormalizer>();
    LJ_ASSIGN_OR_RETURN(n->content, get_string(j, "content", "normalizer Replace"));
    if (!j.contains("pattern"))
      return invalid_argument("tokenizer.json: normalizer Replace needs a \"pattern\"");
    LJ_ASSIGN_OR_RETURN(n->pattern, ReplacePattern::parse(j["pattern"], "normalizer Replace"));
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Strip") {
    auto n = std::make_unique<StripNormalizer>();
    LJ_ASSIGN_OR_RETURN(n->left, get_bool(j, "strip_left", true, "normalizer Strip"));
    LJ_ASSIGN_OR_RETURN(n->right, get_bool(j, "strip_right", true, "normalizer Strip"));
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  const auto unicode = [&](int flags) {
    auto n = std::make_unique<UnicodeNormalizer>();
    n->form = type;
    n->options = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | flags);
    return std::unique_ptr<Normalizer>(std::move(n));
  };
  if (type == "NFC") return unicode(UTF8PROC_COMPOSE);
  if (type == "NFD") return unicode(UTF8PROC_DECOMPOSE);
  if (type == "NFKC") return unicode(UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD") return unicode(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  return unsupported_component("normalizer", type);
}

}  // namespace lj::tok
