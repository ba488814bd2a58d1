// The planned executor (ExecutorOptions::planned, compiled mode) against the caching allocator
// on the same compiled graph: the same kernels on the same inputs, so loss and every gradient must
// be bitwise equal; the arena is no larger than what eager's caching allocator peaks at; plans are
// cached per shape.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "core/units.h"
#include "model/model_test_util.h"
#include "plan/graph_figures.h"
#include "train/train_step.h"

namespace lj {
namespace {

using testing_util::tokens_of;

GraphOptions compiled(bool on) {
  GraphOptions o;
  o.compile = on;
  return o;
}

void expect_bitwise_equal(const char* preset, int64_t B, int64_t T) {
  auto model = llama_preset(preset);
  ASSERT_TRUE(model.ok());
  Device dev(2);
  // The same compiled graph (same kernels) on the caching allocator and on the plan.
  TrainStepConfig eager_cfg, planned_cfg;
  eager_cfg.graph = compiled(true);
  eager_cfg.static_memory_plan = false;
  planned_cfg.graph = compiled(true);
  auto eager = TrainStep::create(*model, eager_cfg, dev);
  auto planned = TrainStep::create(*model, planned_cfg, dev);
  ASSERT_TRUE(eager.ok() && planned.ok());
  ASSERT_NE((*planned)->executor().arena_memory(), nullptr);
  ASSERT_EQ((*eager)->executor().arena_memory(), nullptr);
  const Tensor tokens = tokens_of(dev, B, T, 0, model->vocab_size);
  const Tensor targets = tokens_of(dev, B, T, 1, model->vocab_size);
  // Two steps: the second runs on the reused arena (and after an AdamW update).
  for (int step = 0; step < 2; ++step) {
    auto a = (*eager)->forward_backward(tokens, targets);
    auto b = (*planned)->forward_backward(tokens, targets);
    ASSERT_TRUE(a.ok()) << a.status().message();
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_EQ(std::memcmp(&a->loss, &b->loss, sizeof(double)), 0)
        << preset << " step " << step << ": " << a->loss << " vs " << b->loss;
    ASSERT_EQ(a->grads.size(), b->grads.size());
    for (size_t i = 0; i < a->grads.size(); ++i) {
      ASSERT_EQ(a->grads[i].bytes(), b->grads[i].bytes());
      EXPECT_EQ(std::memcmp(a->grads[i].raw(), b->grads[i].raw(), a->grads[i].bytes()), 0)
          << preset << " step " << step << " " << (*eager)->param_specs()[i].name;
    }
    // The same update on both, so the second step starts from equal parameters. The planned
    // step runs while b's gradients are still held: they must survive it untouched.
    ASSERT_TRUE((*eager)->step(tokens, targets, 1e-3).ok());
    ASSERT_TRUE((*planned)->step(tokens, targets, 1e-3).ok());
    for (size_t i = 0; i < a->grads.size(); ++i) {
      EXPECT_EQ(std::memcmp(a->grads[i].raw(), b->grads[i].raw(), a->grads[i].bytes()), 0)
          << preset << " step " << step << " " << (*eager)->param_specs()[i].name
          << " changed by the next run";
    }
  }
  const ArenaMemory* pm = (*planned)->executor().arena_memory();
  EXPECT_EQ(pm->plans_made(), 1);
  EXPECT_EQ(pm->cache_hits(), 3);
  // Each step() ran while the caller held the previous outputs: a fresh arena each time but the
  // first; each forward_backward after an idle arena reused it.
  std::printf("%s: %lld arenas for 4 runs\n", preset,
              static_cast<long long>(pm->arenas_allocated()));
  EXPECT_GE(pm->arenas_allocated(), 2);
  EXPECT_LE(pm->arenas_allocated(), 4);
}

TEST(PlannedExecutor, BitwiseEqualToEagerTiny) {
  expect_bitwise_equal("tiny", 2, 32);
}

TEST(PlannedExecutor, BitwiseEqualToEagerSmall) {
  expect_bitwise_equal("small", 1, 64);
}

// Gradient accumulation holds the first micro-batch's gradients across the second run: the
// update is bitwise eager's, and one arena serves every run.
TEST(PlannedExecutor, GradientAccumulationBitwiseEqualOneArena) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  const int64_t B = 1, T = 24;
  Device dev(2);
  // The same compiled graph (same kernels) on the caching allocator and on the plan.
  TrainStepConfig eager_cfg, planned_cfg;
  eager_cfg.graph = compiled(true);
  eager_cfg.static_memory_plan = false;
  planned_cfg.graph = compiled(true);
  auto eager = TrainStep::create(*model, eager_cfg, dev);
  auto planned = TrainStep::create(*model, planned_cfg, dev);
  ASSERT_TRUE(eager.ok() && planned.ok());
  std::vector<TrainStep::Batch> micro;
  for (int64_t k = 0; k < 3; ++k) {
    micro.push_back({tokens_of(dev, B, T, 2 * k, model->vocab_size),
                     tokens_of(dev, B, T, 2 * k + 1, model->vocab_size)});
  }
  for (int step = 0; step < 2; ++step) {
    auto a = (*eager)->step(micro, 1e-2);
    auto b = (*planned)->step(micro, 1e-2);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->loss, b->loss);
    EXPECT_EQ(a->grad_norm, b->grad_norm);
  }
  for (size_t i = 0; i < (*eager)->params().size(); ++i) {
    const Tensor& x = (*eager)->params()[i];
    const Tensor& y = (*planned)->params()[i];
    EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.bytes()), 0) << (*eager)->param_specs()[i].name;
  }
  EXPECT_EQ((*planned)->executor().arena_memory()->arenas_allocated(), 1);
}

