// Sums and products of integers that come from a file or a flag (batch sizes, shapes, byte
// sizes, offsets): signed overflow is undefined behaviour and unsigned overflow wraps to a
// plausible-looking small number, so every such sum or product goes through here and the
// caller turns "no value" into an error naming the input.
//
//   const std::optional<int64_t> n = checked_product<int64_t>({micro, accum, world});
//   if (!n) return invalid_argument("ds.json: ... overflows");
#pragma once

#include <initializer_list>
#include <optional>
#include <type_traits>

namespace lj {

// a * b, or nothing when it does not fit T.
template <class T>
[[nodiscard]] std::optional<T> checked_mul(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T out{};
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a + b, or nothing when it does not fit T.
template <class T>
[[nodiscard]] std::optional<T> checked_add(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T out{};
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of `factors` (1 for none), or nothing when a partial product does not fit T.
template <class T>
[[nodiscard]] std::optional<T> checked_product(std::initializer_list<T> factors) {
  T out{1};
  for (const T f : factors) {
    const std::optional<T> p = checked_mul(out, f);
    if (!p) return std::nullopt;
    out = *p;
  }
  return out;
}

}  // namespace lj
