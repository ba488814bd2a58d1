// Running a small graph on the CUDA backend for the `gpu` tests: every node by its CUDA kernel
// (backends/cuda/kernels.h), inputs copied in and outputs copied out, so each op is compared
// with the CPU backend's run of the same graph (tests/ops/op_test_util.h's run_graph).
// Without a GPU the tests skip, unless LJ_REQUIRE_GPU=1 (tools/gpu_check.sh) makes that a
// failure.
#pragma once

#include <memory>
#include <vector>

#include "backends/cuda/context.h"
#include "ops/op_test_util.h"

namespace lj::test {

// The test's CUDA context, made once; nullptr (and the reason in *why) without a GPU.
cuda::Context* gpu_context(std::string* why);

// GTEST_SKIP()s (or fails, under LJ_REQUIRE_GPU=1) when there is no GPU; else binds `ctx`.
#define LJ_REQUIRE_GPU_OR_SKIP(ctx)                                                \
  std::string lj_gpu_why_;                                                         \
  cuda::Context* ctx = ::lj::test::gpu_context(&lj_gpu_why_);                      \
  if (ctx == nullptr) {                                                            \
    if (::lj::test::gpu_required()) FAIL() << "LJ_REQUIRE_GPU=1: " << lj_gpu_why_; \
    GTEST_SKIP() << lj_gpu_why_;                                                   \
  }

bool gpu_required();

// The graph that `build` makes, run node by node on the GPU. An op without a CUDA kernel is an
// unimplemented Status.
StatusOr<std::vector<RefTensor>> run_graph_cuda(cuda::Context& ctx,
                                                const std::vector<GraphInput>& inputs,
                                                const BuildFn& build);

// Copies host bytes to a new device buffer of ctx's allocator (freed by the returned holder).
std::shared_ptr<void> to_device(cuda::Context& ctx, const void* data, size_t bytes);
void from_device(void* host, const void* device, size_t bytes);

}  // namespace lj::test
