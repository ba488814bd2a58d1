// backends/cuda/workspace.h: what a GPU dry run prices as kernel scratch. The attention
// backward asks for Di only (B H Tq f32), where the CPU kernels' dry run would price f32 copies
// of every bf16 operand plus per-thread tiles, which a GPU never allocates.
#include <gtest/gtest.h>

#include "backends/cuda/workspace.h"
#include "graph/builder.h"
#include "runtime/executor.h"

namespace lj {
namespace {

// The workspace peak of a dry run of bf16 sdpa + sdpa_backward at (B, H, G, T, D).
int64_t sdpa_workspace_peak(const KernelTable* sizes) {
  const int64_t b = 2, h = 4, g = 2, t = 128, d = 64;
  Graph graph;
  Builder bld(&graph);
  Val q = bld.input("q", DType::bf16, Shape::concrete({b, h, t, d}));
  Val k = bld.input("k", DType::bf16, Shape::concrete({b, g, t, d}));
  Val v = bld.input("v", DType::bf16, Shape::concrete({b, g, t, d}));
  Val dout = bld.input("dout", DType::bf16, Shape::concrete({b, h, t, d}));
  Attrs a;
  a.set("causal", true);
  std::vector<Val> fwd = bld.add(Op::sdpa, {q, k, v}, a);
  std::vector<Val> bwd = bld.add(Op::sdpa_backward, {q, k, v, fwd[0], fwd[1], dout}, a);
  for (size_t i = 0; i < bwd.size(); ++i) bld.output("d" + std::to_string(i), bwd[i]);
  EXPECT_TRUE(bld.ok()) << bld.status().message();
  Device dev(1, /*is_virtual=*/true);
  std::vector<Tensor> in;
  for (ValueId id : graph.inputs()) {
    in.push_back(Tensor::empty(dev, DType::bf16, graph.type(id).shape.concrete_dims(),
                               MemCategory::activations));
  }
  Executor ex(graph, dev, ExecutorOptions{.dry_workspace_sizes = sizes});
  EXPECT_TRUE(ex.dry_run(in).ok());
  return dev.memory().peak(MemCategory::workspace);
}

TEST(CudaWorkspace, GpuDryRunPricesDiOnly) {
  const int64_t gpu = sdpa_workspace_peak(&cuda::workspace_sizes());
  const int64_t cpu = sdpa_workspace_peak(nullptr);
  // Di: 2 * 4 * 128 f32 = 4 KiB (the allocator rounds to 512, which 4096 is a multiple of).
  EXPECT_EQ(gpu, 2 * 4 * 128 * 4);
  // The CPU's bf16 backward widens q, k, v, out, dout, dq, dk, dv to f32: at least 640 KiB.
  EXPECT_GT(cpu, 640 * 1024);
}

TEST(CudaWorkspace, LossScratchAndChunk) {
  EXPECT_EQ(cuda::sdpa_backward_scratch_bytes(4, 32, 2048), size_t{4 * 32 * 2048 * 4});
  EXPECT_EQ(cuda::loss_scratch_bytes(10), size_t{56});
  Attrs none;
  // 512 MiB of f32 logits per chunk at llama3's vocabulary: 1046 rows, rounded down to 1024.
  EXPECT_EQ(cuda::linear_cross_entropy_chunk(none, 8192, 128256), 1024);
  // A small vocabulary: the 4096-row cap; a huge one: fewer than 128 rows, not rounded.
  EXPECT_EQ(cuda::linear_cross_entropy_chunk(none, 8192, 1000), 4096);
  EXPECT_EQ(cuda::linear_cross_entropy_chunk(none, 8192, 2'000'000), 67);
  EXPECT_EQ(cuda::linear_cross_entropy_chunk(none, 10, 1000), 10);
  Attrs chunk;
  chunk.set("chunk", int64_t{7});
  EXPECT_EQ(cuda::linear_cross_entropy_chunk(chunk, 100, 1000), 7);
}

}  // namespace
}  // namespace lj
