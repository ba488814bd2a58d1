// advise_huge_pages (runtime/malloc_policy.h): which part of a block is advised MADV_HUGEPAGE,
// checked in the kernel's own record of the mapping (/proc/self/smaps, VmFlags "hg"), and that the
// runtime's allocator advises the blocks it takes from the system.
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "runtime/malloc_policy.h"
#include "runtime/memory.h"

namespace lj {
namespace {

// The VmFlags of the mapping that contains `p`, from /proc/self/smaps ("" when none does).
std::string vm_flags_at(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = a >= lo && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool advised(const void* p) {
  return vm_flags_at(p).find(" hg") != std::string::npos;
}

// An anonymous mapping of `bytes` that starts on a huge-page boundary.
struct AlignedMapping {
  char* base = nullptr;
  char* raw = nullptr;
  size_t raw_bytes = 0;
  explicit AlignedMapping(size_t bytes) : raw_bytes(bytes + kHugePageBytes) {
    void* m = mmap(nullptr, raw_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    raw = static_cast<char*>(m);
    const auto a = reinterpret_cast<uintptr_t>(raw);
    base = reinterpret_cast<char*>((a + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
  }
  ~AlignedMapping() {
    if (raw != nullptr) munmap(raw, raw_bytes);
  }
};

TEST(HugePagesTest, AdvisesOnlyTheWholeHugePagesInsideTheBlock) {
  constexpr size_t kH = kHugePageBytes;
  AlignedMapping m(4 * kH);
  ASSERT_NE(m.base, nullptr);
  // A block from 4 KiB past the first huge page to 4 KiB before the end of the fourth: pages 2
  // and 3 are whole inside it, pages 1 and 4 only in part.
  char* block = m.base + 4096;
  const size_t advised_bytes = advise_huge_pages(block, 4 * kH - 2 * 4096);
  if (advised_bytes == 0) GTEST_SKIP() << "this kernel refuses MADV_HUGEPAGE (no THP support)";
  EXPECT_EQ(advised_bytes, 2 * kH);
  EXPECT_FALSE(advised(m.base)) << vm_flags_at(m.base);
  EXPECT_TRUE(advised(m.base + kH)) << vm_flags_at(m.base + kH);
  EXPECT_TRUE(advised(m.base + 3 * kH - 1)) << vm_flags_at(m.base + 3 * kH - 1);
  EXPECT_FALSE(advised(m.base + 3 * kH)) << vm_flags_at(m.base + 3 * kH);
}

TEST(HugePagesTest, BlocksWithNoWholeHugePageAreLeftAlone) {
  AlignedMapping m(2 * kHugePageBytes);
  ASSERT_NE(m.base, nullptr);
  // Just under one huge page, and a full page's length that straddles a boundary.
  EXPECT_EQ(advise_huge_pages(m.base, kHugePageBytes - 1), 0u);
  EXPECT_EQ(advise_huge_pages(m.base + 4096, kHugePageBytes), 0u);
  EXPECT_EQ(advise_huge_pages(nullptr, 4 * kHugePageBytes), 0u);
  EXPECT_FALSE(advised(m.base));
  EXPECT_FALSE(advised(m.base + kHugePageBytes));
}

// With LJ_HUGE_PAGES=1 the allocator advises the blocks it takes from the system; without it
// (the default) or with 0 it does not. `middle`: the huge page that holds the block's middle
// lies wholly inside it.
TEST(HugePagesTest, TheRuntimeAllocatorAdvisesItsBlocksOnlyWhenAsked) {
  {
    AlignedMapping probe(kHugePageBytes);
    ASSERT_NE(probe.base, nullptr);
    if (advise_huge_pages(probe.base, kHugePageBytes) == 0) GTEST_SKIP() << "no THP support";
  }
  const size_t bytes = 8 * kHugePageBytes;
  const char* before = std::getenv("LJ_HUGE_PAGES");
  const std::string saved = before != nullptr ? before : "";
  for (const char* value : {"", "0", "1"}) {
    if (*value == 0) {
      unsetenv("LJ_HUGE_PAGES");
    } else {
      setenv("LJ_HUGE_PAGES", value, 1);
    }
    CachingAllocator alloc;
    void* p = alloc.allocate(bytes, MemCategory::activations);
    ASSERT_NE(p, nullptr);
    const char* middle = static_cast<char*>(p) + bytes / 2;
    EXPECT_EQ(advised(middle), std::string(value) == "1")
        << "LJ_HUGE_PAGES='" << value << "': " << vm_flags_at(middle);
    alloc.deallocate(p, bytes, MemCategory::activations);
  }
  if (before != nullptr) {
    setenv("LJ_HUGE_PAGES", saved.c_str(), 1);
  } else {
    unsetenv("LJ_HUGE_PAGES");
  }
}

}  // namespace
}  // namespace lj
