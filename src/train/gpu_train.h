// Training steps on one GPU (the CUDA executor, runtime/cuda/), for `ljperf benchmark --device
// cuda`: the joint graph of passes/pipeline run on the device, fp32 master weights and AdamW
// states on the device, updated by the multi-tensor AdamW kernel. Plain C++: with LJ_CUDA the
// implementation is train/cuda/gpu_train.cc; without it, train/not_built/ says so.
//
// Compiled runs place values by the static memory plan (one device arena per shape).
// What it does not do yet (issue 16's note): data parallelism (NCCL), ZeRO, gradient
// accumulation, clipping, checkpoints, real data (ljperf train).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "passes/pipeline/train_graph.h"
#include "train/adamw.h"
#include "train/train_step.h"

namespace lj {

struct GpuRunConfig {
  LlamaConfig model;
  GraphOptions graph;  // compile, autocast, recompute
  int64_t batch = 1, seq_len = 0;
  int64_t steps = 1;
  AdamWConfig adamw;
  uint64_t seed = 1234;
  // The batch of step `index` (host tensors (B, T) i32), e.g. benchmark's synthetic tokens.
  std::function<TrainStep::Batch(Device& host, int64_t index)> batch_fn;
};

struct GpuRunResult {
  std::string device_name;  // "NVIDIA H200"
  std::string arch;         // "sm_90"
  int64_t device_memory_bytes = 0;
  double setup_seconds = 0;  // graph, weights to the device, NVRTC compile of fused kernels
  int64_t fused_kernels = 0;
  std::vector<double> step_seconds;  // per step: host clock around a synchronised step
  std::vector<double> losses;
  int64_t kernels_per_step = 0;
  // Compiled runs: whether steps were to be replayed as CUDA graphs, and how many were (a
  // capture that failed leaves every step eager: 0).
  bool cuda_graphs = false;
  int64_t graph_replays = 0;
  // The device's view of memory: the caching allocator's reserved and in-use peaks plus the
  // static plan's arena (compiled runs), and cudaMemGetInfo's used bytes after the run
  // (context, cuBLASLt workspace, arena and the allocator's reservation included).
  int64_t bytes_reserved_peak = 0;
  int64_t bytes_in_use_peak = 0;
  int64_t bytes_device_used = 0;
};

// unimplemented without a CUDA build or a GPU (one line with a hint).
StatusOr<GpuRunResult> run_on_gpu(const GpuRunConfig& config);

}  // namespace lj
