// What this host is: CPU model, cores, clock, vector features, and the fp32 peak they imply
// (cores × GHz × FLOPs per cycle: two FMA units × the lanes of their datapath × 2). Read from
// /proc/cpuinfo.
#pragma once

#include <string>

namespace lj {

struct HostInfo {
  std::string cpu_model;
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  int family = 0;      // "cpu family"
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

// FLOPs per cycle per core in f32 from the vector features: two FMA (or add + mul) units, each
// as wide as the datapath. AMD's family 0x19 (Zen 3 and Zen 4) runs AVX-512 on 256-bit units,
// two passes per instruction, so its datapath is 8 lanes with or without avx512f (session 10
// measured 117.3 GFLOP/s on one Zen 4 core: at 64 FLOPs per cycle that is a 1.8 GHz clock, below
// the 2.6 GHz base; at 32, 3.7 GHz, a boost clock).
int fp32_flops_per_cycle(const std::string& vendor, int family, bool avx2, bool fma, bool avx512f);

}  // namespace lj
