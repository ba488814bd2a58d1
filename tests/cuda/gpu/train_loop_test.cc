// `ljperf train --device cuda`'s loop (train/trainer.h over train/gpu_train.h), label gpu: the
// GPU follows the CPU over 20 steps, a stopped GPU run resumes bitwise, a GPU checkpoint resumes
// on the CPU and a CPU one on the GPU (the host state crosses bitwise), and one rank through NCCL
// trains exactly as no communicator does.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cuda/gpu/gpu_test_util.h"
#include "model/model_test_util.h"
#include "train/checkpoint.h"
#include "train/gpu_train.h"
#include "train/trainer.h"

namespace lj::test {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kBatch = 2, kSeqLen = 32;

std::string temp_dir(const char* name) {
  std::string tmpl = (fs::temp_directory_path() / (std::string("lj_") + name + "_XXXXXX")).string();
  LJ_CHECK(::mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

// Deterministic tokens below the tiny model's vocabulary.
std::string make_tokens(const std::string& dir, const char* name, int64_t vocab, uint32_t mul) {
  const std::string path = dir + "/" + name;
  std::vector<uint32_t> t(6000);
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<uint32_t>(((i * mul) >> 7) % static_cast<uint64_t>(vocab));
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size() * 4));
  return path;
}

struct Options {
  TrainDevice device = TrainDevice::cuda;
  DType autocast = DType::f32;
  bool compile = false;
  int64_t steps = 8;
  int64_t stop_after = 0;  // > 0: a stop request after this step (as SIGTERM makes one)
  bool validate = false;
};

struct TrainRun {
  std::vector<double> losses, val_losses;
  TrainSummary summary;
};

TrainRun train(const Options& o, const std::string& out, const std::string& dir) {
  auto model = llama_preset("tiny");
  LJ_CHECK(model.ok());
  auto data = TokenFile::open(make_tokens(dir, "train.u32", model->vocab_size, 2654435761u),
                              TokenFormat::raw_u32);
  auto val =
      TokenFile::open(make_tokens(dir, "val.u32", model->vocab_size, 40503u), TokenFormat::raw_u32);
  LJ_CHECK(data.ok() && val.ok());
  TrainerConfig t;
  t.out_dir = out;
  t.device = o.device;
  t.steps = o.steps;
  t.batch_size = kBatch;
  t.seq_len = kSeqLen;
  t.grad_accum = 2;
  t.lr = LrSchedule{1e-3, 1e-4, 2, 20, LrSchedule::Decay::cosine};
  t.step.grad_clip = 0.5;  // clipped at first: the clipped path runs
  t.step.graph.autocast = o.autocast;
  t.step.graph.compile = o.compile;
  t.checkpoint_every = 0;
  t.keep_last = 0;
  t.val_every = o.validate ? 10 : 0;
  t.val_batches = 4;
  TrainRun run;
  std::atomic<bool> stop{false};
  TrainerCallbacks cb;
  cb.on_step = [&](const StepMetrics& m) {
    run.losses.push_back(m.loss);
    if (o.stop_after > 0 && m.step == o.stop_after) stop = true;
  };
  cb.on_eval = [&](const EvalMetrics& e) { run.val_losses.push_back(e.loss); };
  Device dev(2);
  auto r = run_training(*model, nullptr, *data, o.validate ? &*val : nullptr, t, dev, &stop, cb);
  LJ_CHECK(r.ok()) << r.status().to_string();
  run.summary = *r;
  return run;
}

using testing_util::max_rel;
using testing_util::same_bits;
Checkpoint latest(const std::string& out) {
  return testing_util::latest_tiny_checkpoint(out);
}

struct Case {
  DType autocast;
  bool compile;
  double tol;
};

class GpuTrainLoop : public testing::TestWithParam<Case> {};

// Bounds (observed on an H200, 2026-12-04: worst step 9.28e-08 f32, 6.16e-05 bf16 compiled; the
// evaluations 0 and 5.59e-06): the step
// itself agrees to ~1e-6 (f32) and ~1e-2 (bf16) of the loss (gpu_train_test.cc); 20 AdamW steps
// at lr 1e-3 move every weight by up to 2e-2 whatever the gradient's size, so a sign that differs
// in a near-zero gradient element moves the losses apart: 1e-3 (f32), 3e-2 (bf16).
TEST_P(GpuTrainLoop, TwentyStepsAndTheirEvaluationFollowTheCpu) {
  LJ_REQUIRE_GPU_OR_SKIP(ctx);
  const Case& c = GetParam();
  const std::string dir = temp_dir("gpu_vs_cpu");
  Options o{TrainDevice::cpu, c.autocast, c.compile, 20, 0, /*validate=*/true};
  const TrainRun cpu = train(o, dir + "/cpu", dir);
  o.device = TrainDevice::cuda;
  const TrainRun gpu = train(o, dir + "/gpu", dir);
  ASSERT_EQ(gpu.losses.size(), 20u);
  ASSERT_EQ(gpu.val_losses.size(), 2u);
  const double worst = max_rel(gpu.losses, cpu.losses);
  const double worst_val = max_rel(gpu.val_losses, cpu.val_losses);
  std::printf("%s%s: loss %.6f -> %.6f (CPU %.6f -> %.6f), worst step %.3g, eval %.3g\n",
              dtype_name(c.autocast), c.compile ? " compiled" : "", gpu.losses.front(),
              gpu.losses.back(), cpu.losses.front(), cpu.losses.back(), worst, worst_val);
  EXPECT_LT(worst, c.tol);
  EXPECT_LT(worst_val, c.tol);
  EXPECT_LT(gpu.losses.back(), gpu.losses.front());  // it trains
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(F32Bf16, GpuTrainLoop,
                         // Two of the four combinations, to keep tools/gpu_check.sh under 8
                         // minutes; the single step is checked in all four (gpu_train_test.cc).
                         testing::Values(Case{DType::f32, false, 1e-3},
                                         Case{DType::bf16, true, 3e-2}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.autocast)) +
                                  (info.param.compile ? "_compiled" : "_eager");
                         });

