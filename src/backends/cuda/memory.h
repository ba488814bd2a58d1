// Device memory of the CUDA backend: where blocks come from (MemorySource: cudaMalloc on a
// device, or a host fake in tests), the caching allocator of eager mode and the arena of the
// static memory plan (compiled mode).
//
// The caching allocator follows the CPU's policy (runtime/memory.h) so the predictor's replay of
// the schedule holds on both: sizes rounded up to 512 bytes, best fit among freed blocks but
// never a block more than twice the request, no splitting, nothing returned to the driver until
// release_cached(). Used from one host thread; blocks are stream-ordered on the one compute
// stream (a block freed after a kernel is handed out again only to kernels on the same stream).
// When the source is out of memory the cached blocks are returned and the request retried once;
// then resource_exhausted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backends/kernel.h"
#include "core/status.h"

namespace lj::cuda {

class MemorySource {
 public:
  virtual ~MemorySource() = default;
  // resource_exhausted when the device has no room.
  virtual Status allocate(size_t bytes, void** p) = 0;
  virtual void free(void* p) = 0;
  // Free and total device memory (cudaMemGetInfo); a fake reports what it likes.
  virtual void memory_info(int64_t* bytes_free, int64_t* bytes_total) = 0;
};

// cudaMalloc / cudaFree on `device` (memory_source.cc).
std::unique_ptr<MemorySource> device_memory_source(int device);

struct DeviceMemoryStats {
  int64_t bytes_in_use = 0;  // handed out, rounded sizes
  int64_t bytes_in_use_peak = 0;
  int64_t bytes_reserved = 0;  // held from the source: in use or cached
  int64_t bytes_reserved_peak = 0;
  int64_t num_allocs = 0;         // requests served
  int64_t num_system_allocs = 0;  // requests that reached the source
  int64_t num_oom_retries = 0;    // times the cache was emptied to retry a request
};

class CachingAllocator {
 public:
  static constexpr size_t kRound = 512;
  explicit CachingAllocator(MemorySource& source) : source_(source) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  StatusOr<void*> allocate(size_t bytes);
  void deallocate(void* p);
  // Returns every cached block to the source.
  void release_cached();
  // While a stream captures a CUDA graph, freeing device memory (what release_cached does on an
  // out-of-memory retry) would invalidate the capture: the retry is skipped and the allocation
  // fails with resource_exhausted, and the executor runs that step kernel by kernel.
  void set_capturing(bool on) { capturing_ = on; }
  const DeviceMemoryStats& stats() const { return stats_; }
  void reset_peaks();
  static size_t round_up(size_t bytes);

 private:
  Status system_alloc(size_t size, void** p);
  MemorySource& source_;
  std::multimap<size_t, void*> free_;             // cached: size -> block (best fit)
  std::unordered_map<void*, size_t> block_size_;  // in use: block -> rounded size
  DeviceMemoryStats stats_;
  bool capturing_ = false;
};

// One device block for a static memory plan: every planned value lives at its offset.
class Arena {
 public:
  // 256-byte alignment of every offset is the plan's business; the base is cudaMalloc's (256).
  static StatusOr<std::unique_ptr<Arena>> create(MemorySource& source, size_t bytes);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  void* at(size_t offset) const;  // LJ_CHECKs offset < size()
  size_t size() const { return bytes_; }

 private:
  Arena(MemorySource& source, void* base, size_t bytes)
      : source_(source), base_(base), bytes_(bytes) {}
  MemorySource& source_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

// Kernel scratch (backends/kernel.h's Workspace) from the caching allocator, returned when the
// kernel call ends (later kernels on the same stream reuse the blocks in order). With `keep`
// (a CUDA graph being captured) the blocks are kept for the keeper's lifetime instead, since
// the graph holds their addresses. Out of device memory, acquire() returns the allocator's
// resource_exhausted (its hint, "GPU workspace of N bytes: " before its message): the kernel
// returns it, the node loop names the op, and the command prints it as an error.
class AllocatorWorkspace final : public Workspace {
 public:
  explicit AllocatorWorkspace(CachingAllocator& a,
                              std::vector<std::shared_ptr<void>>* keep = nullptr)
      : a_(a), keep_(keep) {}
  ~AllocatorWorkspace() override;
  AllocatorWorkspace(const AllocatorWorkspace&) = delete;
  AllocatorWorkspace& operator=(const AllocatorWorkspace&) = delete;
  StatusOr<void*> acquire(size_t bytes) override;

 private:
  CachingAllocator& a_;
  std::vector<std::shared_ptr<void>>* keep_;
  std::vector<void*> blocks_;
};

}  // namespace lj::cuda
