// The Trainer's sharded checkpoints under mpirun (train/trainer.h, train/sharded_checkpoint.h):
//   - k steps, checkpoint, a new Trainer resumes to 2k: bitwise equal to an uninterrupted 2k-step
//     run at the same world size, for ZeRO stages 0-3;
//   - a checkpoint written by 2 ranks (ZeRO 2 and ZeRO 3) resumed by 1 process (here, on rank 0)
//     and by 3 ranks (dist.np3, at ZeRO 1 and 3, from the files dist.np2 leaves in
//     LJ_DIST_ARTIFACT_DIR) continues the loss curve
//     within fp32 reduction-order error. The global batch is the same at every world size (6
//     micro-batches a step: 2 ranks x 3, 3 x 2, 1 x 6), so only the summation order changes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "dist_test_util.h"
#include "model/model_test_util.h"
#include "train/sharded_checkpoint.h"
#include "train/trainer.h"

namespace lj {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kGlobalMicroBatches = 6, kBatch = 2, kSeqLen = 16, kHalf = 3;

// A folder every rank sees: rank 0 makes it, the name is broadcast.
std::string shared_temp_dir() {
  Communicator& c = dist_comm();
  std::vector<std::byte> name(256, std::byte{0});
  if (c.rank() == 0) {
    std::string tmpl = (fs::temp_directory_path() / "lj_dist_ckpt_XXXXXX").string();
    LJ_CHECK(::mkdtemp(tmpl.data()) != nullptr);
    std::memcpy(name.data(), tmpl.data(), tmpl.size());
  }
  LJ_CHECK(c.broadcast(name, 0).ok());
  return reinterpret_cast<const char*>(name.data());
}

// Deterministic tokens below the tiny model's vocabulary, written once by rank 0.
std::string make_tokens(const std::string& dir, int64_t vocab) {
  const std::string path = dir + "/train.u32";
  if (dist_comm().rank() == 0) {
    std::vector<uint32_t> t(4000);
    for (size_t i = 0; i < t.size(); ++i)
      t[i] = static_cast<uint32_t>(((i * 2654435761u) >> 7) % static_cast<uint64_t>(vocab));
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size() * 4));
  }
  LJ_CHECK(dist_comm().barrier().ok());
  return path;
}

struct TrainerRun {
  std::vector<double> losses;  // per step of this run
  TrainSummary summary;
};

// Trains to `steps` (of a 2k-step schedule) in `out`; comm null: one process.
TrainerRun train(Communicator* comm, int stage, const std::string& out,
                 const std::string& data_path, int64_t steps) {
  auto model = llama_preset("tiny");
  LJ_CHECK(model.ok());
  auto data = TokenFile::open(data_path, TokenFormat::raw_u32);
  LJ_CHECK(data.ok()) << data.status().to_string();
  TrainerConfig t;
  t.out_dir = out;
  t.steps = steps;
  t.batch_size = kBatch;
  t.seq_len = kSeqLen;
  const int world = comm != nullptr ? comm->world_size() : 1;
  t.grad_accum = kGlobalMicroBatches / world;
  t.lr = LrSchedule{1e-3, 1e-4, 2, 2 * kHalf, LrSchedule::Decay::cosine};
  t.step.grad_clip = 0.5;  // clipped at first: the clipped path runs
  if (comm != nullptr) t.step.data_parallel = {comm, ZeroConfig{stage, 4099, 3001}};
  t.checkpoint_every = 0;
  t.keep_last = 0;
  TrainerRun run;
  TrainerCallbacks cb;
  cb.on_step = [&](const StepMetrics& m) { run.losses.push_back(m.loss); };
  Device dev(1);
  auto r = run_training(*model, nullptr, *data, nullptr, t, dev, nullptr, cb);
  LJ_CHECK(r.ok()) << r.status().to_string();
  run.summary = *r;
  return run;
}

using testing_util::same_bits;
Checkpoint latest(const std::string& out) {
  return testing_util::latest_tiny_checkpoint(out);
}

