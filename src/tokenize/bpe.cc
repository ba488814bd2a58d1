#include "tokenize/bpe.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/json_read.h"
#include "tokenize/component.h"
#include "tokenize/utf8.h"

namespace lj::tok {
namespace {

// A vocab larger than any released model's by far (Gemma: 256K) still bounds a hostile file.
constexpr size_t kMaxVocab = 1 << 24;

uint64_t pair_key(uint32_t a, uint32_t b) {
  return (static_cast<uint64_t>(a) << 32) | b;
}

// HF's heap order: lowest rank first, then leftmost.
bool heap_less(const BpeScratch::Merge& x, const BpeScratch::Merge& y) {
  return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
}

}  // namespace

StatusOr<Bpe> Bpe::parse(const nlohmann::json& m) {
  LJ_ASSIGN_OR_RETURN(const std::string type, component_type(m, "model"));
  if (type != "BPE") return unsupported_component("model", type);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const std::string* s = json_string_if(json_member(m, key));
    if (s != nullptr && !s->empty())
      return unsupported_component("model", std::string("BPE with ") + key);
  }
  if (json_number_if(json_member(m, "dropout")).value_or(0) > 0)
    return unsupported_component("model", "BPE with dropout");
  Bpe bpe;
  if (!m.contains("vocab") || !m["vocab"].is_object())
    return invalid_argument("tokenizer.json: model.vocab must be an object");
  const auto& vocab = m["vocab"];
  if (vocab.size() > kMaxVocab)
    return out_of_range("tokenizer.json: model.vocab has " + std::to_string(vocab.size()) +
                        " entries, more than the " + std::to_string(kMaxVocab) + " allowed");
  bpe.vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const std::optional<uint64_t> v = json_uint_if(it.value());
    if (!v || *v >= kMaxVocab)
      return invalid_argument("tokenizer.json: model.vocab[\"" + it.key() +
                              "\"] is not an id below " + std::to_string(kMaxVocab));
    const auto id = static_cast<uint32_t>(*v);
    bpe.vocab_[it.key()] = id;
    if (id >= bpe.id_to_token_.size()) bpe.id_to_token_.resize(id + 1);
    bpe.id_to_token_[id] = it.key();
  }
  bpe.direct_char_ids_.assign(kDirectChars, -1);
  for (const auto& [tok, id] : bpe.vocab_) {
    if (tok.empty() || !utf8_valid(tok)) continue;
    size_t i = 0;
    const uint32_t cp = next_code_point(tok, &i);
    if (i == tok.size() && cp < kDirectChars) bpe.direct_char_ids_[cp] = static_cast<int32_t>(id);
  }
  if (m.contains("merges") && m["merges"].is_array()) {
    const auto& merges = m["merges"];
    if (merges.size() > kMaxVocab)
      return out_of_range("tokenizer.json: model.merges has too many entries");
    bpe.merges_.reserve(merges.size());
    uint32_t rank = 0;
    for (const auto& mg : merges) {
      std::string a, b;
      if (const std::string* merge = json_string_if(mg)) {  // "a b" (older files)
        const std::string& s = *merge;
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          return invalid_argument("tokenizer.json: merge \"" + s + "\" is not two tokens");
        a = s.substr(0, sp), b = s.substr(sp + 1);
      } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
        a = *json_string_if(mg[0]), b = *json_string_if(mg[1]);
      } else {
        return invalid_argument("tokenizer.json: a merge is neither \"a b\" nor [\"a\", \"b\"]");
      }
      const auto ia = bpe.vocab_.find(a), ib = bpe.vocab_.find(b), ic = bpe.vocab_.find(a + b);
      if (ia == bpe.vocab_.end() || ib == bpe.vocab_.end() || ic == bpe.vocab_.end())
        return invalid_argument("tokenizer.json: merge \"" + a + " " + b +
                                "\" names a token that is not in the vocab");
      // A repeated pair keeps its last rank, as HF's HashMap collect does.
      bpe.merges_.insert_or_assign(pair_key(ia->second, ib->second), MergeTarget{rank, ic->second});
      ++rank;
    }
  }
  if (const std::string* unk = json_string_if(json_member(m, "unk_token"))) {
    const auto it = bpe.vocab_.find(*unk);
    if (it == bpe.vocab_.end())
      return invalid_argument("tokenizer.json: model.unk_token is not in the vocab");
    bpe.unk_id_ = it->second;
  }
  LJ_ASSIGN_OR_RETURN(bpe.fuse_unk_, get_bool(m, "fuse_unk", false, "model"));
  LJ_ASSIGN_OR_RETURN(bpe.byte_fallback_, get_bool(m, "byte_fallback", false, "model"));
  LJ_ASSIGN_OR_RETURN(bpe.ignore_merges_, get_bool(m, "ignore_merges", false, "model"));
  bpe.all_bytes_ = true;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto it = bpe.vocab_.find(std::string_view(name));
    bpe.byte_ids_[b] = it == bpe.vocab_.end() ? -1 : static_cast<int32_t>(it->second);
    if (it == bpe.vocab_.end()) bpe.all_bytes_ = false;
  }
  return bpe;
}

