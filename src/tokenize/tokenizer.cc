#include "tokenize/tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/json_read.h"
#include "core/text_file.h"
#include "tokenize/component.h"
#include "tokenize/utf8.h"

namespace lj::tok {
namespace {

constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCacheEntries = 1 << 17;

struct Template {
  std::vector<uint32_t> prefix, suffix;
};

// TemplateProcessing's "single" template -> the ids around $A.
StatusOr<Template> parse_template(const nlohmann::json& j) {
  if (!j.contains("single") || !j["single"].is_array())
    return invalid_argument("tokenizer.json: TemplateProcessing needs a \"single\" template");
  const auto& specials =
      j.contains("special_tokens") ? j["special_tokens"] : nlohmann::json::object();
  Template t;
  bool seen_a = false;
  const JsonWhere single = JsonWhere{"tokenizer.json", "post_processor"} / "single";
  for (size_t i = 0; i < j["single"].size(); ++i) {
    const Json& item = j["single"][i];
    if (item.contains("Sequence")) {
      const Json& seq = item["Sequence"];
      std::string id;
      if (seq.is_object()) {
        LJ_ASSIGN_OR_RETURN(id, json_read_or<std::string>(json_member(seq, "id"), "",
                                                          single[i] / "Sequence" / "id"));
      }
      if (seen_a || id != "A")
        return unsupported_component("post_processor",
                                     "TemplateProcessing with a single template "
                                     "other than specials around one $A");
      seen_a = true;
      continue;
    }
    if (!item.contains("SpecialToken") || !item["SpecialToken"].is_object())
      return invalid_argument(
          "tokenizer.json: a template item is neither Sequence nor SpecialToken");
    LJ_ASSIGN_OR_RETURN(const std::string name,
                        get_string(item["SpecialToken"], "id", "a template item"));
    if (!specials.is_object() || !specials.contains(name) || !specials[name].contains("ids") ||
        !specials[name]["ids"].is_array())
      return invalid_argument("tokenizer.json: template token \"" + name +
                              "\" has no ids in special_tokens");
    for (const auto& id : specials[name]["ids"]) {
      const std::optional<uint64_t> v = json_uint_if(id);
      if (!v || *v >= (1u << 24))
        return invalid_argument("tokenizer.json: template token \"" + name + "\" has a bad id");
      (seen_a ? t.suffix : t.prefix).push_back(static_cast<uint32_t>(*v));
    }
  }
  if (!seen_a) return invalid_argument("tokenizer.json: the single template has no $A");
  return t;
}

// Post-processors -> the ids around a single sequence. A Sequence wraps in order.
Status parse_post_processor(const nlohmann::json& j, int depth, Template* t) {
  if (j.is_null()) return ok_status();
  if (depth > kMaxComponentDepth)
    return invalid_argument("tokenizer.json: post-processors nest too deep");
  LJ_ASSIGN_OR_RETURN(const std::string type, component_type(j, "post_processor"));
  if (type == "ByteLevel") return ok_status();  // offsets only
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array())
      return invalid_argument("tokenizer.json: post_processor Sequence needs \"processors\"");
    for (const auto& p : j["processors"]) LJ_RETURN_IF_ERROR(parse_post_processor(p, depth + 1, t));
    return ok_status();
  }
  if (type == "TemplateProcessing") {
    LJ_ASSIGN_OR_RETURN(Template inner, parse_template(j));
    inner.prefix.insert(inner.prefix.end(), t->prefix.begin(), t->prefix.end());
    t->suffix.insert(t->suffix.end(), inner.suffix.begin(), inner.suffix.end());
    t->prefix = std::move(inner.prefix);
    return ok_status();
  }
  return unsupported_component("post_processor", type);
}

}  // namespace

