// Training steps on the GPU (the CUDA executor, runtime/cuda/), for `ljperf train --device cuda`
// and `ljperf benchmark --device cuda`. Plain C++: with LJ_CUDA the implementation is
// train/cuda/; without it, create_gpu_train_step says so (train/no_cuda/).
//
// GpuTrainStep is a StepEngine (train/step_engine.h): the trainer's loop, data, checkpoints and
// resume are the CPU's. On the device: the joint graph of passes/pipeline, the f32 master weights
// in one flat buffer (FlatLayout order: parameters are views of it), the flat f32 gradient the
// micro-batches accumulate into, AdamW's m and v, updated by the multi-tensor AdamW kernel with
// clipping folded in (the norm is summed in f64 in a fixed order: reproducible run to run). bf16
// casts each f32 weight at its point of use (the graph's casts; no 16-bit copies are kept).
// Compiled runs place values by the static memory plan and replay the step as a CUDA graph.
//
// Several ranks (TrainStepConfig::data_parallel.comm set, e.g. MPI under mpirun): one GPU per
// rank, the rank's local rank modulo the GPUs it sees; an NCCL communicator (dist/
// nccl_communicator.h) bootstrapped over data_parallel.comm reduces the gradients. With ZeRO's
// overlap_comm (the default) each bucket of reduce_bucket_size elements is all-reduced on NCCL's
// stream as soon as backward has queued its last gradient, while backward goes on (such runs
// launch kernel by kernel: no CUDA graphs); without it the buckets are reduced after backward and
// compiled steps are still replayed as CUDA graphs.
// Stage 1 keeps this rank's shard of m and v and all-gathers the updated parameters in buckets of
// allgather_bucket_size. The losses and stop decisions still go over data_parallel.comm.
// A communicator of one rank (a self communicator) runs the same NCCL path: N = 1.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/train_step.h"

namespace lj {

// What the GPU measured: the device, setup, and memory as the device sees it.
struct GpuReport {
  std::string device_name;  // "NVIDIA H200"
  std::string arch;         // "sm_90"
  int device = 0;           // the CUDA device index this rank uses
  int64_t device_memory_bytes = 0;
  double setup_seconds = 0;  // graph, weights to the device, NVRTC compile of fused kernels
  int64_t fused_kernels = 0;
  int64_t kernels_per_step = 0;  // of the last forward+backward
  // Compiled runs: whether steps are to be replayed as CUDA graphs, and how many runs were (a
  // capture that failed, or overlapped collectives, leave every run eager: 0).
  bool cuda_graphs = false;
  int64_t graph_replays = 0;
  // The caching allocator's reserved and in-use peaks plus the static plan's arena (compiled
  // runs), and cudaMemGetInfo's used bytes now (context, cuBLASLt workspace, NCCL included).
  int64_t bytes_reserved_peak = 0;
  int64_t bytes_in_use_peak = 0;
  int64_t bytes_device_used = 0;
};

class GpuTrainStep : public StepEngine {
 public:
  virtual GpuReport report() const = 0;
  int64_t device_memory_peak() const override { return report().bytes_reserved_peak; }
};

// What the GPU step refuses in `config`, one line with a hint (host-checkable, any build): fp16
// loss scaling, ZeRO stages 2 and 3, profiling, a compiled run on the caching allocator.
Status check_gpu_step_config(const TrainStepConfig& config);

// The step on this rank's GPU, parameters initialised as on the CPU (init_llama_params: the same
// seed gives the same weights). `host`: where host tensors (batches, the host state) live.
// Errors: check_gpu_step_config's; built without CUDA; no GPU (the CUDA probe's reason); NCCL.
StatusOr<std::unique_ptr<GpuTrainStep>> create_gpu_train_step(const LlamaConfig& model,
                                                              const TrainStepConfig& config,
                                                              Device& host);

}  // namespace lj
