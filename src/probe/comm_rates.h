// What the MPI collectives of a data-parallel run cost on this host, measured, for the host time
// model (plan/time_model.h host_step_times prices the graph's collective nodes with them):
//   all_reduce      stages 0, 1: a gradient bucket's reduction (grad_reduce_start)
//   reduce_scatter  stages 2, 3: a gradient bucket's reduction
//   all_gather      stage 3: a parameter's gather (param_gather_start); stages 1, 2: the updated
//                   parameters after the optimizer step (dist/zero.h all_gather_params, in
//                   allgather_bucket_size chunks, blocking)
//   all_to_all      expert parallelism's token exchange (ep_route, ep_dispatch, ep_combine):
//                   each rank sends an even block to every rank (the uneven MPI_Alltoallv the
//                   exchange uses, with even counts)
// Each kind is measured at kCommProbeBytes: f32 buffers of that many bytes in all (the whole
// vector: world × a rank's block for reduce-scatter's input and all-gather's output, and world ×
// what a rank sends for all-to-all), the
// blocking form, after a barrier, the median of a few repetitions, rank 0's wall time. A
// collective of `bytes` costs the time interpolated linearly between the two samples around it;
// below the smallest sample, that sample's time (the latency); above the largest, the largest's
// time scaled by the bytes (its bandwidth).
//
// Measured by `mpirun -np N ljperf calibrate --comm` (every rank takes part; rank 0 caches it).
// Cache: comm_rates.json beside host_rates.json (probe/host_cache.h), one entry per (CPU model,
// hostname, world size). A plan for N ranks on this host reads the entry of world size N; without
// one its collectives cost nothing and the plan says how to measure them.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "dist/communicator.h"

namespace lj {

enum class CollectiveKind { all_reduce = 0, reduce_scatter = 1, all_gather = 2, all_to_all = 3 };
inline constexpr int kCollectiveKinds = 4;
const char* collective_kind_name(CollectiveKind k);

// The buffer sizes the probe measures: 64 KiB to 64 MiB, which covers DeepSpeed's default
// buckets for the models a 2-core host trains (`small`: 24 MiB of f32 gradients) and beyond.
inline constexpr std::array<double, 6> kCommProbeBytes = {
    64.0 * 1024, 512.0 * 1024, 4.0 * 1048576, 16.0 * 1048576, 32.0 * 1048576, 64.0 * 1048576};

struct CommSample {
  double bytes = 0;    // the whole f32 vector
  double seconds = 0;  // median of the repetitions
};

struct CommRates {
  int world_size = 0;
  std::array<std::vector<CommSample>, kCollectiveKinds> samples;  // ascending bytes
  double probe_seconds = 0;

  // Seconds of one collective of `kind` over `bytes` (the whole vector), 0 when not measured.
  double seconds(CollectiveKind kind, double bytes) const;
  bool valid() const;
};

// Measures every kind at kCommProbeBytes over `comm`'s ranks: every rank must call it.
StatusOr<CommRates> measure_comm_rates(Communicator& comm, int repetitions = 5);

nlohmann::json comm_rates_to_json(const CommRates& r);
StatusOr<CommRates> comm_rates_from_json(const nlohmann::json& j);
// calibrate --comm's lines: each kind's samples (time and bus bandwidth).
std::string describe_comm_rates(const CommRates& r);

std::string comm_rates_cache_path();
void cache_comm_rates(const CommRates& r);
// This host's measured rates for `world_size` ranks; nullopt when none are cached.
std::optional<CommRates> cached_comm_rates(int world_size);

}  // namespace lj
