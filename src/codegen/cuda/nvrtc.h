// NVRTC: CUDA C++ source -> a cubin for one GPU arch, at run time, without a GPU (only the
// NVRTC library). Built with LJ_CUDA only (codegen/cuda/ is codegen's CUDA half).
#pragma once

#include <string>

#include "core/status.h"

namespace lj::codegen {

// "sm_90" -> a cubin for that arch. On a compile error: internal_error whose message holds
// NVRTC's log; `log` (optional) gets the log either way (warnings on success).
StatusOr<std::string> nvrtc_compile(const std::string& source, const std::string& name,
                                    const std::string& arch, std::string* log = nullptr);

// "13.0": the NVRTC library loaded.
std::string nvrtc_version();

// The options every compile passes (part of the kernel cache's key).
std::string nvrtc_options_text(const std::string& arch);

}  // namespace lj::codegen
