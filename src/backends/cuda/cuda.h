// The CUDA backend's face to the rest of ljperf, in plain C++ (no CUDA header): whether this
// ljperf was built with CUDA (CMake LJ_CUDA), and what the CUDA runtime sees on this host. The
// one place outside backends/cuda that may ask: nothing else sees CUDA's headers or the
// LJ_CUDA_BUILD definition (CMakeLists.txt). Without LJ_CUDA, backends/no_cuda/cuda.cc answers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lj::cuda {

// true when this ljperf was built with CUDA (-DLJ_CUDA=ON).
bool built_with_cuda();

// The CUDA toolkit this ljperf was built against, "major.minor" ("13.0"); "" without CUDA.
std::string cuda_build_version();

struct DeviceProps {
  int index = 0;
  std::string name;          // "NVIDIA H200"
  int64_t memory_bytes = 0;  // total device memory
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  std::string arch() const { return "sm_" + std::to_string(sm_major * 10 + sm_minor); }
};

// What the CUDA runtime says on this host. Never fails: `error` says why there are no devices
// (no driver, a driver older than the runtime, no GPU visible, not built with CUDA).
struct Probe {
  bool built = false;
  std::string runtime_version;  // "13.0": the toolkit linked in; "" without CUDA
  std::string driver_version;   // the newest CUDA the driver supports ("13.0"); "" without one
  std::vector<DeviceProps> devices;
  std::string error;  // empty when at least one device is usable
  int device_count() const { return static_cast<int>(devices.size()); }
};
Probe probe();

}  // namespace lj::cuda
