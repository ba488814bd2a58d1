// core/checked_math.h: sums and products of integers from files, with overflow as "no value".
#include "core/checked_math.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace lj {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(CheckedMath, MulAndAddStopAtOverflow) {
  EXPECT_EQ(checked_mul<int64_t>(3, 4), 12);
  EXPECT_EQ(checked_mul<int64_t>(kMax, 1), kMax);
  EXPECT_FALSE(checked_mul<int64_t>(kMax / 2 + 1, 2).has_value());
  EXPECT_FALSE(checked_mul<int64_t>(-kMax, 2).has_value());
  EXPECT_FALSE(checked_mul<uint64_t>(uint64_t{1} << 32, uint64_t{1} << 32).has_value());
  EXPECT_EQ(checked_add<int64_t>(kMax - 1, 1), kMax);
  EXPECT_FALSE(checked_add<int64_t>(kMax, 1).has_value());
  EXPECT_FALSE(checked_add<uint64_t>(~uint64_t{0}, 1).has_value());
}

TEST(CheckedMath, ProductOfTheBatchSizes) {
  EXPECT_EQ(checked_product<int64_t>({}), 1);
  EXPECT_EQ(checked_product<int64_t>({2, 3, 4}), 24);
  // issue 33: micro 2 x accum 6666666666666662662 x world 1 is past 2^63.
  EXPECT_FALSE(checked_product<int64_t>({2, 6666666666666662662, 1}).has_value());
  EXPECT_FALSE(checked_product<int64_t>({1 << 20, 1 << 20, 1 << 20, 1 << 20}).has_value());
  EXPECT_EQ(checked_product<int64_t>({1 << 20, 1 << 20, 1 << 20}), int64_t{1} << 60);
}

}  // namespace
}  // namespace lj
