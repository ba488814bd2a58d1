// `ljperf benchmark --device cuda`: the benchmark's resolved run on one GPU per rank
// (train/gpu_train.h's GpuTrainStep, driven by the one step loop of cli/benchmark_loop.h),
// reported as the CPU benchmark reports (cli/benchmark_report.h): tokens/s, TFLOP/s, MFU against
// the catalog's dense bf16 peak of this GPU (plan/device_catalog.h), step time, and peak memory
// measured on the device (the caching allocator's reserved peak; cudaMemGetInfo) next to the
// predictor's (plan/ price_choice for this GPU). Under mpirun one GPU per rank, gradients over
// NCCL (train/gpu_train.h); tokens/s counts every rank's tokens, the step time is rank 0's.
// Plain C++: a build without CUDA compiles it, and create_gpu_train_step says "not built".
#pragma once

#include <string>

#include "cli/benchmark.h"
#include "core/status.h"

namespace lj::cli {

// Runs `r` (resolved, checked against the GPU's capabilities, agreed by every rank, its
// data_parallel set) and reports it; `output`: rank 0's --out ("" none).
Status run_gpu_benchmark(const BenchmarkArgs& a, const Resolved& r, const std::string& output);

}  // namespace lj::cli
