// DeepSpeed JSON configuration as users of `deepspeed` and HF's Trainer write it: `--deepspeed
// ds.json`, and the ZeRO-3 bf16 recipe that `--model deepspeed/<preset>` means. The parser
// resolves the file against the run's own settings into plain values; it trains nothing.
//
// Rules (DeepSpeed's and HF Trainer's behaviour is the authority):
// - Batch: train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x
//   world_size. Two given: the third is inferred and must divide exactly. All three: they must
//   agree. One given, DeepSpeed's defaults: train only -> accumulation 1, micro = train / world;
//   micro only -> accumulation 1; accumulation only -> micro 1. None: the run's micro batch and
//   accumulation (as if all were "auto").
// - "auto" takes the run's value where HF's Trainer fills it: the three batch keys,
//   gradient_clipping, fp16/bf16.enabled (the run's precision), optimizer.params lr / betas / eps
//   / weight_decay, scheduler.params warmup_min_lr (0), warmup_max_lr (lr), warmup_num_steps,
//   total_num_steps; and, from the model, zero_optimization.reduce_bucket_size = hidden^2,
//   stage3_prefetch_bucket_size = int(0.9 hidden^2), stage3_param_persistence_threshold =
//   10 hidden (sizes count elements). "auto" on any other key is an error: neither HF nor
//   DeepSpeed resolves it.
// - null means not given (DeepSpeed's default), as in DeepSpeed's pydantic models; so does ""
//   on a key that takes "auto" (the seed image's note: leave stage3_prefetch_bucket_size empty or
//   "auto"). describe() says which ("empty in the file: DeepSpeed default").
// - zero_optimization.stage: --zero wins over the file (RunSettings::zero_stage).
// - Flags win over the file. The caller marks a flag the user gave with RunValue::set_flag();
//   plain values are ljperf's defaults, used only for "auto". describe() names each value's origin.
// - Absent blocks: no optimizer block -> the run's AdamW settings (HF builds its own optimizer);
//   no scheduler block -> type none (the trainer keeps its own schedule); no fp16/bf16 block ->
//   fp32, as in DeepSpeed; no gradient_clipping -> 0 (off), DeepSpeed's default.
// - Every key lives in ONE table (deepspeed_config.cc) with its treatment: honoured; accepted
//   without effect; refused ("... is not supported yet" with a hint) unless it holds its harmless
//   value (false, null, {"enabled": false}, device "none"); or a block of further keys. Keys not in
//   the table are ignored and named in `warnings` (the parser prints nothing).
// - activation_checkpointing maps to ljperf's recompute flags. DeepSpeed checkpoints what the
//   model code wraps in deepspeed.checkpointing.checkpoint, which for HF models is
//   gradient_checkpointing: every decoder layer is recomputed, one checkpoint per layer. So the
//   block's presence (an object, even empty) means --recompute full --recompute-method uniform
//   --recompute-layers 1; the flags win, key by key. Its keys: cpu_checkpointing true is refused
//   (ljperf keeps checkpoints in device memory); partition_activations (splits checkpoints over
//   model-parallel ranks: one process has none), contiguous_memory_optimization, number_checkpoints
//   (only sizes the contiguous buffer; it does not choose layers), synchronize_checkpoint_boundary
//   and profile have no effect. No block: recompute is none unless the flags say otherwise.
// - Every error is one Status line "<file>: <key>: <what>" with a hint.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/adamw_config.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/zero_config.h"

