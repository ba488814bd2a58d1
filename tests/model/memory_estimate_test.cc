// The dry-run memory estimate against ljperf's own accounting of a real step: every category
// except kernel workspace must match to the byte (same graph, same allocator policy).
#include <gtest/gtest.h>

#include "passes/pipeline/train_graph.h"
#include "plan/graph_figures.h"
#include "plan/host_plan.h"
#include "train/train_step.h"

namespace lj {
namespace {

TEST(MemoryEstimate, DryRunMatchesARealStepByCategory) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  const int64_t B = 2, T = 48;
  auto est = graph_figures(*model, B, T);
  ASSERT_TRUE(est.ok()) << est.status().to_string();

  Device dev(2);
  auto trainer = TrainStep::create(*model, TrainStepConfig{}, dev);
  ASSERT_TRUE(trainer.ok());
  Tensor tokens = Tensor::zeros(dev, DType::i32, {B, T}, MemCategory::temporaries);
  Tensor targets = Tensor::zeros(dev, DType::i32, {B, T}, MemCategory::temporaries);
  auto r = (*trainer)->step(tokens, targets, 1e-3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const MemoryStats& real = dev.memory();
  for (auto c : {MemCategory::weights, MemCategory::grads, MemCategory::optimizer,
                 MemCategory::activations, MemCategory::temporaries}) {
    EXPECT_EQ(est->stats.peak(c), real.peak(c)) << mem_category_name(c);
  }
  // The total differs only by kernel workspace (attention tiles, loss rows).
  EXPECT_LE(est->bytes_peak, real.bytes_total_peak);
  EXPECT_GE(est->bytes_peak + real.peak(MemCategory::workspace), real.bytes_total_peak);
}

TEST(MemoryEstimate, Llama8BNeedsMoreThanThisMachineAndAllocatesNothing) {
  auto model = llama_preset("llama3-8b");
  ASSERT_TRUE(model.ok());
  auto est = graph_figures(*model, 1, 1024);
  ASSERT_TRUE(est.ok()) << est.status().to_string();
  // fp32 weights + grads + AdamW m, v: 16 bytes x 8.03e9 parameters = 128.5 GB before activations.
  EXPECT_GT(est->bytes_peak, int64_t{16} * 8'030'261'248);
  EXPECT_EQ(est->stats.peak(MemCategory::optimizer), int64_t{8} * 8'030'261'248);
}

// A benchmark-style flow (prepare the chosen configuration: dry run and host prediction, then
// create the step from the same graph) builds that configuration's joint graph once.
TEST(MemoryEstimate, BenchmarkFlowBuildsTheChosenGraphOnce) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  for (bool compile : {false, true}) {
    GraphOptions o;
    o.compile = compile;
    const int64_t before = train_graphs_built();
    auto prepared = prepare_host_run(*model, 2, 64, o);
    ASSERT_TRUE(prepared.ok()) << prepared.status().message();
    EXPECT_GT(prepared->figures.bytes_peak, 0);
    EXPECT_GT(prepared->predicted.memory.total, 0);
    Device dev(1);
    TrainStepConfig cfg;
    cfg.graph = prepared->graph.options;
    auto step = TrainStep::create(*model, cfg, dev, std::move(prepared->graph));
    ASSERT_TRUE(step.ok()) << step.status().message();
    EXPECT_EQ(train_graphs_built() - before, 1) << "compile " << compile;
  }
}

}  // namespace
}  // namespace lj
