// Where a distributed launch's rank, world size and local rank come from: the variables of
// torchrun, MPI (PMI, Open MPI) and Slurm, in one precedence table. A pure function over an
// environment callback, so tests feed it fake environments; `ljperf doctor` reports it and the
// dist/ module's communicator is set up from it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace lj {

// Looks up an environment variable; nullptr when unset. `std::getenv` in production.
using EnvLookup = std::function<const char*(const char*)>;

// The variables each value is read from, first found wins. The one table of these names.
inline constexpr const char* kRankVars[] = {"RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK",
                                            "SLURM_PROCID"};
inline constexpr const char* kWorldSizeVars[] = {"WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE",
                                                 "SLURM_NTASKS"};
inline constexpr const char* kLocalRankVars[] = {"LOCAL_RANK", "MPI_LOCALRANKID",
                                                 "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // The variable each value came from; empty when none was set and the default was used.
  std::string rank_var;
  std::string world_size_var;
  std::string local_rank_var;
  // Lower-precedence variables that are set to a different value than the one used, as
  // "OMPI_COMM_WORLD_RANK=3 (RANK=0 is used)": usually a stale export from another launcher.
  std::vector<std::string> shadowed;
  bool launched() const { return !rank_var.empty() || !world_size_var.empty(); }
};

// Rank, world size and local rank from the first variable set in each list above; none set
// means a single process (rank 0 of 1). A value that is not a non-negative integer, a world
// size below 1, or a rank outside [0, world_size) is an invalid_argument naming the variable.
StatusOr<LaunchEnv> resolve_launch_env(const EnvLookup& env);

}  // namespace lj
