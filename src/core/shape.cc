#include "core/shape.h"

#include <algorithm>

#include "core/check.h"

namespace lj {

SymEnv::SymEnv(std::initializer_list<std::pair<char, int64_t>> bindings) {
  v_.fill(0);
  for (const auto& [s, v] : bindings) set(s, v);
}

void SymEnv::set(char sym, int64_t value) {
  LJ_CHECK(sym >= 'A' && sym <= 'Z') << "symbol " << sym;
  v_[static_cast<size_t>(sym - 'A')] = value;
}

int64_t SymEnv::get(char sym) const {
  LJ_CHECK(sym >= 'A' && sym <= 'Z') << "symbol " << sym;
  return v_[static_cast<size_t>(sym - 'A')];
}

std::string SymEnv::to_string() const {
  std::string s;
  for (int i = 0; i < 26; ++i) {
    if (v_[static_cast<size_t>(i)] == 0) continue;
    if (!s.empty()) s += ' ';
    s += static_cast<char>('A' + i);
    s += '=' + std::to_string(v_[static_cast<size_t>(i)]);
  }
  return s;
}

Dim Dim::sym(char name, int64_t coef) {
  LJ_CHECK(name >= 'A' && name <= 'Z') << "symbol " << name;
  Dim d(coef);
  d.syms_ = std::string(1, name);
  return d;
}

int64_t Dim::value() const {
  LJ_CHECK(is_concrete()) << "dim " << to_string() << " is symbolic";
  return coef_;
}

int64_t Dim::eval(const SymEnv& env) const {
  int64_t v = coef_;
  for (char s : syms_) {
    const int64_t x = env.get(s);
    if (x <= 0) return -1;
    v *= x;
  }
  return v;
}

Dim Dim::operator*(const Dim& o) const {
  Dim d(coef_ * o.coef_);
  d.syms_ = syms_ + o.syms_;
  std::sort(d.syms_.begin(), d.syms_.end());
  return d;
}

bool Dim::divide(const Dim& o, Dim* out) const {
  if (o.coef_ == 0 || coef_ % o.coef_ != 0) return false;
  std::string rest = syms_;
  for (char s : o.syms_) {
    const auto pos = rest.find(s);
    if (pos == std::string::npos) return false;
    rest.erase(pos, 1);
  }
  Dim d(coef_ / o.coef_);
  d.syms_ = rest;
  *out = d;
  return true;
}

std::string Dim::to_string() const {
  if (syms_.empty()) return std::to_string(coef_);
  std::string s = coef_ == 1 ? "" : std::to_string(coef_);
  for (char c : syms_) {
    if (!s.empty()) s += '*';
    s += c;
  }
  return s;
}

Shape Shape::concrete(const std::vector<int64_t>& dims) {
  Shape s;
  for (int64_t d : dims) s.dims_.emplace_back(d);
  return s;
}

bool Shape::is_concrete() const {
  return std::all_of(dims_.begin(), dims_.end(), [](const Dim& d) { return d.is_concrete(); });
}

Dim Shape::numel() const {
  Dim n(1);
  for (const auto& d : dims_) n = n * d;
  return n;
}

bool Shape::eval(const SymEnv& env, std::vector<int64_t>* out) const {
  out->resize(dims_.size());
  for (size_t i = 0; i < dims_.size(); ++i) {
    const int64_t v = dims_[i].eval(env);
    if (v < 0) return false;
    (*out)[i] = v;
  }
  return true;
}

std::vector<int64_t> Shape::concrete_dims() const {
  std::vector<int64_t> out;
  LJ_CHECK(eval(SymEnv(), &out)) << "shape " << to_string() << " is symbolic";
  return out;
}

std::string Shape::to_string() const {
  std::string s = "(";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += dims_[i].to_string();
  }
  return s + ")";
}

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string dims_to_string(const std::vector<int64_t>& dims) {
  return Shape::concrete(dims).to_string();
}

}  // namespace lj
