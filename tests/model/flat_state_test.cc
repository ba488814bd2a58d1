// The GPU step's state crosses to the host through train/flat_state.h: checked here with host
// memory standing in for the device (memcpy for cudaMemcpy). A CPU run's state goes into the flat
// form and back bitwise, lands at the FlatLayout offsets the GPU kernels update, and a checkpoint
// written from the flat form is the CPU's checkpoint (it loads bitwise); stage 1's shard too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "model/model_test_util.h"
#include "train/checkpoint.h"
#include "train/flat_state.h"
#include "train/gpu_train.h"
#include "train/train_step.h"

namespace lj {
namespace {

Status host_copy(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return ok_status();
}

void expect_bitwise(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                    const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].dims(), want[i].dims()) << what << " " << i;
    EXPECT_EQ(std::memcmp(got[i].raw(), want[i].raw(), got[i].bytes()), 0) << what << " " << i;
  }
}

TEST(FlatState, CpuStateRoundTripsThroughTheFlatFormAndItsCheckpointLoadsBitwise) {
  Device dev(2);
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  TrainStepConfig cfg;
  auto step = TrainStep::create(*model, cfg, dev);
  ASSERT_TRUE(step.ok()) << step.status().message();
  TrainStep& t = **step;
  // Two steps, so m and v are not zero.
  for (int s = 0; s < 2; ++s) {
    Tensor tok = testing_util::tokens_of(dev, 2, 16, s, model->vocab_size);
    Tensor tgt = testing_util::tokens_of(dev, 2, 16, s + 1, model->vocab_size);
    ASSERT_TRUE(t.step(tok, tgt, 1e-3).ok());
  }
  const std::vector<ParamSpec>& specs = t.param_specs();
  const FlatLayout layout = FlatLayout::of(t.params(), 1);
  std::vector<float> p(static_cast<size_t>(layout.numel_padded()));
  std::vector<float> m(static_cast<size_t>(flat_state_numel(layout, 0)));
  std::vector<float> v(m.size());
  const FlatState flat{p.data(), m.data(), v.data()};
  ASSERT_TRUE(host_to_flat_state(layout, 0, specs, t.params(), t.optimizer().m(), t.optimizer().v(),
                                 host_copy, flat)
                  .ok());
  // Where the GPU's kernels see them: parameter i at param_begin(i) of the flat vector.
  const size_t last = specs.size() - 1;
  EXPECT_EQ(p[static_cast<size_t>(layout.param_begin(last)) + 3],
            t.params()[last].data<float>()[3]);
  EXPECT_EQ(v[static_cast<size_t>(layout.param_begin(1))], t.optimizer().v()[1].data<float>()[0]);
  std::vector<Tensor> hp, hm, hv;
  ASSERT_TRUE(flat_state_to_host(layout, 0, specs, flat, host_copy, dev, &hp, &hm, &hv).ok());
  expect_bitwise(hp, t.params(), "params");
  expect_bitwise(hm, t.optimizer().m(), "m");
  expect_bitwise(hv, t.optimizer().v(), "v");

  // The checkpoint a GPU run writes from its flat state is the CPU's.
  const std::string dir = testing::TempDir() + "flat_state_ckpt_" + std::to_string(::getpid());
  TrainerState st;
  st.step = 2;
  st.optimizer_steps = 2;
  ASSERT_TRUE(save_checkpoint(dir, *model, specs, Checkpoint{st, hp, hm, hv}, 1).ok());
  auto loaded = load_latest_checkpoint(dir, specs, dev);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  expect_bitwise(loaded->params, t.params(), "loaded params");
  expect_bitwise(loaded->m, t.optimizer().m(), "loaded m");
  expect_bitwise(loaded->v, t.optimizer().v(), "loaded v");
  std::filesystem::remove_all(dir);
}

