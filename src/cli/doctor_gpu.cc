// The doctor's GPU rules and probe; see doctor_gpu.h.
#include "cli/doctor_gpu.h"

#include <fmt/format.h>

#include <sys/wait.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "cli/doctor_host.h"
#include "core/text_file.h"
#include "core/units.h"

namespace lj::cli {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool is_dotted_version(std::string_view t) {
  if (t.empty() || !std::isdigit(static_cast<unsigned char>(t.front()))) return false;
  bool dot = false;
  for (char c : t) {
    if (c == '.') {
      dot = true;
    } else if (!std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return dot && t.back() != '.';
}

// nvidia-smi's memory.total field: "143771 MiB" (or a bare number, MiB as with nounits) ->
// bytes; "[N/A]" and the like -> 0.
bool parse_memory_field(std::string_view s, int64_t* bytes) {
  s = trim(s);
  if (s == "[N/A]" || s == "N/A" || s == "[Not Supported]") {
    *bytes = 0;
    return true;
  }
  const bool bare = !s.empty() && std::isdigit(static_cast<unsigned char>(s.back()));
  const StatusOr<double> b = parse_bytes(std::string(s) + (bare ? " MiB" : ""));
  if (!b.ok()) return false;
  *bytes = std::llround(*b);
  return true;
}

std::string first_line(std::string_view s) {
  s = trim(s);
  return std::string(s.substr(0, s.find('\n')));
}

}  // namespace

StatusOr<int> parse_driver_major(std::string_view driver_version) {
  const std::string_view v = trim(driver_version);
  int major = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), major);
  if (r.ec != std::errc() || (r.ptr != v.data() + v.size() && *r.ptr != '.')) {
    return invalid_argument("'" + std::string(driver_version) + "' is not a driver version",
                            "expected a version like 580.65.06");
  }
  return major;
}

CheckLine cuda_driver_check(int driver_major, std::string_view cuda_version) {
  // Compare major.minor only: "13.0.2" is the 13.0 row.
  std::string_view mm = trim(cuda_version);
  const size_t dot1 = mm.find('.');
  if (dot1 != std::string_view::npos) mm = mm.substr(0, mm.find('.', dot1 + 1));
  for (const CudaDriverRequirement& r : kCudaDriverRequirements) {
    if (mm != r.cuda_version) continue;
    const std::string need = "CUDA " + std::string(r.cuda_version) +
                             " needs driver >= " + std::to_string(r.min_driver_major);
    if (driver_major >= r.min_driver_major) {
      return {CheckLevel::ok, need + ": driver " + std::to_string(driver_major) + " runs it", ""};
    }
    return {CheckLevel::warn, need + "; this driver is " + std::to_string(driver_major),
            "upgrade the NVIDIA driver to " + std::to_string(r.min_driver_major) +
                " or newer to use CUDA " + r.cuda_version};
  }
  std::string known;
  for (const CudaDriverRequirement& r : kCudaDriverRequirements) {
    known += (known.empty() ? "" : ", ") + std::string(r.cuda_version);
  }
  return {CheckLevel::warn,
          "no driver requirement known for CUDA " + std::string(cuda_version) +
              " (the image's release note lists CUDA " + known + ")",
          "see NVIDIA's CUDA compatibility table for the driver it needs"};
}

std::string cuda_driver_rule() {
  std::string s;
  for (const CudaDriverRequirement& r : kCudaDriverRequirements) {
    s += (s.empty() ? "" : ", ") +
         fmt::format("CUDA {} needs driver >= {}", r.cuda_version, r.min_driver_major);
  }
  return s;
}

StatusOr<std::string> parse_nvidia_proc_version(std::string_view text) {
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    const size_t at = line.find("NVRM version:");
    if (at == std::string::npos) continue;
    std::istringstream words(line.substr(at + std::strlen("NVRM version:")));
    std::string w;
    while (words >> w) {
      if (is_dotted_version(w)) return w;
    }
  }
  return invalid_argument("no 'NVRM version:' line with a driver version",
                          "expected the text of /proc/driver/nvidia/version");
}

StatusOr<std::vector<GpuDevice>> parse_nvidia_smi_csv(std::string_view text) {
  std::vector<GpuDevice> gpus;
  std::istringstream lines{std::string(text)};
  std::string raw;
  while (std::getline(lines, raw)) {
    const std::string_view line = trim(raw);
    if (line.empty()) continue;
    // Split from the right: a GPU name could hold a comma, the other two fields cannot.
    const size_t c2 = line.rfind(',');
    const size_t c1 =
        c2 == std::string_view::npos || c2 == 0 ? std::string_view::npos : line.rfind(',', c2 - 1);
    const std::string bad = "nvidia-smi line '" + std::string(line) + "'";
    const std::string hint =
        "expected 'name, driver_version, memory.total' as from nvidia-smi "
        "--query-gpu=name,driver_version,memory.total --format=csv,noheader";
    if (c1 == std::string_view::npos)
      return invalid_argument(bad + " does not have 3 fields", hint);
    GpuDevice g;
    g.name = std::string(trim(line.substr(0, c1)));
    g.driver_version = std::string(trim(line.substr(c1 + 1, c2 - c1 - 1)));
    if (!parse_memory_field(line.substr(c2 + 1), &g.memory_bytes)) {
      return invalid_argument(bad + " has no readable memory size", hint);
    }
    gpus.push_back(std::move(g));
  }
  return gpus;
}

GpuProbe probe_gpus() {
  GpuProbe p;
  const StatusOr<std::string> proc = read_text_file("/proc/driver/nvidia/version");
  if (proc.ok()) {
    if (auto v = parse_nvidia_proc_version(*proc); v.ok()) p.driver_version = *v;
  }
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec), end;
       !ec && it != end; it.increment(ec)) {
    ++p.proc_gpu_count;
  }
  const char* path = std::getenv("PATH");
  p.nvidia_smi_path = find_on_path("nvidia-smi", path);
  if (p.nvidia_smi_path.empty()) return p;
  // A wedged driver can hang nvidia-smi; bound it where coreutils' timeout exists.
  const std::string timeout = find_on_path("timeout", path);
  const std::string command =
      (timeout.empty() ? "" : shell_quote(timeout) + " 20 ") + shell_quote(p.nvidia_smi_path) +
      " --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1";
  int status = 0;
  const std::string out = run_command(command, &status);
  if (status != 0) {
    p.nvidia_smi_error = "nvidia-smi exited with status " + std::to_string(status) +
                         (out.empty() ? "" : ": " + first_line(out));
    return p;
  }
  auto gpus = parse_nvidia_smi_csv(out);
  if (!gpus.ok()) {
    p.nvidia_smi_error = gpus.status().message();
    return p;
  }
  p.gpus = std::move(*gpus);
  if (p.driver_version.empty() && !p.gpus.empty()) p.driver_version = p.gpus[0].driver_version;
  return p;
}

}  // namespace lj::cli
