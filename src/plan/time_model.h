// Step time from the graph. The host: host_step_times, from this host's measured rates (or, with
// none measured, graph_seconds: every node costs max(FLOPs / (peak · efficiency[category]),
// bytes / (bandwidth · bandwidth efficiency)), the nodes one after another). GPUs: the step's
// work (gpu_step_work), priced by plan/gpu_time_model.h, the model fitted on published runs.
// Recompute shows up as the extra nodes the remat pass adds. ZeRO's collectives are priced by the
// volume DeepSpeed moves over the link (zero_comm_bytes).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/zero_config.h"
#include "graph/ir.h"
#include "plan/coefficients.h"
#include "plan/device_catalog.h"
#include "probe/comm_rates.h"
#include "probe/host_rates.h"

namespace lj {

// Sum over the nodes of `g` with symbols bound by `env`. Inputs and aliases cost nothing.
// On a GPU contractions and attention run at the bf16 tensor-core peak when their output is
// bf16; everything else at the fp32 peak.
double graph_seconds(const Graph& g, const SymEnv& env, const DeviceProfile& device,
                     const Efficiency& eff);

// The work of one GPU training step, summed over the joint graph's nodes (inputs and aliases do
// nothing), as the GPU time model (plan/gpu_time_model.h) prices it. Recompute shows up as the
// clones the remat pass adds; the compiled graph (pattern and pointwise fusion) as fewer kernels
// moving fewer bytes.
struct GpuStepWork {
  double gemm_flops = 0;                // contraction nodes (matmul, the fused linear loss)
  double attention_forward_flops = 0;   // sdpa, recomputed clones included
  double attention_backward_flops = 0;  // sdpa_backward
  // Every other kernel is memory-bound: the bytes it reads and writes, by OpCategory (the
  // contractions' and attention's own traffic is inside their FLOP rate).
  std::array<double, kPlanOpCategories> memory_bytes{};
  int64_t kernels = 0;  // nodes that launch a kernel
  double memory_bytes_total() const;
};
GpuStepWork gpu_step_work(const Graph& g, const SymEnv& env);

// Bytes one rank sends per optimizer step for ZeRO `stage` over `world` ranks with bf16
// parameters and gradients (2 bytes each), ring collectives ((world-1)/world of the buffer):
//   stage 0: all-reduce of the gradients            2·(w-1)/w · 2Ψ
//   stage 1, 2: reduce-scatter of the gradients + all-gather of the updated parameters, same
//   stage 3: all-gather of the parameters in forward and again in backward + reduce-scatter of
//            the gradients                          3·(w-1)/w · 2Ψ
double zero_comm_bytes(int64_t num_params, int stage, int64_t world);

// The optimizer step (AdamW over this rank's partition): bytes moved / bandwidth. CPU: f32
// params, grads, m, v (read 4, write 3 arrays); GPU: fp32 master, m, v read and written, bf16
// gradient read, bf16 parameter written.
double optimizer_seconds(int64_t local_params, const DeviceProfile& device, const Efficiency& eff);

// The CPU step priced from this host's measured rates (probe/host_rates.h), by the category
// `--profile` reports, so each can be checked against its measured row:
//   contraction  every GEMM the node runs (matmul, matmul_add: one GEMM of all leading rows when
//                b is a weight, else one per batch matrix; linear_cross_entropy: per chunk of
//                rows the logits, dx and dw GEMMs) at its shape class's measured rate, plus the
//                fused loss's pass over its logits at the loss bandwidth
//   attention    sdpa and sdpa_backward FLOPs at their measured rates
//   elementwise, source, opaque: bytes / pointwise bandwidth (by bytes moved)
//   data_movement bytes / the permute's bandwidth
//   reduction    bytes / rms_norm's bandwidth; cross_entropy(_backward) at the loss bandwidth
//   optimizer    32 B per parameter at the AdamW-traffic bandwidth
//   overhead     kernel_seconds per kernel (every node but inputs and aliases)
//   collective   the gradient reductions and stage 3's gathers in the graph (passes/collectives),
//                with `comm` (this host's measured MPI rates for the run's world size): packing
//                and unpacking at the pointwise bandwidth, and what the collective's measured time
//                has left when its wait comes (host_collective_timeline); without `comm`, nothing
// Recompute adds the remat pass's extra forward nodes, so it is priced by the same rules, but
// for one: a recomputed memory-bound node (elementwise, data movement, reduction) that reads a
// value another recomputed node just produced finds it in cache, and costs hot_factor of its
// cold time (the GEMMs stay cold: measured, their recomputed cost matched the cold rate).
struct StepTimes {
  std::array<double, kPlanOpCategories> category{};  // index: OpCategory
  double optimizer = 0;
  double overhead = 0;
  // What pricing recomputed kernels hot took off the categories (not in total(): the step priced
  // with every recomputed kernel cold is total() + this), so a check can compare both.
  double recompute_hot_saving = 0;
  // Expert parallelism's token exchange (ep_route, ep_dispatch, ep_combine): part of the
  // collective category, shown on its own.
  double expert_exchange = 0;
  double total() const;
  // (name, seconds): the categories with time, by --profile's names, then "optimizer" and
  // "overhead".
  std::vector<std::pair<std::string, double>> items() const;
};
StepTimes host_step_times(const Graph& g, const SymEnv& env, const HostRates& rates, int64_t params,
                          const CommRates* comm = nullptr);

// The seconds one collective node's transfer takes with `comm` (0 for waits and other nodes):
// grad_reduce_start an all-reduce (stages 0, 1) or a reduce-scatter (2, 3) of its buffer,
// param_gather_start an all-gather of its buffer, ep_route / ep_dispatch / ep_combine an
// all-to-all over the expert-parallel group of what this rank sends (the counts; its routed
// rows; as many rows back), the world's all-to-all rates scaled to the group's share of copying.
double collective_transfer_seconds(const Graph& g, const Node& n, const SymEnv& env,
                                   const CommRates& comm);

// Stages 1 and 2: after the optimizer step every rank all-gathers the updated parameters of its
// `shard_numel`-element shard in chunks of allgather_bucket_size / world elements, blocking
// (dist/zero.h all_gather_params); 0 for stages 0 and 3 and one rank.
double zero_param_gather_seconds(const CommRates& comm, const ZeroConfig& zero,
                                 int64_t shard_numel);

// The remat pass's clones (passes/remat: backward nodes marked recompute), and whether one reads
// a value another clone produced (its operands just made, in cache).
bool is_recompute_clone(const Node& n);
bool reads_just_produced(const Graph& g, const Node& n);
// pointwise_bandwidth / pointwise_hot_bandwidth at `bytes`, at most 1.
double hot_factor(const HostRates& rates, double bytes);

}  // namespace lj
