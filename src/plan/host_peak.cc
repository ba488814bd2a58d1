#include "plan/host_peak.h"

#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/text_file.h"
#include "io/atomic_file.h"
#include "runtime/host.h"
#include "runtime/peak_probe.h"

namespace lj {
namespace {

// 2: the probe counts only undisturbed rounds (version 1 figures could be far too low).
constexpr const char* kFormat = "ljperf host peak 2";

bool same_key(const nlohmann::json& e, const HostInfo& h, int threads, DType dtype) {
  return e.value("cpu", "") == h.cpu_model && e.value("hostname", "") == h.hostname &&
         e.value("threads", 0) == threads && e.value("dtype", "") == dtype_name(dtype);
}

// The cache's entries; an empty array when the file is absent or not ours.
nlohmann::json read_entries(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return nlohmann::json::array();
  auto text = read_text_file(path);
  if (!text.ok()) return nlohmann::json::array();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != kFormat ||
      !j.contains("entries") || !j["entries"].is_array())
    return nlohmann::json::array();
  return j["entries"];
}

}  // namespace

std::string HostPeak::describe() const {
  return fmt::format("{:.1f} GFLOP/s {}, measured", flops / 1e9,
                     dtype == DType::f32 ? "fp32" : dtype_name(dtype));
}

std::string host_peak_cache_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/ljperf/host_peak.json";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/ljperf/host_peak.json";
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
    if (same_key(e, h, p.threads, p.dtype) && e.value("flops", 0.0) > 0) {
      p.flops = e["flops"].get<double>();
      p.isa = e.value("isa", "");
      p.cached = true;
      return p;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<HostPeak> cached_host_peak(DType dtype, int threads) {
  const HostInfo h = host_info();
  return find_cached(read_entries(host_peak_cache_path()), h, blank_peak(h, dtype, threads));
}

StatusOr<HostPeak> host_peak(DType dtype, int threads, bool remeasure) {
  const HostInfo h = host_info();
  HostPeak p = blank_peak(h, dtype, threads);
  const std::string path = host_peak_cache_path();
  nlohmann::json entries = read_entries(path);
  if (!remeasure) {
    if (auto c = find_cached(entries, h, p)) return *c;
  }
  LJ_ASSIGN_OR_RETURN(PeakMeasurement m, measure_peak_flops(dtype, p.threads));
  p.flops = m.flops;
  p.isa = m.isa;
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& e : entries) {
    if (!same_key(e, h, p.threads, dtype)) kept.push_back(e);
  }
  kept.push_back({{"cpu", h.cpu_model},
                  {"hostname", h.hostname},
                  {"threads", p.threads},
                  {"dtype", dtype_name(dtype)},
                  {"isa", p.isa},
                  {"flops", p.flops},
                  {"probe_seconds", m.seconds},
                  {"time", static_cast<int64_t>(std::time(nullptr))}});
  const std::string text = nlohmann::json{{"format", kFormat}, {"entries", kept}}.dump(2) + "\n";
  // A cache that cannot be written costs a probe next time, nothing more.
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  (void)write_file_atomic(path, [&](FileWriter& w) { return w.write(text.data(), text.size()); });
  return p;
}

}  // namespace lj
