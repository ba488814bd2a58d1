// Tier 1: the regression test of a heap corruption (cli/stop_signals.h): with a plain handler
// (what train_command.cc had), a SIGTERM that lands while oneDNN's f32 JIT GEMM runs on the
// handling thread writes the signal frame over the heap; this test then aborts in free()
// ("free(): invalid next size") in 5 runs of 5 at 200 GEMMs. The other StopSignals tests are in
// stop_signals_test.cc, which needs no backend (ThreadSanitizer's tsan_tests builds it alone).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "backends/cpu/gemm.h"
#include "cli/stop_signals.h"

namespace lj::cli {
namespace {

TEST(StopSignals, SignalStormDuringOneDnnGemmLeavesTheHeapIntact) {
  std::atomic<bool> stop{false};
  long sent = 0;
  {
    StopSignals signals;
    signals.deliver_to(&stop);
    std::atomic<bool> done{false};
    std::thread sender([&] {
      while (!done.load()) {
        kill(getpid(), SIGTERM);
        kill(getpid(), SIGINT);
        sent += 2;
      }
    });
    // 64 x 64 x 4096 on one thread (this one): dnnl_sgemm's nocopy JIT kernel with K above its
    // stack capacity (84 on AVX-512), the case that moves the stack pointer into a heap buffer.
    const cpu::ScopedOmpThreads one(1);
    const int64_t m = 64, n = 64, k = 4096;
    std::vector<float> a(static_cast<size_t>(m * k), 0.5f), b(static_cast<size_t>(k * n), 0.25f);
    std::vector<float> c(static_cast<size_t>(m * n));
    for (int i = 0; i < 300; ++i) {
      cpu::gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
      std::vector<char> churn(static_cast<size_t>(100 + i % 1000));  // frees next to corruption
      churn[0] = 1;
    }
    done.store(true);
    sender.join();
    for (float x : c) ASSERT_EQ(x, 512.0f);  // 4096 x 0.5 x 0.25, exact in f32
  }
  EXPECT_GT(sent, 0);
  EXPECT_TRUE(stop.load());
}

}  // namespace
}  // namespace lj::cli