StatusOr<std::shared_ptr<const Tokenizer>> Tokenizer::load(const std::string& path) {
  struct stat st {};
  std::string file = path;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    file = path + "/tokenizer.json";
    if (::stat(file.c_str(), &st) != 0)
      return not_found(
          "no tokenizer.json in " + path,
          "pass --tokenizer a folder with tokenizer.json (as HF saves it) or the file");
  } else if (::stat(path.c_str(), &st) != 0) {
    return not_found("cannot read tokenizer " + path, "check --tokenizer");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxTokenizerFileBytes)
    return out_of_range(file + " is " + std::to_string(st.st_size >> 20) +
                        " MiB, more than a tokenizer.json can sensibly be (" +
                        std::to_string(kMaxTokenizerFileBytes >> 20) + " MiB)");
  LJ_ASSIGN_OR_RETURN(const std::string text,
                      read_text_file(file, "check --tokenizer", kMaxTokenizerFileBytes));
  return from_json(text, file);
}

StatusOr<std::shared_ptr<const Tokenizer>> Tokenizer::from_json(std::string_view text,
                                                                const std::string& source) {
  if (text.size() > kMaxTokenizerFileBytes)
    return out_of_range(source + ": larger than a tokenizer.json can sensibly be");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(source + ": not valid JSON: " + e.what(),
                            "pass the tokenizer.json that HF tokenizers saved");
  }
  if (!j.is_object() || !j.contains("model"))
    return invalid_argument(source + ": no \"model\" object; not an HF tokenizer.json",
                            "pass the tokenizer.json that HF tokenizers saved");
  std::shared_ptr<Tokenizer> t(new Tokenizer());
  auto ctx = [&](const Status& s) { return s.with_context(source); };
  auto field = [&](const char* key) { return j.contains(key) ? j[key] : nlohmann::json(); };
  {
    auto r = parse_normalizer(field("normalizer"));
    if (!r.ok()) return ctx(r.status());
    t->normalizer_ = std::move(r).value();
  }
  {
    auto r = parse_pre_tokenizer(field("pre_tokenizer"));
    if (!r.ok()) return ctx(r.status());
    t->pre_tokenizer_ = std::move(r).value();
  }
  {
    auto r = Bpe::parse(j["model"]);
    if (!r.ok()) return ctx(r.status());
    t->model_.emplace(std::move(r).value());
  }
  {
    auto r = parse_decoder(field("decoder"));
    if (!r.ok()) return ctx(r.status());
    t->decoder_ = std::move(r).value();
  }
  {
    Template tp;
    const Status s = parse_post_processor(field("post_processor"), 0, &tp);
    if (!s.ok()) return ctx(s);
    t->prefix_ = std::move(tp.prefix);
    t->suffix_ = std::move(tp.suffix);
  }
  {
    auto r = parse_added_tokens(field("added_tokens"));
    if (!r.ok()) return ctx(r.status());
    t->added_ = std::move(r).value();
  }
  // Normalized added tokens are matched after normalization, so their content is normalized
  // too (HF's refresh_added_tokens).
  Scratch scratch;
  std::vector<const AddedToken*> raw;
  for (const AddedToken& a : t->added_) {
    if (!a.normalized) {
      raw.push_back(&a);
      continue;
    }
    AddedToken n = a;
    if (t->normalizer_) {
      const Status s = t->normalizer_->normalize(&n.content, scratch);
      if (!s.ok()) return ctx(s);
    }
    if (!n.content.empty()) t->added_normalized_.push_back(std::move(n));
  }
  std::vector<const AddedToken*> normalized;
  for (const AddedToken& a : t->added_normalized_) normalized.push_back(&a);
  t->raw_matcher_ = AddedTokenMatcher(std::move(raw));
  t->normalized_matcher_ = AddedTokenMatcher(std::move(normalized));
  t->vocab_size_ = t->model_->vocab_end();
  // Decoding a normalized added token gives its normalized content (HF stores it so: Llama 2's
  // "<sep>" decodes through "▁<sep>").
  for (const AddedToken& a : t->added_normalized_) t->added_by_id_.try_emplace(a.id, &a);
  for (const AddedToken& a : t->added_) {
    t->added_by_id_.try_emplace(a.id, &a);
    t->vocab_size_ = std::max(t->vocab_size_, a.id + 1);
  }
  for (const uint32_t id : t->prefix_) t->vocab_size_ = std::max(t->vocab_size_, id + 1);
  for (const uint32_t id : t->suffix_) t->vocab_size_ = std::max(t->vocab_size_, id + 1);
  return std::shared_ptr<const Tokenizer>(std::move(t));
}

