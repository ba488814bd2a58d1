// What the training loop (train/trainer.h) needs of a training step, whatever runs it: the CPU's
// TrainStep (train/train_step.h) or the GPU's (train/gpu_train.h). The loop itself (data, the
// schedule, checkpoints and resume, evaluation, stop requests, the ranks' agreement) is written
// once against this.
//
// The training state crosses to the host for checkpoints and resume only: pull_state() makes
// host_params(), host_m() and host_v() hold it (the CPU's are the state itself; ZeRO-3 gathers the
// whole parameters; the GPU's are copies from the device), push_state() ends that (the CPU drops
// ZeRO-3's whole parameters; the GPU uploads the copies when they were changed, e.g. by a resume).
// The host form is the CPU's, so checkpoints are the same files on both: the parameters whole and
// f32, m and v per parameter (one process, ZeRO 0) or as this rank's flat shard (ZeRO 1, 2).
#pragma once

#include <string>
#include <vector>

#include "io/tokens.h"
#include "models/llama.h"
#include "runtime/tensor.h"
#include "train/eval.h"
#include "train/loss_scaler.h"

namespace lj {

// One micro-batch: tokens and targets, (B, T) i32 host tensors.
struct MicroBatch {
  Tensor tokens, targets;
};

// What one optimizer step gives (train/train_step.h fills it on the CPU).
struct StepResult {
  double loss = 0;
  double grad_norm = 0;  // before clipping
  bool updated = true;   // false: non-finite loss or gradient, the update was skipped
  // Data parallel: wall time of the step's collectives (backward's bucket reductions from start
  // to completion, train/grad_sync.h, plus the optimizer's blocking ones), and the part of it
  // the step spent waiting on them or packing for them (not hidden behind compute).
  double comm_seconds = 0;
  double comm_exposed_seconds = 0;
  // Wall time of the optimizer phase on the host: gradient norm, clipping and the AdamW update
  // (ZeRO: its whole step, collectives included). Not executor kernels, so the profile adds it.
  double optimizer_seconds = 0;
  // Loss scaling (fp16): the scale this step's backward ran with, and whether its gradients
  // overflowed (the update was skipped; the scaler has adjusted the scale for the next step).
  double loss_scale = 1;
  bool overflow = false;
};

class StepEngine {
 public:
  virtual ~StepEngine() = default;
  virtual const std::vector<ParamSpec>& param_specs() const = 0;
  // What the compiler did (compiled runs), "" otherwise.
  virtual std::string compile_log() const = 0;
  // One optimizer step over this rank's micro-batches at learning rate `lr`: the loss and
  // gradients are the means over them (and over the ranks).
  virtual StatusOr<StepResult> step(const std::vector<MicroBatch>& micro_batches, double lr) = 0;
  // The state on the host (see above). A collective at ZeRO stage 3 (every rank calls it).
  virtual Status pull_state() = 0;
  virtual std::vector<Tensor>& host_params() = 0;
  virtual std::vector<Tensor>& host_m() = 0;
  virtual std::vector<Tensor>& host_v() = 0;
  // `changed`: the host state was written and becomes the run's. The host copies are then not to
  // be used until the next pull_state().
  virtual Status push_state(bool changed) = 0;
  // AdamW's step count (its bias correction), from a checkpoint.
  virtual void set_optimizer_steps(int64_t steps) = 0;
  // fp16 loss scaling; a scale of 1 that never changes otherwise.
  virtual LossScaler& loss_scaler() = 0;
  // Mean loss of the current weights on `data` (train/eval.h's windows), in the run's precision.
  // A collective at ZeRO stage 3.
  virtual StatusOr<EvalResult> evaluate(const TokenFile& data, const EvalOptions& options) = 0;
  // The device's memory peak so far in bytes (the GPU's allocator and arena); 0 on the host,
  // whose figure is the process's peak RSS.
  virtual int64_t device_memory_peak() const { return 0; }
};

}  // namespace lj
