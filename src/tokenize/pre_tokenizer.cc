#include "tokenize/pre_tokenizer.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "core/json_read.h"
#include "tokenize/component.h"
#include "tokenize/utf8.h"

namespace lj::tok {
namespace {

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

StatusOr<Behavior> parse_behavior(const std::string& s) {
  if (s == "Removed") return Behavior::removed;
  if (s == "Isolated") return Behavior::isolated;
  if (s == "MergedWithPrevious") return Behavior::merged_with_previous;
  if (s == "MergedWithNext") return Behavior::merged_with_next;
  if (s == "Contiguous") return Behavior::contiguous;
  return invalid_argument("tokenizer.json: unknown Split behavior \"" + s + "\"");
}

struct Segment {
  uint32_t begin, end;
  bool is_match;
};

// HF's NormalizedString::split: `segs` cover the piece; the behavior decides which survive and
// how matches merge with their neighbours. Appends the resulting spans (absolute offsets).
void apply_behavior(std::vector<Segment>& segs, Behavior behavior, bool invert, const Span& parent,
                    std::vector<Span>* out) {
  if (invert)
    for (auto& s : segs) s.is_match = !s.is_match;
  std::vector<Segment> res;
  res.reserve(segs.size());
  switch (behavior) {
    case Behavior::isolated:
      res = segs;
      for (auto& r : res) r.is_match = false;
      break;
    case Behavior::removed:
      res = segs;  // matched segments are dropped below
      break;
    case Behavior::contiguous: {
      bool prev = false;
      for (const auto& s : segs) {
        if (s.is_match == prev && !res.empty()) {
          res.back().end = s.end;
        } else {
          res.push_back({s.begin, s.end, false});
        }
        prev = s.is_match;
      }
      break;
    }
    case Behavior::merged_with_previous: {
      bool prev = false;
      for (const auto& s : segs) {
        if (s.is_match && !prev && !res.empty()) {
          res.back().end = s.end;
        } else {
          res.push_back({s.begin, s.end, false});
        }
        prev = s.is_match;
      }
      break;
    }
    case Behavior::merged_with_next: {
      bool prev = false;
      for (size_t k = segs.size(); k-- > 0;) {
        const auto& s = segs[k];
        if (s.is_match && !prev && !res.empty()) {
          res.back().begin = s.begin;
        } else {
          res.push_back({s.begin, s.end, false});
        }
        prev = s.is_match;
      }
      std::reverse(res.begin(), res.end());
      break;
    }
  }
  for (const auto& r : res) {
    if (r.end == r.begin || (behavior == Behavior::removed && r.is_match)) continue;
    out->push_back({parent.begin + r.begin, parent.begin + r.end, parent.first && r.begin == 0});
  }
}

// Matches (relative to the piece) -> segments covering the piece.
void to_segments(const std::vector<std::pair<uint32_t, uint32_t>>& matches, uint32_t length,
                 std::vector<Segment>* segs) {
  segs->clear();
  uint32_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (b != prev) segs->push_back({prev, b, false});
    segs->push_back({b, e, true});
    prev = e;
  }
  if (prev != length) segs->push_back({prev, length, false});
}

// Splits every piece on `regex`; the text is unchanged, only spans change.
Status split_pieces(Pieces* p, const Regex& regex, Behavior behavior, bool invert,
                    Scratch& scratch) {
  std::vector<Span> out;
  out.reserve(p->spans.size() * 4);
  std::vector<Segment> segs;
  for (const Span& s : p->spans) {
    scratch.matches.clear();
    LJ_RETURN_IF_ERROR(regex.find_all(p->view(s), scratch.regex, &scratch.matches));
    to_segments(scratch.matches, s.end - s.begin, &segs);
    apply_behavior(segs, behavior, invert, s, &out);
  }
  p->spans.swap(out);
  return ok_status();
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  Status pre_tokenize(Pieces* p, Scratch& scratch) const override {
    for (const auto& part : parts) LJ_RETURN_IF_ERROR(part->pre_tokenize(p, scratch));
    return ok_status();
  }
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  std::shared_ptr<const Regex> regex;
  Behavior behavior = Behavior::isolated;
  bool invert = false;
  Status pre_tokenize(Pieces* p, Scratch& scratch) const override {
    return split_pieces(p, *regex, behavior, invert, scratch);
  }
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  bool add_prefix_space = false;
  std::shared_ptr<const Regex> regex;  // null when use_regex is false
  Status pre_tokenize(Pieces* p, Scratch& scratch) const override {
    if (add_prefix_space) {
      Pieces& q = scratch.tmp;
      q.clear();
      for (const Span& s : p->spans) {
        const std::string_view v = p->view(s);
        const auto b = static_cast<uint32_t>(q.text.size());
        if (v.front() != ' ') q.text.push_back(' ');
        q.text.append(v);
        q.spans.push_back({b, static_cast<uint32_t>(q.text.size()), s.first});
      }
      std::swap(*p, q);
    }
    if (regex) LJ_RETURN_IF_ERROR(split_pieces(p, *regex, Behavior::isolated, false, scratch));
    const auto& chars = byte_level_chars();
    Pieces& q = scratch.tmp;
    q.clear();
    q.text.reserve(p->text.size() * 2);
    for (const Span& s : p->spans) {
      const auto b = static_cast<uint32_t>(q.text.size());
      for (const char c : p->view(s)) q.text.append(chars[static_cast<unsigned char>(c)]);
      q.spans.push_back({b, static_cast<uint32_t>(q.text.size()), s.first});
    }
    std::swap(*p, q);
    return ok_status();
  }
};

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { always, first, never };
  std::string replacement;
  Prepend prepend = Prepend::always;
  bool split = true;
  std::shared_ptr<const Regex> replacement_regex;  // literal, for the split
  Status pre_tokenize(Pieces* p, Scratch& scratch) const override {
    Pieces& q = scratch.tmp;
    q.clear();
    for (const Span& s : p->spans) {
      const std::string_view v = p->view(s);
      const auto b = static_cast<uint32_t>(q.text.size());
      const bool starts = v.front() == ' ' || v.substr(0, replacement.size()) == replacement;
      if (!starts && (prepend == Prepend::always || (prepend == Prepend::first && s.first)))
        q.text.append(replacement);
      for (const char c : v) {
        if (c == ' ') {
          q.text.append(replacement);
        } else {
          q.text.push_back(c);
        }
      }
      q.spans.push_back({b, static_cast<uint32_t>(q.text.size()), s.first});
    }
    std::swap(*p, q);
    if (split)
      LJ_RETURN_IF_ERROR(
          split_pieces(p, *replacement_regex, Behavior::merged_with_next, false, scratch));
    return ok_status();
  }
};

}  // namespace

