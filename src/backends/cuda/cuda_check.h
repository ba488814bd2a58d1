// CUDA error handling inside backends/cuda (sees cuda_runtime_api.h; never included from outside
// the backend). What the environment can get wrong (no driver, out of memory) becomes a Status;
// a failing call that can only be a bug in ljperf is an LJ_CUDA_CHECK.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "core/check.h"
#include "core/status.h"

namespace lj::cuda {

// ok for cudaSuccess; otherwise one line naming the call and CUDA's error, with a hint for the
// errors a user can act on (no driver, driver too old, no device, out of memory).
Status cuda_status(cudaError_t e, const char* what);

}  // namespace lj::cuda

#define LJ_CUDA_CHECK(expr)                                                                 \
  do {                                                                                      \
    const cudaError_t lj_cuda_e_ = (expr);                                                  \
    LJ_CHECK(lj_cuda_e_ == cudaSuccess) << #expr << ": " << cudaGetErrorString(lj_cuda_e_); \
  } while (0)

#define LJ_CUDA_RETURN_IF_ERROR(expr) LJ_RETURN_IF_ERROR(::lj::cuda::cuda_status((expr), #expr))
