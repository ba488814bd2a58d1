// ZeRO's settings, as DeepSpeed's zero_optimization block means them: the one type that holds
// them, from the DeepSpeed JSON (io/deepspeed_config.h) or the flags through the planner
// (plan/), the graph's collectives (passes/collectives/grad_sync.h) and the optimizer's shards
// (dist/zero.h, train/zero_optimizer.h). Sizes count elements, as DeepSpeed counts them.
//
//   stage 0: gradients all-reduced; every rank keeps full optimizer states.
//   stage 1: AdamW m and v only for the rank's shard; parameters all-gathered after the step.
//   stage 2: as 1, and gradients reduce-scattered: a rank keeps only its shard's gradient.
//   stage 3: as 2, and the parameters are sharded too: gathered before each use.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace lj {

// What a ZeRO stage shards across the ranks (llm.c's one answer to "is this sharded at stage
// >= k"): the optimizer states from stage 1, the reduced gradients from 2, the parameters at 3.
enum class ZeroSharded { optimizer_states = 1, gradients = 2, parameters = 3 };
constexpr bool zero_shards(int stage, ZeroSharded what) {
  return stage >= static_cast<int>(what);
}

struct ZeroConfig {
  int stage = 0;                                // 0, 1, 2 or 3
  int64_t reduce_bucket_size = 500'000'000;     // elements per gradient collective
  int64_t allgather_bucket_size = 500'000'000;  // elements per parameter all-gather
  // DeepSpeed's overlap_comm: a gradient bucket's reduction runs while backward goes on (its
  // wait as late as passes/collectives/grad_sync.h allows); false: it blocks where it starts.
  // DeepSpeed's code default is true only for stage 3 (default_overlap_comm).
  bool overlap_comm = false;
  // Stage 3 (DeepSpeed's code defaults): elements gathered ahead of their use, and parameters
  // below this many elements gathered once per step (kept from forward through backward).
  int64_t stage3_prefetch_bucket_size = 50'000'000;
  int64_t stage3_param_persistence_threshold = 100'000;
  // Elements of gathered parameters alive at once, beyond which nothing more is prefetched
  // (the gather a use needs still runs); and the distance, in elements of parameters gathered in
  // between, within which a parameter's next use keeps its gather instead of freeing it
  // (passes/collectives/param_gather.h).
  int64_t stage3_max_live_parameters = 1'000'000'000;
  int64_t stage3_max_reuse_distance = 1'000'000'000;

  // DeepSpeed's code defaults at `stage` (overlap_comm true only for stage 3).
  static ZeroConfig defaults(int stage);
  // HF Trainer's "auto" values for a model of `hidden` (reduce_bucket_size = hidden^2,
  // stage3_prefetch_bucket_size = int(0.9 hidden^2), stage3_param_persistence_threshold =
  // 10 hidden) over DeepSpeed's defaults: what the `deepspeed/` recipe resolves to.
  static ZeroConfig hf_auto(int stage, int64_t hidden);
  static int64_t auto_reduce_bucket(int64_t hidden) { return hidden * hidden; }
  static int64_t auto_prefetch_bucket(int64_t hidden);
  static int64_t auto_persistence_threshold(int64_t hidden) { return 10 * hidden; }

  bool shards(ZeroSharded what) const { return zero_shards(stage, what); }
  // invalid_argument for a stage outside 0-3, a bucket size below 1 or a negative stage-3 size.
  Status validate() const;
  bool operator==(const ZeroConfig&) const = default;
};

}  // namespace lj
