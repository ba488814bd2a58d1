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

// Rank r sends (r + 1) * (q + 1) elements to rank q, each naming sender, receiver and index;
// zero-size blocks (q's block from a rank that sends it none) are exercised by rank 0 sending
// nothing to the last rank.
TEST(Communicator, AllToAllMovesUnevenBlocksToTheirRanks) {
  Communicator& c = dist_comm();
  const int n = c.world_size(), r = c.rank();
  auto count = [n](int from, int to) -> int64_t {
    return from == 0 && to == n - 1 ? 0 : (from + 1) * (to + 1);
  };
  std::vector<int64_t> send_counts, recv_counts;
  std::vector<float> send;
  for (int q = 0; q < n; ++q) {
    send_counts.push_back(count(r, q));
    for (int64_t i = 0; i < count(r, q); ++i) send.push_back(r * 1000.f + q * 100.f + i);
  }
  // The counts travel first, as expert parallelism exchanges them.
  std::vector<int64_t> got_counts(static_cast<size_t>(n));
  ASSERT_TRUE(c.all_to_all(send_counts, got_counts).ok());
  for (int q = 0; q < n; ++q) recv_counts.push_back(count(q, r));
  EXPECT_EQ(got_counts, recv_counts);
  int64_t total = 0;
  for (int64_t k : recv_counts) total += k;
  std::vector<float> recv(static_cast<size_t>(total), -1.f);
  CommHandle h = c.iall_to_all(send, send_counts, recv, recv_counts);
  ASSERT_TRUE(h.wait().ok());
  size_t at = 0;
  for (int q = 0; q < n; ++q) {
    for (int64_t i = 0; i < count(q, r); ++i, ++at) {
      ASSERT_EQ(recv[at], q * 1000.f + r * 100.f + i) << "block from rank " << q << ", " << i;
    }
  }
  // Counts that disagree with the buffers are a Status, before anything moves.
  std::vector<int64_t> short_counts(static_cast<size_t>(n - 1), 0);
  EXPECT_FALSE(c.all_to_all(send, short_counts, recv, recv_counts).ok());
  std::vector<float> small(1);
  EXPECT_FALSE(c.all_to_all(send, send_counts, small, recv_counts).ok());
}

// Groups the way expert parallelism makes them: rank r joins group r % 2; the group's
// collectives reach only its members.
TEST(Communicator, SplitMakesGroupsWhoseCollectivesStayInside) {
  Communicator& c = dist_comm();
  const int n = c.world_size(), r = c.rank();
  StatusOr<std::unique_ptr<Communicator>> g = c.split(r % 2, r);
  ASSERT_TRUE(g.ok()) << g.status().message();
  Communicator& group = **g;
  const int members = (n + 1 - r % 2) / 2;  // ranks of this parity
  EXPECT_EQ(group.world_size(), members);
  EXPECT_EQ(group.rank(), r / 2);
  EXPECT_STREQ(group.backend_name(), "mpi");
  StatusOr<double> sum = group.all_reduce_sum(static_cast<double>(r));
  ASSERT_TRUE(sum.ok());
  double want = 0;
  for (int q = r % 2; q < n; q += 2) want += q;
  EXPECT_EQ(*sum, want);
  std::vector<int64_t> mine(static_cast<size_t>(members), r), theirs(static_cast<size_t>(members));
  ASSERT_TRUE(group.all_to_all(mine, theirs).ok());
  for (int q = 0; q < members; ++q) EXPECT_EQ(theirs[static_cast<size_t>(q)], 2 * q + r % 2);
}

}  // namespace
}  // namespace lj
