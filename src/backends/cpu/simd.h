// Portable SIMD vectors for the CPU kernels that need explicit SIMD (attention tiles, the
// softmax inside cross_entropy, exp-based pointwise ops): GCC/Clang vector extensions, so one
// template serves f32 and f64 and compiles on any target (the compiler splits the vector where the
// ISA is narrower). The width is the target's widest: 64 bytes (f32 16 lanes, f64 8) where
// AVX-512F is enabled (a Xeon's two FMA ports then do twice the work of 256-bit vectors), else
// 32 bytes (8 and 4). FMA goes through the intrinsic when the target has it, so every product
// rounds once. exp_vec<float> is a Cephes-style polynomial (max relative error ~2 ulp on
// [-87.3, 88.3]) that flushes x < -87.68 (and -inf) to exactly 0, overflows to inf from x > 88.37
// (the true limit is 88.72) and propagates NaN; exp_vec<double> calls std::exp per lane (f64
// exists for gradient checks, where accuracy matters more than speed).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__FMA__) || defined(__AVX__)
#include <immintrin.h>
#endif

// Without AVX enabled GCC warns that 32/64-byte vector arguments change the ABI; every function
// here is inline, so no ABI boundary is crossed.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace lj::cpu::simd {

#if defined(__AVX512F__)
inline constexpr int kBytes = 64;
#else
inline constexpr int kBytes = 32;
#endif

template <class T>
struct Vec;
template <>
struct Vec<float> {
  typedef float V __attribute__((vector_size(kBytes)));
  typedef int32_t I __attribute__((vector_size(kBytes)));
  static constexpr int kWidth = kBytes / 4;
};
template <>
struct Vec<double> {
  typedef double V __attribute__((vector_size(kBytes)));
  typedef int64_t I __attribute__((vector_size(kBytes)));
  static constexpr int kWidth = kBytes / 8;
};

template <class T>
using V = typename Vec<T>::V;
template <class T>
inline constexpr int kWidth = Vec<T>::kWidth;

template <class T>
inline V<T> load(const T* p) {
  V<T> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <class T>
inline void store(T* p, V<T> v) {
  std::memcpy(p, &v, sizeof(v));
}
template <class T>
inline V<T> splat(T x) {
#if defined(__AVX512F__)
  if constexpr (sizeof(T) == 4) {
    return _mm512_set1_ps(x);
  } else {
    return _mm512_set1_pd(x);
  }
#elif defined(__AVX__)
  if constexpr (sizeof(T) == 4) {
    return _mm256_set1_ps(x);
  } else {
    return _mm256_set1_pd(x);
  }
#else
  V<T> v{};
  for (int i = 0; i < kWidth<T>; ++i) v[i] = x;
  return v;
#endif
}
// The element type of a vector type.
template <class VT>
using Elem = std::remove_cvref_t<decltype(std::declval<VT>()[0])>;

// a * b + c, rounded once where the target has FMA.
template <class VT>
inline VT fma(VT a, VT b, VT c) {
#if defined(__AVX512F__)
  if constexpr (sizeof(Elem<VT>) == 4) {
    return _mm512_fmadd_ps(a, b, c);
  } else {
    return _mm512_fmadd_pd(a, b, c);
  }
#elif defined(__FMA__)
  if constexpr (sizeof(Elem<VT>) == 4) {
    return _mm256_fmadd_ps(a, b, c);
  } else {
    return _mm256_fmadd_pd(a, b, c);
  }
#else
  return a * b + c;
#endif
}
template <class VT>
inline VT max(VT a, VT b) {
  return a > b ? a : b;
}
template <class VT>
inline Elem<VT> hmax(VT v) {
  Elem<VT> m = v[0];
  for (int i = 1; i < kWidth<Elem<VT>>; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
// Pairwise, in a fixed order: lanes i and i + n/2 first, then halving again (for 8 lanes:
// ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))).
template <class VT>
inline Elem<VT> hsum(VT v) {
  constexpr int n = kWidth<Elem<VT>>;
  if constexpr (n == 16) {
    return ((((v[0] + v[8]) + (v[4] + v[12])) + ((v[2] + v[10]) + (v[6] + v[14]))) +
            (((v[1] + v[9]) + (v[5] + v[13])) + ((v[3] + v[11]) + (v[7] + v[15]))));
  } else if constexpr (n == 8) {
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
  } else {
    static_assert(n == 4, "hsum: 4, 8 or 16 lanes");
    return (v[0] + v[2]) + (v[1] + v[3]);
  }
}

template <class T>
inline V<T> exp_vec(V<T> x);

template <>
inline V<float> exp_vec<float>(V<float> x) {
  using VF = V<float>;
  using VI = Vec<float>::I;
  // Clamp so that 2^n stays in [2^-127 (bits 0: the result is exactly 0), 2^128 (inf)]. Both
  // clamps pass NaN through, and the polynomial turns it into a NaN result.
  const VF lo = splat(-88.0f), hi = splat(88.5f);
#if defined(__AVX__) && !defined(__AVX512F__)
  // (GCC 12's _mm512_min_ps/_mm512_max_ps warn -Wmaybe-uninitialized inside their header; the
  // generic selects below compile to vmaxps/vminps or compare-and-blend there.)
  VF xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
#else
  VF xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
#endif
  // n = round(x / ln 2) by the 1.5 * 2^23 trick, then r = x - n ln 2 in two pieces.
  const VF magic = splat(12582912.0f);
  VF n = fma(xc, splat(1.44269504088896341f), magic) - magic;
  VF r = fma(n, splat(-0.693359375f), xc);
  r = fma(n, splat(2.12194440e-4f), r);
  VF p = splat(1.9875691500e-4f);
  p = fma(p, r, splat(1.3981999507e-3f));
  p = fma(p, r, splat(8.3334519073e-3f));
  p = fma(p, r, splat(4.1665795894e-2f));
  p = fma(p, r, splat(1.6666665459e-1f));
  p = fma(p, r, splat(5.0000001201e-1f));
  p = fma(p, r * r, r) + 1.0f;
  const VI e = (__builtin_convertvector(n, VI) + 127) << 23;
  return p * (VF)e;
}

template <>
inline V<double> exp_vec<double>(V<double> x) {
  V<double> y{};
  for (int i = 0; i < kWidth<double>; ++i) y[i] = std::exp(x[i]);
  return y;
}

}  // namespace lj::cpu::simd

#pragma GCC diagnostic pop