std::optional<uint32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& a : added_)
    if (a.content == token) return a.id;
  return model_->token_to_id(token);
}

StatusOr<std::string> Tokenizer::decode(std::span<const uint32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const uint32_t id : ids) {
    const auto it = added_by_id_.find(id);
    if (it != added_by_id_.end()) {
      if (skip_special && it->second->special) continue;
      tokens.push_back(it->second->content);
      continue;
    }
    const std::string& tok = model_->id_to_token(id);
    if (tok.empty()) continue;  // HF skips ids it does not know
    tokens.push_back(tok);
  }
  if (!decoder_) {
    std::string out;
    for (size_t k = 0; k < tokens.size(); ++k) out += (k ? " " : "") + tokens[k];
    return out;
  }
  LJ_RETURN_IF_ERROR(decoder_->decode_chain(&tokens));
  std::string out;
  for (const auto& s : tokens) out += s;
  return out;
}

Status TokenizerSession::encode(std::string_view text, bool add_special,
                                std::vector<uint32_t>* ids) {
  size_t bad = 0;
  if (!utf8_valid(text, &bad))
    return invalid_argument("invalid UTF-8 at byte " + std::to_string(bad));
  if (text.size() > kMaxEncodeBytes)
    return out_of_range("a document of " + std::to_string(text.size() >> 20) +
                        " MiB, more than the 1 GiB one encode takes");
  const Tokenizer& t = *t_;
  if (add_special) ids->insert(ids->end(), t.prefix_.begin(), t.prefix_.end());
  raw_splits_.clear();
  if (t.raw_matcher_.empty()) {
    if (!text.empty()) raw_splits_.push_back({-1, 0, static_cast<uint32_t>(text.size())});
  } else {
    t.raw_matcher_.split(text, &raw_splits_);
  }
  for (const AddedSplit& s : raw_splits_) {
    if (s.id >= 0) {
      ids->push_back(static_cast<uint32_t>(s.id));
      continue;
    }
    const std::string_view seg = text.substr(s.begin, s.end - s.begin);
    const bool first = s.begin == 0;
    if (!t.normalizer_ && t.normalized_matcher_.empty()) {
      LJ_RETURN_IF_ERROR(encode_segment(seg, first, ids));
      continue;
    }
    normalized_.assign(seg);
    if (t.normalizer_) LJ_RETURN_IF_ERROR(t.normalizer_->normalize(&normalized_, scratch_));
    norm_splits_.clear();
    t.normalized_matcher_.split(normalized_, &norm_splits_);
    for (const AddedSplit& n : norm_splits_) {
      if (n.id >= 0) {
        ids->push_back(static_cast<uint32_t>(n.id));
      } else {
        const std::string_view sub = std::string_view(normalized_).substr(n.begin, n.end - n.begin);
        LJ_RETURN_IF_ERROR(encode_segment(sub, first && n.begin == 0, ids));
      }
    }
  }
  if (add_special) ids->insert(ids->end(), t.suffix_.begin(), t.suffix_.end());
  return ok_status();
}

Status TokenizerSession::encode_segment(std::string_view text, bool first,
                                        std::vector<uint32_t>* ids) {
  pieces_.clear();
  pieces_.add(text, first);
  if (t_->pre_tokenizer_) LJ_RETURN_IF_ERROR(t_->pre_tokenizer_->pre_tokenize(&pieces_, scratch_));
  for (const Span& s : pieces_.spans) {
    const std::string_view word = pieces_.view(s);
    if (word.size() > kMaxCachedWordBytes) {
      t_->model_->tokenize(word, bpe_, ids);
      continue;
    }
    if (const auto it = cache_.find(word); it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      continue;
    }
    const size_t mark = ids->size();
    t_->model_->tokenize(word, bpe_, ids);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(
        std::string(word),
        std::vector<uint32_t>(ids->begin() + static_cast<std::ptrdiff_t>(mark), ids->end()));
  }
  return ok_status();
}

}  // namespace lj::tok
