// probe/comm_rates.h and the host time model's collectives (plan/time_model.h): made-up MPI rates
// (no timing in unit tests), and how the model prices a rank's graph with them: every transfer
// exposed (overlap_comm or not), stages 1-2's gather after the step, and nothing without rates.
// Expert parallelism: the token exchange priced as all-to-alls, and the grouped GEMMs counted by
// the rows a rank receives, not by its receive buffer (graph/moe_rows.h).
#include "probe/comm_rates.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "graph/builder_moe.h"
#include "graph/moe_rows.h"
#include "models/config.h"
#include "plan/graph_figures.h"
#include "plan/time_model.h"
#include "probe/gemm_calls.h"
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

// One rank of 2, tiny-moe (8 experts, top 2) with its experts over `ep` ranks, priced.
struct MoePriced {
  Graph graph;
  StepTimes times;
};
MoePriced moe_priced(int ep, const CommRates* comm) {
  auto m = llama_preset("tiny-moe");
  EXPECT_TRUE(m.ok());
  GraphOptions o;
  o.experts = ExpertShard{.size = ep, .rank = 0};
  o.grad_sync = GradSyncOptions::for_world(ZeroConfig::defaults(0), 2, 0);
  HostRates rates = made_up_rates();
  DryRunOptions dry;
  dry.rates = &rates;
  dry.world_size = 2;
  dry.zero = ZeroConfig::defaults(0);
  dry.comm = comm;
  MoePriced r;
  EXPECT_TRUE(build_train_graph(*m, o, &r.graph).ok());
  auto f = graph_figures(r.graph, *m, 2, 32, o, dry);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  if (f.ok() && f->times) r.times = *f->times;
  return r;
}

const SymEnv kMoeEnv{{'B', 2}, {'T', 32}};  // as moe_priced's dry run binds them

// The grouped GEMMs' FLOPs and the rows their GEMM calls cover, over the graph.
std::pair<double, int64_t> grouped_work(const Graph& g) {
  double flops = 0;
  int64_t rows = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::grouped_matmul && n.op != Op::grouped_matmul_wgrad) continue;
    flops += node_cost(g, n, kMoeEnv).flops;
    for (const auto& [s, count] : node_gemms(g, n, kMoeEnv).gemms)
      rows += (n.op == Op::grouped_matmul ? s.m : s.k) * count;
  }
  return {flops, rows};
}

// A rank of an expert-parallel pair runs half the experts on the rows both ranks route to them:
// as many rows as one rank routes, so the grouped GEMMs cost what they cost without expert
// parallelism (counted by the receive buffer of 2 x the rows, they cost twice as much).
TEST(HostExpertParallelTest, GroupedGemmsCountTheRowsReceivedNotTheBuffer) {
  const MoePriced one = moe_priced(1, nullptr), two = moe_priced(2, nullptr);
  const auto [flops1, rows1] = grouped_work(one.graph);
  const auto [flops2, rows2] = grouped_work(two.graph);
  // 2 layers x (gate_up, down) x (forward, dx, dw) over B·T·k = 128 routed rows each.
  EXPECT_EQ(rows1, 2 * 2 * 3 * 128);
  EXPECT_EQ(rows2, rows1);
  EXPECT_GT(flops1, 0);
  EXPECT_DOUBLE_EQ(flops2, flops1);
  int grouped = 0;
  for (const Node& n : two.graph.nodes()) {
    if (n.op != Op::grouped_matmul && n.op != Op::grouped_matmul_wgrad) continue;
    ++grouped;
    EXPECT_DOUBLE_EQ(grouped_rows_fraction(two.graph, n), 0.5);
    // 4 local experts of 8: each GEMM call covers 128 / 4 = 32 rows.
    for (const auto& [s, count] : node_gemms(two.graph, n, kMoeEnv).gemms) {
      EXPECT_EQ(count, 4);
      EXPECT_EQ(n.op == Op::grouped_matmul ? s.m : s.k, 32);
    }
  }
  EXPECT_EQ(grouped, 2 * 2 * 3);
  for (const Node& n : one.graph.nodes()) EXPECT_DOUBLE_EQ(grouped_rows_fraction(one.graph, n), 1);
}

// The exchange's all-to-alls are priced from the rates (none: nothing), inside the collective
// category, and expert parallelism of one rank exchanges nothing.
TEST(HostExpertParallelTest, TheTokenExchangeIsPricedAsAllToAlls) {
  const CommRates comm = made_up_comm();
  ASSERT_TRUE(comm.valid());
  const MoePriced unpriced = moe_priced(2, nullptr);
  EXPECT_EQ(unpriced.times.expert_exchange, 0);
  const MoePriced none = moe_priced(1, &comm);
  EXPECT_EQ(none.times.expert_exchange, 0);
  const MoePriced two = moe_priced(2, &comm);
  // Per sparse layer: forward ep_route, ep_dispatch, ep_combine and backward's dispatch and
  // combine (ep_route has no gradient), each at least the all-to-all's 1.1 ms latency.
  int exchanges = 0;
  double transfers = 0;
  for (const Node& n : two.graph.nodes()) {
    if (n.op != Op::ep_route && n.op != Op::ep_dispatch && n.op != Op::ep_combine) continue;
    ++exchanges;
    const double s = collective_transfer_seconds(two.graph, n, kMoeEnv, comm);
    EXPECT_GE(s, 1.1e-3) << op_def(n.op).name;
    transfers += s;
  }
  EXPECT_EQ(exchanges, 2 * 5);
  // Beside the transfers, the dispatches zero their receive buffers' unused rows.
  EXPECT_GT(two.times.expert_exchange, transfers);
  EXPECT_LT(two.times.expert_exchange, transfers * 1.01);
  EXPECT_GE(collective(two.times), two.times.expert_exchange);
  // The world's gradient collectives reduce the dense parameters only (the experts' are their
  // own group's): at least one bucket's latency, and less than every parameter's.
  const double world = collective(two.times) - two.times.expert_exchange;
  EXPECT_GE(world, 1.1e-3);
  EXPECT_LT(world, collective(none.times));
}

// An all-to-all over a group of P of the world's W ranks copies (P-1)/P of what a rank sends,
// against (W-1)/W in the world's: priced as the world's all-to-all of as much copying.
TEST(HostExpertParallelTest, AGroupsExchangeIsScaledToTheWorldsRates) {
  CommRates comm = made_up_comm(4);
  // all_to_all only, linear in the bytes: 1 s per 1e9 bytes, no latency.
  for (auto& s : comm.samples) s = {{1e3, 1e-6}, {1e9, 1.0}};
  Graph g;
  Builder b(&g);
  Val sizes = b.input("sizes", DType::i32, Shape{8});
  Val rows = b.input("rows", DType::f32, Shape{1000, 250});  // 1e6 bytes sent
  ExpertRouteVals route = ep_route(sizes, 2);
  Val got = ep_dispatch(rows, sizes, route.recv_sizes, 2);
  ASSERT_TRUE(got.valid());
  const Node& dispatch = g.producer(got.id);
  // A pair copies half of the 1e6 bytes; the world of 4 copies 3/4 of what each sends: as a
  // world all-to-all of 4 x (1e6 x (1/2) / (3/4)) bytes.
  EXPECT_NEAR(collective_transfer_seconds(g, dispatch, {}, comm), 4 * 1e6 * 0.5 / 0.75 * 1e-9,
              1e-12);
}

}  // namespace
}  // namespace lj
