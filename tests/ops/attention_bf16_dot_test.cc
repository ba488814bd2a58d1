// The attention's bf16 dot-product tile products (backends/cpu/attention_tiles.h): against an f64
// reference on the operands rounded to bf16, at the shapes and strides the attention kernels use
// (row-major a and a read transposed, tails of rows, columns and an odd k), with and without
// accumulation, and each triangular mode: the outputs it must write equal the plain product's
// bit for bit when a's promised zeros are zeros. Skipped on hosts without AVX512_BF16.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/attention_tiles.h"
#include "core/dtype.h"
#include "op_test_util.h"

namespace lj::test {
namespace {

using cpu::attn::Tri;

double bf16_of(float x) {
  return static_cast<double>(bf16_to_f32(f32_to_bf16(x)));
}

struct Case {
  int m, n, k;
  bool a_rows;  // a(i, kk) at a[i * k + kk], else at a[i + kk * m]
};

// c = [c +] bf16(a) bf16(b) in f64, and the bound of f32 sums of k products: each product of two
// bf16 values is exact in f32; the sums round k times, |error| <= k 2^-24 sum |a b|.
void reference(const Case& t, const std::vector<float>& a, const std::vector<float>& b,
               std::vector<double>* want, std::vector<double>* bound) {
  for (int i = 0; i < t.m; ++i) {
    for (int j = 0; j < t.n; ++j) {
      double s = 0, mag = 0;
      for (int kk = 0; kk < t.k; ++kk) {
        const float av = t.a_rows ? a[i * t.k + kk] : a[i + kk * t.m];
        const double p = bf16_of(av) * bf16_of(b[kk * t.n + j]);
        s += p;
        mag += std::fabs(p);
      }
      (*want)[i * t.n + j] += s;
      (*bound)[i * t.n + j] = (t.k + 1) * std::ldexp(mag + std::fabs((*want)[i * t.n + j]), -24);
    }
  }
}

std::vector<float> run(const Case& t, const std::vector<float>& a, const std::vector<float>& b,
                       std::vector<float> c, bool accumulate, Tri tri) {
  cpu::attn::tile_gemm_bf16_dot(t.m, t.n, t.k, a.data(), t.a_rows ? t.k : 1, t.a_rows ? 1 : t.m,
                                b.data(), t.n, c.data(), t.n, accumulate, tri);
  return c;
}

TEST(AttentionBf16Dot, MatchesTheRoundedProductAtTheKernelsShapes) {
  if (!cpu::attn::bf16_dot_available()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  // The forward's St (keys x 64 queries, k = D) and P V (queries x D, k = keys, a transposed);
  // the backward's S, dP (a rows) and dV, dK (a transposed); tails of 6-row blocks and of 16
  // columns; an odd k (a last tile of 37 keys).
  const std::vector<Case> cases = {{64, 64, 128, true}, {64, 128, 64, false}, {37, 64, 48, true},
                                   {19, 48, 37, false}, {5, 20, 3, true},     {64, 96, 37, true},
                                   {1, 1, 1, false},    {13, 33, 64, false}};
  for (const Case& t : cases) {
    for (const bool acc : {false, true}) {
      const std::vector<float> a = lcg_floats(static_cast<size_t>(t.m * t.k), 1 + t.m);
      const std::vector<float> b = lcg_floats(static_cast<size_t>(t.k * t.n), 2 + t.n);
      const std::vector<float> c0 = lcg_floats(static_cast<size_t>(t.m * t.n), 3);
      std::vector<double> want(c0.size(), 0.0), bound(c0.size(), 0.0);
      if (acc) {
        for (size_t i = 0; i < c0.size(); ++i) want[i] = c0[i];
      }
      reference(t, a, b, &want, &bound);
      const std::vector<float> got = run(t, a, b, c0, acc, Tri::none);
      const std::string what = std::to_string(t.m) + "x" + std::to_string(t.n) + "x" +
                               std::to_string(t.k) + (t.a_rows ? " rows" : " cols") +
                               (acc ? " accumulate" : "");
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - want[i]), bound[i])
            << what << " at " << i << ": " << got[i] << " vs " << want[i];
        worst = std::max(worst, std::fabs(got[i] - want[i]));
      }
      // The rounding is real: the operands as f32 would give other sums.
      if (t.k >= 37) {
        double f32_sum = 0;
        for (int kk = 0; kk < t.k; ++kk) {
          const float av = t.a_rows ? a[kk] : a[kk * t.m];
          f32_sum += static_cast<double>(av) * b[kk * t.n];
        }
        EXPECT_GT(std::fabs(f32_sum + (acc ? c0[0] : 0.0) - want[0]), 1e-4) << what;
      }
    }
  }
}

// Each triangular mode on a square diagonal tile whose a carries the zeros the mode promises:
// every output the mode needs equals the plain product's, bit for bit.
TEST(AttentionBf16Dot, TriangularModesKeepTheOutputsTheyNeed) {
  if (!cpu::attn::bf16_dot_available()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  for (const int s : {64, 37}) {
    for (const bool rows : {true, false}) {
      const Case t{s, s, s, rows};
      for (const Tri tri : {Tri::out_upper, Tri::out_lower, Tri::k_upto_row, Tri::k_from_row}) {
        std::vector<float> a = lcg_floats(static_cast<size_t>(s * s), 7);
        const std::vector<float> b = lcg_floats(static_cast<size_t>(s * s), 8);
        for (int i = 0; i < s; ++i) {
          for (int kk = 0; kk < s; ++kk) {
            const bool zero =
                (tri == Tri::k_upto_row && kk > i) || (tri == Tri::k_from_row && kk < i);
            if (zero) (rows ? a[i * s + kk] : a[i + kk * s]) = 0.0f;
          }
        }
        const std::vector<float> c0(static_cast<size_t>(s * s), 0.5f);
        const std::vector<float> plain = run(t, a, b, c0, true, Tri::none);
        const std::vector<float> got = run(t, a, b, c0, true, tri);
        for (int i = 0; i < s; ++i) {
          for (int j = 0; j < s; ++j) {
            if ((tri == Tri::out_upper && j > i) || (tri == Tri::out_lower && j < i)) continue;
            ASSERT_EQ(got[i * s + j], plain[i * s + j])
                << "tri " << static_cast<int>(tri) << " s " << s << (rows ? " rows" : " cols")
                << " at (" << i << ", " << j << ")";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace lj::test
