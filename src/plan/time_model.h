// Step time from the graph: every node costs max(FLOPs / (peak · efficiency[category]),
// bytes / (bandwidth · bandwidth efficiency)) — the roofline with measured efficiencies — and the
// nodes run one after another. Recompute shows up as the extra nodes the remat pass adds.
// ZeRO's collectives are priced by the volume DeepSpeed moves over the link.
#pragma once

#include <cstdint>

#include "graph/ir.h"
#include "plan/device_catalog.h"

namespace lj {

// Sum over the nodes of `g` with symbols bound by `env`. Inputs and aliases cost nothing.
// On a GPU contractions and attention run at the bf16 tensor-core peak when their output is
// bf16; everything else at the fp32 peak.
double graph_seconds(const Graph& g, const SymEnv& env, const DeviceProfile& device,
                     const Efficiency& eff);

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

}  // namespace lj
