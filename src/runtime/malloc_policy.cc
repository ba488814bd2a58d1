#include "runtime/malloc_policy.h"

#include <malloc.h>

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

}  // namespace lj
