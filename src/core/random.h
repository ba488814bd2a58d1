// Counter-based random numbers: value i of stream `seed` is a pure function of (seed, i), so a
// tensor fills the same way on any number of threads and any backend. splitmix64 mixing of
// (seed, counter) gives 64 random bits; normals use Box-Muller on two of them.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace lj {

inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t random_bits(uint64_t seed, uint64_t counter) {
  return mix64(mix64(seed) ^ (counter * 0xd1b54a32d192ed03ull));
}

// Uniform in [0, 1) with 53 random bits.
inline double random_uniform01(uint64_t seed, uint64_t counter) {
  return static_cast<double>(random_bits(seed, counter) >> 11) * 0x1.0p-53;
}

// Standard normal for element i.
inline double random_normal01(uint64_t seed, uint64_t i) {
  const double u1 = 1.0 - random_uniform01(seed, 2 * i);  // (0, 1]: log is finite
  const double u2 = random_uniform01(seed, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace lj
