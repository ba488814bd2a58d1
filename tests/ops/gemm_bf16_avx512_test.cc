// The bf16 GEMM on ljperf's own kernel (backends/cpu/sgemm_avx512.h gemm_bf16_avx512): bf16
// operands widened to f32 as they are packed. Its f32 result must be bitwise the f32 GEMM's on the
// widened operands (the same kernel and blocking), within the f32 summation bound of an f64
// reference; its bf16 result must be that f32 sum rounded once (plus c's old value when
// accumulating); and its bits must not depend on the thread count. Also the rule that picks it
// (gemm.h bf16_gemm_rule). Skipped on hosts without AVX-512F.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/gemm.h"
#include "backends/cpu/sgemm_avx512.h"
#include "core/dtype.h"

namespace lj::test {
namespace {

std::vector<uint16_t> bf16_filled(size_t n, uint32_t seed) {
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = f32_to_bf16(static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f);
  }
  return v;
}

std::vector<float> widened(const std::vector<uint16_t>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = bf16_to_f32(v[i]);
  return f;
}

struct Shape {
  bool ta, tb;
  int64_t m, n, k;
};

struct Operands {
  std::vector<uint16_t> a, b;
};

Operands operands(const Shape& s) {
  return {bf16_filled(static_cast<size_t>(s.m * s.k), 11),
          bf16_filled(static_cast<size_t>(s.k * s.n), 12)};
}

std::vector<float> run_f32(const Shape& s, const Operands& o, bool accumulate, std::vector<float> c,
                           const cpu::SgemmBlocking* blk = nullptr) {
  cpu::gemm_bf16_avx512(s.ta, s.tb, s.m, s.n, s.k, o.a.data(), o.b.data(), c.data(), true,
                        accumulate, blk);
  return c;
}

std::vector<uint16_t> run_bf16(const Shape& s, const Operands& o, bool accumulate,
                               std::vector<uint16_t> c, const cpu::SgemmBlocking* blk = nullptr) {
  cpu::gemm_bf16_avx512(s.ta, s.tb, s.m, s.n, s.k, o.a.data(), o.b.data(), c.data(), false,
                        accumulate, blk);
  return c;
}

// The f32 GEMM on the widened operands, beta 0.
std::vector<float> reference_f32(const Shape& s, const Operands& o,
                                 const cpu::SgemmBlocking* blk = nullptr) {
  const std::vector<float> a = widened(o.a), b = widened(o.b);
  std::vector<float> c(static_cast<size_t>(s.m * s.n), 0.0f);
  cpu::sgemm_avx512(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), s.ta ? s.m : s.k, b.data(),
                    s.tb ? s.k : s.n, 0.0f, c.data(), s.n, blk);
  return c;
}

// Largest |c - sum| / sum |a b| against the f64 sum of the exact products.
double worst_vs_f64(const Shape& s, const Operands& o, const std::vector<float>& c) {
  double worst = 0;
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = 0, mag = 1e-30;
      for (int64_t p = 0; p < s.k; ++p) {
        const double av = bf16_to_f32(o.a[static_cast<size_t>(s.ta ? p * s.m + i : i * s.k + p)]);
        const double bv = bf16_to_f32(o.b[static_cast<size_t>(s.tb ? j * s.k + p : p * s.n + j)]);
        sum += av * bv;
        mag += std::fabs(av * bv);
      }
      worst = std::max(worst, std::fabs(c[static_cast<size_t>(i * s.n + j)] - sum) / mag);
    }
  }
  return worst;
}

const Shape kShapes[] = {{false, true, 1, 1, 1},      {false, true, 37, 45, 19},
                         {false, false, 33, 70, 129}, {true, false, 29, 17, 401},
                         {true, true, 15, 97, 33},    {false, true, 301, 173, 450},
                         {true, false, 90, 515, 700}};

TEST(GemmBf16Avx512, F32ResultIsTheF32GemmOnWidenedOperandsBitwise) {
  if (!cpu::sgemm_avx512_available()) GTEST_SKIP() << "no AVX-512F";
  const cpu::SgemmBlocking tiny{28, 16, 64};  // several mc, kc and nc blocks, ragged
  for (const Shape& s : kShapes) {
    const Operands o = operands(s);
    for (const cpu::SgemmBlocking* blk : {static_cast<const cpu::SgemmBlocking*>(nullptr), &tiny}) {
      const std::vector<float> want = reference_f32(s, o, blk);
      // beta 0 must not read c: it starts as NaN.
      const std::vector<float> got =
          run_f32(s, o, false, std::vector<float>(want.size(), std::nanf("")), blk);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0)
          << "ta " << s.ta << " tb " << s.tb << " m " << s.m << " n " << s.n << " k " << s.k
          << (blk ? " tiny blocks" : "");
    }
    // f32 sums of k exact products: the error relative to sum |a b| is at most ~k 2^-24.
    // Observed: at most 7.4e-8 (k = 33: bound 4.2e-6; k = 700: 4.8e-8 against 8.4e-5).
    EXPECT_LE(worst_vs_f64(s, o, reference_f32(s, o)), 2.0 * (s.k + 2) * std::ldexp(1.0, -24));
  }
}

TEST(GemmBf16Avx512, AccumulateAddsToF32C) {
  if (!cpu::sgemm_avx512_available()) GTEST_SKIP() << "no AVX-512F";
  const Shape s{true, false, 45, 61, 77};
  const Operands o = operands(s);
  const std::vector<float> once = reference_f32(s, o);
  std::vector<float> c0(once.size());
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = 0.25f * static_cast<float>(i % 7);
  const std::vector<float> got = run_f32(s, o, true, c0);
  for (size_t i = 0; i < got.size(); ++i) {
    // One k block here (k = 77 < kc): c0 + sum, rounded once in f32.
    ASSERT_EQ(got[i], once[i] + c0[i]) << i;
  }
}

