// What Open MPI 4.1's nonblocking collectives (coll/libnbc, the component that runs them) make
// resident on `rank` of `world` beside the caller's buffers, in f32 elements, for a collective
// over a `count`-element bucket: malloc'd at the start, freed when the request completes, and
// outside ljperf's allocator, so only the memory predictor sees them (plan/graph_figures.h
// DryRunOptions::mpi_temporaries). A model of one MPI library's internals, kept with the
// predictor that prices it rather than with the collectives (dist/zero.h) that cause it.
//   all-reduce: one bucket on every rank (measured at 2 ranks: stage 0's peak is 1 bucket above
//     ljperf's own accounting on both ranks).
//   reduce-scatter: a binomial reduce to rank 0, then a scatter. Every rank mallocs two buckets
//     but writes (makes resident) the first when it receives once and the second when it
//     receives again: rank r receives in round k (1 <= k <= ceil(log2 world)) when r is a
//     multiple of 2^k and r + 2^(k-1) < world. At 2 ranks: one bucket on rank 0, none on rank 1
//     (measured: rank 1's peak was a whole bucket below rank 0's).
//   all-gather(v): nothing (it receives straight into the caller's buffer).
#pragma once

#include <cstdint>

namespace lj {

int64_t mpi_all_reduce_temporary_numel(int64_t count, int rank, int world);
int64_t mpi_reduce_scatter_temporary_numel(int64_t count, int rank, int world);

}  // namespace lj
