// That ThreadSanitizer follows OpenMP in tsan_omp_tests. tsan.omp_reports_race (CMake) runs the
// disabled test and passes only when TSan reports its race, in an OpenMP loop, and archer said it
// is loaded: a build that lost -fsanitize=thread, or a libomp without archer, fails instead of
// passing quietly. The enabled test is the same loop made race-free with a reduction: without
// archer, TSan cannot see the ordering libomp's reduction and barrier give, and reports it.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <vector>

namespace lj {
namespace {

std::vector<int64_t> ones(int64_t n) {
  return std::vector<int64_t>(static_cast<size_t>(n), 1);
}

// Every iteration adds into one shared variable: the race TSan must report.
int64_t g_omp_racy_sum = 0;

__attribute__((noinline)) void omp_race_on_purpose(const std::vector<int64_t>& x) {
  const auto n = static_cast<int64_t>(x.size());
#pragma omp parallel for num_threads(2) schedule(static)
  for (int64_t i = 0; i < n; ++i) g_omp_racy_sum += x[static_cast<size_t>(i)];
}

TEST(TsanOmpCheck, DISABLED_UnreducedSumIsReported) {
  omp_race_on_purpose(ones(4096));
  EXPECT_GT(g_omp_racy_sum, 0);
}

TEST(TsanOmpCheck, ReducedSumAndBarrierAreQuiet) {
  const std::vector<int64_t> x = ones(4096);
  const auto n = static_cast<int64_t>(x.size());
  int64_t sum = 0;
#pragma omp parallel for num_threads(2) schedule(static) reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += x[static_cast<size_t>(i)];
  EXPECT_EQ(sum, n);
  // Each thread writes its half, then, after the barrier, reads the other's.
  std::vector<int64_t> half(2, 0), seen(2, 0);
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    half[static_cast<size_t>(t)] = t + 1;
#pragma omp barrier
    seen[static_cast<size_t>(t)] = half[static_cast<size_t>(1 - t)];
  }
  EXPECT_EQ(seen[0] + seen[1], 3);
}

}  // namespace
}  // namespace lj
