// passes/collectives/grad_sync: the buckets, where the collectives go in the schedule, and what
// the graph outputs become. (The collectives' numbers: tests/dist zero_test.cc.)
#include "passes/collectives/grad_sync.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "models/llama.h"
#include "passes/pipeline/pipeline.h"
#include "passes/pipeline/train_graph.h"
#include "passes/regions/regions.h"

namespace lj {
namespace {

TEST(GradBuckets, WholeParametersFromTheLastBackwardsWithEachRanksShardPart) {
  GradSyncOptions o = GradSyncOptions::of({.stage = 2, .reduce_bucket_size = 50}, 2, 0);
  // 100 elements, shards [0, 50) and [50, 100). From the end: 40 alone (40 + 30 > 50), then
  // 30 + 20 = 50, then 10.
  const std::vector<int64_t> numels{10, 20, 30, 40};
  const std::vector<GradBucket> r0 = grad_buckets(numels, o);
  ASSERT_EQ(r0.size(), 3u);
  EXPECT_EQ(r0[0], (GradBucket{3, 4, 60, 100, 0, 0}));
  EXPECT_EQ(r0[1], (GradBucket{1, 3, 10, 60, 10, 40}));
  EXPECT_EQ(r0[2], (GradBucket{0, 1, 0, 10, 0, 10}));
  o.rank = 1;
  const std::vector<GradBucket> r1 = grad_buckets(numels, o);
  EXPECT_EQ(r1[0], (GradBucket{3, 4, 60, 100, 10, 40}));
  EXPECT_EQ(r1[1], (GradBucket{1, 3, 10, 60, 0, 10}));
  EXPECT_EQ(r1[2], (GradBucket{0, 1, 0, 10, 0, 0}));
  // A parameter above the size is a bucket of its own; one huge bucket takes everything.
  o.zero.reduce_bucket_size = 5;
  EXPECT_EQ(grad_buckets(numels, o).size(), 4u);
  o.zero.reduce_bucket_size = 500'000'000;
  EXPECT_EQ(grad_buckets(numels, o).size(), 1u);
}

struct Placed {
  Graph g;
  std::vector<size_t> starts, waits;  // node positions, in order
};

Placed tiny_graph(GradSyncOptions gs) {
  auto model = llama_preset("tiny");
  LJ_CHECK(model.ok());
  GraphOptions go;
  go.grad_sync = gs;
  Placed p;
  auto ids = build_train_graph(*model, go, &p.g);
  LJ_CHECK(ids.ok()) << ids.status().to_string();
  for (size_t i = 0; i < p.g.nodes().size(); ++i) {
    if (p.g.nodes()[i].op == Op::grad_reduce_start) p.starts.push_back(i);
    if (p.g.nodes()[i].op == Op::grad_reduce_wait) p.waits.push_back(i);
  }
  return p;
}

TEST(GradSyncPass, EachStartFollowsItsBucketsLastGradientWhileBackwardGoesOn) {
  const GradSyncOptions gs =
      GradSyncOptions::of({.stage = 0, .reduce_bucket_size = 20000, .overlap_comm = true}, 2, 0);
  const Placed p = tiny_graph(gs);
  ASSERT_TRUE(verify(p.g).ok());
  ASSERT_GT(p.starts.size(), 3u);
  ASSERT_EQ(p.starts.size(), p.waits.size());
  for (size_t k = 0; k < p.starts.size(); ++k) {
    const Node& s = p.g.nodes()[p.starts[k]];
    EXPECT_EQ(s.attrs.i("bucket"), static_cast<int64_t>(k));
    // The node before the start made one of its inputs (the bucket's last gradient)...
    bool made_by_previous = false;
    for (size_t back = p.starts[k] - 1; !made_by_previous; --back) {
      const Node& prev = p.g.nodes()[back];
      if (prev.op == Op::grad_reduce_start || prev.op == Op::grad_reduce_wait) continue;
      for (ValueId v : s.inputs) made_by_previous |= p.g.value(v).node == static_cast<NodeId>(back);
      break;
    }
    EXPECT_TRUE(made_by_previous) << "bucket " << k;
    // ... and with overlap the wait comes before the start two buckets later, or at the end.
    if (k + kMaxBucketsInFlight < p.starts.size()) {
      EXPECT_LT(p.waits[k], p.starts[k + kMaxBucketsInFlight]);
      EXPECT_GT(p.waits[k], p.starts[k + kMaxBucketsInFlight - 1]);
    }
  }
  // Compute runs between the first start and its wait (the overlap).
  EXPECT_GT(p.waits[0] - p.starts[0], 10u);
  // Every gradient output is now a wait's output, each parameter's exactly once.
  int grads = 0;
  for (const NamedValue& o : p.g.outputs()) {
    if (o.name.rfind("grad:", 0) != 0) continue;
    ++grads;
    EXPECT_EQ(p.g.producer(o.value).op, Op::grad_reduce_wait) << o.name;
  }
  EXPECT_EQ(grads, static_cast<int>(llama_param_specs(*llama_preset("tiny")).size()));
  // Each collective ends a compiled region.
  EXPECT_EQ(find_regions(p.g).breaks.size(), 2 * p.starts.size());
}

TEST(GradSyncPass, WithoutOverlapEachWaitFollowsItsStart) {
  const Placed p = tiny_graph(GradSyncOptions::of({.stage = 1, .reduce_bucket_size = 20000}, 3, 0));
  ASSERT_FALSE(p.starts.empty());
  for (size_t k = 0; k < p.starts.size(); ++k) EXPECT_EQ(p.waits[k], p.starts[k] + 1);
}

TEST(GradSyncPass, StageTwoKeepsOnlyTokensAndSizesTheReceiveByRank) {
  auto model = llama_preset("tiny");
  int64_t numel = 0;
  for (const ParamSpec& s : llama_param_specs(*model)) numel += numel_of(s.dims);
  for (int rank : {0, 1, 2}) {
    const Placed p = tiny_graph(GradSyncOptions::of(
        {.stage = 2, .reduce_bucket_size = 30000, .overlap_comm = true}, 3, rank));
    ASSERT_TRUE(verify(p.g).ok());
    int64_t recv = 0, sent = 0;
    for (size_t i : p.starts) {
      const Node& n = p.g.nodes()[i];
      recv += n.attrs.i("recv_count");
      sent += n.attrs.i("flat_end") - n.attrs.i("flat_begin");
      // In place: this rank's part arrives at the start of the bucket's buffer.
      EXPECT_EQ(p.g.type(n.outputs[0]).shape[0].coef(),
                n.attrs.i("flat_end") - n.attrs.i("flat_begin"));
      EXPECT_LE(n.attrs.i("recv_count"), n.attrs.i("flat_end") - n.attrs.i("flat_begin"));
    }
    EXPECT_EQ(sent, numel);
    // Rank r receives its whole shard, less the padding of the last one.
    const int64_t shard = (numel + 2) / 3;
    EXPECT_EQ(recv, std::min(shard, numel - rank * shard)) << "rank " << rank;
    for (const NamedValue& o : p.g.outputs()) EXPECT_NE(o.name.rfind("grad:", 0), 0u) << o.name;
  }
}

TEST(GradSyncPass, StageThreeGathersEachParameterForForwardAndAgainForBackward) {
  const auto specs = llama_param_specs(*llama_preset("tiny"));
  for (bool overlap : {false, true}) {
    GradSyncOptions gs = GradSyncOptions::of(
        {.stage = 3, .reduce_bucket_size = 20000, .overlap_comm = overlap}, 2, 1);
    gs.zero.stage3_prefetch_bucket_size = 10000;
    gs.zero.stage3_param_persistence_threshold = 100;  // the norms (64 elements) are gathered once
    gs.zero.stage3_max_reuse_distance = 0;  // no other parameter keeps its forward gather
    const Placed p = tiny_graph(gs);
    ASSERT_TRUE(verify(p.g).ok()) << verify(p.g).to_string();
    // What the caller feeds: data, rope tables and the shard; no parameter.
    for (ValueId v : p.g.inputs()) EXPECT_NE(p.g.input_role(v), Role::param) << v;
    ASSERT_NE(p.g.find_input("zero3.param_shard"), kNoValue);
    std::vector<int> fwd(specs.size(), 0), bwd(specs.size(), 0);
    std::vector<size_t> first_wait(p.g.values().size(), 0);
    for (size_t i = 0; i < p.g.nodes().size(); ++i) {
      const Node& n = p.g.nodes()[i];
      if (n.op != Op::param_gather_wait) continue;
      auto& count = n.phase == Phase::forward ? fwd : bwd;
      ++count[static_cast<size_t>(n.attrs.i("param"))];
      // Its start comes before it, and with overlap not right before (prefetched) for all
      // but possibly the first of each phase.
      const ValueId buffer = n.inputs[0];
      EXPECT_LT(static_cast<size_t>(p.g.value(buffer).node), i);
      if (!overlap) {
        EXPECT_EQ(static_cast<size_t>(p.g.value(buffer).node), i - 1);
      }
    }
    for (size_t k = 0; k < specs.size(); ++k) {
      EXPECT_EQ(fwd[k], 1) << specs[k].name;
      // Small ones keep their forward gather; the embedding's gradient (a scatter-add of the
      // output's gradient) does not read the table, so backward does not gather it.
      const bool small = numel_of(specs[k].dims) < gs.zero.stage3_param_persistence_threshold;
      const bool unread = specs[k].name == "model.embed_tokens.weight";
      EXPECT_EQ(bwd[k], small || unread ? 0 : 1) << specs[k].name;
    }
    // Every reader of a whole parameter reads a gather's output.
    for (const Node& n : p.g.nodes()) {
      for (ValueId v : n.inputs) {
        const Node& prod = p.g.producer(v);
        if (prod.op == Op::input) {
          EXPECT_NE(p.g.input_role(v), Role::param) << op_name(n.op);
        }
      }
    }
  }
}

// Expert parallelism (tiny-moe's 8 experts over 2 ranks): the world's collectives are the dense
// parameters' only. The experts' gradients stay "grad:" outputs at every stage, the buckets and
// stage 3's shard cover the dense parameters, and the experts' weights stay inputs.
TEST(GradSyncPass, ShardedExpertsAreLeftToTheirOwnGroup) {
  auto model = llama_preset("tiny-moe");
  ASSERT_TRUE(model.ok());
  const ExpertShard experts{.size = 2, .rank = 1};
  int64_t dense = 0;
  std::vector<std::string> expert_names;
  for (const ParamSpec& s : llama_param_specs(*model, experts)) {
    if (s.is_expert) {
      expert_names.push_back(s.name);
    } else {
      dense += numel_of(s.dims);
    }
  }
  ASSERT_EQ(expert_names.size(), 4u);
  for (int stage : {0, 2, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    GraphOptions go;
    go.grad_sync = GradSyncOptions::of({.stage = stage, .reduce_bucket_size = 20000}, 2, 0);
    go.experts = experts;
    Graph g;
    ASSERT_TRUE(build_train_graph(*model, go, &g).ok());
    ASSERT_TRUE(verify(g).ok());
    int64_t reduced = 0;
    for (const Node& n : g.nodes()) {
      if (n.op == Op::grad_reduce_start) reduced += n.attrs.i("flat_end") - n.attrs.i("flat_begin");
    }
    EXPECT_EQ(reduced, dense);
    std::vector<std::string> grads;
    for (const NamedValue& o : g.outputs()) {
      if (o.name.rfind("grad:", 0) == 0) grads.push_back(o.name.substr(5));
    }
    if (stage >= 2) {
      EXPECT_EQ(grads, expert_names);  // the dense ones are in the optimizer's shard
    } else {
      EXPECT_EQ(grads.size(), llama_param_specs(*model, experts).size());
    }
    std::vector<std::string> param_inputs;
    for (ValueId v : g.inputs()) {
      if (g.input_role(v) == Role::param) param_inputs.push_back(g.input_name(v));
    }
    if (stage == 3) {
      EXPECT_EQ(param_inputs, expert_names);
      const ValueId shard = g.find_input("zero3.param_shard");
      ASSERT_NE(shard, kNoValue);
      EXPECT_EQ(g.type(shard).shape[0].coef(), (dense + 1) / 2);
    }
  }
}

// Backward gathers per parameter (by name) for a stage-3 graph of `tiny`.
std::map<std::string, int> backward_gathers(const GradSyncOptions& gs) {
  const auto specs = llama_param_specs(*llama_preset("tiny"));
  const Placed p = tiny_graph(gs);
  LJ_CHECK(verify(p.g).ok());
  std::map<std::string, int> bwd;
  for (const ParamSpec& s : specs) bwd[s.name] = 0;
  for (const Node& n : p.g.nodes()) {
    if (n.op == Op::param_gather_wait && n.phase == Phase::backward)
      ++bwd[specs[static_cast<size_t>(n.attrs.i("param"))].name];
  }
  return bwd;
}

TEST(GradSyncPass, StageThreeKeepsAGatherWhoseReuseIsWithinTheReuseDistance) {
  GradSyncOptions gs = GradSyncOptions::of({.stage = 3, .reduce_bucket_size = 20000}, 2, 0);
  gs.zero.stage3_param_persistence_threshold = 100;
  // DeepSpeed's default (1e9) is beyond the whole model: nothing is gathered again.
  for (const auto& [name, n] : backward_gathers(gs)) EXPECT_EQ(n, 0) << name;
  // Distance 1: only a parameter with no gather between its last forward use and its first
  // backward use keeps its gather: the LM head (last in forward, first in backward).
  gs.zero.stage3_max_reuse_distance = 1;
  const auto bwd = backward_gathers(gs);
  EXPECT_EQ(bwd.at("lm_head.weight"), 0);
  EXPECT_EQ(bwd.at("model.layers.0.self_attn.q_proj.weight"), 1);
  EXPECT_EQ(bwd.at("model.layers.0.mlp.down_proj.weight"), 1);
}

TEST(GradSyncPass, StageThreePrefetchesOnlyWithinMaxLiveParameters) {
  for (int64_t max_live : {int64_t{1'000'000'000}, int64_t{1}}) {
    GradSyncOptions gs =
        GradSyncOptions::of({.stage = 3, .reduce_bucket_size = 20000, .overlap_comm = true}, 2, 0);
    gs.zero.stage3_max_live_parameters = max_live;
    const Placed p = tiny_graph(gs);
    ASSERT_TRUE(verify(p.g).ok());
    int prefetched = 0, waits = 0;
    for (size_t i = 0; i < p.g.nodes().size(); ++i) {
      const Node& n = p.g.nodes()[i];
      if (n.op != Op::param_gather_wait) continue;
      ++waits;
      if (static_cast<size_t>(p.g.value(n.inputs[0]).node) + 1 < i) ++prefetched;
    }
    ASSERT_GT(waits, 0);
    if (max_live == 1) {
      EXPECT_EQ(prefetched, 0) << "no room to prefetch anything";
    } else {
      EXPECT_GT(prefetched, waits / 2);
    }
  }
}

TEST(GradSyncPass, RunsLastAfterTheSchedule) {
  PipelineOptions o;
  o.compile = true;
  o.grad_sync = GradSyncOptions::of({.stage = 0}, 2, 0);
  const std::vector<std::string> names = pipeline_pass_names(o);
  EXPECT_EQ(names.back(), "grad_sync");
  EXPECT_EQ(names[names.size() - 2], "schedule");
  EXPECT_TRUE(check_pass_order(names).ok());
  const std::vector<std::string> wrong{"autodiff", "grad_sync", "schedule"};
  EXPECT_FALSE(check_pass_order(wrong).ok());
  const std::vector<std::string> after{"autodiff", "schedule", "grad_sync", "dce"};
  EXPECT_FALSE(check_pass_order(after).ok());
}

}  // namespace
}  // namespace lj
