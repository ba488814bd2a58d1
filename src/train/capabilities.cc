#include "train/capabilities.h"

#include <algorithm>
#include <array>
#include <vector>

namespace lj {
namespace {

constexpr TrainDevice cpu = TrainDevice::cpu;
constexpr TrainDevice cuda = TrainDevice::cuda;

constexpr std::string_view kZero2Gpu =
    "stage 2 needs backward's reduce-scatter into the optimizer's shard on the GPU";
constexpr std::string_view kZero3Gpu = "stage 3 needs the graph's parameter gathers on the GPU";
constexpr std::string_view kZeroGpuHint =
    "use --zero 1 (or zero_optimization.stage 1), or --device cpu";

// Measured: tiny-moe, 2 ranks, bf16: losses 1.3e-4 off one process's by step 3 (f32: equal).
constexpr std::string_view kEpGpuWhy = "the GPU runs no mixture-of-experts layer";
constexpr std::string_view kEpGpuHint =
    "drop --expert-parallel and train mixture-of-experts models with --device cpu";

const std::array kTable = {
    Capability{cpu, "zero", "0", true, "", ""},
    Capability{cpu, "zero", "1", true, "", ""},
    Capability{cpu, "zero", "2", true, "", ""},
    Capability{cpu, "zero", "3", true, "", ""},
    Capability{cpu, "precision", "f32", true, "", ""},
    Capability{cpu, "precision", "bf16", true, "", ""},
    Capability{cpu, "precision", "fp16", true, "", ""},
    Capability{cpu, "recompute", "none", true, "", ""},
    Capability{cpu, "recompute", "selective", true, "", ""},
    Capability{cpu, "recompute", "full", true, "", ""},
    Capability{cpu, "compile", "on", true, "", ""},
    Capability{cpu, "profile", "on", true, "", ""},
    Capability{cpu, "ckpt-opt", "on", true, "", ""},
    Capability{cpu, "hf-weights", "on", true, "", ""},
    Capability{cpu, "moe", "on", true, "", ""},
    Capability{cpu, "expert-parallel", "on", true, "", ""},
    Capability{cpu, "expert-parallel", "bf16", true, "", ""},
    Capability{cpu, "expert-parallel", "fp16", true, "", ""},
    Capability{cpu, "ranks", "1", true, "", ""},
    Capability{cpu, "ranks", "several", true, "", ""},  // under mpirun, an MPI build

    Capability{cuda, "zero", "0", true, "", ""},
    Capability{cuda, "zero", "1", true, "", ""},
    Capability{cuda, "zero", "2", false, kZero2Gpu, kZeroGpuHint},
    Capability{cuda, "zero", "3", false, kZero3Gpu, kZeroGpuHint},
    Capability{cuda, "precision", "f32", true, "", ""},
    Capability{cuda, "precision", "bf16", true, "", ""},
    Capability{cuda, "precision", "fp16", false, "the GPU step has no loss scaling",
               "use --precision bf16 (no loss scaling needed), or --device cpu"},
    Capability{cuda, "recompute", "none", true, "", ""},
    Capability{cuda, "recompute", "selective", true, "", ""},
    Capability{cuda, "recompute", "full", true, "", ""},
    Capability{cuda, "compile", "on", true, "", ""},
    Capability{cuda, "profile", "on", false, "--profile times CPU kernels only",
               "drop --profile, or use --device cpu"},
    Capability{cuda, "ckpt-opt", "on", false,
               "checkpoint optimization plans the host's memory, not a GPU's",
               "choose --recompute yourself (`ljperf plan --device h100` ranks the choices for a "
               "GPU), or use --device cpu"},
    Capability{cuda, "hf-weights", "on", false, "benchmark does not load HF weights onto the GPU",
               "use a preset or config.json (benchmark trains from fresh weights), `ljperf train "
               "--device cuda`, or --device cpu"},
    Capability{cuda, "moe", "on", false,
               "the GPU has no top-k, expert sort or grouped GEMM kernels yet",
               "train mixture-of-experts models (Mixtral, Qwen3-MoE) with --device cpu"},
    Capability{cuda, "expert-parallel", "on", false, kEpGpuWhy, kEpGpuHint},
    Capability{cuda, "expert-parallel", "bf16", false, kEpGpuWhy, kEpGpuHint},
    Capability{cuda, "expert-parallel", "fp16", false, kEpGpuWhy, kEpGpuHint},
    Capability{cuda, "ranks", "1", true, "", ""},
    Capability{cuda, "ranks", "several", true, "", ""},  // one GPU per rank, NCCL
};

constexpr std::string_view kDeviceWords[] = {"the CPU", "the GPU"};

}  // namespace

const char* train_device_name(TrainDevice d) {
  return d == TrainDevice::cuda ? "cuda" : "cpu";
}

std::span<const Capability> capabilities() {
  return kTable;
}

const Capability* find_capability(TrainDevice device, std::string_view feature,
                                  std::string_view value) {
  for (const Capability& c : kTable) {
    if (c.device == device && c.feature == feature && c.value == value) return &c;
  }
  return nullptr;
}

std::string_view feature_title(std::string_view feature) {
  if (feature == "zero") return "ZeRO stage";
  if (feature == "precision") return "precision";
  if (feature == "recompute") return "recompute";
  if (feature == "compile") return "compile";
  if (feature == "profile") return "--profile";
  if (feature == "ckpt-opt") return "checkpoint optimization";
  if (feature == "hf-weights") return "HF weights in benchmark";
  if (feature == "moe") return "mixture of experts";
  if (feature == "expert-parallel") return "expert parallelism";
  if (feature == "ranks") return "ranks";
  return feature;
}

std::string supported_values(TrainDevice device, std::string_view feature) {
  std::string s;
  for (const Capability& c : kTable) {
    if (c.device != device || c.feature != feature || !c.supported) continue;
    s += (s.empty() ? "" : ", ") + std::string(c.value);
  }
  return s;
}

Status require_capability(TrainDevice device, std::string_view feature, std::string_view value) {
  const std::string where = std::string("--device ") + train_device_name(device);
  const std::string what =
      std::string(feature_title(feature)) + (value == "on" ? "" : " " + std::string(value));
  const Capability* c = find_capability(device, feature, value);
  if (c == nullptr) {
    return invalid_argument(where + ": " + what + " is not a setting ljperf knows",
                            "supported: " + supported_values(device, feature));
  }
  if (c->supported) return ok_status();
  return unimplemented(where + ": " + what + " does not run on " +
                           std::string(kDeviceWords[static_cast<int>(device)]) + ": " +
                           std::string(c->why),
                       std::string(c->hint));
}

std::string capability_summary(TrainDevice device) {
  // The device's features in the table's order, each once.
  std::vector<std::string_view> features;
  for (const Capability& c : kTable) {
    if (c.device == device &&
        std::find(features.begin(), features.end(), c.feature) == features.end())
      features.push_back(c.feature);
  }
  std::string s;
  for (const std::string_view f : features) {
    const std::string v = supported_values(device, f);
    std::string shown = v == "on" ? "yes" : v.empty() ? "no" : v;
    s += (s.empty() ? "" : "; ") + std::string(feature_title(f)) + " " + shown;
  }
  return s;
}

}  // namespace lj
