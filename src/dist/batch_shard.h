// Which micro-batches of the global stream each rank trains on. The global stream is the one a
// single process reads in order (train/data_loader.h: micro-batch m is windows [m * B, (m + 1) *
// B)). With N ranks and gradient accumulation A, global step s covers micro-batches
// [s * N * A, (s + 1) * N * A); rank r takes r, N + r, 2N + r, ... of them. So N ranks x A x B
// compute what one process with accumulation N * A computes, and the slices are disjoint and
// deterministic. Nothing here (and no seed anywhere) depends on the rank except the slice.
#pragma once

#include <cstdint>
#include <vector>

namespace lj {

// The global micro-batch indices rank `rank` of `world_size` trains on at global step `step`,
// with `grad_accum` micro-batches per rank per step, in the order it accumulates them.
std::vector<int64_t> rank_micro_batches(int64_t step, int64_t grad_accum, int rank, int world_size);

}  // namespace lj
