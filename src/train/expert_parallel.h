// Expert parallelism's settings and groups (--expert-parallel N, Megatron's and torchtitan's
// meaning). The world's W ranks form W / N expert-parallel groups of N consecutive ranks: the
// ranks of one group share their tokens, each holding E / N of every sparse layer's E experts
// (dist/expert_exchange.h moves the tokens). The ranks that hold the same experts, one per group
// (rank % N equal), form an expert-data-parallel group of W / N ranks: the experts' weights are
// data-parallel over it (and ZeRO shards them there, as DeepSpeed-MoE does), while the dense
// weights stay data-parallel over the world.
//
//   W = 4, N = 2:  expert-parallel groups {0, 1}, {2, 3};  expert-data-parallel {0, 2}, {1, 3}
#pragma once

#include <cstdint>
#include <memory>

#include "dist/communicator.h"
#include "models/config.h"

namespace lj {

// Where a rank sits for expert-parallel size `size` in a world of `world` ranks.
struct ExpertParallelLayout {
  int size = 1;                                  // N, ranks per expert-parallel group
  int world = 1;                                 // W
  int rank = 0;                                  // in the world
  int ep_rank() const { return rank % size; }    // in its expert-parallel group
  int edp_size() const { return world / size; }  // W / N
  int edp_rank() const { return rank / size; }   // in its expert-data-parallel group
  int64_t local_experts(int64_t experts) const { return experts / size; }
  int64_t first_local_expert(int64_t experts) const { return ep_rank() * local_experts(experts); }
};

// The checks of --expert-parallel N, before any work, each an invalid_argument naming the flag
// with a hint: N >= 1; N > 1 on a dense model; N not dividing the model's expert count; N not
// dividing the world size.
Status check_expert_parallel(int size, const LlamaConfig& c, int world_size);

// The two groups of this rank, split from the world's communicator (a collective: every rank
// calls it with the same size).
struct ExpertGroups {
  ExpertParallelLayout layout;
  std::unique_ptr<Communicator> ep;   // the expert-parallel group: tokens travel over it
  std::unique_ptr<Communicator> edp;  // the expert-data-parallel group: expert gradients
};
StatusOr<ExpertGroups> make_expert_groups(Communicator& world, int size);

}  // namespace lj
