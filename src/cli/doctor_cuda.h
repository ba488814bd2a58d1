// The doctor's lines from the CUDA runtime linked into this ljperf (backends/cuda/cuda.h's
// probe): the toolkit it was built with against the CUDA version the driver supports, and each
// GPU's model, memory and arch. Pure: tests feed it probes of hosts they do not have.
#pragma once

#include <vector>

#include "backends/cuda/cuda.h"
#include "cli/doctor_check.h"

namespace lj::cli {

// Nothing for a build without CUDA (the backend row says so). On a host without a driver or
// GPU: one ok line that says so plainly (the CPU is used). A driver whose CUDA is older than
// the build's: fail, with the driver the build needs (kCudaDriverRequirements). A GPU older than
// sm_90 (the arch the .cu kernels are built for): warn.
std::vector<CheckLine> cuda_runtime_lines(const cuda::Probe& p);

}  // namespace lj::cli