const std::array<std::string, 256>& byte_level_chars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      append_utf8(&t[b], printable ? b : next++);
    }
    return t;
  }();
  return table;
}

int byte_level_byte(uint32_t cp) {
  static const std::vector<int> inverse = [] {
    std::vector<int> v(512, -1);
    const auto& chars = byte_level_chars();
    for (int b = 0; b < 256; ++b) {
      size_t i = 0;
      v[next_code_point(chars[static_cast<size_t>(b)], &i)] = b;
    }
    return v;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

StatusOr<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const nlohmann::json& j, int depth) {
  if (j.is_null()) return std::unique_ptr<PreTokenizer>();
  if (depth > kMaxComponentDepth)
    return invalid_argument("tokenizer.json: pre-tokenizers nest deeper than " +
                            std::to_string(kMaxComponentDepth));
  LJ_ASSIGN_OR_RETURN(const std::string type, component_type(j, "pre_tokenizer"));
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      return invalid_argument("tokenizer.json: pre_tokenizer Sequence needs \"pretokenizers\"");
    auto seq = std::make_unique<SequencePreTokenizer>();
    for (const auto& part : j["pretokenizers"]) {
      LJ_ASSIGN_OR_RETURN(auto p, parse_pre_tokenizer(part, depth + 1));
      if (p) seq->parts.push_back(std::move(p));
    }
    return std::unique_ptr<PreTokenizer>(std::move(seq));
  }
  if (type == "Split") {
    auto p = std::make_unique<SplitPreTokenizer>();
    const Json& pat = json_member(j, "pattern");
    const std::string* regex = json_string_if(json_member(pat, "Regex"));
    const std::string* literal = json_string_if(json_member(pat, "String"));
    if (regex != nullptr) {
      LJ_ASSIGN_OR_RETURN(p->regex, Regex::compile(*regex));
    } else if (literal != nullptr && !literal->empty()) {
      LJ_ASSIGN_OR_RETURN(p->regex, Regex::compile(*literal, true));
    } else {
      return invalid_argument(
          "tokenizer.json: pre_tokenizer Split needs a pattern {\"Regex\": ...} or "
          "{\"String\": ...}");
    }
    LJ_ASSIGN_OR_RETURN(const std::string behavior,
                        get_string(j, "behavior", "pre_tokenizer Split"));
    LJ_ASSIGN_OR_RETURN(p->behavior, parse_behavior(behavior));
    LJ_ASSIGN_OR_RETURN(p->invert, get_bool(j, "invert", false, "pre_tokenizer Split"));
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  if (type == "ByteLevel") {
    auto p = std::make_unique<ByteLevelPreTokenizer>();
    LJ_ASSIGN_OR_RETURN(p->add_prefix_space,
                        get_bool(j, "add_prefix_space", true, "pre_tokenizer ByteLevel"));
    LJ_ASSIGN_OR_RETURN(const bool use_regex,
                        get_bool(j, "use_regex", true, "pre_tokenizer ByteLevel"));
    if (use_regex) {
      LJ_ASSIGN_OR_RETURN(p->regex, Regex::compile(kGpt2Pattern));
    }
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  if (type == "Metaspace") {
    auto p = std::make_unique<MetaspacePreTokenizer>();
    LJ_ASSIGN_OR_RETURN(p->replacement, get_string(j, "replacement", "pre_tokenizer Metaspace"));
    size_t n = 0;
    if (p->replacement.empty() || !utf8_valid(p->replacement) ||
        (next_code_point(p->replacement, &n), n != p->replacement.size()))
      return invalid_argument("tokenizer.json: Metaspace replacement must be one character");
    if (const std::string* scheme = json_string_if(json_member(j, "prepend_scheme"))) {
      const std::string& s = *scheme;
      if (s == "always") {
        p->prepend = MetaspacePreTokenizer::Prepend::always;
      } else if (s == "first") {
        p->prepend = MetaspacePreTokenizer::Prepend::first;
      } else if (s == "never") {
        p->prepend = MetaspacePreTokenizer::Prepend::never;
      } else {
        return invalid_argument("tokenizer.json: unknown Metaspace prepend_scheme \"" + s + "\"");
      }
    } else {
      LJ_ASSIGN_OR_RETURN(const bool add, get_bool(j, "add_prefix_space", true, "Metaspace"));
      p->prepend =
          add ? MetaspacePreTokenizer::Prepend::always : MetaspacePreTokenizer::Prepend::never;
    }
    LJ_ASSIGN_OR_RETURN(p->split, get_bool(j, "split", true, "pre_tokenizer Metaspace"));
    LJ_ASSIGN_OR_RETURN(p->replacement_regex, Regex::compile(p->replacement, true));
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  return unsupported_component("pre_tokenizer", type);
}

}  // namespace lj::tok
