#include "cli/run_config.h"

#include <cstdlib>

#include <filesystem>

#include "models/hf_config.h"

namespace lj::cli {

StatusOr<ModelRef> resolve_model(const std::string& name) {
  namespace fs = std::filesystem;
  ModelRef m;
  std::string preset = name;
  if (name.rfind("deepspeed/", 0) == 0) {
    preset = name.substr(10);
    m.recipe = "deepspeed/zero3_bf16";
  }
  if (fs::is_directory(preset)) {
    m.weights_dir = preset;
    LJ_ASSIGN_OR_RETURN(m.config, load_hf_config(preset + "/config.json"));
  } else if (preset.ends_with(".json")) {
    LJ_ASSIGN_OR_RETURN(m.config, load_hf_config(preset));
  } else {
    LJ_ASSIGN_OR_RETURN(m.config, llama_preset(preset));
  }
  if (!m.recipe.empty()) m.config.name = name;
  return m;
}

bool compile_requested(bool flag) {
  if (flag) return true;
  const char* env = std::getenv("LJ_COMPILE");
  if (env == nullptr) return false;
  const std::string v = env;
  return v == "1" || v == "true" || v == "TRUE" || v == "True";
}

namespace {

// What ljperf cannot honour yet is an error, not a silent difference from DeepSpeed.
Status check_supported(const DeepSpeedConfig& c) {
  if (c.recompute != "none") {
    return unimplemented(c.source + ": activation_checkpointing (recompute) is not supported yet",
                         "remove the activation_checkpointing block; every activation is kept");
  }
  if (c.world_size != 1) {
    return unimplemented(
        c.source + ": world size " + std::to_string(c.world_size) + " needs the MPI backend",
        "run one process");
  }
  return ok_status();
}

}  // namespace

StatusOr<std::optional<DeepSpeedConfig>> resolve_deepspeed(const std::string& file,
                                                           const ModelRef& model, RunSettings run) {
  run.hidden_size = model.config.hidden_size;
  if (!file.empty()) {
    LJ_ASSIGN_OR_RETURN(DeepSpeedConfig c, load_deepspeed_config(file, run));
    LJ_RETURN_IF_ERROR(check_supported(c));
    return std::optional<DeepSpeedConfig>(std::move(c));
  }
  if (!model.recipe.empty()) {
    LJ_ASSIGN_OR_RETURN(
        DeepSpeedConfig c,
        parse_deepspeed_config(std::string(deepspeed_zero3_bf16_recipe()), model.recipe, run));
    LJ_RETURN_IF_ERROR(check_supported(c));
    return std::optional<DeepSpeedConfig>(std::move(c));
  }
  return std::optional<DeepSpeedConfig>();
}

}  // namespace lj::cli
