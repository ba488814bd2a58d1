#include "runtime/malloc_policy.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace lj {

bool pin_malloc_thresholds() {
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThreshold)) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(kMmapThreshold)) == 1;
  return mmap_ok && trim_ok;
}

int64_t block_resident_bytes(int64_t bytes, int64_t alignment) {
  if (bytes <= 0) return 0;
  const int64_t chunk = (bytes + 8 + 15) / 16 * 16;        // request2size: header, 16 B granules
  const int64_t aligned_request = chunk + alignment + 32;  // _int_memalign's over-allocation
  if (aligned_request + 16 >= static_cast<int64_t>(kMmapThreshold)) {
    const auto page = static_cast<int64_t>(kPageBytes);
    return (aligned_request + 16 + 8 + page - 1) / page * page;
  }
  return chunk;
}

size_t advise_huge_pages(void* p, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (begin + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uintptr_t hi = (begin + bytes) / kHugePageBytes * kHugePageBytes;
  if (p == nullptr || hi <= lo) return 0;
  return madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) == 0 ? hi - lo : 0;
}

bool huge_pages_requested() {
  const char* v = std::getenv("LJ_HUGE_PAGES");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace lj
