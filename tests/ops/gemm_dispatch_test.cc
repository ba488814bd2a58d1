// Which GEMM gemm.h's f32 gemm runs: ljperf's own AVX-512 GEMM only where the CPU and oneDNN both
// run AVX-512, so DNNL_MAX_CPU_ISA=AVX2 makes every GEMM of the process oneDNN's AVX2 one (the
// host caches are keyed by oneDNN's ISA, plan/sgemm_buffers prices oneDNN's buffers there).
#include <cstdlib>

#include <gtest/gtest.h>

#include "backends/cpu/gemm.h"
#include "backends/cpu/onednn_info.h"
#include "backends/cpu/sgemm_avx512.h"

namespace lj::test {
namespace {

// A weight gradient of `small` (aᵀb, every dim >= 256, n <= 1024): a shape the own GEMM takes.
constexpr int64_t kM = 768, kN = 288, kK = 2048;

TEST(GemmDispatch, RuleNeedsBothCpuAndOneDnnAtAvx512) {
  EXPECT_TRUE(cpu::own_sgemm_allowed(true, true));
  EXPECT_FALSE(cpu::own_sgemm_allowed(true, false));  // DNNL_MAX_CPU_ISA=AVX2 on AVX-512
  EXPECT_FALSE(cpu::own_sgemm_allowed(false, true));
  EXPECT_FALSE(cpu::own_sgemm_allowed(false, false));
}

TEST(GemmDispatch, OneDnnCappedBelowAvx512KeepsEveryGemmOnOneDnn) {
  // oneDNN reads DNNL_MAX_CPU_ISA once, on first use: ctest runs each test in its own process.
  setenv("DNNL_MAX_CPU_ISA", "AVX2", 1);
  const cpu::OneDnnInfo info = cpu::onednn_info();
  if (info.isa_avx512)
    GTEST_SKIP() << "oneDNN was initialized before the cap (run this test in its own process)";
  ASSERT_TRUE(cpu::sgemm_avx512_chosen(true, false, kM, kN, kK));
  EXPECT_FALSE(cpu::gemm_uses_own_sgemm(true, false, kM, kN, kK));
}

TEST(GemmDispatch, UncappedAvx512HostTakesOwnGemmForChosenShapes) {
  const cpu::OneDnnInfo info = cpu::onednn_info();
  const bool both = cpu::sgemm_avx512_available() && info.isa_avx512;
  EXPECT_EQ(cpu::gemm_uses_own_sgemm(true, false, kM, kN, kK), both)
      << "oneDNN ISA " << info.cpu_isa;
  EXPECT_FALSE(cpu::gemm_uses_own_sgemm(false, true, kM, kN, kK));  // never chosen: oneDNN
}

}  // namespace
}  // namespace lj::test