namespace lj {

// A run setting: `value` is ljperf's default or the flag's value; `from_flag` says the user gave
// the flag, so it replaces the file's value. "auto" in the file takes `value` either way.
template <class T>
struct RunValue {
  T value{};
  bool from_flag = false;
  RunValue() = default;
  RunValue(T v) : value(v) {}  // NOLINT(google-explicit-constructor): a default, not a flag
  void set_flag(T v) {
    value = v;
    from_flag = true;
  }
  // The value of a command-line flag, marked as given when the user typed it.
  void assign(T v, bool given) {
    value = v;
    from_flag = given;
  }
};

// The run's own settings, from flags and ljperf's defaults (defaults follow core/adamw_config.h).
struct RunSettings {
  RunValue<int64_t> micro_batch{1};       // sequences per device per micro-step
  RunValue<int64_t> grad_accum{1};        // micro-steps per optimizer step
  int64_t world_size = 1;                 // data-parallel ranks, from the launcher (never a flag)
  int64_t hidden_size = 0;                // of the model; "auto" bucket sizes need it (0: unknown)
  RunValue<DType> precision{DType::f32};  // f32, bf16 or f16
  RunValue<double> lr{3e-4};
  RunValue<double> weight_decay{0.1};
  RunValue<double> beta1{0.9};
  RunValue<double> beta2{0.95};
  RunValue<double> eps{1e-8};
  RunValue<double> grad_clip{1.0};   // 0: off
  RunValue<int64_t> total_steps{0};  // optimizer steps in the run (0: unknown)
  RunValue<int64_t> warmup_steps{0};
  // --recompute none|selective|full, --recompute-method uniform|block, --recompute-layers N
  // (passes/remat/remat.h; the CLI checks their spelling before the file is read).
  RunValue<std::string> recompute{"none"};
  RunValue<std::string> recompute_method{"uniform"};
  RunValue<int64_t> recompute_layers{-1};  // -1: RecomputeConfig's default
  // --zero N: zero_optimization.stage (the file's, else DeepSpeed's default 0, unless the flag).
  RunValue<int64_t> zero_stage{0};
};

// fp16 loss scaling (DeepSpeed's names and defaults); used only when precision is f16.
struct DsLossScale {
  double loss_scale = 0;                // 0: dynamic; otherwise a static scale
  int64_t initial_scale_power = 16;     // dynamic scale starts at 2^this
  int64_t loss_scale_window = 1000;     // overflow-free steps before the scale doubles
  int64_t hysteresis = 2;               // overflows tolerated before the scale halves
  bool consecutive_hysteresis = false;  // refill the hysteresis on every overflow-free step
  double min_loss_scale = 1;
};

// AdamW (DeepSpeed's "AdamW", or "Adam" with adam_w_mode true: decoupled weight decay).

// A DeepSpeed learning-rate schedule (deepspeed/runtime/lr_schedules.py).
struct DsScheduler {
  enum class Type { none, warmup_lr, warmup_decay_lr, warmup_cosine_lr };
  enum class Warmup { log, linear };
  Type type = Type::none;
  Warmup warmup_type = Warmup::log;
  double warmup_min_lr = 0;         // WarmupLR, WarmupDecayLR
  double warmup_max_lr = 0;         // WarmupLR, WarmupDecayLR; WarmupCosineLR: the optimizer's lr
  int64_t warmup_num_steps = 1000;  // already raised to >= 2, as DeepSpeed does
  int64_t total_num_steps = 0;      // WarmupDecayLR, WarmupCosineLR
  double warmup_min_ratio = 0;      // WarmupCosineLR
  double cos_min_ratio = 1e-4;      // WarmupCosineLR

  // The learning rate DeepSpeed's scheduler gives when its last_batch_iteration == `iteration`
  // (-1 is the value set at construction). Needs type != none.
  double lr_at(int64_t iteration) const;
  // The engine steps the scheduler after each optimizer step, so optimizer step s (from 0) runs
  // at lr_at(s - 1): step 0 at warmup_min_lr (WarmupCosineLR: 0), as DeepSpeed does.
  double lr_for_step(int64_t step) const { return lr_at(step - 1); }
};

// The zero_optimization block: ljperf's ZeRO settings (core/zero_config.h, the one type the
// run, the planner and the collectives read) and the keys it accepts without their effect.
struct DsZero : ZeroConfig {
  int64_t sub_group_size = 1'000'000'000;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  bool allgather_partitions = true;
  bool stage3_gather_16bit_weights_on_model_save = false;
};

struct DeepSpeedConfig {
  std::string source;  // the file name, or the recipe's name
  int64_t train_batch_size = 1;
  int64_t micro_batch_per_gpu = 1;
  int64_t gradient_accumulation_steps = 1;
  int64_t world_size = 1;
  DType precision = DType::f32;
  DsLossScale loss_scale;
  double gradient_clipping = 0;                           // max global gradient norm; 0: off
  AdamWConfig optimizer = AdamWConfig::torch_defaults();  // the optimizer block's AdamW
  DsScheduler scheduler;
  DsZero zero;
  // Recompute, with the flags' meanings (passes/remat/remat.h), after flags won over the file.
  std::string recompute = "none";  // none, selective or full
  std::string recompute_method = "uniform";
  int64_t recompute_layers = -1;  // -1: RecomputeConfig's default

  // One line per resolved value: key, value, and where it came from (file, auto, flag,
  // DeepSpeed default, inferred, run).
  struct Line {
    std::string key, value, origin;
  };
  std::vector<Line> resolved;
  std::vector<std::string> no_effect_keys;  // accepted without effect
  std::vector<std::string> warnings;        // unknown keys and doubtful values; not printed here

  // Every resolved value, one per line, for printing at start.
  std::string describe() const;
};

// Hostile files: a DeepSpeed JSON larger than this is refused before parsing (real ones ~2 KiB).
constexpr uint64_t kMaxDeepSpeedConfigBytes = 16ull << 20;

StatusOr<DeepSpeedConfig> parse_deepspeed_config(const std::string& json_text,
                                                 const std::string& source, const RunSettings& run);
StatusOr<DeepSpeedConfig> load_deepspeed_config(const std::string& path, const RunSettings& run);

// The ZeRO-3 bf16 recipe behind `--model deepspeed/<preset>`: HF's ds_config_zero3.json with
// "auto" values, bf16 on and offload off. examples/deepspeed/zero3_bf16.json holds the same text
// (a unit test checks).
std::string_view deepspeed_zero3_bf16_recipe();

}  // namespace lj
