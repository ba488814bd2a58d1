// probe/comm_rates.h and the host time model's collectives (plan/time_model.h): made-up MPI rates
// (no timing in unit tests), and how the model prices a rank's graph with them: every transfer
// exposed (overlap_comm or not), stages 1-2's gather after the step, and nothing without rates.
#include "probe/comm_rates.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "models/config.h"
#include "plan/graph_figures.h"
#include "plan/time_model.h"
#include "unit/temp_cache_home.h"

namespace lj {
namespace {

// Every kind at 1 GB/s with 100 µs of latency, sampled at 1 MB and 100 MB.
CommRates made_up_comm(int world = 2) {
  CommRates r;
  r.world_size = world;
  for (auto& s : r.samples) s = {{1e6, 1e-4 + 1e-3}, {1e8, 1e-4 + 1e-1}};
  return r;
}

HostRates made_up_rates() {
  HostRates r;
  r.threads = 1;
  r.gemm = {{1024, 1024, 1024, false, true, 2.0 * 1024 * 1024 * 1024 / 100e9}};
  r.attention_forward_flops = 80e9;
  r.attention_backward_flops = 100e9;
  r.pointwise = {{1e5, 40e9}, {1e7, 10e9}};
  r.pointwise_hot = r.pointwise;
  r.movement_bandwidth = 8e9;
  r.reduction_bandwidth = 12e9;
  r.loss_bandwidth = 9e9;
  r.optimizer_bandwidth = 16e9;
  r.kernel_seconds = 2e-6;
  return r;
}

TEST(CommRatesTest, SecondsInterpolateBetweenSamplesAndScaleAbove) {
  const CommRates r = made_up_comm();
  ASSERT_TRUE(r.valid());
  const auto ar = CollectiveKind::all_reduce;
  EXPECT_DOUBLE_EQ(r.seconds(ar, 1e3), 1.1e-3);  // below the smallest: its time (latency)
  EXPECT_DOUBLE_EQ(r.seconds(ar, 1e6), 1.1e-3);
  EXPECT_NEAR(r.seconds(ar, 50.5e6), 0.5 * (1.1e-3 + 0.1001), 1e-12);  // halfway
  EXPECT_NEAR(r.seconds(ar, 2e8), 2 * 0.1001, 1e-12);  // above: the largest's bandwidth
  EXPECT_EQ(CommRates{}.seconds(ar, 1e6), 0);          // not measured: nothing
}

TEST(CommRatesTest, JsonRoundTripAndRefusals) {
  const CommRates r = made_up_comm(3);
  auto back = comm_rates_from_json(comm_rates_to_json(r));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->world_size, 3);
  EXPECT_DOUBLE_EQ(back->seconds(CollectiveKind::all_gather, 1e8), 0.1001);
  nlohmann::json bad = comm_rates_to_json(r);
  bad["reduce_scatter"][0]["seconds"] = 0;
  EXPECT_FALSE(comm_rates_from_json(bad).ok());
  bad = comm_rates_to_json(r);
  bad.erase("all_gather");
  EXPECT_FALSE(comm_rates_from_json(bad).ok());
}

TEST(CommRatesTest, CachedPerWorldSize) {
  const TempCacheHome cache_home("lj_comm_rates_test");
  EXPECT_FALSE(cached_comm_rates(2).has_value());
  cache_comm_rates(made_up_comm(2));
  ASSERT_TRUE(cached_comm_rates(2).has_value());
  EXPECT_FALSE(cached_comm_rates(3).has_value());  // another world size: not this entry
}

// One rank of 2 with the gradient collectives in the graph, priced with `comm`.
StepTimes priced(int stage, bool overlap, const CommRates* comm) {
  auto m = llama_preset("tiny");
  EXPECT_TRUE(m.ok());
  ZeroConfig zero = ZeroConfig::defaults(stage);
  zero.overlap_comm = overlap;
  zero.reduce_bucket_size = 20'000;  // several buckets
  GraphOptions o;
  o.grad_sync = GradSyncOptions::for_world(zero, 2, 0);
  HostRates rates = made_up_rates();
  DryRunOptions dry;
  dry.rates = &rates;
  dry.world_size = 2;
  dry.zero = zero;
  dry.comm = comm;
  auto f = graph_figures(*m, 2, 64, o, dry);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  return f.ok() ? *f->times : StepTimes{};
}

double collective(const StepTimes& t) {
  return t.category[static_cast<size_t>(OpCategory::collective)];
}

TEST(HostCommTest, EveryTransferIsExposedOverlapOrNot) {
  const CommRates comm = made_up_comm();
  EXPECT_EQ(collective(priced(0, false, nullptr)), 0);  // no rates: not priced
  const double blocking = collective(priced(0, false, &comm));
  // tiny's gradients in 20,000-element buckets: each all-reduce at least the 1.1 ms latency.
  EXPECT_GT(blocking, 2 * 1.1e-3);
  // A host collective progresses in the rank's own MPI calls, so overlap_comm hides nothing
  // (measured: 164.4 ms exposed with it, 167.5 without; bench/plan/comm/RESULTS.md).
  EXPECT_DOUBLE_EQ(collective(priced(0, true, &comm)), blocking);
}

TEST(HostCommTest, Stages1And2GatherTheParametersAfterTheStep) {
  const CommRates comm = made_up_comm();
  ZeroConfig z1 = ZeroConfig::defaults(1);
  z1.allgather_bucket_size = 2'000'000;  // 1,000,000 per rank: two chunks of 1.5M elements
  EXPECT_NEAR(
      zero_param_gather_seconds(comm, z1, 1'500'000),
      comm.seconds(CollectiveKind::all_gather, 8e6) + comm.seconds(CollectiveKind::all_gather, 4e6),
      1e-15);
  EXPECT_EQ(zero_param_gather_seconds(comm, ZeroConfig::defaults(0), 1'500'000), 0);
  EXPECT_EQ(zero_param_gather_seconds(comm, ZeroConfig::defaults(3), 1'500'000), 0);
  // In the step: stage 1 blocking reduces as stage 0 does (a reduce-scatter at the same made-up
  // rate) and adds the gather.
  EXPECT_GT(collective(priced(1, false, &comm)), collective(priced(0, false, &comm)));
}

}  // namespace
}  // namespace lj
