// plan/gpu_collectives.h: one collective's latency and traffic (NCCL's ring model), the buckets a
// DeepSpeed config sets, and what each ZeRO stage runs per micro-batch and per optimizer step.
#include "plan/gpu_collectives.h"

#include <gtest/gtest.h>

namespace lj {
namespace {

constexpr GpuCommLink kNode{.ranks = 8, .gpus_per_node = 8, .bytes_per_s = 100e9};

TEST(GpuCollectivesTest, RingLatencyAndTraffic) {
  // 8 ranks in one node: 7 NVLink steps (14 for an all-reduce), none across the network.
  EXPECT_DOUBLE_EQ(gpu_collective_seconds(GpuCollective::reduce_scatter, 8e9, kNode),
                   8.4e-6 + 7 * 3.4e-6 + 7.0 / 8 * 8e9 / 100e9);
  EXPECT_DOUBLE_EQ(gpu_collective_seconds(GpuCollective::all_reduce, 8e9, kNode),
                   8.4e-6 + 14 * 3.4e-6 + 2 * 7.0 / 8 * 8e9 / 100e9);
  // 16 ranks on 2 nodes: 15 steps, 1 of them across the network.
  const GpuCommLink two{.ranks = 16, .gpus_per_node = 8, .bytes_per_s = 100e9};
  EXPECT_DOUBLE_EQ(gpu_collective_seconds(GpuCollective::all_gather, 0.0, two), 0.0);
  EXPECT_DOUBLE_EQ(gpu_collective_seconds(GpuCollective::all_gather, 16e6, two),
                   8.4e-6 + 14 * 3.4e-6 + 9.6e-6 + 15.0 / 16 * 16e6 / 100e9);
  EXPECT_EQ(gpu_collective_seconds(GpuCollective::all_gather, 16e6, GpuCommLink{}), 0);
}

TEST(GpuCollectivesTest, EveryBucketPaysItsLatency) {
  const double one = gpu_bucketed_seconds(GpuCollective::reduce_scatter, 1000, 1000, kNode);
  const double ten = gpu_bucketed_seconds(GpuCollective::reduce_scatter, 1000, 100, kNode);
  const double lat = 8.4e-6 + 7 * 3.4e-6;
  EXPECT_NEAR(ten - one, 9 * lat, 1e-15);
  // A remainder is a bucket of its own.
  EXPECT_NEAR(gpu_bucketed_seconds(GpuCollective::reduce_scatter, 1050, 100, kNode) - ten,
              lat + 7.0 / 8 * 100 / 100e9, 1e-15);
}

TEST(GpuCollectivesTest, WhatEachStageRunsAndWhen) {
  const int64_t psi = 1'000'000'000;
  ZeroConfig z = ZeroConfig::hf_auto(0, 4096);
  const GpuStepComm s0 = gpu_step_comm(z, psi, kNode);
  EXPECT_GT(s0.last_micro_batch, 0);  // once per optimizer step
  EXPECT_EQ(s0.per_micro_batch, 0);
  EXPECT_EQ(s0.after_step, 0);
  z.stage = 1;
  const GpuStepComm s1 = gpu_step_comm(z, psi, kNode);
  EXPECT_GT(s1.after_step, 0);  // the updated parameters, gathered after the step
  EXPECT_LT(s1.last_micro_batch, s0.last_micro_batch);  // a reduce-scatter moves half
  z.stage = 2;
  const GpuStepComm s2 = gpu_step_comm(z, psi, kNode);
  EXPECT_DOUBLE_EQ(s2.per_micro_batch, s1.last_micro_batch);  // every micro-batch reduces
  EXPECT_DOUBLE_EQ(s2.total(4), 4 * s2.per_micro_batch + s2.after_step);
  z.stage = 3;
  const GpuStepComm s3 = gpu_step_comm(z, psi, kNode);
  EXPECT_EQ(s3.after_step, 0);
  EXPECT_GT(s3.tail, s2.tail);  // the first gather too
  // Exposed: a tail per reducing micro-batch when compute hides the rest, plus what it cannot.
  EXPECT_DOUBLE_EQ(s3.exposed(1e9, 4), 4 * s3.tail);
  EXPECT_DOUBLE_EQ(s0.exposed(1e9, 4), s0.tail);
  EXPECT_DOUBLE_EQ(s1.exposed(0.0, 1), s1.last_micro_batch + s1.tail + s1.after_step);
  // No ranks to talk to: nothing.
  EXPECT_EQ(gpu_step_comm(z, psi, GpuCommLink{}).total(1), 0);
}

}  // namespace
}  // namespace lj
