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
};

// Builds the joint graph for `options` and dry-runs it with micro-batch `batch` and sequence
// `seq_len`. Inputs are allocated as the trainer does: tokens, targets, rope tables, the
// parameters in options.dtype, and, when `with_adam_states`, AdamW's m and v in f32 (the CPU's
// single-process case; estimate_train_memory gives the same figures).
StatusOr<GraphFigures> graph_figures(const LlamaConfig& model, int64_t batch, int64_t seq_len,
                                     const GraphOptions& options, bool with_adam_states,
                                     const DeviceProfile& device, const Efficiency& eff);

}  // namespace lj
