// ZeRO stage 3's parameter gathers, placed by GradSyncPass (grad_sync.h) after the gradient
// collectives: the parameters stop being graph inputs; one input, "zero3.param_shard" f32 (S),
// this rank's part of the flat vector of dist/zero.h, takes their place, and each parameter is
// all-gathered from every rank's shard before its first use in forward and again before its
// first use in backward (its readers rewired to the gathered value), so that a whole parameter
// lives only from its gather to its last use in that phase. A parameter below
// persistence_threshold elements is gathered once: its forward gather serves backward too. So
// is one whose reuse is near (DeepSpeed's stage3_max_reuse_distance, which DeepSpeed checks when
// it would free a parameter after a module: kept if it reappears in the trace before
// max_reuse_distance elements of parameters are traversed): here, when the parameters gathered
// after its last forward use and before its first backward use sum to fewer elements than
// max_reuse_distance. At DeepSpeed's default (1e9) every parameter of a model below 1e9
// elements is kept from forward to backward, as in DeepSpeed.
//
// The parameter is the gather's receive buffer (param_gather_wait aliases it): one copy.
//
// stage3_max_live_parameters (DeepSpeed bounds its prefetch by max_live - elements gathered and
// alive): a gather is prefetched only while the elements alive where it starts (gathered and
// not yet freed, the ones in flight included) stay within max_live_parameters; one that does
// not fit starts right before its first use.
//
// Prefetch, from the static schedule (DeepSpeed records the order in its first step; here the
// node order is known before the first step): within each phase, gathers are in order of first
// use, and with overlap a gather starts right after the wait of the gather d places earlier,
// d >= 1 the most gathers whose elements (its own included) fit prefetch_bucket_size; the first
// ones start where the phase starts. Without overlap each gather starts right before its wait.
#pragma once

#include <cstdint>
#include <vector>

#include "passes/collectives/grad_sync.h"

namespace lj {

// numels: the parameters' element counts in parameter order (g.params() order; with
// options.skip_experts, the parameters other than the experts' weights, which stay inputs).
Status place_param_gathers(Graph& g, const GradSyncOptions& options,
                           const std::vector<int64_t>& numels);

}  // namespace lj
