// runtime/cuda/replay_key.h without a GPU (issue 32 item 6): a CUDA graph is replayed only for a
// run whose key equals the captured one, so the key must change with anything a captured kernel
// launch depends on, not only the addresses.
#include "runtime/cuda/replay_key.h"

#include <gtest/gtest.h>

#include <vector>

namespace lj {
namespace {

TEST(ReplayKey, ShapesDtypesSizesAndTheArenaAreInTheKey) {
  alignas(64) static char buffers[3][64];
  const std::vector<int64_t> bt = {4, 256}, other_bt = {8, 128};  // the same bytes, other shapes
  const auto key = [&](const std::vector<int64_t>& dims, DType dt, const void* arena,
                       size_t arena_bytes, const char* env) {
    const std::vector<ReplayInput> in = {{buffers[0], dt, &dims}, {buffers[1], DType::i32, &bt}};
    return make_replay_key(in, arena, arena_bytes, env);
  };
  const ReplayKey captured = key(bt, DType::f32, buffers[2], 1 << 20, "B=4 T=256");
  EXPECT_EQ(key(bt, DType::f32, buffers[2], 1 << 20, "B=4 T=256"), captured);
  // Each at the same addresses: an addresses-only key would replay the captured graph for them.
  EXPECT_NE(key(other_bt, DType::f32, buffers[2], 1 << 20, "B=4 T=256"), captured);  // shape
  EXPECT_NE(key(bt, DType::bf16, buffers[2], 1 << 20, "B=4 T=256"), captured);       // dtype
  EXPECT_NE(key(bt, DType::f32, buffers[2], 1 << 20, "B=8 T=128"), captured);        // sizes
  EXPECT_NE(key(bt, DType::f32, buffers[2], 2 << 20, "B=4 T=256"), captured);        // a new arena
  EXPECT_NE(key(bt, DType::f32, nullptr, 0, "B=4 T=256"), captured);                 // no arena
  // With no arena its size does not count.
  EXPECT_EQ(key(bt, DType::f32, nullptr, 7, "B=4 T=256"),
            key(bt, DType::f32, nullptr, 0, "B=4 T=256"));
}

}  // namespace
}  // namespace lj
