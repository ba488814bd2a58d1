#include "plan/mpi_temporaries.h"

#include <algorithm>

#include "core/check.h"

namespace lj {

int64_t mpi_all_reduce_temporary_numel(int64_t count, int rank, int world) {
  LJ_CHECK(rank >= 0 && rank < world);
  return world > 1 ? count : 0;
}

int64_t mpi_reduce_scatter_temporary_numel(int64_t count, int rank, int world) {
  LJ_CHECK(rank >= 0 && rank < world);
  int receives = 0;
  for (int64_t step = 1; step < world; step *= 2) {  // round k: step = 2^(k-1)
    if (rank % (2 * step) != 0) break;               // it sends this round and leaves
    if (rank + step < world) ++receives;
  }
  return std::min(receives, 2) * count;
}

}  // namespace lj
