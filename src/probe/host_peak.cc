#include "probe/host_peak.h"

#include <fmt/format.h>
#include <omp.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "core/json_read.h"
#include "probe/full_speed.h"
#include "probe/host_cache.h"
#include "runtime/host.h"
#include "runtime/peak_probe.h"

namespace lj {
namespace {

// 2: the probe counts only undisturbed rounds (version 1 figures could be far too low).
constexpr const char* kFormat = "ljperf host peak 2";

bool same_key(const nlohmann::json& e, const HostInfo& h, int threads, DType dtype) {
  return cache_entry_has(e, "cpu", h.cpu_model) && cache_entry_has(e, "hostname", h.hostname) &&
         cache_entry_has(e, "threads", int64_t{threads}) &&
         cache_entry_has(e, "dtype", dtype_name(dtype));
}

}  // namespace

std::string HostPeak::describe() const {
  return fmt::format("{:.1f} GFLOP/s {}, measured", flops / 1e9,
                     dtype == DType::f32 ? "fp32" : dtype_name(dtype));
}

std::string host_peak_cache_path() {
  return host_cache_path("host_peak.json");
}

namespace {

HostPeak blank_peak(const HostInfo& h, DType dtype, int threads) {
  HostPeak p;
  p.dtype = dtype;
  p.threads = threads > 0 ? threads : omp_get_num_procs();
  if (dtype == DType::f32) p.nominal_flops = h.peak_fp32_flops() * p.threads / h.cores;
  return p;
}

std::optional<HostPeak> find_cached(const nlohmann::json& entries, const HostInfo& h, HostPeak p) {
  for (const auto& e : entries) {
    const double flops = json_number_if(json_member(e, "flops")).value_or(0.0);
    if (same_key(e, h, p.threads, p.dtype) && flops > 0) {
      p.flops = flops;
      const std::string* isa = json_string_if(json_member(e, "isa"));
      p.isa = isa != nullptr ? *isa : "";
      p.cached = true;
      return p;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<HostPeak> cached_host_peak(DType dtype, int threads) {
  const HostInfo h = host_info();
  return find_cached(read_host_cache(host_peak_cache_path(), kFormat), h,
                     blank_peak(h, dtype, threads));
}

StatusOr<HostPeak> host_peak(DType dtype, int threads, bool remeasure) {
  const HostInfo h = host_info();
  HostPeak p = blank_peak(h, dtype, threads);
  const std::string path = host_peak_cache_path();
  nlohmann::json entries = read_host_cache(path, kFormat);
  const std::optional<HostPeak> cached = find_cached(entries, h, p);
  if (!remeasure && cached) return *cached;
  // In a slow window (probe/full_speed.h) the probe reads half the host's speed, and MFU would
  // read twice what it is: a reading under 80% of the cached figure is taken again.
  LJ_ASSIGN_OR_RETURN(PeakMeasurement m,
                      peak_at_full_speed([&] { return measure_peak_flops(dtype, p.threads); },
                                         cached ? cached->flops : 0.0));
  p.flops = m.flops;
  p.isa = m.isa;
  write_host_cache(path, kFormat, entries,
                   [&](const nlohmann::json& e) { return same_key(e, h, p.threads, dtype); },
                   {{"cpu", h.cpu_model},
                    {"hostname", h.hostname},
                    {"threads", p.threads},
                    {"dtype", dtype_name(dtype)},
                    {"isa", p.isa},
                    {"flops", p.flops},
                    {"probe_seconds", m.seconds},
                    {"time", static_cast<int64_t>(std::time(nullptr))}});
  return p;
}

}  // namespace lj
