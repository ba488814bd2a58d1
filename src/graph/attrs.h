// Node attributes: a small ordered list of (key, value). Keys are short literals ("axis",
// "keepdim"); the op table documents which keys each op reads.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace lj {

using AttrValue =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, Shape, DType>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) : kv_(kv) {}

  void set(const std::string& key, AttrValue v);
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed getters: check the key exists with that type (the op table is the contract).
  int64_t i(const std::string& key) const;
  double f(const std::string& key) const;
  bool b(const std::string& key) const;
  const std::string& s(const std::string& key) const;
  const std::vector<int64_t>& ints(const std::string& key) const;
  const Shape& shape(const std::string& key) const;
  DType dtype(const std::string& key) const;
  // With a default when the key is absent.
  int64_t i_or(const std::string& key, int64_t def) const;
  double f_or(const std::string& key, double def) const;
  bool b_or(const std::string& key, bool def) const;

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return kv_; }
  bool operator==(const Attrs& o) const { return kv_ == o.kv_; }
  std::string to_string() const;  // "{axis=-1, keepdim=true}"

 private:
  const AttrValue* find(const std::string& key) const;
  std::vector<std::pair<std::string, AttrValue>> kv_;
};

}  // namespace lj
