// The GPU time model's arithmetic (plan/gpu_time_model.h): each term from hand-computed work, the
// collectives' link and overlap, the MFU convention, and the work the dry run counts.
#include "plan/gpu_time_model.h"

#include <gtest/gtest.h>

#include "models/config.h"
#include "plan/gpu_collectives.h"
#include "plan/graph_figures.h"

namespace lj {
namespace {

DeviceProfile device(const std::string& id) {
  auto d = find_device(id, default_coefficients());
  LJ_CHECK(d.ok());
  return *d;
}

TEST(GpuTimeModelTest, EachTermAtItsRate) {
  const DeviceProfile h100 = device("h100");
  const GpuTimeCoefficients& k = gpu_time_coefficients("h100");
  GpuStepWork w;
  w.gemm_flops = 1e15;
  w.attention_forward_flops = 2e14;
  w.attention_backward_flops = 5e14;
  w.memory_bytes[static_cast<size_t>(OpCategory::elementwise)] = 1e12;
  w.kernels = 1000;
  const GpuStepPrice p = price_gpu_step(
      w, h100, GpuRun{.ranks = 1, .zero = {}, .params = 1'000'000, .local_params = 1'000'000});
  const double peak = 989.4e12;
  EXPECT_DOUBLE_EQ(p.gemm, 1e15 / (peak * k.gemm_efficiency));
  EXPECT_DOUBLE_EQ(p.attention, 2e14 / (peak * k.attention_forward_efficiency) +
                                    5e14 / (peak * k.attention_backward_efficiency));
  EXPECT_DOUBLE_EQ(p.memory, 1e12 / (3.35e12 * k.hbm_efficiency));
  EXPECT_DOUBLE_EQ(p.overhead, 1000 * k.kernel_seconds);
  EXPECT_DOUBLE_EQ(p.optimizer, kAdamBytesPerParam * 1e6 / (3.35e12 * k.hbm_efficiency));
  EXPECT_EQ(p.comm, 0);  // one device: no collectives
  EXPECT_DOUBLE_EQ(p.total(), p.compute());
  // The breakdown sums to the step.
  EXPECT_NEAR(p.step_times(w, h100, k).total(), p.total(), 1e-12 * p.total());
}

TEST(GpuTimeModelTest, CollectivesHideBehindComputeExceptTheTail) {
  const DeviceProfile h100 = device("h100");
  const GpuTimeCoefficients& k = gpu_time_coefficients("h100");
  GpuStepWork w;
  w.gemm_flops = 1e15;  // ~2 s of compute
  const int64_t psi = 8'000'000'000;
  GpuRun run{
      .ranks = 8, .zero = ZeroConfig::hf_auto(3, 4096), .params = psi, .local_params = psi / 8};
  const GpuStepPrice in_node = price_gpu_step(w, h100, run);
  const GpuCommLink nvlink{
      .ranks = 8, .gpus_per_node = 8, .bytes_per_s = h100.link_bandwidth * k.nvlink_efficiency};
  const GpuStepComm c = gpu_step_comm(run.zero, psi, nvlink);
  EXPECT_DOUBLE_EQ(in_node.comm, c.total(1));
  // ZeRO-3's volume over NVLink, and every bucket's ring latency on top: 477 reduce-scatters of
  // hidden^2 and twice 530 all-gathers of 0.9 hidden^2 elements, 32.2 us each (30% of the
  // volume's 117 ms here).
  const double volume = zero_comm_bytes(psi, 3, 8) / nvlink.bytes_per_s;
  const int64_t reduces = (psi + 4096 * 4096 - 1) / (4096 * 4096);
  const int64_t prefetch = ZeroConfig::auto_prefetch_bucket(4096);
  const int64_t gathers = (psi + prefetch - 1) / prefetch;
  EXPECT_EQ(reduces, 477);
  EXPECT_EQ(gathers, 530);
  EXPECT_NEAR(in_node.comm, volume + static_cast<double>(reduces + 2 * gathers) * 32.2e-6,
              1e-9 * in_node.comm);
  EXPECT_LT(in_node.comm, in_node.compute());  // hidden, but for the tail
  EXPECT_DOUBLE_EQ(in_node.comm_exposed, c.tail);
  // Across nodes the ring runs over the node's NICs together (8 x 400 Gb/s = 400 GB/s, under
  // NVLink's 450): a slower fabric leaves the collectives longer than compute, and the step waits.
  run.ranks = 128;
  run.local_params = psi / 128;
  run.fabric_bandwidth = 1e9;  // 8 Gb/s per GPU
  const GpuStepPrice slow = price_gpu_step(w, h100, run);
  EXPECT_GT(slow.comm, slow.compute());
  const double compute = slow.gemm + slow.attention + slow.memory + slow.overhead;
  const GpuStepComm sc = gpu_step_comm(
      run.zero, psi,
      GpuCommLink{.ranks = 128, .gpus_per_node = 8, .bytes_per_s = 8e9 * k.fabric_efficiency});
  EXPECT_DOUBLE_EQ(slow.comm_exposed, slow.comm - compute + sc.tail);
}

TEST(GpuTimeModelTest, AccumulationSharesTheOptimizerAndStage01Reductions) {
  const DeviceProfile h100 = device("h100");
  GpuStepWork w;
  w.gemm_flops = 1e13;  // ~20 ms per micro-batch
  const int64_t psi = 1'000'000'000;
  GpuRun run{.ranks = 64,
             .zero = ZeroConfig::hf_auto(1, 2048),
             .params = psi,
             .local_params = psi / 64,
             .fabric_bandwidth = 1e9};
  const GpuStepPrice one = price_gpu_step(w, h100, run);
  run.micro_batches = 4;
  const GpuStepPrice four = price_gpu_step(w, h100, run);
  // The optimizer and stage 1's reduction and gather run once per step: a quarter per micro-batch.
  EXPECT_DOUBLE_EQ(four.optimizer, one.optimizer / 4);
  EXPECT_DOUBLE_EQ(four.comm, one.comm / 4);
  EXPECT_LT(four.total(), one.total());
  // Stage 3 gathers and reduces in every micro-batch: the same collectives per micro-batch.
  run.zero = ZeroConfig::hf_auto(3, 2048);
  const GpuStepPrice s3_four = price_gpu_step(w, h100, run);
  run.micro_batches = 1;
  const GpuStepPrice s3_one = price_gpu_step(w, h100, run);
  EXPECT_DOUBLE_EQ(s3_four.comm, s3_one.comm);
  EXPECT_DOUBLE_EQ(s3_four.comm_exposed, s3_one.comm_exposed);
}

TEST(GpuTimeModelTest, MfuIsTorchtitansConvention) {
  auto c = llama_preset("llama3-8b");
  ASSERT_TRUE(c.ok());
  // REFERENCE.md: Llama-3-8B at T=8192, 57.9 GFLOP per token; 100% MFU on an H100 = 17.1K
  // tokens/s.
  EXPECT_NEAR(model_flops_utilization(*c, 8192, 17'100, device("h100")), 1.0, 0.002);
}

TEST(GpuTimeModelTest, DryRunCountsTheWorkRecomputeAndCompileChange) {
  auto c = llama_preset("tiny");
  ASSERT_TRUE(c.ok());
  const PredictorCoefficients m = default_coefficients();
  const DeviceProfile h100 = device("h100");
  const auto work = [&](GraphOptions o) {
    o.dtype = DType::bf16;
    auto f = graph_figures(
        *c, 2, 128, o,
        DryRunOptions{
            .with_adam_states = false, .device = &h100, .eff = m.gpu_eff, .cuda_workspace = true});
    LJ_CHECK(f.ok() && f->gpu_work.has_value());
    return *f->gpu_work;
  };
  const GpuStepWork base = work({});
  // 6 FLOPs per parameter and token in the GEMMs (the embedding gather is no GEMM).
  const double tokens = 2 * 128;
  EXPECT_NEAR(base.gemm_flops / tokens,
              6.0 * static_cast<double>(c->num_params_without_embedding()),
              0.01 * 6.0 * static_cast<double>(c->num_params_without_embedding()));
  // Attention backward: 2.5x the forward (graph/cost.cc).
  EXPECT_DOUBLE_EQ(base.attention_backward_flops, 2.5 * base.attention_forward_flops);
  GraphOptions full;
  full.recompute = RecomputeConfig{.policy = RecomputePolicy::full};
  const GpuStepWork re = work(full);
  EXPECT_GT(re.gemm_flops, base.gemm_flops);  // the forward again
  EXPECT_GT(re.attention_forward_flops, base.attention_forward_flops);
  GraphOptions compiled;
  compiled.compile = true;
  const GpuStepWork fused = work(compiled);
  EXPECT_LT(fused.kernels, base.kernels);
  EXPECT_LT(fused.memory_bytes_total(), base.memory_bytes_total());
}

TEST(GpuTimeModelTest, EveryCatalogGpuHasCoefficients) {
  for (const DeviceProfile& d : gpu_catalog()) {
    const GpuTimeCoefficients& k = gpu_time_coefficients(d.id);
    EXPECT_GT(k.gemm_efficiency, 0) << d.id;
    EXPECT_LE(k.gemm_efficiency, 1) << d.id;
    EXPECT_FALSE(k.sources.empty()) << d.id;
    EXPECT_GT(d.fabric_bandwidth, 0) << d.id;
  }
  EXPECT_NE(gpu_time_coefficients("b200").sources.find("borrowed from h100"), std::string::npos);
}

}  // namespace
}  // namespace lj
