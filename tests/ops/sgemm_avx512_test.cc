// The in-tree AVX-512 GEMM (backends/cpu/sgemm_avx512.h) against an f64 reference: every
// transpose case, edge sizes, alpha, beta (beta = 0 must not read c: c starts as NaN), leading
// dimensions past the row, small forced blockings that cut every loop into several blocks with
// ragged ends; and the same bits for any thread count and any row/column blocking. Skipped on
// hosts without AVX-512F.
#include "backends/cpu/sgemm_avx512.h"

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "op_test_util.h"

namespace lj::test {
namespace {

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  int64_t pad;  // added to each leading dimension
};

struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<float> a, b, c0;
};

Operands operands(const Case& t) {
  Operands o;
  o.lda = (t.ta ? t.m : t.k) + t.pad;
  o.ldb = (t.tb ? t.k : t.n) + t.pad;
  o.ldc = t.n + t.pad;
  o.a = lcg_floats(static_cast<size_t>((t.ta ? t.k : t.m) * o.lda), 1);
  o.b = lcg_floats(static_cast<size_t>((t.tb ? t.n : t.k) * o.ldb), 2);
  o.c0 = lcg_floats(static_cast<size_t>(t.m * o.ldc), 3);
  if (t.beta == 0.0f) o.c0.assign(o.c0.size(), std::numeric_limits<float>::quiet_NaN());
  return o;
}

std::vector<float> run(const Case& t, const Operands& o, const cpu::SgemmBlocking* blk) {
  std::vector<float> c = o.c0;
  cpu::sgemm_avx512(t.ta, t.tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda, o.b.data(), o.ldb,
                    t.beta, c.data(), o.ldc, blk);
  return c;
}

// Largest |c - ref| / (|alpha| sum_p |a b| + |beta c0| + tiny) over the matrix; cells outside
// the m x n block (the leading-dimension padding) must be untouched.
double check(const Case& t, const Operands& o, const std::vector<float>& c) {
  double worst = 0;
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < o.ldc; ++j) {
      const size_t at = static_cast<size_t>(i * o.ldc + j);
      if (j >= t.n) {
        EXPECT_EQ(std::memcmp(&c[at], &o.c0[at], sizeof(float)), 0) << "padding written";
        continue;
      }
      double s = 0, mag = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        const double av = t.ta ? o.a[static_cast<size_t>(p * o.lda + i)]
                               : o.a[static_cast<size_t>(i * o.lda + p)];
        const double bv = t.tb ? o.b[static_cast<size_t>(j * o.ldb + p)]
                               : o.b[static_cast<size_t>(p * o.ldb + j)];
        s += av * bv;
        mag += std::fabs(av * bv);
      }
      double ref = t.alpha * s, scale = std::fabs(t.alpha) * mag + 1e-30;
      if (t.beta != 0.0f) {
        ref += t.beta * static_cast<double>(o.c0[at]);
        scale += std::fabs(t.beta * o.c0[at]);
      }
      worst = std::max(worst, std::fabs(c[at] - ref) / scale);
    }
  }
  return worst;
}

// f32 sums of k products from zero: relative to sum |a b| the error is at most ~k * 2^-24; the
// bound is 2 k ulp(1)/2. Observed: at most 3.4e-7 (k = 300) here, bound 1.8e-5 at k = 300.
double bound(int64_t k) {
  return 2.0 * static_cast<double>(k + 2) * std::ldexp(1.0, -24);
}

TEST(SgemmAvx512, MatchesF64ReferenceOnEdgesTransposesAlphaBeta) {
  if (!cpu::sgemm_avx512_available()) GTEST_SKIP() << "no AVX-512F";
  const int64_t sizes[] = {1, 15, 17, 31, 33, 97};
  const cpu::SgemmBlocking tiny{28, 16, 64};  // several mc, kc and nc blocks, ragged
  int cases = 0;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      for (int64_t m : sizes) {
        for (int64_t n : sizes) {
          for (int64_t k : {int64_t{1}, int64_t{17}, int64_t{33}, int64_t{97}}) {
            const int v = cases++;
            const float beta = v % 3 == 0 ? 0.0f : v % 3 == 1 ? 1.0f : 0.25f;
            const Case t{ta == 1, tb == 1, m, n, k, v % 2 ? 0.5f : 1.0f, beta, v % 4 == 0 ? 3 : 0};
            const Operands o = operands(t);
            for (const cpu::SgemmBlocking* blk :
                 {static_cast<const cpu::SgemmBlocking*>(nullptr), &tiny}) {
              const double err = check(t, o, run(t, o, blk));
              ASSERT_LE(err, bound(k)) << "ta " << ta << " tb " << tb << " m " << m << " n " << n
                                       << " k " << k << " alpha " << t.alpha << " beta " << beta
                                       << " pad " << t.pad << (blk ? " tiny blocks" : "");
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 4 * 6 * 6 * 4);
}

TEST(SgemmAvx512, LargerShapesMatchReference) {
  if (!cpu::sgemm_avx512_available()) GTEST_SKIP() << "no AVX-512F";
  for (const Case& t : {Case{false, true, 301, 173, 300, 1.0f, 0.0f, 5},
                        Case{true, false, 127, 290, 257, 1.0f, 1.0f, 0},
                        Case{false, false, 67, 515, 131, 2.0f, 0.0f, 16},
                        Case{true, true, 255, 61, 389, 1.0f, 1.0f, 1}}) {
    const Operands o = operands(t);
    EXPECT_LE(check(t, o, run(t, o, nullptr)), bound(t.k))
        << "ta " << t.ta << " tb " << t.tb << " m " << t.m << " n " << t.n << " k " << t.k;
  }
}

// Same bits on 1, 2 and 3 threads, inside a parallel region, and under other row/column blockings
// (only k's blocking fixes the summation order); rows split (m >= n) and columns split.
TEST(SgemmAvx512, BitwiseIndependentOfThreadsAndRowColumnBlocking) {
  if (!cpu::sgemm_avx512_available()) GTEST_SKIP() << "no AVX-512F";
  const int prev = omp_get_max_threads();
  for (const Case& t : {Case{false, true, 461, 200, 333, 1.0f, 0.0f, 0},
                        Case{true, false, 90, 515, 700, 1.0f, 1.0f, 2}}) {
    const Operands o = operands(t);
    omp_set_num_threads(1);
    const std::vector<float> one = run(t, o, nullptr);
    for (int threads : {2, 3}) {
      omp_set_num_threads(threads);
      EXPECT_EQ(std::memcmp(run(t, o, nullptr).data(), one.data(), one.size() * 4), 0)
          << threads << " threads, m " << t.m << " n " << t.n;
    }
    std::vector<float> inside;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      inside = run(t, o, nullptr);
    }
    EXPECT_EQ(std::memcmp(inside.data(), one.data(), one.size() * 4), 0) << "in a region";
    cpu::SgemmBlocking other = cpu::sgemm_avx512_blocking();
    other.mc = 28;
    other.nc = 64;
    EXPECT_EQ(std::memcmp(run(t, o, &other).data(), one.data(), one.size() * 4), 0)
        << "mc 28, nc 64";
    EXPECT_LE(check(t, o, one), bound(t.k));
  }
  omp_set_num_threads(prev);
}

}  // namespace
}  // namespace lj::test
