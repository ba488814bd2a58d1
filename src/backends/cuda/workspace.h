// The device scratch the CUDA kernels ask for (KernelContext::workspace), as plain C++ for both
// builds: the kernels size their requests with these functions, and the GPU memory prediction
// (plan/graph_figures: DryRunOptions::cuda_workspace) dry-runs the graph with workspace_sizes()
// instead of the CPU kernels' scratch (per-thread tiles, f32 copies of every bf16 operand),
// which the GPU never allocates.
// Each kernel makes ONE request (Workspace::acquire), of what workspace_sizes() prices, before it
// launches anything: out of device memory it then returns resource_exhausted with nothing
// queued, and the request is what the prediction priced (tests/cuda/workspace_request_test.cc
// runs each kernel on the host against these figures). The one exception is scatter_add's radix
// sort, whose temporary storage only CUB can size (on the device): a second, small request.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "backends/kernel.h"
#include "core/shape.h"

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

// Parts of one request, each at a 256-byte boundary (the caching allocator's blocks are
// cudaMalloc'd, 256-aligned).
class ScratchLayout {
 public:
  static constexpr size_t kAlign = 256;
  // Reserves `bytes` (none when 0) and returns its offset.
  size_t add(size_t bytes) {
    const size_t at = (total_ + kAlign - 1) / kAlign * kAlign;
    if (bytes > 0) total_ = at + bytes;
    return at;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

// linear_cross_entropy's rows per chunk: the "chunk" attribute, else as many rows as keep the
// f32 logits of a chunk within 512 MiB, at most 4096, a multiple of 128 from 128 up (and at most
// `rows`). Each chunk reads all of w twice and, in bf16, reads and writes dw's f32 sum (vocab x
// hidden x 8 bytes), and its row kernel has one block per row: with 32 MiB (65-row chunks at
// llama3.2-1b's vocabulary) an H200 spent 173 ms of a 349 ms step in the head (ncu, batch 4 x
// 2048, bf16, 2026-12-04: the dw GEMMs 100 ms, the row kernel 54 ms, 127 chunks).
inline int64_t linear_cross_entropy_chunk(const Attrs& attrs, int64_t rows, int64_t vocab) {
  int64_t chunk = attrs.i_or("chunk", 0);
  if (chunk <= 0) {
    const int64_t cap = (int64_t{512} << 20) / std::max<int64_t>(vocab * 4, 1);
    chunk = std::max<int64_t>(1, std::min<int64_t>(4096, cap));
    if (chunk >= 128) chunk = chunk / 128 * 128;
  }
  return std::min(chunk, std::max<int64_t>(rows, 1));
}

// linear_cross_entropy(x (rows, cols), w (vocab, cols)): the loss scratch (first bad row, count,
// per-row losses) at 0; a chunk's f32 logits; in bf16 the chunk's bf16 dlogits (in f32 they
// overwrite the logits) and, over several chunks, dw's f32 sum (one rounding at the end).
struct LinearCrossEntropyScratch {
  size_t logits = 0, dlogits = 0, dw32 = 0;
  bool has_dlogits = false, has_dw32 = false;
  size_t total = 0;
};
inline LinearCrossEntropyScratch linear_cross_entropy_scratch(int64_t rows, int64_t cols,
                                                              int64_t vocab, int64_t chunk,
                                                              bool bf16) {
  LinearCrossEntropyScratch s;
  ScratchLayout l;
  l.add(loss_scratch_bytes(rows));
  s.logits = l.add(static_cast<size_t>(chunk * vocab) * 4);
  s.has_dlogits = bf16;
  if (bf16) s.dlogits = l.add(static_cast<size_t>(chunk * vocab) * 2);
  s.has_dw32 = bf16 && rows > chunk;
  if (s.has_dw32) s.dw32 = l.add(static_cast<size_t>(vocab * cols) * 4);
  s.total = l.total();
  return s;
}

// scatter_add(ids (n), src (n, cols)) -> out (v, cols): the ids' verdict (8 bytes) at 0; in bf16
// the f32 sum of the output (rounded once at the end); with rows to add, the sorted ids (keys),
// the positions 0..n-1 and the positions in sorted order (int32 each).
struct ScatterAddScratch {
  size_t acc = 0, keys = 0, pos_in = 0, pos = 0;
  bool has_acc = false, sorted = false;
  size_t total = 0;
};
inline ScatterAddScratch scatter_add_scratch(int64_t n, int64_t v, int64_t cols, size_t id_bytes,
                                             bool bf16) {
  ScatterAddScratch s;
  ScratchLayout l;
  if (n > 0) l.add(sizeof(long long));
  const int64_t out = v * cols;
  s.has_acc = bf16 && out > 0;
  if (s.has_acc) s.acc = l.add(static_cast<size_t>(out) * 4);
  s.sorted = out > 0 && n > 0 && cols > 0;
  if (s.sorted) {
    s.keys = l.add(static_cast<size_t>(n) * id_bytes);
    s.pos_in = l.add(static_cast<size_t>(n) * 4);
    s.pos = l.add(static_cast<size_t>(n) * 4);
  }
  s.total = l.total();
  return s;
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
      const int64_t rows = in[0].dim(0), cols = in[0].dim(1), vocab = in[1].dim(0);
      return linear_cross_entropy_scratch(rows, cols, vocab,
                                          linear_cross_entropy_chunk(n.attrs, rows, vocab),
                                          in[0].dtype == DType::bf16)
          .total;
    };
    // Embedding checks its ids on the device: one 8-byte verdict.
    t.ws[static_cast<int>(Op::gather)] = [](const Node&, std::span<const TensorView> in, int) {
      return in[1].numel() > 0 ? sizeof(long long) : size_t{0};
    };
    // The output's rows (the "shape" attribute's first dim) are the vocabulary, concrete in
    // every model; a symbolic one is priced as none.
    t.ws[static_cast<int>(Op::scatter_add)] = [](const Node& n, std::span<const TensorView> in,
                                                 int) {
      const TensorView &ids = in[0], &src = in[1];
      const Dim& rows = n.attrs.shape("shape")[0];
      int64_t cols = 1;  // src's dims past the ids' (src is (ids..., C...))
      for (int i = ids.rank(); i < src.rank(); ++i) cols *= src.dim(i);
      const int64_t count = ids.numel();
      return scatter_add_scratch(count, rows.is_concrete() ? rows.value() : 0, cols,
                                 static_cast<size_t>(dtype_size(ids.dtype)),
                                 src.dtype == DType::bf16)
          .total;
    };
    return t;
  }();
  return table;
}

}  // namespace lj::cuda
