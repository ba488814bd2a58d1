#include "runtime/host.h"

#include <unistd.h>

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
  const int lanes = h.avx512f ? 16 : (h.avx2 ? 8 : 4);
  h.fp32_flops_per_cycle = (h.fma ? 2 : 1) * 2 * lanes;  // two FMA (or add+mul) units
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

}  // namespace lj
