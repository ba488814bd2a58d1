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
  ASSERT_TRUE(cpu::sgemm_avx512_chosen(true, false, kM, kN, kK, false));
  EXPECT_FALSE(cpu::gemm_uses_own_sgemm(true, false, kM, kN, kK, false));
  EXPECT_FALSE(cpu::gemm_uses_own_sgemm(false, true, kN, kM, kK, false));
}

TEST(GemmDispatch, UncappedAvx512HostTakesOwnGemmForChosenShapes) {
  const cpu::OneDnnInfo info = cpu::onednn_info();
  const bool both = cpu::sgemm_avx512_available() && info.isa_avx512;
  EXPECT_EQ(cpu::gemm_uses_own_sgemm(true, false, kM, kN, kK, false), both)
      << "oneDNN ISA " << info.cpu_isa;
  EXPECT_EQ(cpu::gemm_uses_own_sgemm(true, false, kM, kN, kK, true), both);
}

// A layer's GEMM (not nested in a parallel region) goes to the own GEMM in every transpose case
// from 128 in every dimension; nested, only the weight-gradient class does.
TEST(GemmDispatch, LayerGemmsFrom128TakeOwnGemmNestedOnlyWeightGradients) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      EXPECT_TRUE(cpu::sgemm_avx512_chosen(ta, tb, 2048, 768, 288, false)) << ta << tb;
      EXPECT_TRUE(cpu::sgemm_avx512_chosen(ta, tb, 128, 128, 128, false)) << ta << tb;
      EXPECT_FALSE(cpu::sgemm_avx512_chosen(ta, tb, 2048, 96, 288, false)) << ta << tb;  // kv
      EXPECT_FALSE(cpu::sgemm_avx512_chosen(ta, tb, 127, 2048, 2048, false)) << ta << tb;
      EXPECT_EQ(cpu::sgemm_avx512_chosen(ta, tb, 512, 288, 256, true), ta && !tb) << ta << tb;
    }
  }
  EXPECT_FALSE(cpu::sgemm_avx512_chosen(false, true, 256, 512, 288, true));  // the loss's logits
  EXPECT_FALSE(cpu::sgemm_avx512_chosen(true, false, 2816, 1025, 1024, true));
}

}  // namespace
}  // namespace lj::test
