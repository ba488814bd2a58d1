// Shapes whose dims may hold symbols, so one graph (and one compiled kernel) serves many batch
// sizes and sequence lengths. A Dim is coef * product of symbols: 288, B, B*T, 6*T. Symbols are
// the capital letters; B (micro-batch) and T (sequence length) are the ones the models use.
// A SymEnv binds symbols to numbers; Shape::eval turns a symbolic shape into concrete dims.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace lj {

// Values of the symbols 'A'..'Z'; 0 means unbound.
class SymEnv {
 public:
  SymEnv() { v_.fill(0); }
  SymEnv(std::initializer_list<std::pair<char, int64_t>> bindings);
  void set(char sym, int64_t value);
  int64_t get(char sym) const;  // 0 when unbound
  bool operator==(const SymEnv& o) const { return v_ == o.v_; }
  std::string to_string() const;  // "B=4 T=256"

 private:
  std::array<int64_t, 26> v_;
};

class Dim {
 public:
  Dim() = default;
  Dim(int64_t value) : coef_(value) {}  // NOLINT(google-explicit-constructor): dims read as numbers
  static Dim sym(char name, int64_t coef = 1);

  bool is_concrete() const { return syms_.empty(); }
  int64_t coef() const { return coef_; }
  const std::string& syms() const { return syms_; }  // sorted symbol letters, repeated for powers
  // Concrete value (the coefficient) of a concrete dim; checks it is concrete.
  int64_t value() const;
  // Value under env; returns -1 when a symbol is unbound.
  int64_t eval(const SymEnv& env) const;

  bool operator==(const Dim& o) const { return coef_ == o.coef_ && syms_ == o.syms_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }
  Dim operator*(const Dim& o) const;
  // Exact division: false when `o` does not divide this (coefficient or symbols).
  bool divide(const Dim& o, Dim* out) const;
  std::string to_string() const;  // "288", "B", "6*T", "B*T"

 private:
  int64_t coef_ = 1;
  std::string syms_;
};

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<Dim> dims) : dims_(dims) {}
  explicit Shape(std::vector<Dim> dims) : dims_(std::move(dims)) {}
  static Shape concrete(const std::vector<int64_t>& dims);

  int rank() const { return static_cast<int>(dims_.size()); }
  const Dim& operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  Dim& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  // Negative axes count from the end (-1 is the last).
  const Dim& dim(int axis) const { return dims_[static_cast<size_t>(norm_axis(axis))]; }
  int norm_axis(int axis) const { return axis < 0 ? axis + rank() : axis; }
  const std::vector<Dim>& dims() const { return dims_; }
  std::vector<Dim>& dims() { return dims_; }

  bool is_concrete() const;
  Dim numel() const;
  // Concrete dims under env; false when a symbol is unbound.
  bool eval(const SymEnv& env, std::vector<int64_t>* out) const;
  std::vector<int64_t> concrete_dims() const;  // checks is_concrete()

  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string to_string() const;  // "(B, T, 288)"

 private:
  std::vector<Dim> dims_;
};

int64_t numel_of(const std::vector<int64_t>& dims);
std::string dims_to_string(const std::vector<int64_t>& dims);

}  // namespace lj
