#include "cli/doctor_cuda.h"

#include <fmt/format.h>

#include <charconv>

#include "cli/doctor_gpu.h"
#include "core/units.h"

namespace lj::cli {
namespace {

// "13.0" -> 13000 (CUDA's encoding); 0 when not a version.
int encoded(const std::string& v) {
  int major = 0, minor = 0;
  const char* end = v.data() + v.size();
  auto r = std::from_chars(v.data(), end, major);
  if (r.ec != std::errc() || r.ptr == end || *r.ptr != '.') return 0;
  r = std::from_chars(r.ptr + 1, end, minor);
  if (r.ec != std::errc()) return 0;
  return major * 1000 + minor * 10;
}

}  // namespace

std::vector<CheckLine> cuda_runtime_lines(const cuda::Probe& p) {
  std::vector<CheckLine> lines;
  if (!p.built) return lines;
  const std::string rt = "CUDA runtime " + p.runtime_version + " (built in)";
  if (p.driver_version.empty()) {
    lines.push_back({CheckLevel::ok,
                     rt + ": no NVIDIA driver and no GPU on this host; the CPU "
                          "backend is used",
                     ""});
    return lines;
  }
  if (encoded(p.driver_version) < encoded(p.runtime_version)) {
    int need = 0;
    for (const CudaDriverRequirement& r : kCudaDriverRequirements) {
      if (p.runtime_version == r.cuda_version) need = r.min_driver_major;
    }
    lines.push_back(
        {CheckLevel::fail,
         fmt::format("{}: the NVIDIA driver supports CUDA {} only, older than this build's", rt,
                     p.driver_version),
         need > 0 ? fmt::format("upgrade the NVIDIA driver to {} or newer", need)
                  : std::string("upgrade the NVIDIA driver (NVIDIA's CUDA compatibility table)")});
    return lines;
  }
  lines.push_back(
      {CheckLevel::ok, fmt::format("{}: the driver supports CUDA {}", rt, p.driver_version), ""});
  if (p.devices.empty()) {
    lines.push_back({CheckLevel::warn, "the CUDA runtime sees no GPU: " + p.error,
                     "check CUDA_VISIBLE_DEVICES, or pass the GPUs into the container"});
  }
  for (const cuda::DeviceProps& d : p.devices) {
    const bool old = d.sm_major * 10 + d.sm_minor < 90;
    lines.push_back({old ? CheckLevel::warn : CheckLevel::ok,
                     fmt::format("GPU {}: {}, {}, {} ({} SMs)", d.index, d.name,
                                 format_bytes(static_cast<double>(d.memory_bytes)), d.arch(),
                                 d.multiprocessors),
                     old ? "ljperf's CUDA kernels are built for sm_90; rebuild with "
                           "-DCMAKE_CUDA_ARCHITECTURES=" +
                               std::to_string(d.sm_major * 10 + d.sm_minor)
                         : std::string()});
  }
  return lines;
}

}  // namespace lj::cli
