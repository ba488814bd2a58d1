#include "runtime/memory.h"

#include <cstdio>
#include <cstdlib>

#include "core/check.h"
#include "core/units.h"
#include "runtime/malloc_policy.h"

namespace lj {

std::string MemoryStats::to_string() const {
  std::string s = "category        current        peak   at peak\n";
  char buf[128];
  for (int i = 0; i < kNumMemCategories; ++i) {
    const auto k = static_cast<size_t>(i);
    std::snprintf(buf, sizeof buf, "%-12s %10s  %10s  %8s\n",
                  mem_category_name(static_cast<MemCategory>(i)),
                  format_bytes(static_cast<double>(bytes_current[k])).c_str(),
                  format_bytes(static_cast<double>(bytes_peak[k])).c_str(),
                  format_bytes(static_cast<double>(bytes_at_peak[k])).c_str());
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "%-12s %10s  %10s\n", "total",
                format_bytes(static_cast<double>(bytes_total_current)).c_str(),
                format_bytes(static_cast<double>(bytes_total_peak)).c_str());
  s += buf;
  std::snprintf(buf, sizeof buf, "%-12s %10s  %10s\n", "reserved",
                format_bytes(static_cast<double>(bytes_reserved)).c_str(),
                format_bytes(static_cast<double>(bytes_reserved_peak)).c_str());
  s += buf;
  return s;
}

namespace {
size_t round_up(size_t bytes) {
  if (bytes == 0) bytes = 1;
  return (bytes + CachingAllocator::kRound - 1) / CachingAllocator::kRound *
         CachingAllocator::kRound;
}
}  // namespace

CachingAllocator::~CachingAllocator() {
  release_cached();
}

void* CachingAllocator::system_alloc(size_t size) {
  void* p = nullptr;
  if (virtual_) {
    p = reinterpret_cast<void*>(next_virtual_);
    next_virtual_ += size;
  } else {
    p = std::aligned_alloc(64, size);
    if (p == nullptr) return nullptr;
    if (huge_pages_) advise_huge_pages(p, size);  // before the first touch (malloc_policy.h)
  }
  stats_.bytes_reserved += static_cast<int64_t>(size);
  stats_.bytes_reserved_peak = std::max(stats_.bytes_reserved_peak, stats_.bytes_reserved);
  stats_.bytes_resident += block_resident_bytes(static_cast<int64_t>(size));
  stats_.bytes_resident_peak = std::max(stats_.bytes_resident_peak, stats_.bytes_resident);
  ++stats_.num_system_allocs;
  return p;
}

void CachingAllocator::count_alloc(size_t size, MemCategory category) {
  ++stats_.num_allocs;
  const auto k = static_cast<size_t>(category);
  const auto n = static_cast<int64_t>(size);
  stats_.bytes_current[k] += n;
  stats_.bytes_peak[k] = std::max(stats_.bytes_peak[k], stats_.bytes_current[k]);
  stats_.bytes_total_current += n;
  if (stats_.bytes_total_current > stats_.bytes_total_peak) {
    stats_.bytes_total_peak = stats_.bytes_total_current;
    stats_.bytes_at_peak = stats_.bytes_current;
  }
  const int64_t transient = stats_.bytes_total_current - stats_.bytes_current[0] -
                            stats_.bytes_current[1] - stats_.bytes_current[2];
  stats_.bytes_transient_peak = std::max(stats_.bytes_transient_peak, transient);
}

void CachingAllocator::count_free(size_t size, MemCategory category) {
  const auto k = static_cast<size_t>(category);
  stats_.bytes_current[k] -= static_cast<int64_t>(size);
  stats_.bytes_total_current -= static_cast<int64_t>(size);
}

void* CachingAllocator::allocate(size_t bytes, MemCategory category) {
  const size_t size = round_up(bytes);
  void* p = nullptr;
  // Best fit among cached blocks, but never hand out a block more than twice the request:
  // blocks are not split, so a much larger block would waste what the accounting reports.
  auto it = free_.lower_bound(size);
  if (it != free_.end() && it->first <= 2 * size) {
    p = it->second;
    block_size_[p] = it->first;
    free_.erase(it);
  } else {
    p = system_alloc(size);
    if (p == nullptr) return nullptr;
    block_size_[p] = size;
  }
  count_alloc(block_size_[p], category);
  return p;
}

void* CachingAllocator::allocate_from_cache(size_t bytes, MemCategory category) {
  const size_t size = round_up(bytes);
  auto it = free_.lower_bound(size);
  if (it == free_.end() || it->first > 2 * size) return nullptr;
  void* p = it->second;
  block_size_[p] = it->first;
  free_.erase(it);
  count_alloc(block_size_[p], category);
  return p;
}

void CachingAllocator::deallocate(void* p, size_t bytes, MemCategory category) {
  if (p == nullptr) return;
  auto it = block_size_.find(p);
  LJ_CHECK(it != block_size_.end()) << "deallocate of a pointer this allocator did not give";
  const size_t size = it->second;
  LJ_CHECK(size >= bytes) << "deallocate with a larger size than allocated";
  block_size_.erase(it);
  count_free(size, category);
  free_.emplace(size, p);
}

void* CachingAllocator::allocate_uncached(size_t bytes, MemCategory category) {
  const size_t size = round_up(bytes);
  void* p = system_alloc(size);
  if (p != nullptr) count_alloc(size, category);
  return p;
}

void CachingAllocator::deallocate_uncached(void* p, size_t bytes, MemCategory category) {
  if (p == nullptr) return;
  const size_t size = round_up(bytes);
  count_free(size, category);
  stats_.bytes_reserved -= static_cast<int64_t>(size);
  stats_.bytes_resident -= block_resident_bytes(static_cast<int64_t>(size));
  if (!virtual_) std::free(p);
}

void* CachingAllocator::allocate_uncached_split(const CategoryBytes& bytes_by_category) {
  int64_t total = 0;
  for (int64_t b : bytes_by_category) total += b;
  if (total == 0) return nullptr;
  LJ_CHECK(total > 0 && total % static_cast<int64_t>(kRound) == 0) << total << " bytes";
  void* p = system_alloc(static_cast<size_t>(total));
  if (p == nullptr) return nullptr;
  // One count per category: the total only grows, so the last count records the peak with
  // every category in place.
  for (int i = 0; i < kNumMemCategories; ++i) {
    const int64_t b = bytes_by_category[static_cast<size_t>(i)];
    if (b > 0) count_alloc(static_cast<size_t>(b), static_cast<MemCategory>(i));
  }
  return p;
}

void CachingAllocator::deallocate_uncached_split(void* p, const CategoryBytes& bytes_by_category) {
  if (p == nullptr) return;
  int64_t total = 0;
  for (int i = 0; i < kNumMemCategories; ++i) {
    const int64_t b = bytes_by_category[static_cast<size_t>(i)];
    if (b > 0) count_free(static_cast<size_t>(b), static_cast<MemCategory>(i));
    total += b;
  }
  stats_.bytes_reserved -= total;
  stats_.bytes_resident -= block_resident_bytes(total);
  if (!virtual_) std::free(p);
}

void CachingAllocator::release_cached() {
  for (auto& [size, p] : free_) {
    if (!virtual_) std::free(p);
    stats_.bytes_reserved -= static_cast<int64_t>(size);
    stats_.bytes_resident -= block_resident_bytes(static_cast<int64_t>(size));
  }
  free_.clear();
}

void CachingAllocator::reset_peaks() {
  stats_.bytes_peak = stats_.bytes_current;
  stats_.bytes_total_peak = stats_.bytes_total_current;
  stats_.bytes_at_peak = stats_.bytes_current;
  stats_.bytes_reserved_peak = stats_.bytes_reserved;
  stats_.bytes_resident_peak = stats_.bytes_resident;
  stats_.bytes_transient_peak = stats_.bytes_total_current - stats_.bytes_current[0] -
                                stats_.bytes_current[1] - stats_.bytes_current[2];
}

}  // namespace lj