// Stopped at step 4 (the stop request SIGTERM makes), resumed to 8: the same bits as 8 steps in
// one go (the kernels and the f64 norm have no atomics; compiled runs replay CUDA graphs).
TEST(GpuTrainResume, StoppedAndResumedIsBitwiseTheUninterruptedRun) {
  LJ_REQUIRE_GPU_OR_SKIP(ctx);
  for (const bool compile : {true, false}) {
    const std::string dir = temp_dir("gpu_resume");
    Options o;
    o.compile = compile;
    o.autocast = compile ? DType::f32 : DType::bf16;
    const TrainRun whole = train(o, dir + "/whole", dir);
    o.stop_after = 4;
    const TrainRun first = train(o, dir + "/parts", dir);
    EXPECT_TRUE(first.summary.stopped_by_signal);
    EXPECT_EQ(first.summary.final_step, 4);
    o.stop_after = 0;
    const TrainRun second = train(o, dir + "/parts", dir);
    EXPECT_TRUE(second.summary.resumed);
    EXPECT_EQ(second.summary.resumed_from, 4);
    std::vector<double> joined = first.losses;
    joined.insert(joined.end(), second.losses.begin(), second.losses.end());
    EXPECT_EQ(joined, whole.losses) << "compile " << compile;
    const Checkpoint a = latest(dir + "/whole"), b = latest(dir + "/parts");
    EXPECT_TRUE(same_bits(a.params, b.params)) << "compile " << compile;
    EXPECT_TRUE(same_bits(a.m, b.m)) << "compile " << compile;
    EXPECT_TRUE(same_bits(a.v, b.v)) << "compile " << compile;
    fs::remove_all(dir);
  }
}