TEST(FlatState, StageOneKeepsTheShardAndRefusesOtherShapes) {
  Device dev(1);
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  const std::vector<ParamSpec> specs = llama_param_specs(*model);
  const std::vector<Tensor> params = init_llama_params(dev, specs, 0.02, 5);
  const FlatLayout layout = FlatLayout::of(params, 3);  // 3 ranks: a padded last shard
  const int64_t S = layout.shard_numel();
  ASSERT_EQ(flat_state_numel(layout, 1), S);
  Tensor ms = Tensor::empty(dev, DType::f32, {S}, MemCategory::optimizer);
  Tensor vs = Tensor::empty(dev, DType::f32, {S}, MemCategory::optimizer);
  for (int64_t k = 0; k < S; ++k) {
    ms.data<float>()[k] = static_cast<float>(k) * 0.5f;
    vs.data<float>()[k] = static_cast<float>(k) * 0.25f;
  }
  std::vector<float> p(static_cast<size_t>(layout.numel_padded())), m(static_cast<size_t>(S)),
      v(static_cast<size_t>(S));
  const FlatState flat{p.data(), m.data(), v.data()};
  ASSERT_TRUE(host_to_flat_state(layout, 1, specs, params, {ms}, {vs}, host_copy, flat).ok());
  std::vector<Tensor> hp, hm, hv;
  ASSERT_TRUE(flat_state_to_host(layout, 1, specs, flat, host_copy, dev, &hp, &hm, &hv).ok());
  expect_bitwise(hp, params, "params");
  expect_bitwise(hm, {ms}, "m shard");
  expect_bitwise(hv, {vs}, "v shard");
  // A stage-0 (per parameter) host state is not a shard: refused, nothing silently misplaced.
  const Status wrong =
      host_to_flat_state(layout, 1, specs, params, params, params, host_copy, flat);
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("moments"), std::string::npos) << wrong.message();
}

// The overlap's bookkeeping: gradients taken in backward's order (last parameter first), each
// bucket becomes ready exactly once, right when the last parameter overlapping it is taken, and
// the buckets cover the flat vector once.
TEST(GradBuckets, EveryBucketStartsOnceWhenItsLastParameterIsIn) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  std::vector<int64_t> numels;
  for (const ParamSpec& p : llama_param_specs(*model)) numels.push_back(numel_of(p.dims));
  const FlatLayout layout(numels, 2);
  for (const int64_t bucket : {int64_t{1000}, int64_t{5000}, int64_t{1} << 30}) {
    const GradBuckets g = grad_buckets(layout, bucket);
    int64_t covered = 0;
    for (const FlatRange& r : g.buckets) {
      EXPECT_EQ(r.begin, covered);
      EXPECT_LE(r.size(), bucket);
      covered = r.end;
    }
    EXPECT_EQ(covered, layout.numel());
    std::vector<size_t> pending = g.waits();
    std::vector<int> started(g.buckets.size(), 0);
    std::vector<bool> taken(numels.size(), false);
    for (size_t i = numels.size(); i-- > 0;) {
      taken[i] = true;
      for (size_t b : g.of_param[i]) {
        if (--pending[b] > 0) continue;
        ++started[b];
        // Every parameter with an element in the bucket is in.
        for (size_t j = 0; j < numels.size(); ++j) {
          const int64_t pb = layout.param_begin(j), pe = pb + numels[j];
          if (pb < g.buckets[b].end && g.buckets[b].begin < pe) {
            EXPECT_TRUE(taken[j]) << "bucket " << b << " started before parameter " << j;
          }
        }
      }
    }
    for (size_t b = 0; b < started.size(); ++b) EXPECT_EQ(started[b], 1) << "bucket " << b;
    if (bucket == 1000) {
      // The embedding (vocab x hidden) is larger than a bucket: it spans several.
      EXPECT_GT(g.of_param[0].size(), 1u);
    }
  }
}

// What the GPU step refuses, one line each with a hint; checked on any build.
TEST(GpuStepConfig, RefusesWhatTheGpuStepDoesNotRun) {
  TrainStepConfig ok;
  EXPECT_TRUE(check_gpu_step_config(ok).ok());
  ok.graph.autocast = DType::bf16;
  ok.graph.compile = true;
  EXPECT_TRUE(check_gpu_step_config(ok).ok());
  TrainStepConfig fp16;
  fp16.graph.autocast = DType::f16;
  fp16.loss_scale.enabled = true;
  SelfCommunicator self;
  TrainStepConfig zero2;
  zero2.data_parallel.comm = &self;
  zero2.data_parallel.zero.stage = 2;
  TrainStepConfig zero1 = zero2;
  zero1.data_parallel.zero.stage = 1;
  EXPECT_TRUE(check_gpu_step_config(zero1).ok());
  TrainStepConfig zero3 = zero2;
  zero3.data_parallel.zero.stage = 3;
  TrainStepConfig profile;
  profile.profile = true;
  for (const TrainStepConfig* c : {&fp16, &zero2, &zero3, &profile}) {
    const Status s = check_gpu_step_config(*c);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.message().rfind("--device cuda: ", 0), 0u) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    EXPECT_NE(s.hint().find("--device cpu"), std::string::npos) << s.hint();
  }
  EXPECT_NE(check_gpu_step_config(zero2).message().find("ZeRO stage 2"), std::string::npos);
}

}  // namespace
}  // namespace lj
