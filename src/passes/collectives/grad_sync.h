// The gradient collectives of data parallelism as graph nodes (docs/architecture.md "Distributed
// training"): the pass cuts the parameters' gradients into buckets and places, for each bucket, a
// grad_reduce_start right after the node that produces the bucket's last gradient (so the
// reduction runs while backward goes on) and a grad_reduce_wait as late as allowed.
//
// Buckets (DeepSpeed's reduce_bucket_size, counted in elements): consecutive parameters taken
// from the last one backwards, as backward produces their gradients, until the next would pass
// the size; a parameter larger than the size is a bucket of its own. A bucket is therefore one
// contiguous range of the flat vector of dist/zero.h (parameters end to end, padded to a
// multiple of the world size; rank r owns [r * S, (r + 1) * S), S = padded / world), and its
// part in rank r's shard is contiguous too (what stage 2's reduce-scatter gives rank r).
//
// Waits: overlap off (DeepSpeed's overlap_comm false): right after the start, so the
// reduction blocks backward where the bucket fills. Overlap on: before the start of the
// bucket kMaxBucketsInFlight places later, else at the end of the graph: at most that many
// reductions are in flight, as DeepSpeed's double-buffered reduction holds at most two buckets
// (a bound on the communication buffers the memory plan sees).
//
// Stage 3 reduces as stage 2 and also gathers the parameters (param_gather.h).
//
// Outputs: stages 0 and 1 rewire every "grad:<name>" output to the wait's averaged gradient;
// stages 2 and 3 drop them (a rank keeps only its shard, in the optimizer) and adds one scalar
// token per bucket, "grad_sync:<bucket>", so the waits stay reachable. With skip_experts the
// experts' "grad:" outputs stay as they are.
//
// Before: every pass that adds, drops or reorders nodes (autodiff, remat, dce, fusion, the
// schedule): the starts are placed by node position. Nothing may run after it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/zero_config.h"
#include "passes/pass.h"

namespace lj {

// Where the gradient collectives run: rank `rank` of `world_size`, with the run's ZeRO settings
// (core/zero_config.h: the stage, reduce_bucket_size, overlap_comm and stage 3's sizes, which
// param_gather.h reads). Off (the default): one process, no collectives (the pass does nothing).
struct GradSyncOptions {
  ZeroConfig zero;
  int world_size = 1;
  int rank = 0;
  bool on = false;
  // Expert parallelism: the experts' weights (models/moe.h is_expert_param) are not this
  // group's: their gradients stay "grad:" outputs, reduced over their own group after backward
  // (train/expert_params.h), and stage 3 leaves them graph inputs. The flat vector, the buckets
  // and the gathers are the other parameters'.
  bool skip_experts = false;
  static GradSyncOptions of(const ZeroConfig& zero, int world_size, int rank) {
    return GradSyncOptions{zero, world_size, rank, true};
  }
  // The host's ranks as benchmark and train run them: collectives only with several.
  static GradSyncOptions for_world(const ZeroConfig& zero, int world_size, int rank) {
    return world_size > 1 ? of(zero, world_size, rank) : GradSyncOptions{};
  }
  bool enabled() const { return on; }
  bool operator==(const GradSyncOptions&) const = default;
};

inline constexpr int kMaxBucketsInFlight = 2;

// One bucket: parameters [param_begin, param_end) = flat elements [flat_begin, flat_end);
// recv_begin, recv_count: the part of it in this rank's shard (offset into the shard, count).
struct GradBucket {
  int64_t param_begin = 0, param_end = 0;
  int64_t flat_begin = 0, flat_end = 0;
  int64_t recv_begin = 0, recv_count = 0;
  int64_t numel() const { return flat_end - flat_begin; }
  bool operator==(const GradBucket&) const = default;
};

// The buckets for parameters of `numels` (in parameter order), from the last parameter
// backwards (the order backward fills them).
std::vector<GradBucket> grad_buckets(const std::vector<int64_t>& numels,
                                     const GradSyncOptions& options);

class GradSyncPass : public Pass {
 public:
  explicit GradSyncPass(GradSyncOptions options) : options_(options) {}
  const char* name() const override { return "grad_sync"; }
  StatusOr<bool> run(Graph& g) override;

 private:
  GradSyncOptions options_;
};

}  // namespace lj
