// Resolving what a run is from the command line: the model (a preset, `deepspeed/<preset>` =
// the preset with the DeepSpeed ZeRO-3 bf16 recipe, a config.json, or an HF model folder) and
// the DeepSpeed JSON, with flags winning over the file; what is recomputed.
#pragma once

#include <optional>
#include <string>

#include "io/deepspeed_config.h"
#include "models/config.h"
#include "passes/remat/remat.h"
#include "train/train_step.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace lj::cli {

struct ModelRef {
  LlamaConfig config;
  std::string weights_dir;  // an HF folder to load weights from ("" = initialise)
  std::string recipe;       // "deepspeed/zero3_bf16" when the name asked for it
};

StatusOr<ModelRef> resolve_model(const std::string& name);

// --compile, or LJ_COMPILE=1 / true in the environment (the seed image's switch).
bool compile_requested(bool flag);

// DeepSpeed settings from --deepspeed FILE, else the model's recipe, else none; `run` holds
// the flags (RunValue::set_flag for each flag the user gave) and ljperf's defaults.
StatusOr<std::optional<DeepSpeedConfig>> resolve_deepspeed(const std::string& file,
                                                           const ModelRef& model, RunSettings run);

// What one training step runs with, as benchmark and train hold it after flags (and, with
// apply_deepspeed, a DeepSpeed config) are resolved.
struct StepSettings {
  int64_t micro_batch = 1;
  int64_t grad_accum = 1;
  DType precision = DType::f32;
  TrainStepConfig step;  // grad_clip, AdamW, the graph options
};
// The one mapping from a resolved DeepSpeed config to a run (benchmark, train; plan reads its
// micro-batch): micro-batch, gradient accumulation, precision, clipping and AdamW's settings.
// The flags already won inside `ds` (resolve_deepspeed).
void apply_deepspeed(const DeepSpeedConfig& ds, StepSettings* s);
// The step's settings, taken in one place for benchmark and train: the DeepSpeed config's when
// there is one (the flags already won inside it), else the flags and ljperf's defaults in `run`;
// then the precision's graph (apply_precision).
StepSettings step_settings(const RunSettings& run, const std::optional<DeepSpeedConfig>& ds);
// --precision: f32 (fp32, float32), bf16 (bfloat16) or f16 (fp16, float16); false otherwise.
bool parse_precision(const std::string& name, DType* out);
// The step's graph and loss scaling for s->precision: bf16 and f16 run the autocast pass (f32
// master weights); f16 adds loss scaling (the graph's loss_scale input and the scaler, with the
// DeepSpeed fp16 block's settings that apply_deepspeed copied, else DeepSpeed's defaults).
void apply_precision(StepSettings* s);
// One line for the log: what runs in that precision (nothing for f32), with oneDNN's ISA and,
// for f16, the GEMM path (oneDNN f16 where this build has it, else f32 on f16 storage).
std::string precision_line(const StepSettings& s, bool checkpoints);

// Data parallelism of a run (benchmark; train when it runs under mpirun): the launcher's world
// size and rank, ZeRO stage and bucket sizes. Stage: --zero, else the DeepSpeed JSON's
// zero_optimization.stage (the flag already won inside `ds`), else 0. Buckets: the DeepSpeed
// JSON's (HF's "auto" rules: reduce_bucket_size = hidden^2), else DeepSpeed's code defaults
// (5e8 elements each). Each value keeps where it came from, for describe().
struct DataParallelSettings {
  int world_size = 1;
  int rank = 0;
  std::string backend = "self";  // the communicator's ("self", "mpi")
  ZeroConfig zero;
  std::string stage_origin, reduce_bucket_origin, allgather_bucket_origin, overlap_origin;
  std::string stage3_origin;  // of the stage3_* values (one origin: they come together)
  // One line per resolved value with its origin, for printing at start ("data parallel: ...").
  std::string describe() const;
};
// `run.zero_stage` holds --zero (marked as given); `ds` the resolved DeepSpeed JSON, if any.
DataParallelSettings resolve_data_parallel(const RunSettings& run,
                                           const std::optional<DeepSpeedConfig>& ds, int world_size,
                                           int rank, const std::string& backend);
// Invalid ZeRO settings (a stage outside 0-3, bucket sizes below 1); what a device runs is
// train/capabilities.h's.
Status check_zero_supported(const ZeroConfig& zero);
// The ZeRO stages each device runs, from train/capabilities.h: "cpu: 0, 1, 2, 3; cuda: 0, 1".
std::string zero_stages_text();
// --zero N on a command that trains (benchmark; train); -1 when not given.
void add_zero_flag(CLI::App* sub, int* zero);
// --comm-timeout SECONDS on a command that runs under mpirun (benchmark; train): CommOptions::
// timeout_seconds, the time a collective may wait before the job ends. `*seconds` holds the
// default (600, PyTorch's) when not given.
void add_comm_timeout_flag(CLI::App* sub, double* seconds);

// --recompute none|selective|full, --recompute-layers N, --recompute-method uniform|block, with
// Megatron's meanings (passes/remat/remat.h), as typed.
struct RecomputeFlags {
  std::string policy = "none";
  std::string method = "uniform";
  int64_t layers = -1;  // -1: RecomputeConfig's default (block: all layers; uniform: 1)
  CLI::Option* policy_flag = nullptr;
  CLI::Option* method_flag = nullptr;
  CLI::Option* layers_flag = nullptr;
};
void add_recompute_flags(CLI::App* sub, RecomputeFlags* f);
// The two optimizations, as benchmark and train take them: --compile, --ckpt-opt with
// --memory-limit, and the recompute flags (add_recompute_flags).
void add_optimization_flags(CLI::App* sub, bool* compile, bool* ckpt_opt, std::string* memory_limit,
                            RecomputeFlags* recompute);
// Checks the flags' spelling and puts them into `run` (marked as given where the user typed
// them), before a DeepSpeed file is resolved against them.
Status apply_recompute_flags(const RecomputeFlags& f, RunSettings* run);
// What is recomputed: the DeepSpeed file's resolution when there is one (the flags already won
// inside it), else the flags; checked against the model's number of layers.
StatusOr<RecomputeConfig> resolve_recompute(const RunSettings& run,
                                            const std::optional<DeepSpeedConfig>& ds,
                                            const LlamaConfig& model);

}  // namespace lj::cli
