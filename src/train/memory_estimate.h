// What a training step of the eager executor will allocate, known before anything is: the
// joint graph is replayed on a virtual device (runtime Executor::dry_run), so the figure is the
// caching allocator's exact peak for that schedule, plus the parameters, gradients and AdamW
// states. Kernel scratch (a few tile buffers) and the process itself (binary, libraries, thread
// stacks) are not included; plan/ adds those.
// With GraphOptions::compile the executor runs planned: the figure is the static memory plan's
// arena (held for the whole step, by category as at the plan's peak) plus everything outside it.
#pragma once

#include <optional>

#include "models/config.h"
#include "passes/memory_plan/memory_plan.h"
#include "runtime/memory.h"
#include "train/train_step.h"

namespace lj {

struct TrainMemoryEstimate {
  MemoryStats stats;               // per category, peak of the total
  int64_t bytes_peak = 0;          // total at peak
  int64_t bytes_reserved = 0;      // held by the caching allocator at peak (>= bytes_peak)
  std::optional<MemoryPlan> plan;  // compile only: the static plan (arena, naive, peak live)
};

StatusOr<TrainMemoryEstimate> estimate_train_memory(const LlamaConfig& model, int64_t batch_size,
                                                    int64_t seq_len,
                                                    const GraphOptions& options = {});

}  // namespace lj
