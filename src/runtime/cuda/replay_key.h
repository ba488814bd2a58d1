// What identifies a run of the CUDA executor for CUDA-graph replay: a captured graph holds
// device addresses and the shapes its kernels were launched with, so a replay needs the same
// inputs at the same addresses, with the same dtypes and shapes, the same symbolic sizes (B, T)
// and the same arena (address and size). Addresses alone are not enough: a new arena at the old
// address, or an input reused at its address with another shape, would replay kernels launched
// for other sizes. Host-only (no CUDA): tests/unit/replay_key_test.cc checks make_replay_key
// without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace lj {

struct ReplayKey {
  std::vector<const void*> addresses;      // each input's, then the arena's base (or null)
  std::vector<std::vector<int64_t>> dims;  // each input's
  std::vector<DType> dtypes;               // each input's
  std::string env;                         // the symbolic sizes, "B=4 T=256"
  size_t arena_bytes = 0;
  bool operator==(const ReplayKey& o) const = default;
};

// One input of a run as the key sees it.
struct ReplayInput {
  const void* data = nullptr;
  DType dtype = DType::f32;
  const std::vector<int64_t>* dims = nullptr;
};

// The key of a run with `inputs`, the arena at `arena_base` of `arena_bytes` (null and 0 when the
// run has none) and the symbolic sizes `env` (SymEnv::to_string).
inline ReplayKey make_replay_key(std::span<const ReplayInput> inputs, const void* arena_base,
                                 size_t arena_bytes, std::string env) {
  ReplayKey k;
  for (const ReplayInput& in : inputs) {
    k.addresses.push_back(in.data);
    k.dims.push_back(*in.dims);
    k.dtypes.push_back(in.dtype);
  }
  k.addresses.push_back(arena_base);
  k.arena_bytes = arena_base != nullptr ? arena_bytes : 0;
  k.env = std::move(env);
  return k;
}

}  // namespace lj
