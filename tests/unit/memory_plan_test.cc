// The static memory plan (passes/memory_plan) and the schedule (passes/schedule): plans are
// valid (no two live buffers share bytes) on hand-made and real training graphs at several
// shapes, in place and reshape sharing happen where they may and nowhere else, and the schedule
// keeps the graph's results while never raising its peak.
#include <gtest/gtest.h>

#include <cstdio>

#include "graph/builder.h"
#include "passes/memory_plan/memory_plan.h"
#include "passes/pipeline/train_graph.h"
#include "passes/schedule/schedule.h"

namespace lj {
namespace {

GraphOptions compiled(bool on) {
  GraphOptions o;
  o.compile = on;
  return o;
}

TEST(MemoryPlan, InPlaceReshapeAndOutputsKeptAfterTheRun) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{Dim::sym('B'), 256});
  Val a = exp(x);  // new buffer (x is a graph input: never overwritten)
  Val c = neg(a);  // a dies here, same dims: in place
  Val r = reshape(c, Shape{Dim::sym('B'), 16, 16});    // shares c's buffer
  Val e = reshape(exp(r), Shape{Dim::sym('B'), 256});  // exp(r): r is an output, new buffer
  Val d = e * a;  // e and a both die here with d's dims: d takes e's buffer
  Val s = sum(d, {}, false);
  b.output("s", s);
  b.output("c", c);  // c (and r, which aliases it) must survive the run
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto plan = plan_memory(g, SymEnv{{'B', 4}});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_TRUE(check_plan(g, *plan).ok()) << check_plan(g, *plan).message();
  // c is a graph output: kept after the run, so neg may not run in a's buffer.
  EXPECT_TRUE(plan->is_output(c.id));
  EXPECT_TRUE(plan->is_output(r.id));
  EXPECT_EQ(plan->buffer_of[static_cast<size_t>(r.id)], plan->buffer_of[static_cast<size_t>(c.id)]);
  EXPECT_EQ(plan->buffer_of[static_cast<size_t>(x.id)], -1);
  EXPECT_NE(plan->buffer_of[static_cast<size_t>(c.id)], plan->buffer_of[static_cast<size_t>(a.id)]);
  EXPECT_EQ(plan->bytes_outputs, 4 * 256 * 4 + 64);  // c, and the scalar s
  // The mul takes e's dying buffer (its first input), not a's.
  EXPECT_EQ(plan->buffer_of[static_cast<size_t>(d.id)], plan->buffer_of[static_cast<size_t>(e.id)]);
  EXPECT_NE(plan->buffer_of[static_cast<size_t>(d.id)], plan->buffer_of[static_cast<size_t>(a.id)]);
  EXPECT_EQ(plan->num_inplace, 1);
  EXPECT_EQ(plan->num_alias, 2);
  // a, c and exp(r) (then d) are live together: 3 x 4 KiB. s then takes a's freed place.
  EXPECT_EQ(plan->bytes_arena, 3 * 4096);
  EXPECT_EQ(plan->bytes_peak_live, 3 * 4096);
  EXPECT_EQ(plan->offset(s.id), plan->offset(a.id));
  EXPECT_EQ(plan->bytes_naive, 4 * 4096 + 64);
  EXPECT_EQ(plan->bytes_at_peak[static_cast<size_t>(MemCategory::temporaries)], 3 * 4096);
}

TEST(MemoryPlan, ChainReusesFreedBuffersBestFit) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{64});
  Val v = x;  // 256 bytes per value
  // Ten exps in a row, each reading only the previous: with in place one buffer serves them
  // all; without, two alternate (the input and output of a node are live together).
  for (int i = 0; i < 10; ++i) v = exp(v);
  b.output("y", sum(v, {}, false));
  ASSERT_TRUE(b.ok());
  auto inplace = plan_memory(g, SymEnv{});
  auto separate = plan_memory(g, SymEnv{}, PlanOptions{false});
  ASSERT_TRUE(inplace.ok() && separate.ok());
  EXPECT_TRUE(check_plan(g, *inplace).ok());
  EXPECT_TRUE(check_plan(g, *separate).ok());
  // Plus the scalar output (64 bytes, its own region).
  EXPECT_EQ(inplace->bytes_arena, 256 + 64);
  EXPECT_EQ(inplace->num_inplace, 9);
  // Without: two alternate, and the scalar fits in the one the ninth exp freed.
  EXPECT_EQ(separate->bytes_arena, 512);
  EXPECT_EQ(separate->bytes_naive, 10 * 256 + 64);
}

TEST(MemoryPlan, UnboundSymbolIsAStatus) {
  Graph g;
  Builder b(&g);
  Val x = b.input("x", DType::f32, Shape{Dim::sym('T')});
  b.output("y", exp(x));
  auto plan = plan_memory(g, SymEnv{});
  EXPECT_FALSE(plan.ok());
}

