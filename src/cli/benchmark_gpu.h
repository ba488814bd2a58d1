// `ljperf benchmark --device cuda`: the benchmark's resolved run on one GPU (train/gpu_train.h),
// reported as the CPU benchmark reports: tokens/s, TFLOP/s, MFU against the catalog's dense
// bf16 peak of this GPU (plan/device_catalog.h), step time, and peak memory measured on the
// device (the caching allocator's reserved peak; cudaMemGetInfo) next to the predictor's
// (plan/ price_choice for this GPU). Under mpirun one GPU per rank, gradients over NCCL
// (train/gpu_train.h); tokens/s counts every rank's tokens, the step time is rank 0's.
#pragma once

#include <functional>
#include <string>

#include "core/status.h"
#include "train/gpu_train.h"

namespace lj::cli {

struct GpuBenchmark {
  std::string model_name;
  GpuRunConfig run;
  int64_t warmup = 1;  // steps left out of the summary
  std::string output;  // JSONL file to append one record to ("" none)
};

Status run_gpu_benchmark(const GpuBenchmark& b);

}  // namespace lj::cli