// A GPU checkpoint resumes on the CPU and a CPU one on the GPU: the same files either way, and
// the state crosses device <-> host bitwise (a checkpoint loaded into the GPU step reads back
// unchanged).
TEST(GpuTrainResume, GpuCheckpointResumesOnTheCpuAndBack) {
  LJ_REQUIRE_GPU_OR_SKIP(ctx);
  const std::string dir = temp_dir("gpu_cpu_resume");
  Options o;
  o.stop_after = 4;
  train(o, dir + "/run", dir);  // GPU, steps 1-4
  const Checkpoint at4 = latest(dir + "/run");
  {
    auto model = llama_preset("tiny");
    Device host(1);
    TrainStepConfig cfg;
    auto g = create_gpu_train_step(*model, cfg, host);
    ASSERT_TRUE(g.ok()) << g.status().message();
    ASSERT_TRUE((*g)->pull_state().ok());
    for (size_t i = 0; i < at4.params.size(); ++i) {
      std::memcpy((*g)->host_params()[i].raw(), at4.params[i].raw(), at4.params[i].bytes());
      std::memcpy((*g)->host_m()[i].raw(), at4.m[i].raw(), at4.m[i].bytes());
      std::memcpy((*g)->host_v()[i].raw(), at4.v[i].raw(), at4.v[i].bytes());
    }
    ASSERT_TRUE((*g)->push_state(true).ok());
    ASSERT_TRUE((*g)->pull_state().ok());
    EXPECT_TRUE(same_bits((*g)->host_params(), at4.params));
    EXPECT_TRUE(same_bits((*g)->host_m(), at4.m));
    EXPECT_TRUE(same_bits((*g)->host_v(), at4.v));
  }
  o.device = TrainDevice::cpu;
  o.stop_after = 6;
  const TrainRun cpu = train(o, dir + "/run", dir);  // CPU, steps 5-6
  EXPECT_EQ(cpu.summary.resumed_from, 4);
  EXPECT_EQ(cpu.losses.size(), 2u);
  o.device = TrainDevice::cuda;
  o.stop_after = 0;
  const TrainRun gpu = train(o, dir + "/run", dir);  // GPU again, steps 7-8
  EXPECT_EQ(gpu.summary.resumed_from, 6);
  EXPECT_EQ(gpu.losses.size(), 2u);
  // Against 8 steps on the GPU alone (the CPU's two steps differ by the kernels' rounding only;
  // bound as in TwentyStepsAndTheirEvaluationFollowTheCpu; passed on an H200, 2026-12-04).
  Options whole;
  const TrainRun ref = train(whole, dir + "/whole", dir);
  EXPECT_LT(max_rel({gpu.losses.back()}, {ref.losses.back()}), 1e-3);
  fs::remove_all(dir);
}

// One rank through NCCL (a self communicator bootstraps it) at ZeRO 0 and 1, with and without
// overlap_comm, trains bit for bit as no communicator does: a one-rank all-reduce and all-gather
// are copies, and the update is the same kernel over the same range.
TEST(GpuNccl, OneRankThroughNcclIsBitwiseNoCommunicator) {
  LJ_REQUIRE_GPU_OR_SKIP(ctx);
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  Device host(1);
  auto losses = [&](Communicator* comm, int stage, bool overlap) {
    TrainStepConfig cfg;
    cfg.grad_clip = 0.5;
    if (comm != nullptr) {
      cfg.data_parallel.comm = comm;
      cfg.data_parallel.zero.stage = stage;
      cfg.data_parallel.zero.overlap_comm = overlap;
      cfg.data_parallel.zero.reduce_bucket_size = 5000;  // several buckets
      cfg.data_parallel.zero.allgather_bucket_size = 7000;
    }
    auto g = create_gpu_train_step(*model, cfg, host);
    LJ_CHECK(g.ok()) << g.status().to_string();
    std::vector<double> out;
    for (int s = 0; s < 5; ++s) {
      std::vector<MicroBatch> micro;
      for (int j = 0; j < 2; ++j) {
        micro.push_back(
            {testing_util::tokens_of(host, kBatch, kSeqLen, 2 * s + j, model->vocab_size),
             testing_util::tokens_of(host, kBatch, kSeqLen, 2 * s + j + 1, model->vocab_size)});
      }
      auto r = (*g)->step(micro, 1e-3);
      LJ_CHECK(r.ok()) << r.status().to_string();
      out.push_back(r->loss);
      out.push_back(r->grad_norm);
    }
    return out;
  };
  const std::vector<double> alone = losses(nullptr, 0, false);
  SelfCommunicator self;
  for (int stage : {0, 1}) {
    for (bool overlap : {true, false}) {
      EXPECT_EQ(losses(&self, stage, overlap), alone)
          << "stage " << stage << " overlap " << overlap;
    }
  }
}

}  // namespace
}  // namespace lj::test
