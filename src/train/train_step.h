// One training step of a Llama model on the eager executor: forward and backward in one joint
// graph, global-norm clipping, AdamW. Owns the graph, the parameters and the optimizer state.
#pragma once

#include <memory>
#include <vector>

#include "graph/ir.h"
#include "models/llama.h"
#include "passes/pass.h"
#include "passes/pipeline/train_graph.h"
#include "runtime/executor.h"
#include "runtime/fused_kernels.h"
#include "train/adamw.h"
#include "train/expert_params.h"
#include "train/expert_sync.h"
#include "train/grad_sync.h"
#include "train/loss_scaler.h"
#include "train/step_engine.h"
#include "train/zero_optimizer.h"

namespace lj {

struct TrainStepConfig {
  AdamWConfig adamw;
  double grad_clip = 1.0;  // 0: no clipping
  uint64_t seed = 1234;    // parameter initialisation
  GraphOptions graph;
  bool profile = false;  // time every kernel (Executor::profile())
  // With profile: kernels and the optimizer timed in process CPU time / threads, not wall time.
  bool profile_cpu = false;
  // Compiled only: values live at the static memory plan's offsets. false runs the compiled
  // graph on the caching allocator instead (to check the plan against it).
  bool static_memory_plan = true;
  // Compile only: where fused kernels are built and cached; null: a cache from the environment
  // (codegen/kernel_cache.h: LJ_KERNEL_CACHE, LJ_CXX).
  std::shared_ptr<codegen::KernelCache> kernel_cache;
  // Several processes (dist/zero.h): gradients averaged across data_parallel.comm's ranks and
  // ZeRO stage 0-3 sharding. Null comm: one process, exactly as without it. Every rank passes the
  // same config and seed (parameters start equal everywhere) and its own micro-batches
  // (dist/batch_shard.h); step() then returns the loss and gradient norm over all ranks.
  DataParallel data_parallel;
  // How communicators the step makes for itself behave (the GPU step's NCCL one: the timeout of
  // --comm-timeout, as data_parallel.comm's).
  CommOptions comm_options;
  // fp16: loss scaling (train/loss_scaler.h). Enabled needs graph.loss_scaling.
  LossScaleConfig loss_scale;
};

// The gradient collectives the joint graph carries for `dp` (passes/collectives/grad_sync.h):
// none without a communicator.
GradSyncOptions grad_sync_options(const DataParallel& dp);
// The graph's expert parallelism for `dp` (GraphOptions::experts): size 1 without an
// expert-parallel group.
ExpertShard expert_shard(const DataParallel& dp);

// What one forward+backward gives.
struct ForwardBackward {
  double loss = 0;
  Tensor logits;              // (B, T, V) when TrainStepConfig::output_logits
  std::vector<Tensor> grads;  // one per "grad:" output (the graph's parameters, in order)
};

class TrainStep final : public StepEngine {
 public:
  static StatusOr<std::unique_ptr<TrainStep>> create(const LlamaConfig& model,
                                                     TrainStepConfig config, Device& dev);
  // The same with the joint graph already built (plan/ dry-ran it first): `built.options` must
  // be config.graph's, and the graph is not built again.
  static StatusOr<std::unique_ptr<TrainStep>> create(const LlamaConfig& model,
                                                     TrainStepConfig config, Device& dev,
                                                     TrainGraph built);

  // tokens, targets: (B, T) i32. Runs forward+backward, clips, updates with learning rate lr.
  StatusOr<StepResult> step(const Tensor& tokens, const Tensor& targets, double lr);
  // Gradient accumulation over micro-batches (tokens, targets): the loss and gradients are the
  // means over the micro-batches, as HF's Trainer computes them. When the loss or the gradient
  // norm is not finite, nothing is updated and `updated` is false.
  using Batch = MicroBatch;
  StatusOr<StepResult> step(const std::vector<Batch>& micro_batches, double lr) override;
  // Forward+backward only (for tests and gradient accumulation). With loss scaling the
  // gradients are those of loss x loss_scaler().scale(); the loss is unscaled.
  StatusOr<ForwardBackward> forward_backward(const Tensor& tokens, const Tensor& targets);