// The compiled dry run predicts a real compiled step's memory by category (kernel workspace
// aside), as the eager estimate does for eager steps (memory_estimate_test.cc).
TEST(PlannedExecutor, DryRunMatchesARealPlannedStepByCategory) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  const int64_t B = 2, T = 48;
  auto est = graph_figures(*model, B, T, compiled(true));
  ASSERT_TRUE(est.ok()) << est.status().to_string();
  Device dev(2);
  TrainStepConfig cfg;
  cfg.graph = compiled(true);
  auto trainer = TrainStep::create(*model, cfg, dev);
  ASSERT_TRUE(trainer.ok());
  Tensor tokens = Tensor::zeros(dev, DType::i32, {B, T}, MemCategory::temporaries);
  Tensor targets = Tensor::zeros(dev, DType::i32, {B, T}, MemCategory::temporaries);
  for (int step = 0; step < 2; ++step) ASSERT_TRUE((*trainer)->step(tokens, targets, 1e-3).ok());
  const MemoryStats& real = dev.memory();
  for (auto c : {MemCategory::weights, MemCategory::grads, MemCategory::optimizer,
                 MemCategory::activations, MemCategory::temporaries}) {
    EXPECT_EQ(est->stats.peak(c), real.peak(c)) << mem_category_name(c);
  }
  EXPECT_LE(est->bytes_peak, real.bytes_total_peak);
  EXPECT_GE(est->bytes_peak + real.peak(MemCategory::workspace), real.bytes_total_peak);
  EXPECT_EQ((*trainer)->executor().arena_memory()->arenas_allocated(), 1);
}

