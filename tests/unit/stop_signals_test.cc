// Tier 1: SIGTERM / SIGINT as `ljperf train` takes them (cli/stop_signals.h): the flag, the
// mask and handlers restored, the default action before a flag. The heap-corruption regression
// test (signals during oneDNN's GEMM) is stop_signals_gemm_test.cc. No backend here: tsan_tests
// (ThreadSanitizer, tools/setup.sh test-tsan) builds this file with cli/stop_signals.cc alone.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cli/stop_signals.h"

namespace lj::cli {
namespace {

// Waits up to 10 s for *flag.
bool wait_for(const std::atomic<bool>& flag) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return flag.load();
}

TEST(StopSignals, SetsTheFlagAndRestoresHandlerAndMask) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGTERM, &ignore, &before), 0);
  std::atomic<bool> stop{false};
  {
    StopSignals signals;
    signals.deliver_to(&stop);
    sigset_t mask;
    ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &mask), 0);
    EXPECT_TRUE(sigismember(&mask, SIGTERM));
    EXPECT_TRUE(sigismember(&mask, SIGINT));
    kill(getpid(), SIGINT);
    EXPECT_TRUE(wait_for(stop));
  }
  struct sigaction after {};
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, SIG_IGN);
  sigset_t mask;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &mask), 0);
  EXPECT_FALSE(sigismember(&mask, SIGTERM));
  EXPECT_FALSE(sigismember(&mask, SIGINT));
  sigaction(SIGTERM, &before, nullptr);
}

// Signals from another thread, without pause, while the flag is read and while the StopSignals
// is destroyed (its waiter ends, the pending ones are drained, the handlers restored): every
// signal is taken by the waiter or the drain, or, once the old handler (ignore) is back, dropped;
// none ends the process. Under ThreadSanitizer (tsan_tests) it checks the hand-over of the flag
// and the waiter's shutdown for races.
TEST(StopSignals, SignalStormDuringShutdownIsTakenOrIgnored) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction before_term {};
  struct sigaction before_int {};
  ASSERT_EQ(sigaction(SIGTERM, &ignore, &before_term), 0);
  ASSERT_EQ(sigaction(SIGINT, &ignore, &before_int), 0);
  std::atomic<bool> done{false};
  std::atomic<long> sent{0};
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> stop{false};
    std::thread sender;
    {
      StopSignals signals;
      signals.deliver_to(&stop);
      done.store(false);
      sender = std::thread([&] {
        while (!done.load()) {
          kill(getpid(), round % 2 == 0 ? SIGTERM : SIGINT);
          sent.fetch_add(1);
        }
      });
      EXPECT_TRUE(wait_for(stop)) << "round " << round;
    }  // destroyed while the sender still sends
    done.store(true);
    sender.join();
  }
  EXPECT_GE(sent.load(), 20);
  sigaction(SIGTERM, &before_term, nullptr);
  sigaction(SIGINT, &before_int, nullptr);
}

// Before deliver_to (the run is still loading) a SIGTERM ends the process as by default.
TEST(StopSignalsDeathTest, BeforeAFlagTheSignalEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StopSignals signals;
        kill(getpid(), SIGTERM);
        std::this_thread::sleep_for(std::chrono::seconds(10));
      },
      ::testing::KilledBySignal(SIGTERM), "");
}

}  // namespace
}  // namespace lj::cli
