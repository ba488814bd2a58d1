// Memory owned by the runtime (used from one thread: the executor's): a caching allocator (what
// PyTorch's eager mode does: freed blocks are kept and reused by size, never returned to the system
// until release_cached()), and the accounting every allocation passes through: current and peak
// bytes per category, and the peak of the total (which is not the sum of the per-category peaks).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "core/mem_category.h"
#include "runtime/malloc_policy.h"

namespace lj {

struct MemoryStats {
  std::array<int64_t, kNumMemCategories> bytes_current{};
  std::array<int64_t, kNumMemCategories> bytes_peak{};
  // Each category's bytes at the moment the total peaked.
  std::array<int64_t, kNumMemCategories> bytes_at_peak{};
  int64_t bytes_total_current = 0;
  int64_t bytes_total_peak = 0;
  // Peak of what is not model state (activations + temporaries + workspace): the part of a
  // step that stays per rank when ZeRO streams gradients out (plan/ memory predictor).
  int64_t bytes_transient_peak = 0;
  int64_t bytes_reserved = 0;  // held from the system, in use or cached
  int64_t bytes_reserved_peak = 0;
  // What those blocks cost in resident memory: each priced by runtime/malloc_policy.h's
  // block_resident_bytes (glibc's headers, alignment slack, whole pages for mmapped blocks).
  int64_t bytes_resident = 0;
  int64_t bytes_resident_peak = 0;
  int64_t num_allocs = 0;         // requests served
  int64_t num_system_allocs = 0;  // requests that reached the system allocator

  int64_t current(MemCategory c) const { return bytes_current[static_cast<size_t>(c)]; }
  int64_t peak(MemCategory c) const { return bytes_peak[static_cast<size_t>(c)]; }
  int64_t at_peak(MemCategory c) const { return bytes_at_peak[static_cast<size_t>(c)]; }
  // A table: category, current, peak, at total peak.
  std::string to_string() const;
};

class CachingAllocator {
 public:
  // Sizes are rounded up to kRound bytes; blocks are 64-byte aligned.
  static constexpr size_t kRound = 512;

  // A virtual allocator hands out addresses that are never backed by memory: the same policy
  // and accounting, for predicting a run's memory without allocating it (dry runs).
  // Blocks from the system are advised onto huge pages when LJ_HUGE_PAGES=1 was set when the
  // allocator was made (huge_pages_requested, runtime/malloc_policy.h).
  explicit CachingAllocator(bool is_virtual = false)
      : virtual_(is_virtual), huge_pages_(huge_pages_requested()) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(size_t bytes, MemCategory category);
  void deallocate(void* p, size_t bytes, MemCategory category);
  // Counted like allocate() but never taken from or returned to the cache, so long-lived
  // buffers (the executor's kernel workspace) do not change how tensors reuse cached blocks.
  void* allocate_uncached(size_t bytes, MemCategory category);
  // A cached block that fits (as allocate() would take it), or nullptr when none does: never a
  // new block. Freed with deallocate().
  void* allocate_from_cache(size_t bytes, MemCategory category);
  void deallocate_uncached(void* p, size_t bytes, MemCategory category);
  // One uncached block counted under several categories at once (the planned executor's arena
  // holds activations and temporaries): its size is the sum of `bytes_by_category`, which must
  // be a multiple of kRound. nullptr when the sum is 0.
  using CategoryBytes = std::array<int64_t, kNumMemCategories>;
  void* allocate_uncached_split(const CategoryBytes& bytes_by_category);
  void deallocate_uncached_split(void* p, const CategoryBytes& bytes_by_category);
  // Returns cached free blocks to the system.
  void release_cached();
  const MemoryStats& stats() const { return stats_; }
  bool is_virtual() const { return virtual_; }
  // Starts a new peak window (current values stay).
  void reset_peaks();

 private:
  bool virtual_ = false;
  bool huge_pages_ = false;
  uintptr_t next_virtual_ = 4096;      // fake addresses, 64-byte aligned, never dereferenced
  std::multimap<size_t, void*> free_;  // cached: size -> block (best fit)
  std::unordered_map<void*, size_t> block_size_;  // in use: block -> its rounded size
  void count_alloc(size_t size, MemCategory category);
  void count_free(size_t size, MemCategory category);
  void* system_alloc(size_t size);
  MemoryStats stats_;
};

}  // namespace lj