TEST(GemmBf16Avx512, Bf16ResultIsTheF32SumRoundedOnce) {
  if (!cpu::sgemm_avx512_available()) GTEST_SKIP() << "no AVX-512F";
  const cpu::SgemmBlocking tiny{28, 16, 64};
  for (const Shape& s : kShapes) {
    const Operands o = operands(s);
    for (const cpu::SgemmBlocking* blk : {static_cast<const cpu::SgemmBlocking*>(nullptr), &tiny}) {
      const std::vector<float> sum = reference_f32(s, o, blk);
      const std::vector<uint16_t> old = bf16_filled(sum.size(), 13);
      const std::vector<uint16_t> got = run_bf16(s, o, false, old, blk);
      const std::vector<uint16_t> acc = run_bf16(s, o, true, old, blk);
      for (size_t i = 0; i < sum.size(); ++i) {
        ASSERT_EQ(got[i], f32_to_bf16(sum[i])) << "element " << i << " k " << s.k;
        ASSERT_EQ(acc[i], f32_to_bf16(sum[i] + bf16_to_f32(old[i])))
            << "accumulate, element " << i << " k " << s.k;
      }
    }
  }
}

// Same bits on 1, 2 and 3 threads and inside a parallel region; rows split (m >= n) and columns.
TEST(GemmBf16Avx512, BitwiseIndependentOfThreads) {
  if (!cpu::sgemm_avx512_available()) GTEST_SKIP() << "no AVX-512F";
  const int prev = omp_get_max_threads();
  for (const Shape& s : {Shape{false, true, 461, 200, 333}, Shape{true, false, 90, 515, 700}}) {
    const Operands o = operands(s);
    const size_t size = static_cast<size_t>(s.m * s.n);
    omp_set_num_threads(1);
    const std::vector<float> one = run_f32(s, o, false, std::vector<float>(size));
    const std::vector<uint16_t> one16 = run_bf16(s, o, false, std::vector<uint16_t>(size));
    for (int threads : {2, 3}) {
      omp_set_num_threads(threads);
      EXPECT_EQ(run_f32(s, o, false, std::vector<float>(size)), one) << threads << " threads";
      EXPECT_EQ(run_bf16(s, o, false, std::vector<uint16_t>(size)), one16) << threads << " threads";
    }
    std::vector<uint16_t> inside;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      inside = run_bf16(s, o, false, std::vector<uint16_t>(size));
    }
    EXPECT_EQ(inside, one16) << "in a region";
  }
  omp_set_num_threads(prev);
}

TEST(GemmBf16Avx512, KZeroWritesZerosOrKeepsC) {
  if (!cpu::sgemm_avx512_available()) GTEST_SKIP() << "no AVX-512F";
  std::vector<uint16_t> c(6, f32_to_bf16(3.0f));
  cpu::gemm_bf16_avx512(false, false, 2, 3, 0, nullptr, nullptr, c.data(), false, true);
  EXPECT_EQ(c, std::vector<uint16_t>(6, f32_to_bf16(3.0f)));
  cpu::gemm_bf16_avx512(false, false, 2, 3, 0, nullptr, nullptr, c.data(), false, false);
  EXPECT_EQ(c, std::vector<uint16_t>(6, 0));
}

TEST(GemmBf16Rule, OwnGemmOnIntelWithoutAmxUnlessOverridden) {
  EXPECT_TRUE(cpu::bf16_gemm_rule(true, false, true, nullptr).own);
  EXPECT_FALSE(cpu::bf16_gemm_rule(true, true, true, nullptr).own);    // AMX: oneDNN
  EXPECT_FALSE(cpu::bf16_gemm_rule(true, false, false, nullptr).own);  // AMD: oneDNN
  EXPECT_FALSE(cpu::bf16_gemm_rule(false, false, true, nullptr).own);  // no own GEMM
  EXPECT_TRUE(cpu::bf16_gemm_rule(true, true, false, "own").own);
  EXPECT_FALSE(cpu::bf16_gemm_rule(true, false, true, "onednn").own);
  const cpu::Bf16Gemm cannot = cpu::bf16_gemm_rule(false, false, true, "own");
  EXPECT_FALSE(cannot.own);
  EXPECT_NE(cannot.warning.find("AVX-512"), std::string::npos) << cannot.warning;
  const cpu::Bf16Gemm bad = cpu::bf16_gemm_rule(true, false, true, "fast");
  EXPECT_TRUE(bad.own);
  EXPECT_NE(bad.warning.find("'fast'"), std::string::npos) << bad.warning;
  EXPECT_TRUE(cpu::bf16_gemm_rule(true, false, true, "").warning.empty());
}

// ctest's bf16_gemm_own / bf16_gemm_onednn runs set LJ_BF16_GEMM: the process takes that path.
TEST(GemmBf16Rule, ProcessFollowsTheEnvironment) {
  const char* env = std::getenv("LJ_BF16_GEMM");
  if (env == nullptr) GTEST_SKIP() << "LJ_BF16_GEMM not set (ctest's bf16_gemm_* runs set it)";
  if (std::string(env) == "onednn") {
    EXPECT_FALSE(cpu::gemm_bf16_uses_own());
  } else if (std::string(env) == "own") {
    EXPECT_EQ(cpu::gemm_bf16_uses_own(), cpu::own_sgemm_enabled());
  }
}

}  // namespace
}  // namespace lj::test
