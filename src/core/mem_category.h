// What a byte of device memory holds, for accounting (runtime/memory.h) and for the static
// memory plan (passes/memory_plan), which must agree on it:
//   weights, optimizer        persistent state the caller allocates
//   grads                     backward values that are graph outputs (parameter gradients)
//   activations               forward values read by a backward node (saved for backward)
//   temporaries               every other intermediate value
//   workspace                 kernel scratch
#pragma once

#include <cstdint>

namespace lj {

enum class MemCategory : uint8_t { weights, grads, optimizer, activations, temporaries, workspace };
inline constexpr int kNumMemCategories = 6;
const char* mem_category_name(MemCategory c);

}  // namespace lj