// A checker that can fail: a plan with two live buffers moved onto each other is rejected.
TEST(MemoryPlan, CheckerCatchesOverlap) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  Graph g;
  ASSERT_TRUE(build_train_graph(*model, GraphOptions{}, &g).ok());
  auto plan = plan_memory(g, SymEnv{{'B', 2}, {'T', 16}});
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(check_plan(g, *plan).ok());
  MemoryPlan bad = *plan;
  // The first arena buffer that is live with another at a different offset: put it there.
  bool broke = false;
  for (size_t x = 0; x < bad.buffers.size() && !broke; ++x) {
    for (size_t y = x + 1; y < bad.buffers.size() && !broke; ++y) {
      PlanBuffer& a = bad.buffers[x];
      const PlanBuffer& c = bad.buffers[y];
      if (a.offset == c.offset) continue;
      if (a.first <= c.last && c.first <= a.last) {
        a.offset = c.offset;
        broke = true;
      }
    }
  }
  ASSERT_TRUE(broke);
  EXPECT_FALSE(check_plan(g, bad).ok());
}

struct Figures {
  int64_t arena, naive, peak;
};

Figures plan_figures(const Graph& g, SymEnv env) {
  auto plan = plan_memory(g, env);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  if (!plan.ok()) return {};
  EXPECT_TRUE(check_plan(g, *plan).ok())
      << env.to_string() << ": " << check_plan(g, *plan).message();
  EXPECT_LE(plan->bytes_peak_live, plan->bytes_arena);
  EXPECT_LE(plan->bytes_arena, plan->bytes_naive);
  int64_t sum = 0;
  for (int64_t c : plan->bytes_at_peak) sum += c;
  EXPECT_EQ(sum, plan->bytes_peak_live);
  return {plan->bytes_arena, plan->bytes_naive, plan->bytes_peak_live};
}

TEST(MemoryPlan, TrainGraphsPlanValidlyAtTwoShapesScheduledOrNot) {
  for (const char* preset : {"tiny", "small"}) {
    auto model = llama_preset(preset);
    ASSERT_TRUE(model.ok());
    for (bool compile : {false, true}) {  // compile: the schedule pass ran
      Graph g;
      ASSERT_TRUE(build_train_graph(*model, compiled(compile), &g).ok());
      for (SymEnv env : {SymEnv{{'B', 2}, {'T', 32}}, SymEnv{{'B', 4}, {'T', 256}}}) {
        const Figures f = plan_figures(g, env);
        std::printf("%s %s %s: naive %lld, arena %lld, peak live %lld\n", preset,
                    compile ? "scheduled" : "unscheduled", env.to_string().c_str(),
                    static_cast<long long>(f.naive), static_cast<long long>(f.arena),
                    static_cast<long long>(f.peak));
      }
    }
  }
}

// bf16 mixed precision (passes/autocast): the plan counts each buffer at its dtype's size, so the
// bf16 joint graph's arena is smaller than f32's, its activations by about half.
TEST(MemoryPlan, Bf16GraphPlansASmallerArena) {
  auto model = llama_preset("small");
  ASSERT_TRUE(model.ok());
  const SymEnv env{{'B', 4}, {'T', 256}};
  MemoryPlan plans[2];
  for (int i = 0; i < 2; ++i) {
    GraphOptions o = compiled(true);
    if (i == 1) o.autocast = DType::bf16;
    Graph g;
    ASSERT_TRUE(build_train_graph(*model, o, &g).ok());
    auto plan = plan_memory(g, env);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    ASSERT_TRUE(check_plan(g, *plan).ok());
    plans[i] = std::move(*plan);
  }
  const MemoryPlan& f32 = plans[0];
  const MemoryPlan& bf16 = plans[1];
  const auto act = [](const MemoryPlan& p) { return p.at_peak(MemCategory::activations); };
  std::printf("small %s: arena f32 %lld, bf16 %lld (%.2fx); activations at peak %lld -> %lld\n",
              env.to_string().c_str(), static_cast<long long>(f32.bytes_arena),
              static_cast<long long>(bf16.bytes_arena),
              static_cast<double>(bf16.bytes_arena) / static_cast<double>(f32.bytes_arena),
              static_cast<long long>(act(f32)), static_cast<long long>(act(bf16)));
  EXPECT_LT(bf16.bytes_arena, f32.bytes_arena);
  // Observed (small, B=4 T=256, compiled): arena 0.75x, activations at peak 142.1 -> 100.1 MB
  // (0.70x): not 0.5x because linear_cross_entropy's f32 dw (V, C) made in the forward and the
  // bf16 weight copies the GEMMs keep for the backward are activations too. 0.75 still fails a
  // plan that counted bf16 at 4 bytes (that gives >= 1x).
  EXPECT_LT(static_cast<double>(act(bf16)), 0.75 * static_cast<double>(act(f32)));
}

