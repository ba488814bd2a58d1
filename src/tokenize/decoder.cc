#include "tokenize/decoder.h"

#include <nlohmann/json.hpp>

#include "core/json_read.h"
#include "tokenize/component.h"
#include "tokenize/normalizer.h"
#include "tokenize/pre_tokenizer.h"
#include "tokenize/utf8.h"

namespace lj::tok {
namespace {

class SequenceDecoder final : public Decoder {
 public:
  std::vector<std::unique_ptr<Decoder>> parts;
  Status decode_chain(std::vector<std::string>* t) const override {
    for (const auto& p : parts) LJ_RETURN_IF_ERROR(p->decode_chain(t));
    return ok_status();
  }
};

// Each token's characters back to bytes; a token with a character outside the map keeps its
// own bytes. All of it becomes one string, invalid UTF-8 replaced by U+FFFD.
class ByteLevelDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>* t) const override {
    std::string bytes;
    for (const std::string& tok : *t) {
      const size_t mark = bytes.size();
      size_t i = 0;
      bool all = true;
      while (i < tok.size()) {
        const int b = byte_level_byte(next_code_point(tok, &i));
        if (b < 0) {
          all = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!all) {
        bytes.resize(mark);
        bytes.append(tok);
      }
    }
    t->assign(1, utf8_lossy(bytes));
    return ok_status();
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  std::string replacement;
  bool strip_first = true;  // prepend_scheme != never
  Status decode_chain(std::vector<std::string>* t) const override {
    for (size_t k = 0; k < t->size(); ++k) {
      std::string out;
      const std::string& tok = (*t)[k];
      for (size_t i = 0; i < tok.size();) {
        if (tok.compare(i, replacement.size(), replacement) == 0) {
          if (!(k == 0 && strip_first)) out.push_back(' ');
          i += replacement.size();
        } else {
          out.push_back(tok[i++]);
        }
      }
      (*t)[k] = std::move(out);
    }
    return ok_status();
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplacePattern pattern;
  std::string content;
  Status decode_chain(std::vector<std::string>* t) const override {
    Scratch scratch;
    std::string out;
    for (std::string& tok : *t) {
      LJ_RETURN_IF_ERROR(pattern.replace(tok, content, scratch, &out));
      tok.swap(out);
    }
    return ok_status();
  }
};

// Runs of <0xXX> tokens become their bytes when those form UTF-8, else one U+FFFD per byte.
class ByteFallbackDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>* t) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t n_bytes = 0;
    auto flush = [&] {
      if (n_bytes == 0) return;
      if (utf8_valid(bytes)) {
        out.push_back(bytes);
      } else {
        for (size_t k = 0; k < n_bytes; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      n_bytes = 0;
    };
    for (std::string& tok : *t) {
      int byte = -1;
      if (tok.size() == 6 && tok.compare(0, 3, "<0x") == 0 && tok[5] == '>') {
        char* end = nullptr;
        const std::string hex = tok.substr(3, 2);
        const long v = std::strtol(hex.c_str(), &end, 16);
        if (end == hex.c_str() + 2 && std::isxdigit(static_cast<unsigned char>(hex[0])) &&
            std::isxdigit(static_cast<unsigned char>(hex[1])))
          byte = static_cast<int>(v);
      }
      if (byte >= 0) {
        bytes.push_back(static_cast<char>(byte));
        ++n_bytes;
      } else {
        flush();
        out.push_back(std::move(tok));
      }
    }
    flush();
    t->swap(out);
    return ok_status();
  }
};

class FuseDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>* t) const override {
    std::string all;
    for (const auto& s : *t) all += s;
    t->assign(1, std::move(all));
    return ok_status();
  }
};

