// backends/cuda/strided_walk.h: merging a walk's dims keeps every element's two offsets, and
// the common shapes come out as one or two dims.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "backends/cuda/strided_walk.h"

namespace lj {
namespace {

struct Walk {
  std::vector<int64_t> dims, a, b;
};

// Element i's offsets, as the CUDA kernels compute them (the innermost dim fastest).
std::pair<int64_t, int64_t> offsets(const Walk& w, int64_t i) {
  int64_t oa = 0, ob = 0;
  for (size_t k = w.dims.size(); k-- > 0;) {
    const int64_t idx = i % w.dims[k];
    i /= w.dims[k];
    oa += idx * w.a[k];
    ob += idx * w.b[k];
  }
  return {oa, ob};
}

Walk coalesced(Walk w) {
  int rank = static_cast<int>(w.dims.size());
  w.dims.resize(std::max<size_t>(w.dims.size(), 1));
  w.a.resize(w.dims.size());
  w.b.resize(w.dims.size());
  cuda::coalesce_walk(&rank, w.dims.data(), w.a.data(), w.b.data());
  w.dims.resize(static_cast<size_t>(rank));
  w.a.resize(static_cast<size_t>(rank));
  w.b.resize(static_cast<size_t>(rank));
  return w;
}

int64_t numel(const Walk& w) {
  int64_t n = 1;
  for (int64_t d : w.dims) n *= d;
  return n;
}

TEST(CudaStridedWalk, MergedDimsGiveEveryElementTheSameOffsets) {
  const std::vector<Walk> walks = {
      {{4, 8, 16}, {128, 16, 1}, {128, 16, 1}},        // two dense operands
      {{4, 8, 16}, {128, 16, 1}, {0, 0, 1}},           // a row broadcast
      {{4, 8, 16}, {128, 16, 1}, {8, 1, 0}},           // a column broadcast
      {{2, 3, 4, 5}, {60, 20, 5, 1}, {0, 5, 0, 1}},    // broadcast in the middle
      {{2, 3, 4, 5}, {60, 1, 15, 3}, {60, 20, 5, 1}},  // a permuted view
      {{1, 6, 1, 7}, {42, 7, 7, 1}, {0, 7, 0, 1}},     // size-1 dims
      {{5, 1}, {1, 1}, {0, 0}},                        // a scalar broadcast
      {{3, 4}, {8, 1}, {4, 1}},                        // a slice of wider rows
  };
  for (const Walk& w : walks) {
    const Walk m = coalesced(w);
    ASSERT_EQ(numel(m), numel(w));
    ASSERT_LE(m.dims.size(), w.dims.size());
    for (int64_t i = 0; i < numel(w); ++i) {
      ASSERT_EQ(offsets(m, i), offsets(w, i)) << "element " << i << " of a walk of rank "
                                              << w.dims.size() << " merged to " << m.dims.size();
    }
  }
}

TEST(CudaStridedWalk, CommonShapesBecomeOneOrTwoDims) {
  EXPECT_EQ(coalesced({{4, 8, 16}, {128, 16, 1}, {128, 16, 1}}).dims, (std::vector<int64_t>{512}));
  const Walk row = coalesced({{4, 8, 16}, {128, 16, 1}, {0, 0, 1}});
  EXPECT_EQ(row.dims, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(row.b, (std::vector<int64_t>{0, 1}));
  const Walk scalar = coalesced({{5, 7}, {7, 1}, {0, 0}});
  EXPECT_EQ(scalar.dims, (std::vector<int64_t>{35}));
  EXPECT_EQ(scalar.b, (std::vector<int64_t>{0}));
  // Rank 0 and all-ones: one dim of one element.
  EXPECT_EQ(coalesced({{}, {}, {}}).dims, (std::vector<int64_t>{1}));
  EXPECT_EQ(coalesced({{1, 1}, {1, 1}, {1, 1}}).dims, (std::vector<int64_t>{1}));
  // A slice of wider rows stays two dims: its rows are not adjacent.
  EXPECT_EQ(coalesced({{3, 4}, {8, 1}, {4, 1}}).dims, (std::vector<int64_t>{3, 4}));
}

TEST(CudaStridedWalk, ThirtyTwoBitIndexingOnlyWhenEveryOffsetFits) {
  const int64_t dims[] = {1024, 1024}, dense[] = {1024, 1}, wide[] = {1 << 21, 1};
  EXPECT_EQ(cuda::walk_max_offset(2, dims, dense), 1024 * 1024 - 1);
  EXPECT_EQ(cuda::walk_max_offset(2, dims, dense, 5), 1024 * 1024 + 4);
  EXPECT_TRUE(cuda::walk_fits_32(1024 * 1024, cuda::walk_max_offset(2, dims, dense)));
  // A slice whose rows lie 2^21 apart: the last offset is past 2^30.
  EXPECT_FALSE(cuda::walk_fits_32(1024 * 1024, cuda::walk_max_offset(2, dims, wide)));
  EXPECT_FALSE(cuda::walk_fits_32(int64_t{1} << 31, 0));
  const int64_t back[] = {-1024, 1};
  EXPECT_EQ(cuda::walk_max_offset(2, dims, back), -1);
}

}  // namespace
}  // namespace lj