TEST(Schedule, KeepsNodesAndDependenciesAndNeverRaisesThePeak) {
  for (const char* preset : {"tiny", "small"}) {
    auto model = llama_preset(preset);
    ASSERT_TRUE(model.ok());
    Graph plain;
    ASSERT_TRUE(build_train_graph(*model, GraphOptions{}, &plain).ok());
    Graph scheduled = plain;
    SchedulePass pass;
    auto changed = pass.run(scheduled);
    ASSERT_TRUE(changed.ok()) << changed.status().message();
    ASSERT_TRUE(verify(scheduled).ok()) << verify(scheduled).message();
    // The same nodes (op, inputs, outputs), only reordered.
    ASSERT_EQ(scheduled.nodes().size(), plain.nodes().size());
    std::vector<int> seen(plain.values().size(), 0);
    for (const Node& n : scheduled.nodes()) {
      const Node& orig = plain.producer(n.outputs[0]);
      EXPECT_EQ(n.op, orig.op);
      EXPECT_EQ(n.inputs, orig.inputs);
      EXPECT_EQ(n.outputs, orig.outputs);
      ++seen[static_cast<size_t>(n.outputs[0])];
    }
    for (const Node& n : plain.nodes()) EXPECT_EQ(seen[static_cast<size_t>(n.outputs[0])], 1);
    EXPECT_EQ(scheduled.inputs(), plain.inputs());
    // Deterministic.
    Graph again = plain;
    ASSERT_TRUE(SchedulePass().run(again).ok());
    for (size_t i = 0; i < again.nodes().size(); ++i)
      EXPECT_EQ(again.nodes()[i].outputs, scheduled.nodes()[i].outputs);
    // Peak at the nominal shape the pass ranks with (never worse by construction), and at the
    // shapes the tests and benchmarks run.
    for (SymEnv env : {SymEnv{{'B', 64}, {'T', 64}}, SymEnv{{'B', 2}, {'T', 32}},
                       SymEnv{{'B', 4}, {'T', 256}}}) {
      const Figures before = plan_figures(plain, env);
      const Figures after = plan_figures(scheduled, env);
      EXPECT_LE(after.peak, before.peak) << preset << " " << env.to_string();
      std::printf("%s %s: peak live %lld -> %lld scheduled (arena %lld -> %lld)", preset,
                  env.to_string().c_str(), static_cast<long long>(before.peak),
                  static_cast<long long>(after.peak), static_cast<long long>(before.arena),
                  static_cast<long long>(after.arena));
      for (ScheduleStrategy st : {ScheduleStrategy::sink, ScheduleStrategy::greedy}) {
        std::vector<Node> nodes;
        for (int i : schedule_order(plain, SymEnv{}, st))
          nodes.push_back(plain.nodes()[static_cast<size_t>(i)]);
        Graph candidate = plain;
        candidate.set_nodes(nodes);
        const Figures f = plan_figures(candidate, env);
        std::printf("; %s: peak %lld arena %lld", st == ScheduleStrategy::sink ? "sink" : "greedy",
                    static_cast<long long>(f.peak), static_cast<long long>(f.arena));
      }
      std::printf("\n");
    }
    // Each strategy is a topological order.
    for (ScheduleStrategy st : {ScheduleStrategy::sink, ScheduleStrategy::greedy}) {
      const std::vector<int> order = schedule_order(plain, SymEnv{}, st);
      ASSERT_EQ(order.size(), plain.nodes().size());
      std::vector<bool> ready(plain.values().size(), false);
      for (int i : order) {
        const Node& n = plain.nodes()[static_cast<size_t>(i)];
        for (ValueId v : n.inputs) EXPECT_TRUE(ready[static_cast<size_t>(v)]);
        for (ValueId v : n.outputs) ready[static_cast<size_t>(v)] = true;
      }
    }
  }
}

TEST(MemoryPlan, SummaryHasOneLinePerFact) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  Graph g;
  ASSERT_TRUE(build_train_graph(*model, compiled(true), &g).ok());
  auto plan = plan_memory(g, SymEnv{{'B', 2}, {'T', 32}});
  ASSERT_TRUE(plan.ok());
  const std::string s = memory_plan_summary(*plan);
  std::printf("%s", s.c_str());
  EXPECT_NE(s.find("memory plan (B=2 T=32):"), std::string::npos) << s;
  EXPECT_NE(s.find("naive "), std::string::npos);
  EXPECT_NE(s.find("-> arena "), std::string::npos);
  EXPECT_NE(s.find("activations"), std::string::npos);
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 4);
}

}  // namespace
}  // namespace lj
