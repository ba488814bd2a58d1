// Element types. One table (dtype.cc) holds each type's name and size; everything else reads it.
// bf16 and f16 are storage types on the CPU: kernels compute in f32 and convert at the edges.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace lj {

enum class DType : uint8_t { f32, f64, bf16, f16, i32, i64, u8 };
inline constexpr int kNumDTypes = 7;

struct DTypeInfo {
  DType dtype;
  const char* name;  // "f32", ...
  int size_bytes;
  bool is_float;
};

const DTypeInfo& dtype_info(DType t);
inline int dtype_size(DType t) {
  return dtype_info(t).size_bytes;
}
inline const char* dtype_name(DType t) {
  return dtype_info(t).name;
}
inline bool is_float(DType t) {
  return dtype_info(t).is_float;
}
// Parses "f32"/"float32"/... ; returns false when the name is unknown.
bool parse_dtype(std::string_view name, DType* out);

// Round-to-nearest-even f32 -> bf16, as PyTorch does (NaN stays NaN).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace lj
