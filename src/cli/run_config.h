// Resolving what a run is from the command line: the model (a preset, `deepspeed/<preset>` =
// the preset with the DeepSpeed ZeRO-3 bf16 recipe, a config.json, or an HF model folder) and
// the DeepSpeed JSON, with flags winning over the file.
#pragma once

#include <optional>
#include <string>

#include "io/deepspeed_config.h"
#include "models/config.h"

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

}  // namespace lj::cli
