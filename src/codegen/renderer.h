// The backend-neutral renderer interface: a Kernel (codegen/kernel_ir.h) in, source text and the
// name of its entry function out. The C++ renderer (cpp_renderer.h) is the CPU one; a CUDA
// renderer (compiled with NVRTC) implements the same interface beside it.
//
// Every rendered entry has one ABI, whatever the backend's launch looks like inside:
//   extern "C" void <entry>(const int64_t* loop_dims,  // (rank)
//                           const int64_t* strides,    // (inputs, rank) elements; 0 = broadcast
//                           const void* const* in,     // the kernel's inputs, in order
//                           void* const* out,          // elementwise outputs, then the reduction
//                           int threads);
// (LaunchGeometry in kernel_ir.h computes the first two from the tensors' dims.)
#pragma once

#include <cstdint>
#include <string>

#include "codegen/kernel_ir.h"

namespace lj::codegen {

using KernelEntry = void (*)(const int64_t* loop_dims, const int64_t* strides,
                             const void* const* in, void* const* out, int threads);

struct RenderedKernel {
  std::string source;
  std::string entry;  // the extern "C" symbol
};

class Renderer {
 public:
  virtual ~Renderer() = default;
  // Short and stable ("cpp"); part of the cache key.
  virtual const char* name() const = 0;
  // Source for one kernel whose entry function is called `entry`. Deterministic: the same
  // kernel and entry give the same text (the kernel cache hashes it).
  virtual RenderedKernel render(const Kernel& k, const std::string& entry) const = 0;
  // Text that must precede any number of rendered kernels in one translation unit (includes,
  // helpers); render() output never repeats it.
  virtual std::string prelude() const = 0;
};

}  // namespace lj::codegen
