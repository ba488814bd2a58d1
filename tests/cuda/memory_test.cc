// The CUDA backend's caching allocator and arena over a host fake of the device (no GPU needed):
// the CPU allocator's policy (round to 512, best fit up to twice the request, no splitting),
// the reserved peak that the measured peak reports, and the out-of-memory retry.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "backends/cuda/memory.h"

namespace lj::cuda {
namespace {

// Host memory with a capacity; counts what is outstanding.
class FakeSource final : public MemorySource {
 public:
  explicit FakeSource(int64_t capacity) : capacity_(capacity) {}
  ~FakeSource() override { EXPECT_EQ(outstanding_, 0) << "blocks leaked"; }
  Status allocate(size_t bytes, void** p) override {
    if (outstanding_ + static_cast<int64_t>(bytes) > capacity_)
      return resource_exhausted("fake device full");
    *p = std::malloc(bytes);
    sizes_[*p] = bytes;
    outstanding_ += static_cast<int64_t>(bytes);
    ++calls;
    return ok_status();
  }
  void free(void* p) override {
    outstanding_ -= static_cast<int64_t>(sizes_.at(p));
    sizes_.erase(p);
    std::free(p);
  }
  void memory_info(int64_t* bytes_free, int64_t* bytes_total) override {
    *bytes_free = capacity_ - outstanding_;
    *bytes_total = capacity_;
  }
  int calls = 0;

 private:
  int64_t capacity_, outstanding_ = 0;
  std::map<void*, size_t> sizes_;
};

TEST(CudaCachingAllocator, ReusesBestFitWithinTwiceAndCountsPeaks) {
  FakeSource src(1 << 20);
  {
    CachingAllocator a(src);
    auto p1 = a.allocate(1000);  // -> 1024
    auto p2 = a.allocate(5000);  // -> 5120
    ASSERT_TRUE(p1.ok() && p2.ok());
    EXPECT_EQ(a.stats().bytes_in_use, 1024 + 5120);
    a.deallocate(*p2);
    auto p3 = a.allocate(3000);  // 3072: the cached 5120 block is within twice -> reused
    ASSERT_TRUE(p3.ok());
    EXPECT_EQ(*p3, *p2);
    EXPECT_EQ(src.calls, 2);
    a.deallocate(*p3);
    auto p4 = a.allocate(2000);  // 2048: 5120 is more than twice -> a new block
    ASSERT_TRUE(p4.ok());
    EXPECT_NE(*p4, *p2);
    EXPECT_EQ(src.calls, 3);
    EXPECT_EQ(a.stats().bytes_reserved, 1024 + 5120 + 2048);
    EXPECT_EQ(a.stats().bytes_reserved_peak, 1024 + 5120 + 2048);
    EXPECT_EQ(a.stats().bytes_in_use_peak, 1024 + 5120);
    a.deallocate(*p1);
    a.deallocate(*p4);
    a.release_cached();
    EXPECT_EQ(a.stats().bytes_reserved, 0);
    EXPECT_EQ(a.stats().bytes_reserved_peak, 1024 + 5120 + 2048);
  }
}

TEST(CudaCachingAllocator, OutOfMemoryEmptiesTheCacheAndRetriesOnce) {
  FakeSource src(10 * 1024);
  CachingAllocator a(src);
  auto small = a.allocate(4096);
  ASSERT_TRUE(small.ok());
  a.deallocate(*small);             // cached, 4 KiB held
  auto big = a.allocate(9 * 1024);  // fits only once the cache is returned
  ASSERT_TRUE(big.ok()) << big.status().message();
  EXPECT_EQ(a.stats().num_oom_retries, 1);
  auto more = a.allocate(4096);  // nothing cached to return: out of memory
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), StatusCode::resource_exhausted);
  a.deallocate(*big);
}

// A CUDA-graph capture must not free device memory: out of memory while capturing fails the
// allocation (the executor then runs kernel by kernel) and keeps the cache.
TEST(CudaCachingAllocator, OutOfMemoryWhileCapturingKeepsTheCache) {
  FakeSource src(10 * 1024);
  CachingAllocator a(src);
  auto small = a.allocate(4096);
  ASSERT_TRUE(small.ok());
  a.deallocate(*small);  // cached, 4 KiB held
  a.set_capturing(true);
  auto big = a.allocate(9 * 1024);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::resource_exhausted);
  EXPECT_NE(big.status().message().find("capture"), std::string::npos) << big.status().message();
  EXPECT_EQ(a.stats().num_oom_retries, 0);
  EXPECT_EQ(a.stats().bytes_reserved, 4096);  // the cached block was not returned
  a.set_capturing(false);
  auto after = a.allocate(9 * 1024);  // outside capture the retry returns the cache
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_EQ(a.stats().num_oom_retries, 1);
  a.deallocate(*after);
}

TEST(CudaArena, OffsetsInsideOneBlock) {
  FakeSource src(1 << 20);
  auto arena = Arena::create(src, 4096);
  ASSERT_TRUE(arena.ok());
  EXPECT_EQ(static_cast<char*>((*arena)->at(512)) - static_cast<char*>((*arena)->at(0)), 512);
  EXPECT_EQ(src.calls, 1);
  EXPECT_DEATH((void)(*arena)->at(4096), "offset past the arena");
  auto too_big = Arena::create(src, 2 << 20);
  EXPECT_FALSE(too_big.ok());
}

}  // namespace
}  // namespace lj::cuda
