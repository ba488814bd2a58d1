// The optimizer side of data parallelism: ZeRO stages 0-2 (dist/zero.h) applied to AdamW
// (train/adamw.h). TrainStep hands it each rank's accumulated gradients; it averages them across
// ranks, clips by the global norm, updates the parameters this rank owns and gathers the rest.
// With one rank (SelfCommunicator) every stage computes bit for bit what TrainStep computes
// without a communicator.
//
// Memory per rank: stage 0 keeps m and v for every parameter; stages 1 and 2 only for the rank's
// shard (numel_padded / world_size elements each); stage 2 also keeps a shard-sized gradient
// buffer and drops the full gradients after the reduce-scatter. The full gradients from
// backward still exist until then: sharding them during backward (DeepSpeed's bucketed
// reduce-as-you-go) needs the collectives in the graph, which is a later step.
#pragma once

#include <memory>
#include <vector>

#include "dist/zero.h"
#include "train/adamw.h"

namespace lj {

struct ZeroStepResult {
  double loss = 0;       // mean over every rank's micro-batches
  double grad_norm = 0;  // global, before clipping
  bool updated = true;   // false: non-finite loss or gradient norm (the same on every rank)
  // Wall time in this step's collectives (the loss and norm all-reduces, the gradient
  // all-reduce or reduce-scatter and the parameter all-gather, their bucket packing included).
  // All of it is exposed: nothing overlaps the collectives with compute yet.
  double comm_seconds = 0;
};

class ZeroOptimizer {
 public:
  // dp.comm must be set and outlive the optimizer. Errors: a stage that is not 0-2.
  static StatusOr<std::unique_ptr<ZeroOptimizer>> create(Device& dev, const DataParallel& dp,
                                                         const std::vector<Tensor>& params,
                                                         AdamWConfig adamw);

  // One update. grads: this rank's gradients (f32, the mean over its micro-batches), one per
  // parameter, consumed (changed in place, or dropped at stage 2). local_loss: this rank's mean
  // loss. grad_clip 0: no clipping. Every rank must call it with the same lr and grad_clip.
  StatusOr<ZeroStepResult> step(std::vector<Tensor>& params, std::vector<Tensor> grads,
                                double local_loss, double lr, double grad_clip);

  // Stage 0: m and v per parameter; stages 1 and 2: one flat m and v for this rank's shard.
  AdamW& adamw() { return *adamw_; }
  const FlatLayout& layout() const { return layout_; }
  const ZeroConfig& config() const { return zero_; }

 private:
  ZeroOptimizer(Device& dev, Communicator& comm, ZeroConfig zero, FlatLayout layout)
      : dev_(dev), comm_(comm), zero_(zero), layout_(std::move(layout)) {}

  Device& dev_;
  Communicator& comm_;
  ZeroConfig zero_;
  FlatLayout layout_;
  std::unique_ptr<AdamW> adamw_;
  Tensor grad_shard_;  // stage 2: (S) this rank's reduced gradient
};

}  // namespace lj
