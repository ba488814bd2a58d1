// Helpers shared by the micro-benchmarks: a malloc-backed Workspace, owned buffers behind
// TensorViews, deterministic fill, the thread count and this machine class's fp32 peak.
#pragma once

#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "backends/kernel.h"

namespace lj::bench {

// Kernel scratch from aligned_alloc, freed by release() (the benchmarks call it after every kernel
// call, as the executor frees scratch when a kernel returns) or when the object dies.
class MallocWorkspace : public Workspace {
 public:
  ~MallocWorkspace() override {
    for (void* p : blocks_) std::free(p);
  }
  void* get(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    blocks_.push_back(p);
    return p;
  }
  void release() {
    for (void* p : blocks_) std::free(p);
    blocks_.clear();
  }

 private:
  std::vector<void*> blocks_;
};

// n values in [-1, 1) from a fixed LCG started at `seed`.
inline std::vector<float> filled(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

// A f32 tensor that owns its storage, filled with values in [-1, 1) from a fixed LCG.
struct OwnedTensor {
  std::vector<float> storage;
  TensorView view;
  explicit OwnedTensor(std::vector<int64_t> dims, uint32_t seed = 1) {
    view.dtype = DType::f32;
    view.dims = std::move(dims);
    storage = filled(static_cast<size_t>(view.numel()), seed * 2654435761u + 12345u);
    view.data = storage.data();
  }
};

inline int bench_threads() {
  return omp_get_max_threads();
}

// Nominal fp32 peak of one EPYC Zen 3 core at its 2.45 GHz base clock: 2 FMA pipes x 8 lanes x
// 2 FLOP = 32 FLOP/cycle. The cores boost above base, so a good GEMM reads above 1.0 (oneDNN's
// sgemm at (2048, 288) x (288, 768) measured ~90 GFLOP/s on one core, 1.15 of this).
inline double peak_flops(int threads) {
  return threads * 2.45e9 * 32.0;
}

}  // namespace lj::bench
