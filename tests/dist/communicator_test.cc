// The MPI communicator's collectives at 2 and 3 ranks: values, in-place forms, several in
// flight, completion by test(), and size errors as Status on every rank.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "dist_test_util.h"

namespace lj {
namespace {

TEST(Communicator, RanksComeFromTheLauncher) {
  Communicator& c = dist_comm();
  EXPECT_STREQ(c.backend_name(), "mpi");
  EXPECT_GE(c.world_size(), 2);
  EXPECT_LT(c.rank(), c.world_size());
  EXPECT_EQ(c.local_rank(), c.rank());  // one host
}

TEST(Communicator, AllReduceSumsFloatAndDouble) {
  Communicator& c = dist_comm();
  const int n = c.world_size(), r = c.rank();
  std::vector<float> f{static_cast<float>(r + 1), 0.5f, static_cast<float>(r)};
  std::vector<float> out(3);
  ASSERT_TRUE(c.all_reduce_sum(std::span<const float>(f), std::span<float>(out)).ok());
  EXPECT_EQ(out, (std::vector<float>{n * (n + 1) / 2.0f, 0.5f * n, n * (n - 1) / 2.0f}));
  ASSERT_TRUE(c.all_reduce_sum(std::span<const float>(f), std::span<float>(f)).ok());  // in place
  EXPECT_EQ(f, out);
  std::vector<double> d{1e300 * (r + 1), 1.0 / 3};
  ASSERT_TRUE(c.all_reduce_sum(std::span<const double>(d), std::span<double>(d)).ok());
  EXPECT_DOUBLE_EQ(d[0], 1e300 * n * (n + 1) / 2);
  EXPECT_DOUBLE_EQ(*c.all_reduce_sum(static_cast<double>(r)), n * (n - 1) / 2.0);
}

TEST(Communicator, ReduceScatterGivesEachRankItsSummedBlock) {
  Communicator& c = dist_comm();
  const int n = c.world_size(), r = c.rank();
  const int block = 3;
  std::vector<float> send(static_cast<size_t>(block * n)), recv(block);
  for (int b = 0; b < n; ++b)
    for (int i = 0; i < block; ++i)
      send[static_cast<size_t>(b * block + i)] = r * 100.f + b * 10.f + i;
  ASSERT_TRUE(c.reduce_scatter_sum(std::span<const float>(send), std::span<float>(recv)).ok());
  for (int i = 0; i < block; ++i) {
    // sum over ranks q of q * 100 + r * 10 + i
    EXPECT_EQ(recv[static_cast<size_t>(i)], 100.f * n * (n - 1) / 2 + n * (r * 10.f + i));
  }
}

TEST(Communicator, AllGatherAndBroadcast) {
  Communicator& c = dist_comm();
  const int n = c.world_size(), r = c.rank();
  std::vector<float> send{static_cast<float>(r), r + 0.5f}, recv(static_cast<size_t>(2 * n));
  ASSERT_TRUE(c.all_gather(std::span<const float>(send), std::span<float>(recv)).ok());
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(recv[static_cast<size_t>(2 * q)], static_cast<float>(q));
    EXPECT_EQ(recv[static_cast<size_t>(2 * q + 1)], q + 0.5f);
  }
  std::vector<std::byte> bytes(5, std::byte{static_cast<unsigned char>(r)});
  ASSERT_TRUE(c.broadcast(bytes, n - 1).ok());
  for (std::byte b : bytes) EXPECT_EQ(b, std::byte{static_cast<unsigned char>(n - 1)});
  EXPECT_TRUE(c.barrier().ok());
}

TEST(Communicator, SeveralInFlightCompleteByTestOrWait) {
  Communicator& c = dist_comm();
  std::vector<float> a(1000, 1.0f), b(10, 2.0f);
  CommHandle ha = c.iall_reduce_sum(std::span<const float>(a), std::span<float>(a));
  CommHandle hb = c.iall_reduce_sum(std::span<const float>(b), std::span<float>(b));
  CommHandle hbar = c.ibarrier();
  while (!hb.test()) {
  }
  EXPECT_TRUE(hb.wait().ok());
  EXPECT_TRUE(ha.wait().ok());
  EXPECT_TRUE(ha.wait().ok());  // again: the same status
  EXPECT_TRUE(hbar.wait().ok());
  EXPECT_EQ(a[999], static_cast<float>(c.world_size()));
  EXPECT_EQ(b[0], 2.0f * c.world_size());
}

TEST(Communicator, WrongSizesAreErrorsNotAborts) {
  Communicator& c = dist_comm();
  std::vector<float> send(5), recv(2);  // not world_size x 2
  const Status s = c.reduce_scatter_sum(std::span<const float>(send), std::span<float>(recv));
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_FALSE(c.all_gather(std::span<const float>(send), std::span<float>(recv)).ok());
  EXPECT_FALSE(c.broadcast({}, c.world_size()).ok());
  EXPECT_TRUE(c.barrier().ok());  // still usable
}

}  // namespace
}  // namespace lj
