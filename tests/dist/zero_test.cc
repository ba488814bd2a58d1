// Data parallelism with ZeRO stages 0-2 at N ranks equals one process with gradient accumulation
// N over the same global data (dist/batch_shard.h): losses, gradient norms and final weights.
// Every rank computes the one-process reference itself (SelfCommunicator is not needed: no
// communicator is the one-process path, which the model tests show equal to Self bit for bit).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "dist/batch_shard.h"
#include "dist_test_util.h"
#include "plan/graph_figures.h"
#include "train/train_step.h"

namespace lj {
namespace {

constexpr int64_t kSteps = 4, kMicroBatch = 2, kSeqLen = 16;
constexpr double kLr = 1e-3;

// Global micro-batch `index` of the data stream: the same on every rank.
Tensor tokens_of(Device& dev, int64_t index, int64_t salt, int64_t vocab) {
  Tensor t = Tensor::empty(dev, DType::i32, {kMicroBatch, kSeqLen}, MemCategory::temporaries);
  for (int64_t i = 0; i < kMicroBatch * kSeqLen; ++i) {
    const uint64_t x = static_cast<uint64_t>(index * 7919 + salt * 104729 + i) * 2654435761u;
    t.data<int32_t>()[i] = static_cast<int32_t>((x >> 7) % static_cast<uint64_t>(vocab));
  }
  return t;
}

struct TrainRun {
  std::vector<double> losses, grad_norms;
  std::vector<Tensor> params;
  int64_t optimizer_bytes = 0;  // after create
};

// kSteps steps. comm null: one process taking all world x grad_accum micro-batches of each step
// in order; else this rank's micro-batches, grad_accum of them per step.
TrainRun train(Device& dev, Communicator* comm, ZeroConfig zero, int world, int64_t grad_accum) {
  auto model = llama_preset("tiny");
  LJ_CHECK(model.ok());
  TrainStepConfig cfg;
  cfg.grad_clip = 0.5;  // the tiny model's norm is above it at first: the clipped path runs
  if (comm != nullptr) cfg.data_parallel = {comm, zero};
  auto step = TrainStep::create(*model, cfg, dev);
  LJ_CHECK(step.ok()) << step.status().to_string();
  TrainRun run;
  run.optimizer_bytes = dev.memory().current(MemCategory::optimizer);
  for (int64_t s = 0; s < kSteps; ++s) {
    std::vector<int64_t> indices;
    if (comm != nullptr) {
      indices = rank_micro_batches(s, grad_accum, comm->rank(), world);
    } else {
      for (int64_t m = 0; m < grad_accum * world; ++m)
        indices.push_back(s * grad_accum * world + m);
    }
    std::vector<TrainStep::Batch> batches;
    for (int64_t g : indices) {
      batches.push_back(
          {tokens_of(dev, g, 0, model->vocab_size), tokens_of(dev, g, 1, model->vocab_size)});
    }
    auto r = (*step)->step(batches, kLr);
    LJ_CHECK(r.ok()) << r.status().to_string();
    LJ_CHECK(r->updated);
    run.losses.push_back(r->loss);
    run.grad_norms.push_back(r->grad_norm);
  }
  LJ_CHECK((*step)->gather_params().ok());  // ZeRO-3 keeps only its shard
  run.params = (*step)->params();
  return run;
}

double rel(double a, double b) {
  return std::fabs(a - b) / std::max(std::fabs(b), 1e-30);
}

// The largest |a - b| over the parameters, relative to each parameter's largest |b|.
double max_param_rel(const TrainRun& a, const TrainRun& b) {
  double worst = 0;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const float* x = a.params[i].data<float>();
    const float* y = b.params[i].data<float>();
    double diff = 0, scale = 0;
    for (int64_t k = 0; k < a.params[i].numel(); ++k) {
      diff = std::max(diff, std::fabs(static_cast<double>(x[k]) - y[k]));
      scale = std::max(scale, std::fabs(static_cast<double>(y[k])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

bool bitwise_equal(const TrainRun& a, const TrainRun& b) {
  if (a.losses != b.losses || a.grad_norms != b.grad_norms) return false;
  for (size_t i = 0; i < a.params.size(); ++i) {
    if (std::memcmp(a.params[i].raw(), b.params[i].raw(), a.params[i].bytes()) != 0) return false;
  }
  return true;
}

// Every rank holds the same parameters: rank 0's, broadcast, compared bit for bit.
void expect_replicas_equal(const TrainRun& run) {
  Communicator& c = dist_comm();
  for (const Tensor& p : run.params) {
    std::vector<std::byte> mine(p.bytes()), root(p.bytes());
    std::memcpy(mine.data(), p.raw(), p.bytes());
    root = mine;
    ASSERT_TRUE(c.broadcast(root, 0).ok());
    ASSERT_EQ(mine, root) << "rank " << c.rank() << " drifted from rank 0";
  }
}

const TrainRun& reference(int world, int64_t grad_accum) {
  static std::map<std::pair<int, int64_t>, std::pair<std::unique_ptr<Device>, TrainRun>> cache;
  auto& slot = cache[{world, grad_accum}];
  if (!slot.first) {
    slot.first = std::make_unique<Device>(1);
    slot.second = train(*slot.first, nullptr, {}, world, grad_accum);
  }
  return slot.second;
}

struct Case {
  int stage;
  int64_t grad_accum;
  int64_t reduce_bucket_size, allgather_bucket_size;
  bool overlap = false;  // overlap_comm: the bucket reductions in flight during backward
};

class ZeroEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(ZeroEquivalence, MatchesOneProcessWithGradAccumN) {
  const Case k = GetParam();
  Communicator& c = dist_comm();
  const int n = c.world_size();
  const TrainRun& ref = reference(n, k.grad_accum);
  Device dev(1);
  const ZeroConfig zero{k.stage, k.reduce_bucket_size, k.allgather_bucket_size, k.overlap};
  const TrainRun dp = train(dev, &c, zero, n, k.grad_accum);
  double loss_err = 0, norm_err = 0;
  for (size_t s = 0; s < dp.losses.size(); ++s) {
    loss_err = std::max(loss_err, rel(dp.losses[s], ref.losses[s]));
    norm_err = std::max(norm_err, rel(dp.grad_norms[s], ref.grad_norms[s]));
  }
  const double param_err = max_param_rel(dp, ref);
  if (c.rank() == 0) {
    std::printf(
        "stage %d N=%d accum %lld buckets %lld/%lld overlap %d: max rel err loss %.3g, grad "
        "norm %.3g, weights %.3g (%lld steps)\n",
        k.stage, n, static_cast<long long>(k.grad_accum),
        static_cast<long long>(k.reduce_bucket_size),
        static_cast<long long>(k.allgather_bucket_size), k.overlap ? 1 : 0, loss_err, norm_err,
        param_err, static_cast<long long>(kSteps));
  }
  // Observed (4 steps, lr 1e-3): with one micro-batch per rank the sums happen in the same
  // order as in one process, and losses and weights are bitwise equal (norms of stages 1 and 2
  // differ by 2e-16: f64 sums per shard). With accumulation 2 per rank the fp32 gradient sums
  // are grouped differently: loss 2.2e-8 (N=2) / 1.5e-8 (N=3), grad norm 1.0e-8 / 9.7e-9,
  // weights 5.4e-6 / 2.7e-6 of each parameter's largest element (an Adam step moves an element
  // by ~lr whatever its gradient, so one whose gradient is near zero moves on rounding alone).
  // Stage 2 reduce-scatters every micro-batch during backward (as DeepSpeed does) and sums the
  // parts in the shard: grad norm 1.7e-8 / 6.5e-9, weights 5.3e-6 / 3.2e-6. With the reductions
  // overlapping backward (overlap_comm) the numbers are the same as without: only when the
  // collectives run changes, not what they add.
  // The bounds are 20-50x that; a wrong or missing micro-batch moves the loss by 1e-3 or more.
  EXPECT_LT(loss_err, 1e-6);
  EXPECT_LT(norm_err, 1e-6);
  EXPECT_LT(param_err, 1e-4);
  expect_replicas_equal(dp);
}

INSTANTIATE_TEST_SUITE_P(
    Stages, ZeroEquivalence,
    ::testing::Values(Case{0, 1, 500'000'000, 500'000'000}, Case{1, 1, 500'000'000, 500'000'000},
                      Case{2, 1, 500'000'000, 500'000'000},
                      // Small odd buckets: many collectives, cut inside parameters.
                      Case{0, 1, 4099, 3001}, Case{1, 2, 4099, 3001}, Case{2, 2, 4099, 3001},
                      // The same with the reductions overlapping backward (overlap_comm).
                      Case{0, 1, 4099, 3001, true}, Case{1, 1, 4099, 3001, true},
                      Case{2, 1, 4099, 3001, true}, Case{0, 2, 4099, 3001, true},
                      Case{2, 2, 4099, 3001, true},
                      // ZeRO-3: parameters gathered in forward and backward, blocking and
                      // prefetched.
                      Case{3, 1, 500'000'000, 500'000'000}, Case{3, 1, 4099, 3001, true},
                      Case{3, 2, 4099, 3001, true}, Case{3, 2, 4099, 3001, false}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return "stage" + std::to_string(info.param.stage) + "_accum" +
             std::to_string(info.param.grad_accum) +
             (info.param.reduce_bucket_size < 1'000'000 ? "_small_buckets" : "") +
             (info.param.overlap ? "_overlap" : "");
    });

TEST(ZeroDeterminism, TwoRunsAtTheSameWorldSizeAreBitwiseEqual) {
  Communicator& c = dist_comm();
  for (int stage : {0, 1, 2, 3}) {
    const ZeroConfig zero{stage, 4099, 3001, /*overlap_comm=*/true};
    Device d1(1), d2(1);
    const TrainRun a = train(d1, &c, zero, c.world_size(), 1);
    const TrainRun b = train(d2, &c, zero, c.world_size(), 1);
    EXPECT_TRUE(bitwise_equal(a, b)) << "stage " << stage;
  }
}

TEST(ZeroMemory, StagesOneAndTwoHoldAnNthOfTheOptimizerStates) {
  Communicator& c = dist_comm();
  const int n = c.world_size();
  int64_t bytes[4] = {};
  int64_t numel = 0;
  for (int stage : {0, 1, 2, 3}) {
    Device dev(1);
    const TrainRun r = train(dev, &c, ZeroConfig{.stage = stage}, n, 1);
    bytes[stage] = r.optimizer_bytes;
    numel = 0;
    for (const Tensor& p : r.params) numel += p.numel();
  }
  const int64_t shard = (numel + n - 1) / n;
  if (c.rank() == 0) {
    std::printf(
        "optimizer bytes per rank at N=%d (%lld parameters): stage 0 %lld, stage 1 %lld, "
        "stage 2 %lld, stage 3 %lld (ratio %.4f, 1/N = %.4f)\n",
        n, static_cast<long long>(numel), static_cast<long long>(bytes[0]),
        static_cast<long long>(bytes[1]), static_cast<long long>(bytes[2]),
        static_cast<long long>(bytes[3]), static_cast<double>(bytes[1]) / bytes[0], 1.0 / n);
  }
  // m and v in f32; the allocator rounds each block up a little (runtime/memory.h).
  EXPECT_GE(bytes[0], 2 * 4 * numel);
  for (int stage : {1, 2, 3}) {
    EXPECT_GE(bytes[stage], 2 * 4 * shard);
    EXPECT_LE(bytes[stage], 2 * 4 * shard + 2 * 4096) << "stage " << stage;
  }
}

// The memory predictor's per-rank dry run (plan/graph_figures.h DryRunOptions::world_size) holds
// what a real rank holds: every category's peak equal to the byte, at every stage, the optimizer
// step's collective buffers included (workspace: the real run adds only kernel scratch).
TEST(ZeroMemory, DryRunOfOneRankMatchesARealRankByCategory) {
  Communicator& c = dist_comm();
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  const int64_t B = kMicroBatch, T = kSeqLen;  // tokens_of's shape
  for (int stage : {0, 1, 2, 3}) {
    // Small buckets, so the step splits its collectives as a large model's would.
    const ZeroConfig zero{.stage = stage,
                          .reduce_bucket_size = 5000,
                          .allgather_bucket_size = 7000,
                          .overlap_comm = stage == 3,
                          .stage3_prefetch_bucket_size = 20000};
    DryRunOptions dry;
    dry.world_size = c.world_size();
    dry.zero = zero;
    dry.mpi_temporaries = false;  // MPI's own buffers are outside ljperf's accounting
    GraphOptions go;              // with the gradient collectives, as the trainer builds its graph
    go.grad_sync = grad_sync_options(DataParallel{&c, zero});
    auto est = graph_figures(*model, B, T, go, dry);
    ASSERT_TRUE(est.ok()) << est.status().to_string();
    Device dev(1);
    TrainStepConfig cfg;
    cfg.data_parallel = DataParallel{&c, zero};
    auto trainer = TrainStep::create(*model, cfg, dev);
    ASSERT_TRUE(trainer.ok()) << trainer.status().to_string();
    Tensor tokens = tokens_of(dev, c.rank(), 1, model->vocab_size);
    Tensor targets = tokens_of(dev, c.rank(), 2, model->vocab_size);
    auto r = (*trainer)->step(tokens, targets, kLr);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_GT(r->comm_seconds, 0) << "stage " << stage;
    const MemoryStats& real = dev.memory();
    for (auto cat : {MemCategory::weights, MemCategory::grads, MemCategory::optimizer,
                     MemCategory::activations, MemCategory::temporaries}) {
      EXPECT_EQ(est->stats.peak(cat), real.peak(cat))
          << "stage " << stage << ": " << mem_category_name(cat);
    }
    // The collective buffers are workspace in both; the real run adds kernel scratch.
    EXPECT_LE(est->stats.peak(MemCategory::workspace), real.peak(MemCategory::workspace))
        << "stage " << stage;
    EXPECT_LE(est->bytes_peak, real.bytes_total_peak) << "stage " << stage;
    EXPECT_GE(est->bytes_peak + real.peak(MemCategory::workspace), real.bytes_total_peak)
        << "stage " << stage;
  }
}

// Not run by default: CTest's dist.abort_on_failure runs it to show that a check failing on one
// rank ends the run (MPI_Abort from main.cc) while the other ranks wait in a collective.
TEST(DistHarness, DISABLED_FailureOnOneRankEndsEveryRank) {
  Communicator& c = dist_comm();
  EXPECT_NE(c.rank(), 1) << "deliberate failure on rank 1";
  ASSERT_TRUE(c.barrier().ok());  // rank 1 never gets here: without the abort, rank 0 hangs
}

}  // namespace
}  // namespace lj
