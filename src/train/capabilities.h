// What each device trains with: the one table of ZeRO stages, precisions, recompute, compile,
// profiling, checkpoint optimization, weights, mixture of experts and ranks per device. Every
// refusal of an unsupported setting (train/gpu_step_check.cc, cli/), every --help text that lists
// what a device takes and `ljperf doctor` read it, so no message can disagree with what runs. A
// test walks it: each supported entry runs, each unsupported one is refused with the table's words
// (tests/unit/capabilities_test.cc for the GPU's host-side checks, tests/e2e/capabilities_test.sh
// for the CPU's runs).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace lj {

// Where the steps run: the CPU (train/train_step.h) or one GPU per rank (train/gpu_train.h).
// The rest of the loop, and the checkpoints, are the same for both.
enum class TrainDevice { cpu, cuda };
const char* train_device_name(TrainDevice d);  // "cpu", "cuda"

struct Capability {
  TrainDevice device;
  std::string_view feature;  // "zero", "precision", "recompute", "compile", "profile", ...
  std::string_view value;    // the setting: "3", "fp16", "full", "on", "several" (ranks)
  bool supported;
  std::string_view why;   // unsupported: what the device lacks, in a user's words
  std::string_view hint;  // unsupported: what to run instead
};

// Every entry, device by device, feature by feature.
std::span<const Capability> capabilities();
// The entry for (device, feature, value); null when the table has none (a value no device takes).
const Capability* find_capability(TrainDevice device, std::string_view feature,
                                  std::string_view value);
// The feature's name in messages: "ZeRO stage", "precision", "checkpoint optimization", ...
std::string_view feature_title(std::string_view feature);
// OK when supported; else unimplemented("--device cuda: ZeRO stage 2 does not run on the GPU:
// <why>", <hint>). A value the table does not list is invalid_argument, naming the supported ones.
Status require_capability(TrainDevice device, std::string_view feature, std::string_view value);
// The supported values of a feature, for help texts and doctor: "0, 1" or "f32, bf16".
std::string supported_values(TrainDevice device, std::string_view feature);
// One line per device for doctor and --help: "cuda: ZeRO 0, 1; precision f32, bf16; ...".
std::string capability_summary(TrainDevice device);

}  // namespace lj
