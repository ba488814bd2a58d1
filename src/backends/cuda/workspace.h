// The device scratch the CUDA kernels ask for (KernelContext::workspace), as plain C++ for both
// builds: the kernels size their requests with these functions, and the GPU memory prediction
// (plan/graph_figures: DryRunOptions::cuda_workspace) dry-runs the graph with workspace_sizes()
// instead of the CPU kernels' scratch (per-thread tiles, f32 copies of every bf16 operand),
// which the GPU never allocates.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "backends/kernel.h"

namespace lj::cuda {

// sdpa_backward (flash and plain kernels alike): Di, one f32 per query row.
inline size_t sdpa_backward_scratch_bytes(int64_t b, int64_t h, int64_t tq) {
  return static_cast<size_t>(b * h * tq) * sizeof(float);
}

// cross_entropy and linear_cross_entropy: the first bad row (8 bytes), the valid count (4,
// padded to 8), then `floats` floats (per-row losses).
inline size_t loss_scratch_bytes(int64_t floats) {
  return 16 + static_cast<size_t>(floats) * sizeof(float);
}

// linear_cross_entropy's rows per chunk: the "chunk" attribute, else as many rows as keep the
// f32 logits of a chunk within 32 MiB, at most 256 (and at most `rows`).
inline int64_t linear_cross_entropy_chunk(const Attrs& attrs, int64_t rows, int64_t vocab) {
  int64_t chunk = attrs.i_or("chunk", 0);
  if (chunk <= 0) {
    const int64_t cap = (int64_t{32} << 20) / std::max<int64_t>(vocab * 4, 1);
    chunk = std::max<int64_t>(1, std::min<int64_t>(256, cap));
  }
  return std::min(chunk, std::max<int64_t>(rows, 1));
}

// The CUDA kernels' scratch by op (the KernelTable's `ws` only; no kernels): what a GPU dry run
// prices. Ops not listed ask for none (cuBLASLt's workspace is the context's, priced by the
// predictor's gpu_memory.workspace_bytes).
inline const KernelTable& workspace_sizes() {
  static const KernelTable table = [] {
    KernelTable t;
    t.ws[static_cast<int>(Op::sdpa_backward)] = [](const Node&, std::span<const TensorView> in,
                                                   int) {
      const TensorView& q = in[0];
      return q.rank() == 4 ? sdpa_backward_scratch_bytes(q.dim(0), q.dim(1), q.dim(2)) : 0;
    };
    t.ws[static_cast<int>(Op::cross_entropy)] = [](const Node&, std::span<const TensorView> in,
                                                   int) {
      return loss_scratch_bytes(in[0].dim(0));
    };
    t.ws[static_cast<int>(Op::cross_entropy_backward)] =
        [](const Node&, std::span<const TensorView>, int) { return loss_scratch_bytes(0); };
    t.ws[static_cast<int>(Op::linear_cross_entropy)] = [](const Node& n,
                                                          std::span<const TensorView> in, int) {
      const int64_t rows = in[0].dim(0), vocab = in[1].dim(0);
      const auto logits =
          static_cast<size_t>(linear_cross_entropy_chunk(n.attrs, rows, vocab) * vocab);
      return loss_scratch_bytes(rows) + logits * 4 + (in[0].dtype == DType::bf16 ? logits * 2 : 0);
    };
    // Embedding and scatter_add check their ids on the device: one 8-byte verdict.
    const WorkspaceFn verdict = [](const Node&, std::span<const TensorView>, int) {
      return sizeof(long long);
    };
    t.ws[static_cast<int>(Op::gather)] = verdict;
    t.ws[static_cast<int>(Op::scatter_add)] = verdict;
    return t;
  }();
  return table;
}

}  // namespace lj::cuda
