// Expert parallelism's token exchange (dist/expert_exchange.h) at 2 and 3 ranks, against the one
// process it stands for: every rank can make every rank's routed rows (seeded by rank), so each
// checks that its experts receive exactly the rows one process's moe_sort would give them, in
// that order, and that combine brings each rank's rows back where they left. Bitwise: the
// exchange only moves floats.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "dist/expert_exchange.h"
#include "dist_test_util.h"
#include "train/expert_parallel.h"

namespace lj {
namespace {

constexpr int64_t kExperts = 6;  // splits over 1, 2, 3 and 6 ranks
constexpr int64_t kWidth = 5;

// Rank q's routed rows: an expert per row (some experts get none), the rows sorted by expert
// (moe_sort's order), each row's values naming (rank, row, column).
struct Routed {
  std::vector<int64_t> sizes;   // (E)
  std::vector<float> rows;      // (M, W), sorted by expert
  std::vector<int64_t> expert;  // (M)
};

Routed routed_rows(int q) {
  std::mt19937 rng(1234u + static_cast<unsigned>(q));
  const int64_t m = 7 + 4 * q;  // uneven across ranks
  Routed r;
  r.sizes.assign(kExperts, 0);
  for (int64_t i = 0; i < m; ++i) {
    // Expert 1 is never chosen: an empty group on its rank.
    int64_t e = static_cast<int64_t>(rng() % (kExperts - 1));
    if (e >= 1) ++e;
    ++r.sizes[static_cast<size_t>(e)];
  }
  for (int64_t e = 0; e < kExperts; ++e) {
    for (int64_t k = 0; k < r.sizes[static_cast<size_t>(e)]; ++k) r.expert.push_back(e);
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < kWidth; ++c) r.rows.push_back(q * 1000.f + i * 10.f + c + 0.25f);
  }
  return r;
}

// What an expert does to a row in this test: a function of the expert, so combine's answer
// shows each row went to its own expert and came back to its own place.
float expert_fn(int64_t e, float x) {
  return x * static_cast<float>(e + 2) + static_cast<float>(e);
}

TEST(ExpertExchange, ExpertsGetOneProcesssRowsAndCombineReturnsThem) {
  Communicator& c = dist_comm();
  const int p = c.world_size(), r = c.rank();
  ASSERT_EQ(kExperts % p, 0) << "run at 2, 3 or 6 ranks";
  const Routed mine = routed_rows(r);
  StatusOr<ExpertRoute> route = plan_expert_route(c, mine.sizes);
  ASSERT_TRUE(route.ok()) << route.status().message();
  const int64_t local = kExperts / p;
  ASSERT_EQ(route->local_experts, local);

  // One process's order for this rank's experts: expert by expert, then rank by rank (the
  // batch is the ranks' batches end to end), then row by row.
  std::vector<float> want;
  std::vector<int64_t> want_expert, want_sizes(static_cast<size_t>(local), 0);
  std::vector<Routed> all;
  for (int q = 0; q < p; ++q) all.push_back(routed_rows(q));
  for (int64_t l = 0; l < local; ++l) {
    const int64_t e = r * local + l;
    for (int q = 0; q < p; ++q) {
      const Routed& w = all[static_cast<size_t>(q)];
      for (size_t i = 0; i < w.expert.size(); ++i) {
        if (w.expert[i] != e) continue;
        for (int64_t col = 0; col < kWidth; ++col)
          want.push_back(w.rows[i * kWidth + static_cast<size_t>(col)]);
        want_expert.push_back(e);
        ++want_sizes[static_cast<size_t>(l)];
      }
    }
  }
  EXPECT_EQ(route->group_sizes, want_sizes);
  ASSERT_EQ(route->rows_in() * kWidth, static_cast<int64_t>(want.size()));

  ExpertExchange x(c, *route, kWidth);
  std::vector<float> staging(want.size()), got(want.size(), -1.f);
  CommHandle h = x.start_dispatch(mine.rows, staging);
  ASSERT_TRUE(x.finish_dispatch(h, staging, got).ok());
  ASSERT_EQ(got, want);  // bitwise, in one process's order

  // The experts run; combine brings the results home.
  std::vector<float> y(got.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = expert_fn(want_expert[i / kWidth], got[i]);
  std::vector<float> back(mine.rows.size(), -1.f);
  ASSERT_TRUE(x.combine(y, staging, back).ok());
  for (size_t i = 0; i < back.size(); ++i) {
    ASSERT_EQ(back[i], expert_fn(mine.expert[i / kWidth], mine.rows[i])) << "element " << i;
  }
}

TEST(ExpertExchange, RefusesExpertsThatDoNotSplitOverTheGroup) {
  Communicator& c = dist_comm();
  // E = p + 1 experts never split over p >= 2 ranks; refused before any exchange, on every rank.
  std::vector<int64_t> sizes(static_cast<size_t>(c.world_size() + 1), 1);
  StatusOr<ExpertRoute> route = plan_expert_route(c, sizes);
  ASSERT_FALSE(route.ok());
  EXPECT_NE(route.status().message().find("do not split"), std::string::npos);
}

// The exchange within the groups expert parallelism makes out of a bigger world: with
// expert-parallel size 1 each rank is its own group and keeps every row.
TEST(ExpertExchange, AGroupOfOneKeepsItsRows) {
  Communicator& c = dist_comm();
  StatusOr<std::unique_ptr<Communicator>> own = c.split(c.rank(), 0);
  ASSERT_TRUE(own.ok());
  const Routed mine = routed_rows(c.rank());
  StatusOr<ExpertRoute> route = plan_expert_route(**own, mine.sizes);
  ASSERT_TRUE(route.ok());
  EXPECT_EQ(route->group_sizes, mine.sizes);
  ExpertExchange x(**own, *route, kWidth);
  std::vector<float> staging(mine.rows.size()), got(mine.rows.size());
  ASSERT_TRUE(x.dispatch(mine.rows, staging, got).ok());
  EXPECT_EQ(got, mine.rows);
}

// The groups of train/expert_parallel.h, made from the world: at size N every expert-parallel
// group holds N consecutive ranks and every expert-data-parallel group W / N ranks N apart.
TEST(ExpertGroups, SplitTheWorldIntoTokenAndExpertGroups) {
  Communicator& c = dist_comm();
  const int w = c.world_size(), r = c.rank();
  for (int n : {1, w}) {
    StatusOr<ExpertGroups> g = make_expert_groups(c, n);
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(g->ep->world_size(), n);
    EXPECT_EQ(g->ep->rank(), r % n);
    EXPECT_EQ(g->edp->world_size(), w / n);
    EXPECT_EQ(g->edp->rank(), r / n);
    // The members' world ranks, summed over each group, name the group.
    StatusOr<double> ep_sum = g->ep->all_reduce_sum(static_cast<double>(r));
    StatusOr<double> edp_sum = g->edp->all_reduce_sum(static_cast<double>(r));
    ASSERT_TRUE(ep_sum.ok() && edp_sum.ok());
    double want_ep = 0, want_edp = 0;
    for (int q = 0; q < w; ++q) {
      if (q / n == r / n) want_ep += q;
      if (q % n == r % n) want_edp += q;
    }
    EXPECT_EQ(*ep_sum, want_ep);
    EXPECT_EQ(*edp_sum, want_edp);
  }
}

}  // namespace
}  // namespace lj
