// The ZeRO / FSDP collectives of one optimizer step on GPUs, as DeepSpeed schedules them at the
// bucket sizes its config sets (core/zero_config.h), for the GPU time model
// (plan/gpu_time_model.h). Per optimizer step of A micro-batches (gradient accumulation):
//   stage 0  the gradients all-reduced once, in reduce_bucket_size buckets, behind the last
//            micro-batch's backward
//   stage 1  the same with a reduce-scatter, then the updated parameters all-gathered after the
//            optimizer step in allgather_bucket_size buckets (blocking: nothing left to hide it)
//   stage 2  every micro-batch reduce-scatters its gradients in buckets behind its own backward
//            (DeepSpeed's stage 2 reduces each micro-batch), then the stage-1 all-gather
//   stage 3  every micro-batch all-gathers the parameters in stage3_prefetch_bucket_size buckets
//            for forward and again for backward, and reduce-scatters its gradients in buckets
// Gradients and parameters move in bf16 (2 bytes an element). One collective of a bucket of b
// bytes over w ranks costs its latency plus its ring traffic over the link:
//   traffic   reduce-scatter, all-gather (w-1)/w · b; all-reduce twice that
//   latency   NCCL's ring model (NVIDIA/nccl src/graph/tuning.cc, Simple protocol, at commit
//             01afd20a): 8.4 µs + 3.4 µs per step inside a node (NVLink) + 9.6 µs per step
//             between nodes; steps w-1 (2(w-1) for all-reduce), of which nodes-1 (2(nodes-1))
//             cross the network. Priors from NCCL's own tuner, not fitted: no published row's
//             collectives are exposed.
// Overlap: a micro-batch's collectives run behind its compute, all but a tail that nothing can
// hide (stage 3: the first gather bucket, before any compute; every stage: the last reduction
// bucket, after the last gradient); what is longer than compute shows too.
#pragma once

#include <cstdint>

#include "core/zero_config.h"

namespace lj {

inline constexpr double kNcclBaseLatencySeconds = 8.4e-6;
inline constexpr double kNcclNvlinkStepSeconds = 3.4e-6;
inline constexpr double kNcclNetworkStepSeconds = 9.6e-6;

enum class GpuCollective { all_reduce, reduce_scatter, all_gather };

struct GpuCommLink {
  int64_t ranks = 1;
  int64_t gpus_per_node = 8;
  double bytes_per_s = 0;  // ring bandwidth per rank (already at its efficiency)
};

// Seconds of one collective over a `bytes` buffer (the whole vector).
double gpu_collective_seconds(GpuCollective c, double bytes, const GpuCommLink& link);

// Seconds of `params` elements moved in buckets of `bucket` elements (bf16): every bucket pays
// its latency.
double gpu_bucketed_seconds(GpuCollective c, int64_t params, int64_t bucket,
                            const GpuCommLink& link);

// One optimizer step's collectives.
struct GpuStepComm {
  double per_micro_batch = 0;   // behind every micro-batch's compute (stages 2, 3)
  double last_micro_batch = 0;  // behind the last micro-batch's compute only (stages 0, 1)
  double tail = 0;              // of each micro-batch that reduces: cannot hide
  double after_step = 0;        // after the optimizer step: exposed (stages 1, 2)
  // All of it over `micro_batches`.
  double total(int64_t micro_batches) const;
  // What compute of `compute_seconds` per micro-batch does not hide, over `micro_batches`.
  double exposed(double compute_seconds, int64_t micro_batches) const;
};

GpuStepComm gpu_step_comm(const ZeroConfig& zero, int64_t params, const GpuCommLink& link);

}  // namespace lj
