#include "dist/batch_shard.h"

#include "core/check.h"

namespace lj {

std::vector<int64_t> rank_micro_batches(int64_t step, int64_t grad_accum, int rank,
                                        int world_size) {
  LJ_CHECK(world_size >= 1 && rank >= 0 && rank < world_size) << rank << " of " << world_size;
  LJ_CHECK(step >= 0 && grad_accum >= 1) << step << " " << grad_accum;
  std::vector<int64_t> out;
  const int64_t first = step * grad_accum * world_size;
  for (int64_t j = 0; j < grad_accum; ++j) out.push_back(first + j * world_size + rank);
  return out;
}

}  // namespace lj
