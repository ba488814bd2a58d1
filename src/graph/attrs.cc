#include "graph/attrs.h"

#include <cstdio>

#include "core/check.h"

namespace lj {

void Attrs::set(const std::string& key, AttrValue v) {
  for (auto& [k, val] : kv_) {
    if (k == key) {
      val = std::move(v);
      return;
    }
  }
  kv_.emplace_back(key, std::move(v));
}

const AttrValue* Attrs::find(const std::string& key) const {
  for (const auto& [k, v] : kv_) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {
template <class T>
const T& get(const AttrValue* v, const std::string& key) {
  LJ_CHECK(v != nullptr) << "missing attribute '" << key << "'";
  const T* p = std::get_if<T>(v);
  LJ_CHECK(p != nullptr) << "attribute '" << key << "' has another type";
  return *p;
}
}  // namespace

int64_t Attrs::i(const std::string& key) const {
  return get<int64_t>(find(key), key);
}
double Attrs::f(const std::string& key) const {
  return get<double>(find(key), key);
}
bool Attrs::b(const std::string& key) const {
  return get<bool>(find(key), key);
}
const std::string& Attrs::s(const std::string& key) const {
  return get<std::string>(find(key), key);
}
const std::vector<int64_t>& Attrs::ints(const std::string& key) const {
  return get<std::vector<int64_t>>(find(key), key);
}
const Shape& Attrs::shape(const std::string& key) const {
  return get<Shape>(find(key), key);
}
DType Attrs::dtype(const std::string& key) const {
  return get<DType>(find(key), key);
}
int64_t Attrs::i_or(const std::string& key, int64_t def) const {
  return has(key) ? i(key) : def;
}
double Attrs::f_or(const std::string& key, double def) const {
  return has(key) ? f(key) : def;
}
bool Attrs::b_or(const std::string& key, bool def) const {
  return has(key) ? b(key) : def;
}

std::string Attrs::to_string() const {
  if (kv_.empty()) return "";
  std::string s = "{";
  for (size_t n = 0; n < kv_.size(); ++n) {
    if (n) s += ", ";
    s += kv_[n].first + "=";
    const AttrValue& v = kv_[n].second;
    if (const auto* x = std::get_if<int64_t>(&v)) s += std::to_string(*x);
    if (const auto* x = std::get_if<double>(&v)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", *x);
      s += buf;
    }
    if (const auto* x = std::get_if<bool>(&v)) s += *x ? "true" : "false";
    if (const auto* x = std::get_if<std::string>(&v)) s += "\"" + *x + "\"";
    if (const auto* x = std::get_if<Shape>(&v)) s += x->to_string();
    if (const auto* x = std::get_if<DType>(&v)) s += dtype_name(*x);
    if (const auto* x = std::get_if<std::vector<int64_t>>(&v)) {
      s += "[";
      for (size_t j = 0; j < x->size(); ++j) s += (j ? ", " : "") + std::to_string((*x)[j]);
      s += "]";
    }
  }
  return s + "}";
}

}  // namespace lj