std::optional<uint32_t> Bpe::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string& Bpe::id_to_token(uint32_t id) const {
  static const std::string kNone;
  return id < id_to_token_.size() ? id_to_token_[id] : kNone;
}

uint32_t Bpe::char_id(std::string_view ch, bool* found) const {
  if (ch.size() <= 2) {
    size_t i = 0;
    const uint32_t cp = next_code_point(ch, &i);
    if (cp < kDirectChars) {
      const int32_t id = direct_char_ids_[cp];
      *found = id >= 0;
      return static_cast<uint32_t>(id);
    }
  }
  const auto it = vocab_.find(ch);
  *found = it != vocab_.end();
  return *found ? it->second : 0;
}

const Bpe::MergeTarget* Bpe::find_merge(uint32_t a, uint32_t b) const {
  const auto it = merges_.find(pair_key(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

void Bpe::tokenize(std::string_view w, BpeScratch& sc, std::vector<uint32_t>* out) const {
  if (w.empty()) return;
  if (ignore_merges_) {
    if (const auto it = vocab_.find(w); it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  auto& sym = sc.symbols;
  sym.clear();
  auto add = [&](uint32_t id, uint32_t bytes) {
    const auto n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, -1, bytes});
    if (n > 0) sym[static_cast<size_t>(n - 1)].next = n;
  };
  // HF's merge_word: one symbol per character; unknown characters become <0xXX> bytes
  // (byte_fallback) or unk (fused with a preceding unk when fuse_unk).
  bool unk = false;  // an unk of unk_bytes not yet added
  uint32_t unk_bytes = 0;
  size_t i = 0;
  while (i < w.size()) {
    size_t len = 1;
    const auto b = static_cast<unsigned char>(w[i]);
    if (b >= 0xF0) {
      len = 4;
    } else if (b >= 0xE0) {
      len = 3;
    } else if (b >= 0xC0) {
      len = 2;
    }
    len = std::min(len, w.size() - i);
    const std::string_view ch = w.substr(i, len);
    i += len;
    bool found = false;
    const uint32_t id = char_id(ch, &found);
    if (found) {
      if (unk) add(*unk_id_, unk_bytes);
      unk = false;
      add(id, static_cast<uint32_t>(len));
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char c : ch) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (const char c : ch)
          add(static_cast<uint32_t>(byte_ids_[static_cast<unsigned char>(c)]), 1);
        continue;
      }
    }
    if (unk_id_) {
      if (unk && fuse_unk_) {
        unk_bytes += static_cast<uint32_t>(len);
      } else {
        if (unk) add(*unk_id_, unk_bytes);
        unk = true;
        unk_bytes = static_cast<uint32_t>(len);
      }
    }
  }
  if (unk) add(*unk_id_, unk_bytes);

  auto& heap = sc.heap;
  heap.clear();
  for (size_t k = 0; k + 1 < sym.size(); ++k) {
    if (const MergeTarget* m = find_merge(sym[k].id, sym[k + 1].id))
      heap.push_back({m->rank, static_cast<uint32_t>(k), m->new_id});
  }
  std::make_heap(heap.begin(), heap.end(), heap_less);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), heap_less);
    const BpeScratch::Merge top = heap.back();
    heap.pop_back();
    auto& left = sym[top.pos];
    if (left.bytes == 0 || left.next < 0) continue;
    const auto next_pos = static_cast<size_t>(left.next);
    auto& right = sym[next_pos];
    const MergeTarget* m = find_merge(left.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;
    left.id = top.new_id;
    left.bytes += right.bytes;
    left.next = right.next;
    right.bytes = 0;
    if (left.next >= 0) sym[static_cast<size_t>(left.next)].prev = static_cast<int32_t>(top.pos);
    if (left.prev >= 0) {
      const auto& p = sym[static_cast<size_t>(left.prev)];
      if (const MergeTarget* pm = find_merge(p.id, left.id)) {
        heap.push_back({pm->rank, static_cast<uint32_t>(left.prev), pm->new_id});
        std::push_heap(heap.begin(), heap.end(), heap_less);
      }
    }
    if (left.next >= 0) {
      const auto& n = sym[static_cast<size_t>(left.next)];
      if (const MergeTarget* nm = find_merge(left.id, n.id)) {
        heap.push_back({nm->rank, top.pos, nm->new_id});
        std::push_heap(heap.begin(), heap.end(), heap_less);
      }
    }
  }
  for (int32_t k = 0; k >= 0 && static_cast<size_t>(k) < sym.size();
       k = sym[static_cast<size_t>(k)].next)
    out->push_back(sym[static_cast<size_t>(k)].id);
}

}  // namespace lj::tok
