#include "plan/gpu_collectives.h"

#include <algorithm>

namespace lj {

namespace {

constexpr double kBf16Bytes = 2;

}  // namespace

double gpu_collective_seconds(GpuCollective c, double bytes, const GpuCommLink& link) {
  const int64_t w = link.ranks;
  if (w <= 1 || bytes <= 0 || link.bytes_per_s <= 0) return 0;
  const int64_t per_node = std::max<int64_t>(link.gpus_per_node, 1);
  const int64_t nodes = (w + per_node - 1) / per_node;
  const int64_t twice = c == GpuCollective::all_reduce ? 2 : 1;
  const int64_t steps = twice * (w - 1), inter_steps = twice * (nodes - 1);
  const double latency = kNcclBaseLatencySeconds +
                         static_cast<double>(steps - inter_steps) * kNcclNvlinkStepSeconds +
                         static_cast<double>(inter_steps) * kNcclNetworkStepSeconds;
  const double frac = static_cast<double>(w - 1) / static_cast<double>(w);
  return latency + static_cast<double>(twice) * frac * bytes / link.bytes_per_s;
}

double gpu_bucketed_seconds(GpuCollective c, int64_t params, int64_t bucket,
                            const GpuCommLink& link) {
  if (params <= 0) return 0;
  const int64_t b = std::clamp<int64_t>(bucket, 1, params);
  const int64_t full = params / b, rest = params % b;
  double s = static_cast<double>(full) *
             gpu_collective_seconds(c, kBf16Bytes * static_cast<double>(b), link);
  if (rest > 0) s += gpu_collective_seconds(c, kBf16Bytes * static_cast<double>(rest), link);
  return s;
}

double GpuStepComm::total(int64_t micro_batches) const {
  return static_cast<double>(micro_batches) * per_micro_batch + last_micro_batch + after_step;
}

double GpuStepComm::exposed(double compute_seconds, int64_t micro_batches) const {
  const auto a = static_cast<double>(std::max<int64_t>(micro_batches, 1));
  // Stages 0, 1 reduce in the last micro-batch only; 2, 3 in every one.
  const double reducing = last_micro_batch > 0 ? 1 : a;
  return (a - 1) * std::max(per_micro_batch - compute_seconds, 0.0) +
         std::max(per_micro_batch + last_micro_batch - compute_seconds, 0.0) + reducing * tail +
         after_step;
}

GpuStepComm gpu_step_comm(const ZeroConfig& zero, int64_t params, const GpuCommLink& link) {
  GpuStepComm c;
  if (link.ranks <= 1 || params <= 0) return c;
  const int64_t reduce_bucket = std::clamp<int64_t>(zero.reduce_bucket_size, 1, params);
  const auto one = [&](GpuCollective k, int64_t elements) {
    return gpu_collective_seconds(k, kBf16Bytes * static_cast<double>(elements), link);
  };
  const GpuCollective reduce =
      zero.stage == 0 ? GpuCollective::all_reduce : GpuCollective::reduce_scatter;
  const double reduction = gpu_bucketed_seconds(reduce, params, reduce_bucket, link);
  c.tail = one(reduce, reduce_bucket);
  if (zero.stage <= 1) {
    c.last_micro_batch = reduction;
  } else {
    c.per_micro_batch = reduction;
  }
  if (zero.stage == 1 || zero.stage == 2) {
    c.after_step =
        gpu_bucketed_seconds(GpuCollective::all_gather, params, zero.allgather_bucket_size, link);
  }
  if (zero.stage == 3) {
    const int64_t prefetch = std::clamp<int64_t>(zero.stage3_prefetch_bucket_size, 1, params);
    c.per_micro_batch +=
        2 * gpu_bucketed_seconds(GpuCollective::all_gather, params, prefetch, link);
    c.tail += one(GpuCollective::all_gather, prefetch);
  }
  return c;
}

}  // namespace lj
