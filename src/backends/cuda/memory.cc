// The caching allocator and the arena (memory.h); plain C++, the source does the CUDA calls.
#include "backends/cuda/memory.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace lj::cuda {

size_t CachingAllocator::round_up(size_t bytes) {
  if (bytes == 0) bytes = 1;
  return (bytes + kRound - 1) / kRound * kRound;
}

CachingAllocator::~CachingAllocator() {
  release_cached();
}

Status CachingAllocator::system_alloc(size_t size, void** p) {
  Status s = source_.allocate(size, p);
  if (s.code() == StatusCode::resource_exhausted && capturing_) {
    return resource_exhausted(s.message() +
                                  " (during CUDA-graph capture, when the cache cannot "
                                  "be returned to the device)",
                              "the step runs kernel by kernel; LJ_CUDA_GRAPHS=0 skips capture");
  }
  if (s.code() == StatusCode::resource_exhausted && !free_.empty()) {
    ++stats_.num_oom_retries;
    release_cached();
    s = source_.allocate(size, p);
  }
  LJ_RETURN_IF_ERROR(s);
  stats_.bytes_reserved += static_cast<int64_t>(size);
  stats_.bytes_reserved_peak = std::max(stats_.bytes_reserved_peak, stats_.bytes_reserved);
  ++stats_.num_system_allocs;
  return ok_status();
}

StatusOr<void*> CachingAllocator::allocate(size_t bytes) {
  const size_t size = round_up(bytes);
  void* p = nullptr;
  size_t got = size;
  auto it = free_.lower_bound(size);
  if (it != free_.end() && it->first <= 2 * size) {
    p = it->second;
    got = it->first;
    free_.erase(it);
  } else {
    LJ_RETURN_IF_ERROR(system_alloc(size, &p));
  }
  block_size_[p] = got;
  ++stats_.num_allocs;
  stats_.bytes_in_use += static_cast<int64_t>(got);
  stats_.bytes_in_use_peak = std::max(stats_.bytes_in_use_peak, stats_.bytes_in_use);
  return p;
}

void CachingAllocator::deallocate(void* p) {
  if (p == nullptr) return;
  auto it = block_size_.find(p);
  LJ_CHECK(it != block_size_.end()) << "deallocate of a pointer this allocator did not give";
  stats_.bytes_in_use -= static_cast<int64_t>(it->second);
  free_.emplace(it->second, p);
  block_size_.erase(it);
}

void CachingAllocator::release_cached() {
  for (const auto& [size, p] : free_) {
    source_.free(p);
    stats_.bytes_reserved -= static_cast<int64_t>(size);
  }
  free_.clear();
}

void CachingAllocator::reset_peaks() {
  stats_.bytes_in_use_peak = stats_.bytes_in_use;
  stats_.bytes_reserved_peak = stats_.bytes_reserved;
}

StatusOr<std::unique_ptr<Arena>> Arena::create(MemorySource& source, size_t bytes) {
  void* base = nullptr;
  if (bytes > 0) LJ_RETURN_IF_ERROR(source.allocate(bytes, &base));
  return std::unique_ptr<Arena>(new Arena(source, base, bytes));
}

Arena::~Arena() {
  if (base_ != nullptr) source_.free(base_);
}

void* Arena::at(size_t offset) const {
  LJ_CHECK_LT(offset, bytes_) << "offset past the arena";
  return static_cast<char*>(base_) + offset;
}

AllocatorWorkspace::~AllocatorWorkspace() {
  for (void* p : blocks_) a_.deallocate(p);
}

StatusOr<void*> AllocatorWorkspace::acquire(size_t bytes) {
  StatusOr<void*> p = a_.allocate(bytes);
  if (!p.ok()) {
    return Status(p.status().code(),
                  "GPU workspace of " + std::to_string(bytes) + " bytes: " + p.status().message(),
                  p.status().hint());
  }
  if (keep_ != nullptr) {
    CachingAllocator* a = &a_;
    keep_->push_back(std::shared_ptr<void>(*p, [a](void* q) { a->deallocate(q); }));
  } else {
    blocks_.push_back(*p);
  }
  return *p;
}

}  // namespace lj::cuda
