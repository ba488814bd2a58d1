#include "core/dtype.h"

#include <cmath>

#include "core/check.h"

namespace lj {
namespace {

constexpr DTypeInfo kDTypes[kNumDTypes] = {
    {DType::f32, "f32", 4, true}, {DType::f64, "f64", 8, true},  {DType::bf16, "bf16", 2, true},
    {DType::f16, "f16", 2, true}, {DType::i32, "i32", 4, false}, {DType::i64, "i64", 8, false},
    {DType::u8, "u8", 1, false},
};

}  // namespace

const DTypeInfo& dtype_info(DType t) {
  const auto& info = kDTypes[static_cast<int>(t)];
  LJ_CHECK(info.dtype == t);
  return info;
}

bool parse_dtype(std::string_view name, DType* out) {
  struct Alias {
    const char* name;
    DType t;
  };
  static constexpr Alias kAliases[] = {
      {"float32", DType::f32}, {"float64", DType::f64}, {"bfloat16", DType::bf16},
      {"float16", DType::f16}, {"int32", DType::i32},   {"int64", DType::i64},
      {"uint8", DType::u8},
  };
  for (const auto& d : kDTypes) {
    if (name == d.name) return *out = d.dtype, true;
  }
  for (const auto& a : kAliases) {
    if (name == a.name) return *out = a.t, true;
  }
  return false;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal or zero in f16: scale and round to nearest even
    float a;
    std::memcpy(&a, &absx, 4);
    const float scaled = a * 16777216.0f;  // 2^24: one f16 subnormal ulp becomes 1
    const auto q = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t mant = absx & 0x7fffffu;
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h += 1;
  return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    std::memcpy(&u, &v, 4);
    u |= sign;
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace lj
