#include "probe/comm_rates.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <span>

#include "core/json_read.h"
#include "core/units.h"
#include "probe/host_cache.h"
#include "runtime/host.h"

namespace lj {

namespace {

// 2: all_to_all measured too (a format 1 entry lacks it and is measured again).
constexpr const char* kFormat = "2";

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One blocking collective of `kind` over `big` (world × block elements, block a multiple of the
// world size): its wall time on this rank, after a barrier. all_to_all sends `block` in world
// even parts and receives as much into the front of `big`.
StatusOr<double> time_collective(Communicator& comm, CollectiveKind kind, std::vector<float>& big,
                                 std::vector<float>& block) {
  LJ_RETURN_IF_ERROR(comm.barrier());
  const double t0 = now_seconds();
  switch (kind) {
    case CollectiveKind::all_reduce:
      LJ_RETURN_IF_ERROR(comm.all_reduce_sum(std::span<const float>(big), std::span<float>(big)));
      break;
    case CollectiveKind::reduce_scatter:
      LJ_RETURN_IF_ERROR(
          comm.reduce_scatter_sum(std::span<const float>(big), std::span<float>(block)));
      break;
    case CollectiveKind::all_gather:
      LJ_RETURN_IF_ERROR(comm.all_gather(std::span<const float>(block), std::span<float>(big)));
      break;
    case CollectiveKind::all_to_all: {
      const std::vector<int64_t> counts(static_cast<size_t>(comm.world_size()),
                                        static_cast<int64_t>(block.size()) / comm.world_size());
      LJ_RETURN_IF_ERROR(comm.all_to_all(std::span<const float>(block), counts,
                                         std::span<float>(big).first(block.size()), counts));
      break;
    }
  }
  return now_seconds() - t0;
}

std::string cpu_key() {
  return host_info().cpu_model;
}

bool same_key(const nlohmann::json& e, int world_size) {
  const HostInfo h = host_info();
  return cache_entry_has(e, "cpu", h.cpu_model) && cache_entry_has(e, "hostname", h.hostname) &&
         cache_entry_has(e, "world_size", int64_t{world_size});
}

}  // namespace

const char* collective_kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::all_to_all:
      return "all_to_all";
  }
  return "?";
}

double CommRates::seconds(CollectiveKind kind, double bytes) const {
  const std::vector<CommSample>& s = samples[static_cast<size_t>(kind)];
  if (s.empty() || bytes <= 0) return 0;
  if (bytes <= s.front().bytes) return s.front().seconds;
  for (size_t i = 1; i < s.size(); ++i) {
    if (bytes <= s[i].bytes) {
      const double f = (bytes - s[i - 1].bytes) / (s[i].bytes - s[i - 1].bytes);
      return s[i - 1].seconds + f * (s[i].seconds - s[i - 1].seconds);
    }
  }
  return s.back().seconds * bytes / s.back().bytes;
}

bool CommRates::valid() const {
  if (world_size < 2) return false;
  for (const auto& s : samples) {
    if (s.empty()) return false;
    for (size_t i = 0; i < s.size(); ++i) {
      if (!(s[i].bytes > 0) || !(s[i].seconds > 0)) return false;
      if (i > 0 && s[i].bytes <= s[i - 1].bytes) return false;
    }
  }
  return true;
}

StatusOr<CommRates> measure_comm_rates(Communicator& comm, int repetitions) {
  CommRates r;
  r.world_size = comm.world_size();
  const double start = now_seconds();
  const int64_t world = comm.world_size();
  for (int k = 0; k < kCollectiveKinds; ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    for (double bytes : kCommProbeBytes) {
      // A rank's block: a multiple of the world size, so all-to-all's parts are even.
      const int64_t per_rank =
          std::max<int64_t>(1, static_cast<int64_t>(bytes) / 4 / world / world) * world;
      std::vector<float> big(static_cast<size_t>(per_rank * world), 1.0f);
      std::vector<float> block(static_cast<size_t>(per_rank), 1.0f);
      // One run first: MPI's first collective of a size sets up its buffers.
      LJ_RETURN_IF_ERROR(time_collective(comm, kind, big, block).status());
      std::vector<double> runs;
      for (int i = 0; i < repetitions; ++i) {
        LJ_ASSIGN_OR_RETURN(double s, time_collective(comm, kind, big, block));
        runs.push_back(s);
      }
      r.samples[static_cast<size_t>(k)].push_back(
          {4.0 * static_cast<double>(per_rank * world), median_of(runs)});
    }
  }
  r.probe_seconds = now_seconds() - start;
  return r;
}

