// Rendered CUDA kernels (codegen/cuda_renderer.h) compiled by NVRTC for one arch, through an
// on-disk cache keyed by content, as the C++ kernel cache (codegen/kernel_cache.h) does.
//
// Key: FNV-1a/64 of (prelude + source rendered with a neutral entry name, "cuda", NVRTC's
// options and version, the arch). A kernel's cubin is <dir>/k_<key>.cubin with entry
// `lj_k_<key>`; dir is the C++ cache's directory + "/cuda" (LJ_KERNEL_CACHE and the XDG rules).
// All kernels not yet cached in one get() are compiled in ONE NVRTC program into one cubin in a
// temporary directory inside dir, then hard-linked to each kernel's name and renamed into place
// (atomic, as the C++ cache). Loading a cubin into a context is the backend's (backends/cuda).
// A compile error is a bug in the renderer: get() returns it, with NVRTC's log and the source.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "codegen/cuda_renderer.h"
#include "codegen/kernel_cache.h"

namespace lj::codegen {

struct CudaKernelFile {
  std::string path;   // the cubin
  std::string entry;  // the __global__ function in it
};

class CudaKernelCache {
 public:
  // arch: "sm_90". dir: "" for the default (above).
  CudaKernelCache(std::string arch, std::string dir = "");

  // One file per kernel, in order.
  StatusOr<std::vector<CudaKernelFile>> get(std::span<const Kernel> kernels);

  KernelCacheStats stats() const;
  const std::string& dir() const { return dir_; }
  const std::string& arch() const { return arch_; }

 private:
  std::string arch_, dir_;
  CudaRenderer renderer_;
  mutable std::mutex mu_;
  KernelCacheStats stats_;
  std::map<uint64_t, CudaKernelFile> known_;  // found or built by this cache
};

}  // namespace lj::codegen