// The largest |a - b| over the parameters, relative to each parameter's largest |b|.
double max_rel(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double diff = 0, scale = 0;
    for (int64_t k = 0; k < a[i].numel(); ++k) {
      const double x = a[i].data<float>()[k], y = b[i].data<float>()[k];
      diff = std::max(diff, std::fabs(x - y));
      scale = std::max(scale, std::fabs(y));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

using testing_util::max_rel;

class ShardedResume : public ::testing::TestWithParam<int> {};

TEST_P(ShardedResume, KStepsThenResumeToTwoKIsBitwiseEqualToAnUninterruptedRun) {
  Communicator& c = dist_comm();
  const int stage = GetParam();
  const std::string dir = shared_temp_dir();
  const std::string data = make_tokens(dir, 256);
  const TrainerRun whole = train(&c, stage, dir + "/whole", data, 2 * kHalf);
  const TrainerRun first = train(&c, stage, dir + "/resumed", data, kHalf);
  ASSERT_TRUE(is_sharded_checkpoint(latest_checkpoint_dir(dir + "/resumed")));
  const TrainerRun second = train(&c, stage, dir + "/resumed", data, 2 * kHalf);
  ASSERT_TRUE(second.summary.resumed);
  ASSERT_EQ(second.summary.resumed_from, kHalf);
  std::vector<double> joined = first.losses;
  joined.insert(joined.end(), second.losses.begin(), second.losses.end());
  EXPECT_EQ(joined, whole.losses);  // bitwise
  const Checkpoint a = latest(dir + "/whole"), b = latest(dir + "/resumed");
  EXPECT_EQ(a.state.step, 2 * kHalf);
  EXPECT_EQ(a.state.data_position, b.state.data_position);
  EXPECT_TRUE(same_bits(a.params, b.params));
  EXPECT_TRUE(same_bits(a.m, b.m));
  EXPECT_TRUE(same_bits(a.v, b.v));

  ASSERT_TRUE(c.barrier().ok());  // every rank has read the files
  if (c.rank() == 0) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Stages, ShardedResume, ::testing::Values(0, 1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "stage" + std::to_string(info.param);
                         });

std::string hex_losses(const std::vector<double>& losses) {
  std::string text;
  char buf[64];
  for (double l : losses) {
    std::snprintf(buf, sizeof(buf), "%a\n", l);
    text += buf;
  }
  return text;
}

// The artifacts dist.np2 leaves for dist.np3 (CTest orders them with a fixture), per stage of
// the N=2 run that wrote them.
fs::path artifacts(int stage) {
  return fs::path(LJ_DIST_ARTIFACT_DIR) / ("np2_to_np3_stage" + std::to_string(stage));
}

// N=2 at `stage` writes a checkpoint at step k; one process resumes it to 2k (on rank 0 here),
// and dist.np3 resumes it at N=3 (TwoRanksToThree). Compared with the uninterrupted N=2 run.
class ReshardedResumeFrom : public ::testing::TestWithParam<int> {};

TEST_P(ReshardedResumeFrom, TwoRanksToOneProcess) {
  Communicator& c = dist_comm();
  if (c.world_size() != 2) GTEST_SKIP() << "writes the N=2 checkpoint; runs in dist.np2";
  const int stage = GetParam();
  const fs::path out = artifacts(stage);
  const std::string dir = shared_temp_dir();
  const std::string data = make_tokens(dir, 256);
  const TrainerRun whole = train(&c, stage, dir + "/whole", data, 2 * kHalf);
  (void)train(&c, stage, dir + "/part", data, kHalf);
  if (c.rank() == 0) {
    fs::copy(dir + "/part", dir + "/one", fs::copy_options::recursive);
    const TrainerRun one = train(nullptr, 0, dir + "/one", data, 2 * kHalf);
    ASSERT_TRUE(one.summary.resumed);
    const std::vector<double> tail(whole.losses.begin() + kHalf, whole.losses.end());
    const double loss_err = max_rel(one.losses, tail);
    const double weight_err = max_rel(latest(dir + "/one").params, latest(dir + "/whole").params);
    std::printf(
        "resume N=2 (stage %d) -> N=1: max rel err loss %.3g, weights %.3g (steps %lld-%lld)\n",
        stage, loss_err, weight_err, static_cast<long long>(kHalf + 1),
        static_cast<long long>(2 * kHalf));
    // Observed (steps 4-6), stages 2 and 3 alike: loss 1.5e-8, weights 1.1e-7 of a parameter's
    // largest element (6 micro-batch gradients summed in f32 in one order, against the N=2 run
    // that reduce-scatters each micro-batch during backward and sums the parts in its shard;
    // 1.7e-16 / 1.1e-7 before stage 2 reduced during backward). The bounds are those of
    // zero_test.cc (>= 60x the observed); a wrong shard, a lost optimizer state or a wrong data
    // position moves the loss by 1e-3 or more.
    EXPECT_LT(loss_err, 1e-6);
    EXPECT_LT(weight_err, 1e-4);
    // For dist.np3: the step-k checkpoint, the uninterrupted losses and final checkpoint.
    fs::remove_all(out);
    fs::create_directories(out);
    fs::copy(dir + "/part", out / "part", fs::copy_options::recursive);
    fs::copy(dir + "/whole", out / "whole", fs::copy_options::recursive);
    fs::copy(data, out / "train.u32");
    std::ofstream(out / "losses.txt") << hex_losses(whole.losses);
    fs::remove_all(dir);
  }
  ASSERT_TRUE(c.barrier().ok());
}

INSTANTIATE_TEST_SUITE_P(Stages, ReshardedResumeFrom, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "stage" + std::to_string(info.param);
                         });

// (stage of the N=2 run that wrote the checkpoint, stage of the N=3 run that resumes it)
class ReshardedResumeAtThree : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(ReshardedResumeAtThree, TwoRanksToThree) {
  Communicator& c = dist_comm();
  if (c.world_size() != 3) GTEST_SKIP() << "resumes the N=2 checkpoint; runs in dist.np3";
  const auto [from, to] = GetParam();
  const fs::path in = artifacts(from);
  if (!fs::exists(in / "losses.txt")) {
    GTEST_SKIP() << in << " is missing: run dist.np2 first (CTest does)";
  }
  const std::string dir = shared_temp_dir();
  if (c.rank() == 0) fs::copy(in / "part", dir + "/part", fs::copy_options::recursive);
  ASSERT_TRUE(c.barrier().ok());
  // The same data path on every rank of this run (the fingerprint compares it).
  const TrainerRun three = train(&c, to, dir + "/part", (in / "train.u32").string(), 2 * kHalf);
  ASSERT_TRUE(three.summary.resumed);
  ASSERT_EQ(three.summary.resumed_from, kHalf);
  std::vector<double> whole;
  std::ifstream losses(in / "losses.txt");
  for (std::string line; std::getline(losses, line);)
    whole.push_back(std::strtod(line.c_str(), nullptr));
  ASSERT_EQ(whole.size(), static_cast<size_t>(2 * kHalf));
  const std::vector<double> tail(whole.begin() + kHalf, whole.end());
  const double loss_err = max_rel(three.losses, tail);
  const double weight_err =
      max_rel(latest(dir + "/part").params, latest((in / "whole").string()).params);
  if (c.rank() == 0) {
    std::printf("resume N=2 (stage %d) -> N=3 (stage %d): max rel err loss %.3g, weights %.3g\n",
                from, to, loss_err, weight_err);
  }
  // Observed: stage 2 -> 1 loss 1.5e-8, weights 8.9e-8; stage 3 -> 3 loss 1.5e-8, weights
  // 9.8e-8 (2 + 2 + 2 micro-batch gradients against the uninterrupted N=2 run's, which
  // reduce-scatters each micro-batch as it goes and sums (a1 + b1) + (a2 + b2) + (a3 + b3)
  // instead of 3 + 3). Bounds as in TwoRanksToOneProcess (>= 60x the observed).
  EXPECT_LT(loss_err, 1e-6);
  EXPECT_LT(weight_err, 1e-4);
  ASSERT_TRUE(c.barrier().ok());
  if (c.rank() == 0) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Stages, ReshardedResumeAtThree,
                         ::testing::Values(std::pair{2, 1}, std::pair{3, 3}),
                         [](const ::testing::TestParamInfo<std::pair<int, int>>& info) {
                           return "stage" + std::to_string(info.param.first) + "_to_stage" +
                                  std::to_string(info.param.second);
                         });

}  // namespace
}  // namespace lj
