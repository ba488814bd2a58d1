// Internal to the DeepSpeed config reader: the file's values before resolution (Raw), the one
// table of keys with their treatment (KeySpec, deepspeed_keys.cc), and the walk that fills Raw
// from the JSON text. deepspeed_config.cc resolves Raw against the run's settings.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/status.h"

namespace lj::deepspeed_detail {

// A value as the file gives it, before resolution.
template <class T>
struct FileValue {
  bool present = false;  // given, "auto" included
  bool is_auto = false;
  T value{};
  // Not given although the key is there: "null", or "empty" ("" where "auto" is allowed, as the
  // seed image's note allows for stage3_prefetch_bucket_size); "" when the key is absent.
  const char* unset_as = "";
};

struct KeySpec;

// Everything the walk reads from the file.
struct Raw {
  FileValue<int64_t> train_batch, micro_batch, grad_accum;
  FileValue<double> grad_clip;
  FileValue<bool> fp16_enabled, bf16_enabled;
  FileValue<double> loss_scale, min_loss_scale;
  FileValue<int64_t> initial_scale_power, loss_scale_window, hysteresis;
  FileValue<bool> consecutive_hysteresis;
  FileValue<std::string> optimizer_type;
  FileValue<double> lr, eps, weight_decay;
  FileValue<std::vector<double>> betas;
  FileValue<bool> adam_w_mode;
  FileValue<std::string> scheduler_type, warmup_type;
  FileValue<double> warmup_min_lr, warmup_max_lr, warmup_min_ratio, cos_min_ratio;
  FileValue<int64_t> warmup_num_steps, total_num_steps;
  FileValue<int64_t> stage, reduce_bucket, allgather_bucket, prefetch_bucket, persistence, max_live,
      max_reuse, sub_group;
  FileValue<bool> overlap_comm, contiguous_gradients, reduce_scatter, allgather_partitions,
      gather_16bit;
  FileValue<std::string> offload_optimizer_device, offload_param_device;

  std::set<std::string> blocks;                              // scopes of the blocks present
  std::vector<std::pair<const KeySpec*, std::string>> seen;  // honoured keys and their paths
  std::vector<std::string> no_effect, warnings;
};

using Target = std::variant<std::monostate, FileValue<int64_t> Raw::*, FileValue<double> Raw::*,
                            FileValue<bool> Raw::*, FileValue<std::string> Raw::*,
                            FileValue<std::vector<double>> Raw::*>;

enum class Treat { honoured, no_effect, refused, block };

struct KeySpec {
  const char* scope;  // "" for the top level, else the block's scope ("zero_optimization", ...)
  const char* key;
  Treat treat;
  Target target;                   // honoured: where the value goes, and its type
  bool auto_ok = false;            // honoured: HF's Trainer (or ljperf) resolves "auto"
  const char* detail = "";         // block: its scope; refused: the hint; no_effect: why;
                                   // scheduler.params: the scheduler types that read the key
  const char* inactive = "false";  // refused: the JSON value that asks for nothing
};

// The key `key` in the block whose scope is `scope` ("" for the top level), or null.
const KeySpec* find_key(const std::string& scope, const std::string& key);

// "<src>: <path>: <what>" with a hint.
Status key_error(const std::string& src, const std::string& path, const std::string& what,
                 const std::string& hint);

// Parses `text` and walks it against the key table into `raw`: wrong types, "auto" where it is
// not resolved and refused keys are errors; unknown keys become warnings.
Status read_deepspeed_json(const std::string& text, const std::string& src, Raw* raw);

}  // namespace lj::deepspeed_detail
