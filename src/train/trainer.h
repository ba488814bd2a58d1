// The training loop behind `ljperf train`: data, gradient accumulation, LR schedule, skipped
// non-finite steps, periodic evaluation, crash-safe checkpoints and automatic resume. Output
// (console, JSONL, TensorBoard) is the caller's: the trainer reports through callbacks.
//
// Data parallel (TrainerConfig::step.data_parallel.comm set; every rank calls run_training):
//   - before anything else the ranks compare training_fingerprint() (dist/consistency.h) and
//     all refuse to start when one differs;
//   - global step s covers the next world x grad_accum micro-batches of the one global stream
//     (dist/batch_shard.h); TrainerState::data_position counts global windows, so a resumed run
//     at another world size with the same global batch reads the same data;
//   - checkpoints are sharded (train/sharded_checkpoint.h): all ranks write, rank 0 commits after
//     the barrier; resume reshards when the world size or ZeRO stage changed. A one-process
//     checkpoint resumes too, and a one-process run resumes a sharded one (load_checkpoint);
//   - a stop request (`stop`) on any rank stops all at the same step;
//   - an error in a step on one rank ends every rank (abort_all_ranks), since the others would be
//     waiting in a collective; errors every rank sees alike (validation, checkpoint writes, the
//     non-finite limit) are returned on every rank.
// The one-process path (no communicator) is unchanged: it writes one-process checkpoints.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "dist/consistency.h"
#include "io/tokens.h"
#include "train/capabilities.h"
#include "train/checkpoint.h"
#include "train/lr_schedule.h"
#include "train/train_step.h"

namespace lj {

struct TrainerConfig {
  std::string out_dir;
  TrainDevice device = TrainDevice::cpu;
  int64_t steps = 100;  // optimizer steps in total (a resumed run continues to this count)
  int64_t batch_size = 4;
  int64_t seq_len = 256;
  int64_t grad_accum = 1;  // micro-batches per rank per step
  LrSchedule lr;
  std::function<double(int64_t)> lr_fn;  // when set, replaces `lr` (a DeepSpeed scheduler)
  TrainStepConfig step;
  int64_t checkpoint_every = 100;  // 0: only at the end
  int keep_last = 3;
  int64_t val_every = 0;  // 0: no evaluation
  int64_t val_batches = 8;
  int64_t max_bad_steps = 5;  // consecutive non-finite steps before aborting
};

struct StepMetrics {
  int64_t step = 0;  // 1-based: steps completed
  double loss = 0;
  double grad_norm = 0;
  double lr = 0;
  double step_seconds = 0;
  int64_t tokens = 0;  // tokens in this step (all micro-batches of this rank)
  bool skipped = false;
  int64_t skipped_total = 0;
  // fp16 loss scaling (0 / false otherwise): the scale this step ran with, whether it
  // overflowed (skipped), overflowing steps so far, and the scale of the next step.
  double loss_scale = 0;
  bool overflow = false;
  int64_t overflow_total = 0;
  double next_loss_scale = 0;
  // On the GPU: its memory peak so far (StepEngine::device_memory_peak); 0 on the CPU.
  int64_t device_memory_peak = 0;
};

struct EvalMetrics {
  int64_t step = 0;
  double loss = 0;
  double perplexity = 0;
};

struct TrainerCallbacks {
  std::function<void(const std::string&)> info;  // one-line notices (resume, checkpoint)
  // Called once the run is validated (data, model, checkpoint to resume) and before the first
  // step: the place to open log files, so a run that fails validation writes nothing.
  std::function<Status()> on_start;
  std::function<void(const StepMetrics&)> on_step;
  std::function<void(const EvalMetrics&)> on_eval;
};

struct TrainSummary {
  int64_t steps_run = 0;  // in this process
  int64_t final_step = 0;
  bool stopped_by_signal = false;
  bool resumed = false;
  int64_t resumed_from = 0;
  int64_t overflow_steps = 0;   // fp16: steps skipped for overflow, in total (with resumes)
  double final_loss_scale = 0;  // fp16: the scale at the end
};

// What must be equal on every rank of a data-parallel run: the device, the resolved model config,
// batch, sequence length, accumulation, world size, ZeRO stage and buckets, schedule (sampled),
// AdamW, clipping, seed, steps and checkpoint cadence, output folder, the data files (path, size
// and a hash of their first and last 65,536 tokens), recompute, and the precision with its loss
// scaling.
RunFingerprint training_fingerprint(const LlamaConfig& model, const TrainerConfig& config,
                                    const TokenFile& train_data, const TokenFile* val_data);
// The part of it that one step's configuration decides (model, world size, ZeRO settings, seed,
// AdamW and clipping, compile, recompute, precision and loss scaling), added to *fp; the
// benchmark adds its own run's fields to the same.
void add_step_fingerprint(const LlamaConfig& model, const TrainStepConfig& step,
                          RunFingerprint* fp);

// `initial` (optional): starting weights (an HF model); otherwise seeded initialisation.
// `stop`: set asynchronously (SIGTERM/SIGINT); the trainer saves a checkpoint and returns.
StatusOr<TrainSummary> run_training(const LlamaConfig& model, const std::vector<Tensor>* initial,
                                    const TokenFile& train_data, const TokenFile* val_data,
                                    const TrainerConfig& config, Device& dev,
                                    const std::atomic<bool>* stop, const TrainerCallbacks& cb);

}  // namespace lj
