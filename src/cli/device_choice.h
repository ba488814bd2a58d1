// `--device auto|cpu|cuda` of benchmark and train: the one rule for which backend a run uses.
// auto (the default) is cuda when this ljperf was built with CUDA, a GPU is visible and the
// command runs on CUDA (benchmark and train do in a CUDA build), else cpu. An explicit cuda that
// cannot run is a one-line error with a hint, never a silent fall back to the CPU. Pure (the probe
// is an argument) so tests feed it every host.
#pragma once

#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "core/status.h"

namespace lj::cli {

enum class RunDevice { cpu, cuda };

struct DeviceHost {
  bool built_with_cuda = false;
  int gpu_count = 0;
  std::string probe_error;  // why the CUDA runtime sees no GPU ("" when it sees some)
  // The command runs on CUDA in this build (benchmark and train do with LJ_CUDA).
  bool cuda_executor = false;
  std::string command = "this command";  // for the message when it does not
};

// What `requested` resolves to on `host`; invalid_argument for a name that is no device.
StatusOr<RunDevice> choose_device(std::string_view requested, const DeviceHost& host);

// The host as backends/cuda sees it (probes the CUDA runtime when built with it), for
// `command` ("ljperf benchmark"), which runs on CUDA when `runs_on_cuda` and the build has it.
DeviceHost probe_device_host(const std::string& command, bool runs_on_cuda);

void add_device_flag(CLI::App* sub, std::string* device);

}  // namespace lj::cli
