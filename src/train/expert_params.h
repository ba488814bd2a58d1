// Expert parallelism's weights (--expert-parallel N; train/expert_parallel.h makes the groups):
// each rank holds only its E / N experts of every sparse layer (models/llama.h
// ParamSpec::is_expert), and they are data-parallel over its expert-data-parallel group
// (DataParallel::expert_data: the W / N ranks that hold the same experts), as DeepSpeed-MoE keeps
// them.
//   - Gradients: the world's collectives in the graph skip the experts
//     (passes/collectives/grad_sync.h skip_experts), so their gradients leave backward as
//     "grad:" outputs. They are accumulated over the micro-batches as one process accumulates
//     them, then averaged over the group after backward and divided by the world's size W (an
//     expert's gradient on its rank already sums the rows its N token-sharing ranks routed to
//     it): the same value the world's all-reduce gave when every rank held every expert.
//   - ZeRO over the group: optimizer states sharded at stages 1-3, gradients at 2-3. At stage 3
//     the experts' weights stay whole on each rank of the group (the rank's E / N experts),
//     as at stage 2: the graph's parameter gathers are the dense weights' only.
//   - One global norm clips both groups: the dense weights' sum of squares (over the world) plus
//     the experts' (each group's summed over the expert-parallel group, whose ranks hold the
//     other experts).
//   - Checkpoints and evaluation see the whole model. whole_*() gathers the experts over the
//     expert-parallel group into the host form a run without expert parallelism holds at the
//     same ZeRO stage (train/step_engine.h): the whole weights, and AdamW's m and v per
//     parameter (stage 0) or as this rank's shard of the whole flat vector (1-3), so the files
//     are the ones that run writes and resume at any expert-parallel size. set_whole_*() takes
//     the rank's part back. The host form is transient, but whole: every rank holds the whole
//     model's m and v while it converts them (8 bytes per parameter, at checkpoints and resumes
//     only).
#pragma once

#include <memory>
#include <vector>

#include "dist/zero.h"
#include "models/llama.h"
#include "train/zero_optimizer.h"

namespace lj {

// Whether `dp` shards the experts: an expert-parallel group of more than one rank.
bool shards_experts(const DataParallel& dp);

// Which of a rank's parameters (in spec order) are the experts' weights, and which the dense
// ones; the same positions in the whole model's specs.
struct ParamSplit {
  std::vector<size_t> dense, experts;
  static ParamSplit of(const std::vector<ParamSpec>& specs);
  // The tensors at `which` (shared storage).
  static std::vector<Tensor> pick(const std::vector<Tensor>& all, const std::vector<size_t>& which);
};

// The experts' own data-parallel group: their optimizer over DataParallel::expert_data, and the
// conversions to and from the whole model.
class ExpertParams {
 public:
  // dp: the run's (shards_experts(dp)); `local`, `whole`: the rank's and the model's specs;
  // `experts`: the rank's expert weights (f32, in spec order), which the optimizer updates.
  static StatusOr<std::unique_ptr<ExpertParams>> create(Device& dev, const DataParallel& dp,
                                                        std::vector<ParamSpec> local,
                                                        std::vector<ParamSpec> whole,
                                                        const std::vector<Tensor>& experts,
                                                        AdamWConfig adamw);

  const ParamSplit& split() const { return split_; }
  // The experts' averaged gradients (reduce) and their global sum of squares: over their
  // group, then over the expert-parallel group. `grads`: the rank's expert gradients, the mean
  // over its micro-batches.
  StatusOr<ZeroReduced> reduce(std::vector<Tensor> grads, double grad_unscale);
  // Clip and update the rank's expert weights (`experts`, as given to create()).
  StatusOr<double> update(std::vector<Tensor>& experts, double lr, double clip);
  void discard() { zero_->discard(); }
  AdamW& adamw() { return zero_->adamw(); }

  // The whole model's tensors from the rank's `local` ones (spec order): the dense ones shared,
  // each expert tensor all-gathered over the expert-parallel group (rank p holds experts
  // [p L, (p + 1) L)). A collective over that group.
  StatusOr<std::vector<Tensor>> whole_params(Device& dev, const std::vector<Tensor>& local);
  // Copies the rank's experts out of whole tensors into `local`'s expert tensors (the dense ones
  // are copied too when they do not share storage).
  void set_local_params(const std::vector<Tensor>& whole, std::vector<Tensor>& local) const;
  // AdamW's m (or v) of the whole model in the host form of stage `stage` over the world:
  // `dense`: the dense group's (ZeroOptimizer over the world: per dense parameter at stage 0,
  // its flat shard at 1-3), the experts' from this object. Collectives over the world, the
  // expert-data-parallel and the expert-parallel groups.
  StatusOr<std::vector<Tensor>> whole_moments(Device& dev, const FlatLayout& dense_layout,
                                              const std::vector<Tensor>& dense, bool v);
  // The inverse: the host form `whole` into the dense group's states `dense` and the experts'.
  Status set_moments(Device& dev, const FlatLayout& dense_layout, const std::vector<Tensor>& whole,
                     std::vector<Tensor>& dense, bool v);

 private:
  ExpertParams(const DataParallel& dp, std::vector<ParamSpec> local, std::vector<ParamSpec> whole)
      : dp_(dp), local_(std::move(local)), whole_(std::move(whole)) {}
  // Per parameter whole m (or v) of every parameter, from both groups' states.
  StatusOr<std::vector<Tensor>> per_param_moments(Device& dev, const FlatLayout& dense_layout,
                                                  const std::vector<Tensor>& dense, bool v);

  DataParallel dp_;  // the world's; dp_.experts and dp_.expert_data are the groups
  std::vector<ParamSpec> local_, whole_;
  ParamSplit split_;
  std::unique_ptr<ZeroOptimizer> zero_;  // over dp_.expert_data, dividing by the world's size
};

}  // namespace lj