TEST(PlannedExecutor, ArenaNoLargerThanEagerPeakAndCachedPerShape) {
  auto model = llama_preset("small");
  ASSERT_TRUE(model.ok());
  const int64_t B = 4, T = 256;
  auto eager = graph_figures(*model, B, T, compiled(false));
  auto planned = graph_figures(*model, B, T, compiled(true));
  ASSERT_TRUE(eager.ok() && planned.ok());
  ASSERT_TRUE(planned->plan.has_value());
  EXPECT_FALSE(eager->plan.has_value());
  const MemoryPlan& plan = *planned->plan;
  // What eager's allocator held for the graph's values at its peak (everything but the
  // caller's inputs, weights and optimizer state) against the arena, which holds the outputs.
  const MemoryStats& e = eager->stats;
  const int64_t eager_values = e.bytes_at_peak[static_cast<size_t>(MemCategory::activations)] +
                               e.bytes_at_peak[static_cast<size_t>(MemCategory::temporaries)] +
                               e.bytes_at_peak[static_cast<size_t>(MemCategory::grads)];
  EXPECT_LE(plan.bytes_arena, eager_values);
  EXPECT_LE(planned->bytes_peak, eager->bytes_peak);
  std::printf(
      "small B=%lld T=%lld: eager dry-run peak %s (reserved %s); planned peak %s "
      "(arena %s, naive %s, peak live %s, outputs %s)\n%s",
      static_cast<long long>(B), static_cast<long long>(T),
      format_bytes(static_cast<double>(eager->bytes_peak)).c_str(),
      format_bytes(static_cast<double>(eager->bytes_reserved)).c_str(),
      format_bytes(static_cast<double>(planned->bytes_peak)).c_str(),
      format_bytes(static_cast<double>(plan.bytes_arena)).c_str(),
      format_bytes(static_cast<double>(plan.bytes_naive)).c_str(),
      format_bytes(static_cast<double>(plan.bytes_peak_live)).c_str(),
      format_bytes(static_cast<double>(plan.bytes_outputs)).c_str(),
      memory_plan_summary(plan).c_str());
  std::printf("eager stats:\n%splanned stats:\n%s", e.to_string().c_str(),
              planned->stats.to_string().c_str());

  // Plan cache: the same shape again is a hit, a new T a new plan; the arena follows the shape.
  Graph g;
  ASSERT_TRUE(build_train_graph(*model, compiled(true), &g).ok());
  Device dev(1, /*is_virtual=*/true);
  ExecutorOptions opts;
  opts.planned = true;
  Executor ex(g, dev, opts);
  auto inputs_for = [&](int64_t t) {
    std::vector<Tensor> in;
    in.push_back(Tensor::empty(dev, DType::i32, {B, t}, MemCategory::temporaries));
    in.push_back(Tensor::empty(dev, DType::i32, {B, t}, MemCategory::temporaries));
    in.push_back(Tensor::empty(dev, DType::f32, {t, model->head_dim}, MemCategory::workspace));
    in.push_back(Tensor::empty(dev, DType::f32, {t, model->head_dim}, MemCategory::workspace));
    for (const ParamSpec& s : llama_param_specs(*model))
      in.push_back(Tensor::empty(dev, DType::f32, s.dims, MemCategory::weights));
    return in;
  };
  const auto in256 = inputs_for(256);
  const auto in128 = inputs_for(128);
  ASSERT_TRUE(ex.dry_run(in256).ok());
  EXPECT_EQ(ex.arena_memory()->plans_made(), 1);
  EXPECT_EQ(ex.arena_memory()->cache_hits(), 0);
  ASSERT_TRUE(ex.dry_run(in256).ok());
  EXPECT_EQ(ex.arena_memory()->plans_made(), 1);
  EXPECT_EQ(ex.arena_memory()->cache_hits(), 1);
  const int64_t arena256 = ex.arena_memory()->plan().bytes_arena;
  EXPECT_EQ(arena256, plan.bytes_arena);
  ASSERT_TRUE(ex.dry_run(in128).ok());
  EXPECT_EQ(ex.arena_memory()->plans_made(), 2);
  EXPECT_LT(ex.arena_memory()->plan().bytes_arena, arena256);
  EXPECT_EQ(ex.arena_memory()->plan().env, (SymEnv{{'B', B}, {'T', 128}}));
  ASSERT_TRUE(ex.dry_run(in256).ok());
  EXPECT_EQ(ex.arena_memory()->plans_made(), 2);
  EXPECT_EQ(ex.arena_memory()->cache_hits(), 2);
}

}  // namespace
}  // namespace lj
