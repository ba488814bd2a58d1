// That ThreadSanitizer is live in tsan_tests: tsan.reports_race (CMake, LJ_TSAN builds only)
// runs this disabled test and passes only when TSan reports its data race, so a build that lost
// -fsanitize=thread, or options that silence reports, fails instead of passing quietly.
#include <gtest/gtest.h>

#include <thread>

namespace lj {
namespace {

// Written by two threads with nothing ordering them: the race TSan must report.
int g_racy_count = 0;

__attribute__((noinline)) void race_on_purpose() {
  for (int i = 0; i < 1000; ++i) g_racy_count = g_racy_count + 1;
}

TEST(TsanCheck, DISABLED_UnorderedWritesAreReported) {
  std::thread a(race_on_purpose), b(race_on_purpose);
  a.join();
  b.join();
  EXPECT_GT(g_racy_count, 0);
}

}  // namespace
}  // namespace lj
