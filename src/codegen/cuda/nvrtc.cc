#include "codegen/cuda/nvrtc.h"

#include <nvrtc.h>

#include <vector>

namespace lj::codegen {
namespace {

std::vector<std::string> options_for(const std::string& arch) {
  // No fast math: the kernels must agree with the CPU's within fp32 rounding.
  return {"--gpu-architecture=" + arch, "--std=c++17", "--device-as-default-execution-space"};
}

}  // namespace

std::string nvrtc_options_text(const std::string& arch) {
  std::string s;
  for (const std::string& o : options_for(arch)) s += o + " ";
  return s;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "?";
  return std::to_string(major) + "." + std::to_string(minor);
}

StatusOr<std::string> nvrtc_compile(const std::string& source, const std::string& name,
                                    const std::string& arch, std::string* log) {
  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS)
    return internal_error(std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(r));
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  const std::vector<std::string> opts = options_for(arch);
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  r = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  std::string text;
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    text.resize(log_size);
    if (nvrtcGetProgramLog(prog, text.data()) != NVRTC_SUCCESS) text.clear();
    while (!text.empty() && (text.back() == '\0' || text.back() == '\n')) text.pop_back();
  }
  if (log != nullptr) *log = text;
  if (r != NVRTC_SUCCESS) {
    return internal_error("NVRTC could not compile " + name + " for " + arch + ": " +
                              nvrtcGetErrorString(r) + "\n" + text,
                          "a bug in codegen/cuda_renderer.cc: the source is in the message");
  }
  size_t size = 0;
  r = nvrtcGetCUBINSize(prog, &size);
  if (r != NVRTC_SUCCESS || size == 0) {
    return internal_error(std::string("nvrtcGetCUBINSize: ") + nvrtcGetErrorString(r),
                          "the arch must be a real one (sm_90), not a virtual one (compute_90)");
  }
  std::string cubin(size, '\0');
  r = nvrtcGetCUBIN(prog, cubin.data());
  if (r != NVRTC_SUCCESS)
    return internal_error(std::string("nvrtcGetCUBIN: ") + nvrtcGetErrorString(r));
  return cubin;
}

}  // namespace lj::codegen
