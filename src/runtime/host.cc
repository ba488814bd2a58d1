#include "runtime/host.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace lj {

HostInfo host_info() {
  HostInfo h;
  h.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) h.hostname = name;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpu, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && h.cpu_model.empty()) h.cpu_model = value;
    if (key == "vendor_id" && h.vendor.empty()) h.vendor = value;
    if (key == "cpu family" && h.family == 0) h.family = std::atoi(value.c_str());
    if (key == "cpu MHz" && h.ghz == 0) h.ghz = std::stod(value) / 1000.0;
    if (key == "flags" && !h.avx2) {
      std::istringstream fl(value);
      std::string f;
      while (fl >> f) {
        h.avx2 = h.avx2 || f == "avx2";
        h.fma = h.fma || f == "fma";
        h.avx512f = h.avx512f || f == "avx512f";
      }
    }
  }
  h.fp32_flops_per_cycle = fp32_flops_per_cycle(h.vendor, h.family, h.avx2, h.fma, h.avx512f);
  std::ifstream mem("/proc/meminfo");
  while (std::getline(mem, line)) {
    std::istringstream ls(line);
    std::string key;
    long long kb = 0;
    ls >> key >> kb;
    if (key == "MemTotal:") h.mem_total_bytes = kb * 1024;
    if (key == "MemAvailable:") h.mem_available_bytes = kb * 1024;
  }
  return h;
}

int fp32_flops_per_cycle(const std::string& vendor, int family, bool avx2, bool fma, bool avx512f) {
  const bool half_width_avx512 = vendor == "AuthenticAMD" && family == 0x19;
  const int lanes = avx512f && !half_width_avx512 ? 16 : (avx2 || avx512f ? 8 : 4);
  return (fma ? 2 : 1) * 2 * lanes;  // two units
}

}  // namespace lj
