// What this host is: CPU model, cores, clock, vector features, and the fp32 peak they imply
// (cores × GHz × FLOPs per cycle: two FMA units × vector lanes × 2). Read from /proc/cpuinfo
// and the compiler's CPU detection.
#pragma once

#include <string>

namespace lj {

struct HostInfo {
  std::string cpu_model;
  std::string hostname;
  int cores = 1;   // online logical CPUs
  double ghz = 0;  // nominal clock from /proc/cpuinfo
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  int fp32_flops_per_cycle = 0;  // per core
  double peak_fp32_flops() const { return cores * ghz * 1e9 * fp32_flops_per_cycle; }
  // Total and available memory from /proc/meminfo.
  long long mem_total_bytes = 0;
  long long mem_available_bytes = 0;
};

HostInfo host_info();

}  // namespace lj
