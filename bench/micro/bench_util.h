// Helpers shared by the micro-benchmarks: a malloc-backed Workspace, owned buffers behind
// TensorViews, deterministic fill, the thread count and this machine class's fp32 peak.
#pragma once

#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "backends/kernel.h"
#include "runtime/malloc_policy.h"

namespace lj::bench {

// Memory as the runtime's allocator gives it (runtime/memory.cc): 64-byte aligned and, with
// huge_pages (by default as LJ_HUGE_PAGES asks the runtime), its whole huge pages advised
// MADV_HUGEPAGE before the first touch, so the kernels see the same TLB cost.
inline void* runtime_like_alloc(size_t bytes, bool huge_pages = huge_pages_requested()) {
  bytes = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (huge_pages) advise_huge_pages(p, bytes);
  return p;
}

// A std::allocator that allocates with runtime_like_alloc.
template <class T>
struct RuntimeLikeAllocator {
  using value_type = T;
  bool huge_pages = huge_pages_requested();
  RuntimeLikeAllocator() = default;
  explicit RuntimeLikeAllocator(bool huge) : huge_pages(huge) {}
  template <class U>
  RuntimeLikeAllocator(const RuntimeLikeAllocator<U>& o) : huge_pages(o.huge_pages) {}
  T* allocate(size_t n) { return static_cast<T*>(runtime_like_alloc(n * sizeof(T), huge_pages)); }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const RuntimeLikeAllocator<U>& o) const {
    return huge_pages == o.huge_pages;
  }
};

// Kernel scratch from runtime_like_alloc. release() (the benchmarks call it after every kernel
// call, as the executor frees scratch when a kernel returns) keeps the blocks for the next call's
// acquire(), as the executor's workspace stays mapped across steps, so a call does not pay for page
// faults the executor pays once; they are freed when the object dies.
class MallocWorkspace : public Workspace {
 public:
  explicit MallocWorkspace(bool huge_pages = huge_pages_requested()) : huge_pages_(huge_pages) {}
  ~MallocWorkspace() override {
    for (const Block& b : used_) std::free(b.p);
    for (const Block& b : free_) std::free(b.p);
  }
  StatusOr<void*> acquire(size_t bytes) override {
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].bytes >= bytes) {
        used_.push_back(free_[i]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        return used_.back().p;
      }
    }
    used_.push_back({runtime_like_alloc(bytes, huge_pages_), bytes});
    return used_.back().p;
  }
  void release() {
    free_.insert(free_.end(), used_.begin(), used_.end());
    used_.clear();
  }

 private:
  struct Block {
    void* p;
    size_t bytes;
  };
  bool huge_pages_;
  std::vector<Block> used_, free_;
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

// A f32 tensor that owns its storage (runtime_like_alloc), filled with values in [-1, 1) from a
// fixed LCG.
struct OwnedTensor {
  std::vector<float, RuntimeLikeAllocator<float>> storage;
  TensorView view;
  explicit OwnedTensor(std::vector<int64_t> dims, uint32_t seed = 1,
                       bool huge_pages = huge_pages_requested())
      : storage(RuntimeLikeAllocator<float>(huge_pages)) {
    view.dtype = DType::f32;
    view.dims = std::move(dims);
    const std::vector<float> v =
        filled(static_cast<size_t>(view.numel()), seed * 2654435761u + 12345u);
    storage.assign(v.begin(), v.end());
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
