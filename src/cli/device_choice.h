// `--device auto|cpu|cuda` of benchmark and train: the one rule for which backend a run uses.
// auto (the default) is cuda when this ljperf was built with CUDA, a GPU is visible and the
// CUDA executor exists, else cpu. An explicit cuda that cannot run is a one-line error with a
// hint, never a silent fall back to the CPU. Pure (the probe is an argument) so tests feed it
// every host.
#pragma once

#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "core/status.h"

namespace lj::cli {

enum class DeviceKind { cpu, cuda };

struct DeviceHost {
  bool built_with_cuda = false;
  int gpu_count = 0;
  std::string probe_error;     // why the CUDA runtime sees no GPU ("" when it sees some)
  bool cuda_executor = false;  // backends/cuda runs a training graph
};

// What `requested` resolves to on `host`; invalid_argument for a name that is no device.
StatusOr<DeviceKind> choose_device(std::string_view requested, const DeviceHost& host);

// The host as backends/cuda sees it (probes the CUDA runtime when built with it).
DeviceHost probe_device_host();

void add_device_flag(CLI::App* sub, std::string* device);

}  // namespace lj::cli
