// What the planner needs from one joint graph: the dry run's memory (the caching allocator's
// exact replay on a virtual device) and the predicted compute time of every node.
#pragma once

#include <cstdint>

#include "models/config.h"
#include "plan/device_catalog.h"
#include "runtime/memory.h"
#include "train/train_step.h"

namespace lj {

struct GraphFigures {
  MemoryStats stats;           // dry run: per category, peaks, reserved
  int64_t nodes = 0;           // nodes of the joint graph
  double compute_seconds = 0;  // time model over every node (time_model.h)
  // A forward GEMM that oneDNN's sgemm packs into its own per-thread buffers (outside the
  // allocator): more than kGemmPackRows output rows and a B operand (N·K) of at least
  // kGemmPackElements. Thresholds measured on this host (libdnnl 2.6, 2 threads): the LM head of
  // `small` (N 32000, K 288) adds ~14 MiB of peak RSS at 400 rows and above, nothing at 384;
  // the backward GEMMs of the same shapes and the FFN GEMMs (N·K 221K) add nothing. Compiled,
  // the LM head is inside linear_cross_entropy (256-row chunks, which do not pack in isolation),
  // yet the process shows the same step above 384 rows (17 MiB over the reserved peak at 384,
  // 25-34 MiB at 448-2048; source not pinned down): the fused loss counts with all its rows.
  bool gemm_packing = false;
};
inline constexpr int64_t kGemmPackRows = 384;
inline constexpr int64_t kGemmPackElements = int64_t{1} << 21;

// Builds the joint graph for `options` and dry-runs it with micro-batch `batch` and sequence
// `seq_len`. Inputs are allocated as the trainer does: tokens, targets, rope tables, the
// parameters in options.dtype, and, when `with_adam_states`, AdamW's m and v in f32 (the CPU's
// single-process case; estimate_train_memory gives the same figures). With options.compile the
// executor runs planned (the static memory plan's arena), as the compiled TrainStep does.
StatusOr<GraphFigures> graph_figures(const LlamaConfig& model, int64_t batch, int64_t seq_len,
                                     const GraphOptions& options, bool with_adam_states,
                                     const DeviceProfile& device, const Efficiency& eff);

}  // namespace lj