  const Graph& graph() const { return graph_; }
  // Expert parallelism: the graph's exchange nodes bound to the expert-parallel group (0 without).
  int64_t expert_exchange_nodes() const { return expert_sync_ ? expert_sync_->nodes() : 0; }
  const LlamaConfig& model() const { return model_; }
  // The whole parameters. ZeRO stage 3 keeps only its shard: params() is empty there between
  // gather_params() (a collective: every rank calls it) and scatter_params(). A caller may change
  // them: the 16-bit copies (low_params()) are then written again before the next forward.
  std::vector<Tensor>& params() {
    low_fresh_ = false;
    return params_;
  }
  // Mixed precision (GraphOptions::low_weight_copies): the 16-bit copy of each parameter the
  // graph reads (its input "low:<name>"), in param_specs() order, undefined where the graph
  // reads none (a parameter only read in f32, e.g. the embedding table). Empty without them.
  const std::vector<Tensor>& low_params() const { return low_params_; }
  // Stage 3: all-gathers the whole parameters into params() from every rank's shard; below
  // stage 3, nothing (they are there).
  Status gather_params();
  // Stage 3: takes this rank's shard from params() (changed, e.g. by a resume) and drops them;
  // below stage 3, nothing.
  void scatter_params();
  // The model's parameters (checkpoints hold these). The graph's are this rank's: under expert
  // parallelism its experts' weights are its E / N experts (local_specs()).
  const std::vector<ParamSpec>& param_specs() const override { return whole_specs_; }
  const std::vector<ParamSpec>& local_specs() const { return specs_; }
  // Trains `owner`'s parameters and AdamW states from now on (shared storage; this step's own
  // are released): several steps of one model built with other graph options (recompute,
  // compile) train one set of weights in one process, as `ljperf plan --measure` times them in
  // turns. One process only (no ZeRO), and the same 16-bit weight copies (precision) as `owner`.
  Status share_state_with(TrainStep& owner);
  Executor& executor() { return *executor_; }
  // What the compiler did (GraphOptions::compile): passes with timings, compiled regions and
  // graph breaks. Empty when compile is off.
  std::string compile_log() const override;
  // With ZeRO stage 1 or 2, its m and v are one flat tensor: this rank's shard.
  AdamW& optimizer() { return zero_ ? zero_->adamw() : *adamw_; }
  // Compile only: what building the fused kernels did (once, in create()).
  const FusedKernelReport& kernel_report() const { return kernel_report_; }
  // fp16 loss scaling (TrainStepConfig::loss_scale); a scale of 1 that never changes otherwise.
  LossScaler& loss_scaler() override { return scaler_; }
  // StepEngine: the host state is the state itself (ZeRO-3: gather_params / scatter_params).
  // Expert parallelism: the whole model's, gathered (train/expert_params.h), as a run without
  // it holds the state at the same stage.
  Status pull_state() override;
  std::vector<Tensor>& host_params() override;
  std::vector<Tensor>& host_m() override;
  std::vector<Tensor>& host_v() override;
  Status push_state(bool changed) override;
  void set_optimizer_steps(int64_t steps) override;
  StatusOr<EvalResult> evaluate(const TokenFile& data, const EvalOptions& options) override;

 private:
  TrainStep(Device& dev) : dev_(dev) {}
  Status rope_for(int64_t seq_len);
  // Expert parallelism: moves the experts' gradients out of `grads` (one per "grad:" output)
  // and returns them, in order.
  std::vector<Tensor> take_expert_grads(std::vector<Tensor>& grads) const;
  // Several ranks: the optimizer step over the world's ZeRO (and the experts' group).
  StatusOr<ZeroStepResult> zero_step(std::vector<Tensor> grads, std::vector<Tensor> expert_grads,
                                     double local_loss, double lr, bool grads_reduced,
                                     double grad_unscale);

  Device& dev_;
  LlamaConfig model_;
  TrainStepConfig config_;
  Graph graph_;
  PassReport passes_;
  LlamaGraph ids_;
  std::vector<ParamSpec> specs_;        // the graph's: this rank's experts only
  std::vector<ParamSpec> whole_specs_;  // the model's
  ParamSplit split_;                    // dense and expert parameters in specs_ (all dense without)
  std::vector<Tensor> params_;
  std::vector<Tensor> low_params_;  // 16-bit copies, see low_params()
  std::vector<size_t> low_inputs_;  // per "low:" graph input, in input order: its parameter
  bool low_fresh_ = false;          // low_params_ equal the casts of params_
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<AdamW> adamw_;             // one process
  std::unique_ptr<ZeroOptimizer> zero_;      // TrainStepConfig::data_parallel.comm set
  std::unique_ptr<GradSync> grad_sync_;      // the graph's gradient collectives, bound
  std::unique_ptr<ExpertSync> expert_sync_;  // the sparse layers' exchange, bound
  // Expert parallelism: the experts' weights (held whole at every stage; shared with params_
  // below stage 3), their group's optimizer, the "grad:" outputs that are theirs, and the whole
  // state between pull_state() and push_state().
  std::vector<Tensor> expert_params_;
  std::unique_ptr<ExpertParams> experts_;
  std::vector<bool> grad_is_expert_;
  std::vector<Tensor> whole_params_, whole_m_, whole_v_;
  size_t num_grad_outputs_ = 0;  // "grad:" outputs (none at stage 2 with collectives)
  Tensor rope_cos_, rope_sin_;
  LossScaler scaler_{LossScaleConfig{}};
  Tensor loss_scale_;            // () f32: the graph's loss_scale input, when it has one
  bool sharded_params_ = false;  // ZeRO stage 3
  std::shared_ptr<codegen::KernelCache> kernel_cache_;
  FusedKernelReport kernel_report_;
};

// The rope.cos / rope.sin inputs (T, D) for a sequence length; an error past the model's
// max_position_embeddings.
Status make_rope_inputs(Device& dev, const LlamaConfig& c, int64_t seq_len, Tensor* cos,
                        Tensor* sin);

// The same values for rank `rank`'s shard of the flat vector (dist/zero.h) only: f32 (S), the
// padding zero. Whole parameters are never made (ZeRO-3). `in_specs`: the layout's parameters
// are these of `specs` (empty: all of them, in order).
Tensor init_llama_shard(Device& dev, const std::vector<ParamSpec>& specs, double std, uint64_t seed,
                        const FlatLayout& layout, int rank,
                        const std::vector<size_t>& in_specs = {});

// HF's initialisation: normal(0, initializer_range) for linear and embedding weights, ones for
// norms; stream `seed + parameter index`, counter-based (core/random.h), from the element
// ParamSpec::expert_offset (a rank's experts are their slice of the whole tensor).
std::vector<Tensor> init_llama_params(Device& dev, const std::vector<ParamSpec>& specs, double std,
                                      uint64_t seed);
// Parameter `i` of `specs` alone.
Tensor init_llama_param(Device& dev, const std::vector<ParamSpec>& specs, size_t i, double std,
                        uint64_t seed);

}  // namespace lj
