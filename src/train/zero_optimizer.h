// The optimizer side of data parallelism: ZeRO stages 0-3 (dist/zero.h) applied to AdamW
// (train/adamw.h). TrainStep hands it each rank's accumulated gradients; it averages them across
// ranks, clips by the global norm, updates the parameters this rank owns and gathers the rest.
// With one rank (SelfCommunicator) every stage computes bit for bit what TrainStep computes
// without a communicator.
//
// Memory per rank: stage 0 keeps m and v for every parameter; stages 1 and 2 only for the rank's
// shard (numel_padded / world_size elements each); stages 2 and 3 also hold a shard-sized
// gradient buffer, from the step's first reduction into it until the end of step(). When the joint
// graph carries the gradient collectives (passes/collectives/grad_sync.h, bound by
// train/grad_sync.h), backward has reduced the gradients bucket by bucket before step()
// (grads_reduced), and stage 2's full gradients never outlive their bucket.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "dist/zero.h"
#include "train/adamw.h"

namespace lj {

// reduce()'s result: the loss (over the ranks when asked) and the sum of the squared averaged
// gradients over the group's ranks (the same on each of them).
struct ZeroReduced {
  double loss = 0;
  double sum_squares = 0;
  double comm_seconds = 0;  // the blocking collectives' wall time, packing included
};

// torch.nn.utils.clip_grad_norm_'s factor: max_norm / (norm + 1e-6) above max_norm, else 1
// (grad_clip 0: no clipping).
double clip_factor(double grad_norm, double grad_clip);

struct ZeroStepResult {
  double loss = 0;       // mean over every rank's micro-batches
  double grad_norm = 0;  // global, before clipping
  bool updated = true;   // false: non-finite loss or gradient norm (the same on every rank)
  // Wall time in this step's blocking collectives (the loss and norm all-reduces, the gradient
  // all-reduce or reduce-scatter when backward did not reduce, and the parameter all-gather,
  // their bucket packing included): all of it exposed.
  double comm_seconds = 0;
};

class ZeroOptimizer {
 public:
  // dp.comm must be set and outlive the optimizer. Errors: a stage that is not 0-3. Stage 3:
  // the parameters' shard is taken from `params`; create_sharded() below avoids holding them.
  static StatusOr<std::unique_ptr<ZeroOptimizer>> create(Device& dev, const DataParallel& dp,
                                                         const std::vector<Tensor>& params,
                                                         AdamWConfig adamw);
  // Stage 3 without the whole parameters: `layout` is theirs, `param_shard` (f32 (S), weights)
  // this rank's shard of them, already initialised; the optimizer keeps it.
  static StatusOr<std::unique_ptr<ZeroOptimizer>> create_sharded(Device& dev,
                                                                 const DataParallel& dp,
                                                                 FlatLayout layout,
                                                                 Tensor param_shard,
                                                                 AdamWConfig adamw);

  // One update. grads: this rank's gradients (f32, the mean over its micro-batches), one per
  // parameter, consumed (changed in place, or dropped at stage 2). local_loss: this rank's mean
  // loss. grad_clip 0: no clipping. Every rank must call it with the same lr and grad_clip.
  // grads_reduced: backward's collectives (train/grad_sync.h) already averaged them across
  // ranks: stages 0, 1 pass the averaged gradients, stages 2, 3 none (they are in the
  // grad_part()s). grad_unscale (fp16, DeepSpeed's order): the averaged gradients are multiplied by
  // it after the reduction and before the norm, clipping and update; 1 / the loss scale, a power of
  // two, so exact. Overflow is global: an inf or NaN in any rank's gradients makes the all-reduced
  // loss or norm non-finite on every rank, and every rank skips the update (updated false).
  StatusOr<ZeroStepResult> step(std::vector<Tensor>& params, std::vector<Tensor> grads,
                                double local_loss, double lr, double grad_clip,
                                bool grads_reduced = false, double grad_unscale = 1.0);
  // step() in two halves, for a run whose parameters form several groups, each with its own
  // optimizer and communicator, clipped by one global norm (expert parallelism: the dense
  // weights over the world, the experts' over their expert-data-parallel group,
  // train/expert_params.h):
  //   reduce(): what step() does up to the norm: the loss over the ranks (reduce_loss; else
  //     local_loss as it is), the gradients averaged (unless grads_reduced) and unscaled, and
  //     the sum of their squares over the group. It keeps the gradients for update().
  //   update(): scales them by `clip` (clip_factor of the global norm), updates with AdamW and
  //     gathers the parameters (stages 1, 2); returns the gather's wall time.
  //   discard(): drops the kept gradients (a step skipped after reduce()).
  StatusOr<ZeroReduced> reduce(std::vector<Tensor> grads, double local_loss, bool grads_reduced,
                               double grad_unscale, bool reduce_loss);
  StatusOr<double> update(std::vector<Tensor>& params, double lr, double clip);
  void discard();

  // Stages 2, 3: elements [begin, begin + count) of this rank's averaged gradient shard, a part
  // allocated (zeros) at its first use in a step: each bucket's part when its reduction lands
  // (train/grad_sync.h), or the whole shard in step() when backward did not reduce. A later
  // call for the same part returns it (gradient accumulation). step() frees every part at its
  // end, as DeepSpeed frees its averaged gradient partitions after the update: the shard never
  // coexists with forward, and grows over backward as the full gradients are freed.
  float* grad_part(int64_t begin, int64_t count);
  // Stage 3: this rank's shard of the parameters (f32 (S), the only copy it keeps; made from
  // the params given to create()); step() updates it in place. Undefined below stage 3.
  Tensor& param_shard() { return param_shard_; }

  // Stage 0: m and v per parameter; stages 1 and 2: one flat m and v for this rank's shard.
  AdamW& adamw() { return *adamw_; }
  const FlatLayout& layout() const { return layout_; }
  const ZeroConfig& config() const { return zero_; }

 private:
  ZeroOptimizer(Device& dev, Communicator& comm, ZeroConfig zero, FlatLayout layout, int divisor)
      : dev_(dev), comm_(comm), zero_(zero), layout_(std::move(layout)), divisor_(divisor) {}
  // The gradient of a piece of this rank's shard (in grads_ or, stages 2-3, grad_parts_).
  float* held_grad(const FlatPiece& p);
  // Scales the gradients this rank updates: all of them (stage 0) or its shard's (1-3).
  void scale_held(double factor);

  Device& dev_;
  Communicator& comm_;
  ZeroConfig zero_;
  FlatLayout layout_;
  int divisor_;  // the gradients' sum over the ranks is divided by this (DataParallel::divisor)
  std::unique_ptr<AdamW> adamw_;
  std::vector<Tensor> grads_;  // between reduce() and update(): stages 0, 1's averaged gradients
  // Stages 2, 3: this rank's reduced gradient, by offset in the shard, during a step only.
  std::map<int64_t, Tensor> grad_parts_;
  Tensor param_shard_;  // stage 3: (S) this rank's parameters
};

}  // namespace lj
