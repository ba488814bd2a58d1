// The doctor's GPU rules: the driver each CUDA version needs (the seed image's release note),
// parsers for /proc/driver/nvidia/version and nvidia-smi's CSV, and the probe that reads them on
// this host without linking CUDA. The parsers are pure so tests feed them fake tool output;
// probe_gpus never fails: an absent tool or file is an empty answer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/doctor_check.h"
#include "core/status.h"

namespace lj::cli {

// The driver each CUDA version needs (the seed image's release note). The one table of these.
struct CudaDriverRequirement {
  const char* cuda_version;  // "major.minor"
  int min_driver_major;
};
inline constexpr CudaDriverRequirement kCudaDriverRequirements[] = {{"13.0", 580}, {"12.8", 575}};

// ok when a driver of major version `driver_major` runs `cuda_version` ("13.0", "12.8.0"; only
// major.minor is compared), warn when it is too old or the version is not in the table.
CheckLine cuda_driver_check(int driver_major, std::string_view cuda_version);
// Every row of that table in one line: "CUDA 13.0 needs driver >= 580, CUDA 12.8 needs ...".
std::string cuda_driver_rule();

// "580.65.06" -> 580. invalid_argument when the text does not start with a number.
StatusOr<int> parse_driver_major(std::string_view driver_version);

// The driver version in the text of /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX
// x86_64 Kernel Module  580.65.06  ..." or the Open Kernel Module form). invalid_argument when
// there is no NVRM line with a dotted version.
StatusOr<std::string> parse_nvidia_proc_version(std::string_view text);

struct GpuDevice {
  std::string name;
  std::string driver_version;
  int64_t memory_bytes = 0;  // 0 when nvidia-smi says [N/A]
};

// The output of `nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader`:
// one "NVIDIA H200, 580.65.06, 143771 MiB" line per GPU. Empty text is no GPUs; a line without
// three fields or with a memory that is neither a size nor [N/A] is invalid_argument.
StatusOr<std::vector<GpuDevice>> parse_nvidia_smi_csv(std::string_view text);

// What the host says about NVIDIA GPUs, read without linking CUDA.
struct GpuProbe {
  std::string driver_version;    // empty when no NVIDIA driver is loaded
  std::vector<GpuDevice> gpus;   // from nvidia-smi; empty when it is absent or failed
  int proc_gpu_count = 0;        // entries of /proc/driver/nvidia/gpus
  std::string nvidia_smi_path;   // empty when nvidia-smi is not on PATH
  std::string nvidia_smi_error;  // why nvidia-smi's answer was not used; empty when it was
  int gpu_count() const { return gpus.empty() ? proc_gpu_count : static_cast<int>(gpus.size()); }
};
GpuProbe probe_gpus();

}  // namespace lj::cli