nlohmann::json comm_rates_to_json(const CommRates& r) {
  nlohmann::json j;
  j["world_size"] = r.world_size;
  j["probe_seconds"] = r.probe_seconds;
  for (int k = 0; k < kCollectiveKinds; ++k) {
    nlohmann::json a = nlohmann::json::array();
    for (const CommSample& s : r.samples[static_cast<size_t>(k)])
      a.push_back({{"bytes", s.bytes}, {"seconds", s.seconds}});
    j[collective_kind_name(static_cast<CollectiveKind>(k))] = a;
  }
  return j;
}

StatusOr<CommRates> comm_rates_from_json(const nlohmann::json& j) {
  const JsonWhere at("comm_rates.json");
  CommRates r;
  LJ_ASSIGN_OR_RETURN(int64_t world,
                      json_read<int64_t>(json_member(j, "world_size"), at / "world_size"));
  r.world_size = static_cast<int>(world);
  LJ_ASSIGN_OR_RETURN(r.probe_seconds, json_read_or<double>(json_member(j, "probe_seconds"), 0.0,
                                                            at / "probe_seconds"));
  for (int k = 0; k < kCollectiveKinds; ++k) {
    const char* name = collective_kind_name(static_cast<CollectiveKind>(k));
    const nlohmann::json& a = json_member(j, name);
    LJ_RETURN_IF_ERROR(json_need_array(a, at / name));
    for (size_t i = 0; i < a.size(); ++i) {
      const nlohmann::json& s = a[i];
      LJ_ASSIGN_OR_RETURN(double bytes,
                          json_read<double>(json_member(s, "bytes"), at / name / "bytes"));
      LJ_ASSIGN_OR_RETURN(double sec,
                          json_read<double>(json_member(s, "seconds"), at / name / "seconds"));
      r.samples[static_cast<size_t>(k)].push_back({bytes, sec});
    }
  }
  if (!r.valid()) {
    return invalid_argument("comm_rates.json: an entry with missing or non-positive samples",
                            "mpirun -np N ljperf calibrate --comm remeasures it");
  }
  return r;
}

std::string describe_comm_rates(const CommRates& r) {
  std::string s = fmt::format("MPI collectives over {} ranks (measured in {:.1f} s):\n",
                              r.world_size, r.probe_seconds);
  // Bus bandwidth (NCCL's convention): what each rank's link carries, (w-1)/w of the vector for
  // reduce-scatter, all-gather and all-to-all, twice that for all-reduce.
  const double frac =
      static_cast<double>(r.world_size - 1) / static_cast<double>(std::max(r.world_size, 1));
  for (int k = 0; k < kCollectiveKinds; ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    const double factor = kind == CollectiveKind::all_reduce ? 2 * frac : frac;
    for (const CommSample& c : r.samples[static_cast<size_t>(k)]) {
      s += fmt::format("  {:<15} {:>10}  {:>10}  bus {:.2f} GB/s\n", collective_kind_name(kind),
                       format_bytes(c.bytes), format_seconds(c.seconds),
                       factor * c.bytes / c.seconds / 1e9);
    }
  }
  return s;
}

std::string comm_rates_cache_path() {
  return host_cache_path("comm_rates.json");
}

void cache_comm_rates(const CommRates& r) {
  const HostInfo h = host_info();
  const std::string path = comm_rates_cache_path();
  nlohmann::json entry = comm_rates_to_json(r);
  entry["cpu"] = cpu_key();
  entry["hostname"] = h.hostname;
  entry["time"] = static_cast<int64_t>(std::time(nullptr));
  write_host_cache(
      path, kFormat, read_host_cache(path, kFormat),
      [&](const nlohmann::json& e) { return same_key(e, r.world_size); }, entry);
}

std::optional<CommRates> cached_comm_rates(int world_size) {
  for (const auto& e : read_host_cache(comm_rates_cache_path(), kFormat)) {
    if (!same_key(e, world_size)) continue;
    StatusOr<CommRates> r = comm_rates_from_json(e);
    if (r.ok()) return *r;
  }
  return std::nullopt;
}

}  // namespace lj