// Removes up to `start` leading and `stop` trailing `content` characters of each token.
class StripDecoder final : public Decoder {
 public:
  uint32_t content = ' ';
  int64_t start = 0, stop = 0;
  Status decode_chain(std::vector<std::string>* t) const override {
    for (std::string& tok : *t) {
      std::vector<size_t> starts;  // byte offset of each character, and the end
      std::vector<uint32_t> cps;
      for (size_t i = 0; i < tok.size();) {
        starts.push_back(i);
        cps.push_back(next_code_point(tok, &i));
      }
      starts.push_back(tok.size());
      size_t b = 0, e = cps.size();
      for (int64_t k = 0; k < start && b < cps.size() && cps[b] == content; ++k) ++b;
      for (int64_t k = 0; k < stop && e > 0 && cps[e - 1] == content; ++k) --e;
      tok = e > b ? tok.substr(starts[b], starts[e] - starts[b]) : std::string();
    }
    return ok_status();
  }
};

}  // namespace

StatusOr<std::unique_ptr<Decoder>> parse_decoder(const nlohmann::json& j, int depth) {
  if (j.is_null()) return std::unique_ptr<Decoder>();
  if (depth > kMaxComponentDepth)
    return invalid_argument("tokenizer.json: decoders nest deeper than " +
                            std::to_string(kMaxComponentDepth));
  LJ_ASSIGN_OR_RETURN(const std::string type, component_type(j, "decoder"));
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array())
      return invalid_argument("tokenizer.json: decoder Sequence needs \"decoders\"");
    auto seq = std::make_unique<SequenceDecoder>();
    for (const auto& part : j["decoders"]) {
      LJ_ASSIGN_OR_RETURN(auto d, parse_decoder(part, depth + 1));
      if (d) seq->parts.push_back(std::move(d));
    }
    return std::unique_ptr<Decoder>(std::move(seq));
  }
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(std::make_unique<ByteLevelDecoder>());
  if (type == "ByteFallback")
    return std::unique_ptr<Decoder>(std::make_unique<ByteFallbackDecoder>());
  if (type == "Fuse") return std::unique_ptr<Decoder>(std::make_unique<FuseDecoder>());
  if (type == "Metaspace") {
    auto d = std::make_unique<MetaspaceDecoder>();
    LJ_ASSIGN_OR_RETURN(d->replacement, get_string(j, "replacement", "decoder Metaspace"));
    if (const std::string* scheme = json_string_if(json_member(j, "prepend_scheme"))) {
      d->strip_first = *scheme != "never";
    } else {
      LJ_ASSIGN_OR_RETURN(d->strip_first, get_bool(j, "add_prefix_space", true, "Metaspace"));
    }
    return std::unique_ptr<Decoder>(std::move(d));
  }
  if (type == "Replace") {
    auto d = std::make_unique<ReplaceDecoder>();
    LJ_ASSIGN_OR_RETURN(d->content, get_string(j, "content", "decoder Replace"));
    if (!j.contains("pattern"))
      return invalid_argument("tokenizer.json: decoder Replace needs a \"pattern\"");
    LJ_ASSIGN_OR_RETURN(d->pattern, ReplacePattern::parse(j["pattern"], "decoder Replace"));
    return std::unique_ptr<Decoder>(std::move(d));
  }
  if (type == "Strip") {
    auto d = std::make_unique<StripDecoder>();
    LJ_ASSIGN_OR_RETURN(const std::string content, get_string(j, "content", "decoder Strip"));
    size_t i = 0;
    if (content.empty() || !utf8_valid(content) ||
        (d->content = next_code_point(content, &i), i != content.size()))
      return invalid_argument("tokenizer.json: decoder Strip content must be one character");
    LJ_ASSIGN_OR_RETURN(d->start, get_int(j, "start", "decoder Strip"));
    LJ_ASSIGN_OR_RETURN(d->stop, get_int(j, "stop", "decoder Strip"));
    return std::unique_ptr<Decoder>(std::move(d));
  }
  return unsupported_component("decoder", type);
}

}  // namespace lj::tok
