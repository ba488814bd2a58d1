// A structure-aware mutator for the targets whose input is JSON (issue 33): libFuzzer's byte
// mutations mostly break the syntax, so the parser's semantic checks (types, ranges, overflow,
// cross-field rules) see few inputs. Half the time this mutator parses the input, changes one
// value, key or subtree, and writes it back as valid JSON; the other half, and whenever the input
// does not parse, it leaves the input to libFuzzer's own mutations. Include it from exactly one
// file of a target: it defines LLVMFuzzerCustomMutator. LJ_FUZZ_BYTES_ONLY=1 in the environment
// turns it off (the A/B of tools/fuzz.sh's header).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace lj::fuzz {

using Json = nlohmann::json;

// Values at the edges of what parsers check: signs, powers of two, int64 and double limits.
inline Json interesting_value(std::minstd_rand& rng) {
  static const std::vector<Json> values = {0,
                                           -1,
                                           1,
                                           2,
                                           3,
                                           7,
                                           8,
                                           255,
                                           256,
                                           4096,
                                           65535,
                                           65536,
                                           std::numeric_limits<int32_t>::max(),
                                           int64_t{1} << 31,
                                           int64_t{1} << 32,
                                           (int64_t{1} << 53) + 1,
                                           std::numeric_limits<int64_t>::max(),
                                           std::numeric_limits<int64_t>::min(),
                                           std::numeric_limits<uint64_t>::max(),
                                           0.5,
                                           -0.5,
                                           1e-300,
                                           1e308,
                                           -1e308,
                                           true,
                                           false,
                                           nullptr,
                                           "",
                                           "auto",
                                           "none",
                                           "bf16",
                                           "fp32",
                                           Json::array(),
                                           Json::object()};
  return values[rng() % values.size()];
}

// Every value in the document, depth first (pointers stay valid until the document changes).
inline void collect(Json& j, std::vector<Json*>* out) {
  out->push_back(&j);
  if (j.is_object() || j.is_array()) {
    for (auto& child : j) collect(child, out);
  }
}

inline void collect_keys(const Json& j, std::vector<std::string>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      out->push_back(it.key());
      collect_keys(it.value(), out);
    }
  } else if (j.is_array()) {
    for (const auto& child : j) collect_keys(child, out);
  }
}

// One change to a random place of `doc`.
inline void mutate_json(Json& doc, std::minstd_rand& rng) {
  std::vector<Json*> nodes;
  collect(doc, &nodes);
  std::vector<std::string> keys;
  collect_keys(doc, &keys);
  Json& n = *nodes[rng() % nodes.size()];
  switch (rng() % 6) {
    case 0:  // a value from the edges
      n = interesting_value(rng);
      return;
    case 1:  // a copy of another subtree (a value of the wrong shape, or the right one elsewhere)
      n = Json(*nodes[rng() % nodes.size()]);
      return;
    case 2:  // a number nudged, scaled or turned into its text
      if (n.is_number_integer()) {
        // In uint64 arithmetic: the harness must not overflow where the parser is checked for it.
        const auto v = static_cast<uint64_t>(n.get<int64_t>());
        const auto i = [](uint64_t u) { return static_cast<int64_t>(u); };
        const int64_t choices[] = {i(v + 1), i(v - 1), i(0 - v), i(v * 2), i(v) / 2};
        n = rng() % 6 == 0 ? Json(std::to_string(i(v))) : Json(choices[rng() % 5]);
      } else if (n.is_number()) {
        n = n.get<double>() * (rng() % 2 ? -1.0 : 1e10);
      } else {
        n = interesting_value(rng);
      }
      return;
    case 3:  // a string's bytes through libFuzzer's mutations
      if (n.is_string()) {
        std::string s = n.get<std::string>();
        const size_t max = s.size() + 16;
        s.resize(max);
        s.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(s.data()), max - 16, max));
        n = s;
      } else {
        n = interesting_value(rng);
      }
      return;
    case 4:  // an object loses a key, or gains one the document uses elsewhere
      if (n.is_object() && !n.empty() && rng() % 2 == 0) {
        auto it = n.begin();
        std::advance(it, static_cast<long>(rng() % n.size()));
        n.erase(it);
      } else if (n.is_object() && !keys.empty()) {
        n[keys[rng() % keys.size()]] = interesting_value(rng);
      } else if (n.is_array() && !n.empty()) {
        n.erase(n.begin() + static_cast<long>(rng() % n.size()));
      }
      return;
    default:  // an array or object grows
      if (n.is_array()) {
        n.push_back(n.empty() ? interesting_value(rng) : Json(n[rng() % n.size()]));
      } else if (n.is_object() && !keys.empty()) {
        const std::string& k = keys[rng() % keys.size()];
        n[k + (rng() % 2 ? "" : "_")] = Json(*nodes[rng() % nodes.size()]);
      } else {
        n = Json::array({n});
      }
      return;
  }
}

}  // namespace lj::fuzz

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  static const bool bytes_only = [] {
    const char* e = std::getenv("LJ_FUZZ_BYTES_ONLY");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }();
  std::minstd_rand rng(seed == 0 ? 1 : seed);
  if (bytes_only || rng() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  auto doc = lj::fuzz::Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return LLVMFuzzerMutate(data, size, max_size);
  const int changes = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < changes; ++i) lj::fuzz::mutate_json(doc, rng);
  // Strings whose bytes the mutation left invalid UTF-8 are written with U+FFFD.
  const std::string out =
      doc.dump(rng() % 4 == 0 ? 2 : -1, ' ', false, lj::fuzz::Json::error_handler_t::replace);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
