#include "cli/mfu_peak.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "plan/device_catalog.h"
#include "probe/host_peak.h"
#include "runtime/host.h"
#include "runtime/peak_probe.h"

namespace lj::cli {

MfuPeak mfu_peak(DType dtype, int threads_per_rank, int ranks_on_host, int world_size,
                 bool may_probe) {
  const HostInfo h = host_info();
  const int threads = std::clamp(threads_per_rank * std::max(ranks_on_host, 1), 1, h.cores);
  const int hosts = std::max(world_size / std::max(ranks_on_host, 1), 1);
  const DType probed = peak_probe_supports(dtype) ? dtype : DType::f32;
  const auto peak_of = [&](DType d) -> std::optional<HostPeak> {
    if (may_probe) {
      // Measured now, not read from the cache: this host's speed moves (a VM, turbo), and a peak
      // from hours before misstates MFU (442.5 at 06:23, 493.0 at 08:23 GFLOP/s on the 2-core
      // guest of bench/archive/speed.md, session 9). The probe takes about 0.3 s.
      auto m = host_peak(d, threads, /*remeasure=*/true);
      if (m.ok()) return *m;
      return std::nullopt;
    }
    return cached_host_peak(d, threads);
  };
  std::optional<HostPeak> p = peak_of(probed);
  // bf16 operands widen exactly to f32, so a host's bf16 peak is the higher of its bf16
  // dot-product peak and its f32 FMA peak: on Intel without AMX the dot products run at half the
  // FMA rate (168-174 against 342-354 GFLOP/s on 2 vCPUs, session 16), and its bf16 GEMMs run on
  // the FMA units (backends/cpu/gemm.h gemm_bf16_uses_own); MFU of the dot-product peak alone
  // read 118%.
  bool fma_higher = false;
  if (probed == DType::bf16) {
    const std::optional<HostPeak> fma = peak_of(DType::f32);
    if (fma && (!p || fma->flops > p->flops)) {
      p = fma;
      fma_higher = true;
    }
  }
  MfuPeak r;
  const std::string times = hosts > 1 ? fmt::format("{} hosts × ", hosts) : "";
  if (p) {
    r.flops = p->flops * hosts;
    r.measured = true;
    r.name = times + p->describe();
    if (probed != dtype) r.name += fmt::format(" (no {} probe on this host)", dtype_name(dtype));
    if (fma_higher) r.name += " (for bf16: above this host's bf16 dot-product peak)";
    return r;
  }
  r.flops = h.peak_fp32_flops() * threads / h.cores * hosts;
  r.name = fmt::format(
      "{}{:.1f} GFLOP/s fp32 nominal (cores × clock × {} FLOPs/cycle, assumed; measure it with "
      "ljperf calibrate --measure)",
      times, h.peak_fp32_flops() * threads / h.cores / 1e9, h.fp32_flops_per_cycle);
  return r;
}

MfuPeak higher_peak(const MfuPeak& a, const MfuPeak& b, const std::string& which) {
  if (!b.measured) return a;
  if (!a.measured) return b;
  MfuPeak r = a.flops >= b.flops ? a : b;
  r.name += "; the higher of " + which;
  return r;
}

const DeviceProfile* gpu_catalog_entry(const std::string& device_name) {
  std::string lower = device_name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const DeviceProfile& d : gpu_catalog()) {
    if (lower.find(d.id) != std::string::npos) return &d;
  }
  return nullptr;
}

MfuPeak gpu_mfu_peak(const std::string& device_name, int world_size) {
  const DeviceProfile* d = gpu_catalog_entry(device_name);
  if (d == nullptr) return MfuPeak{0, "n/a (no catalog entry for " + device_name + ")", false};
  MfuPeak p;
  p.flops = d->peak_bf16_flops * std::max(world_size, 1);
  p.name = fmt::format("{:.0f} TFLOP/s dense bf16 ({}{})", p.flops / 1e12, d->name,
                       world_size > 1 ? fmt::format(" x {}", world_size) : "");
  return p;
}

}  // namespace lj::cli
