#include "train/expert_parallel.h"

#include <string>

namespace lj {

Status check_expert_parallel(int size, const LlamaConfig& c, int world_size) {
  const std::string n = std::to_string(size);
  if (size < 1) {
    return invalid_argument("--expert-parallel " + n + ": the size must be at least 1",
                            "1 keeps every expert on every rank");
  }
  if (size == 1) return ok_status();
  if (!c.is_moe()) {
    return invalid_argument(
        "--expert-parallel " + n + ": model '" + c.name + "' is dense (it has no experts to shard)",
        "drop --expert-parallel, or train a mixture-of-experts model "
        "(--model tiny-moe, mixtral-8x7b, qwen3-30b-a3b)");
  }
  const std::string e = std::to_string(c.moe.num_experts);
  if (c.moe.num_experts % size != 0) {
    return invalid_argument(
        "--expert-parallel " + n + " does not divide the " + e + " experts of model '" + c.name +
            "'",
        "each rank of a group holds the same number of experts: use a divisor of " + e);
  }
  if (world_size % size != 0) {
    return invalid_argument(
        "--expert-parallel " + n + " does not divide the world size " + std::to_string(world_size),
        "the world splits into groups of N ranks: launch a multiple of " + n +
            " ranks (mpirun -np " + n + "), or use a divisor of " + std::to_string(world_size));
  }
  return ok_status();
}

StatusOr<ExpertGroups> make_expert_groups(Communicator& world, int size) {
  ExpertGroups g;
  g.layout = ExpertParallelLayout{.size = size, .world = world.world_size(), .rank = world.rank()};
  if (size < 1 || g.layout.world % size != 0) {
    return invalid_argument("expert-parallel size " + std::to_string(size) +
                            " does not divide the world size " + std::to_string(g.layout.world));
  }
  // Consecutive ranks share tokens; ranks with the same place in their group share experts.
  LJ_ASSIGN_OR_RETURN(g.ep, world.split(g.layout.edp_rank(), g.layout.ep_rank()));
  LJ_ASSIGN_OR_RETURN(g.edp, world.split(g.layout.ep_rank(), g.layout.edp_rank()));
  return g;
}

}  // namespace lj
