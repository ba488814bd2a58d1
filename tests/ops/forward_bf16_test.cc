// Tier-2 tests of the bf16 paths (mixed precision, passes/autocast): every op family the Llama
// graph runs in bf16, against the same op in f32 on the same (bf16-representable) inputs, its
// result rounded to bf16. The kernels compute in f32 and round their outputs once, so the bound
// is one bf16 rounding (relative 2^-9 = 0.2%; rtol 2^-8 leaves a factor 2 for f32 ops summed in
// another order) plus the f32 kernel's own error (atol). Observed errors: LJ_OPS_VERBOSE=1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/attention_tiles.h"
#include "graph/builder_fused.h"
#include "graph/builder_moe.h"
#include "op_test_util.h"

namespace lj::test {
namespace {

using Dims = std::vector<int64_t>;

// One bf16 rounding of a value computed in f32.
constexpr double kBf16Rtol = 1.0 / 256;

// Runs `build` twice: on the inputs as f32 (the reference) and as bf16 (integer inputs as they
// are). Every bf16 output must match the f32 output rounded to bf16 within atol + rtol |want|.
void expect_bf16_matches_f32(const std::string& what, const std::vector<GraphInput>& inputs,
                             const BuildFn& build, double atol, double rtol = kBf16Rtol) {
  std::vector<GraphInput> f32_in, bf16_in;
  for (const GraphInput& in : inputs) {
    const bool fl = is_float(in.value.dtype);
    f32_in.push_back(
        {in.name, fl ? rounded(rounded(in.value, DType::bf16), DType::f32) : in.value});
    bf16_in.push_back({in.name, fl ? rounded(in.value, DType::bf16) : in.value});
  }
  auto want = run_graph(f32_in, build);
  auto got = run_graph(bf16_in, build);
  ASSERT_TRUE(want.ok()) << what << " (f32): " << want.status().to_string();
  ASSERT_TRUE(got.ok()) << what << " (bf16): " << got.status().to_string();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size(); ++i) {
    const RefTensor& g = (*got)[i];
    const RefTensor& w = (*want)[i];
    const std::string name = what + " output " + std::to_string(i);
    if (g.dtype == DType::bf16) {
      expect_close(g, rounded(w, DType::bf16), atol, rtol, name);
    } else {
      expect_close(g, w, atol, rtol, name);
    }
  }
}

TEST(ForwardBf16, MatmulEveryLayoutAndBatch) {
  struct Case {
    Dims a_batch, b_batch;
    int64_t m, k, n;
  };
  const std::vector<Case> cases = {
      {{}, {}, 5, 7, 3},   {{}, {}, 37, 65, 29},   {{2, 5}, {}, 7, 33, 9},
      {{4}, {4}, 5, 7, 3}, {{2, 1}, {3}, 4, 6, 5}, {{}, {}, 64, 288, 96},
  };
  uint64_t seed = 100;
  for (const Case& c : cases) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        Dims ad = c.a_batch, bd = c.b_batch;
        ad.push_back(ta ? c.k : c.m);
        ad.push_back(ta ? c.m : c.k);
        bd.push_back(tb ? c.n : c.k);
        bd.push_back(tb ? c.k : c.n);
        const RefTensor a = random_tensor(DType::f32, ad, seed++);
        const RefTensor b = random_tensor(DType::f32, bd, seed++);
        // bf16 x bf16 products are exact in f32; oneDNN accumulates them in f32 in its own
        // order, as sgemm does in its own: the f32 sum error (~1e-6 K at these magnitudes, as in
        // Forward.Matmul) then one bf16 rounding. Observed: bitwise equal but for K = 288 with
        // tb (max_abs 6.1e-5, one bf16 ulp of a small entry; bound 1e-6 K = 2.9e-4).
        expect_bf16_matches_f32(
            "bf16 matmul " + dims_to_string(ad) + " x " + dims_to_string(bd) +
                " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb),
            {{"a", a}, {"b", b}},
            [&](Builder&, const std::vector<Val>& in) {
              return std::vector<Val>{matmul(in[0], in[1], ta, tb)};
            },
            1e-6 * static_cast<double>(c.k));
      }
    }
  }
}

TEST(ForwardBf16, MatmulAddAccumulatesIntoTheResidual) {
  const RefTensor x = random_tensor(DType::f32, {2, 33, 48}, 1);
  const RefTensor w = random_tensor(DType::f32, {70, 48}, 2);
  const RefTensor r = random_tensor(DType::f32, {2, 33, 70}, 3);
  // The GEMM accumulates into the bf16 residual in f32 and rounds once; observed max_rel ~2^-9.
  expect_bf16_matches_f32(
      "bf16 matmul_add", {{"x", x}, {"w", w}, {"r", r}},
      [](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{matmul_add(in[0], in[1], in[2], false, true)};
      },
      1e-6 * 48);
}

// The experts' GEMMs on bf16 operands (backends/cpu/moe.cc: gemm_bf16 per group, not widened):
// groups of 5, 0, 9 and 3 rows, both weight layouts, and the weight gradient in bf16 and, as
// master weights ask for it, in f32.
TEST(ForwardBf16, GroupedMatmulAndWeightGradient) {
  const RefTensor sizes = make_tensor(DType::i32, {4}, {5, 0, 9, 3});
  const RefTensor x = random_tensor(DType::f32, {17, 40}, 41);
  const RefTensor dy = random_tensor(DType::f32, {17, 24}, 42);
  for (bool tb : {true, false}) {
    const RefTensor w = random_tensor(
        DType::f32, tb ? std::vector<int64_t>{4, 24, 40} : std::vector<int64_t>{4, 40, 24}, 43);
    // As matmul: exact products, f32 sums in oneDNN's order, one bf16 rounding (bound 1e-6 K).
    // Observed (AMD EPYC): y max_abs 7.6e-6 (tb; one bf16 ulp of a small entry), 0 (not tb);
    // bf16 dw 0; f32 dw 1.2e-7.
    expect_bf16_matches_f32(
        std::string("bf16 grouped_matmul") + (tb ? " tb" : ""),
        {{"x", x}, {"w", w}, {"g", sizes}, {"dy", dy}},
        [tb](Builder& b, const std::vector<Val>& in) {
          const Val f32_dw =
              b.add1(Op::grouped_matmul_wgrad, {in[0], in[3], in[2]}, {{"dtype", DType::f32}});
          return std::vector<Val>{grouped_matmul(in[0], in[1], in[2], tb),
                                  grouped_matmul_wgrad(in[0], in[3], in[2]), f32_dw};
        },
        1e-6 * 40);
  }
}

TEST(ForwardBf16, SdpaAndBackward) {
  const RefTensor q = random_tensor(DType::f32, {2, 4, 19, 16}, 4);
  const RefTensor k = random_tensor(DType::f32, {2, 2, 19, 16}, 5);
  const RefTensor v = random_tensor(DType::f32, {2, 2, 19, 16}, 6);
  const RefTensor dout = random_tensor(DType::f32, {2, 4, 19, 16}, 7);
  // Softmax in f32 inside the kernel, outputs rounded once; the products multiply bf16 operands
  // (P rounded, as flash attention's; the f32 reference does not round it). Outputs are
  // averages of v (|.| < 1) and may be near 0, so the bound is absolute at the scale of v: 2^-9
  // of P's rounding plus one of the output's. lse is f32 (as flash attention keeps it).
  // Observed: lse bitwise equal; out, dq, dk, dv max_abs 3.9e-3, 2.0e-3, 2.0e-3, 7.8e-3 (with P
  // in f32: 0, 9.8e-4, 2.0e-3, 0; with a bf16 lse as well: 2.0e-3, 2.0e-3, 7.8e-3); bound 1e-2.
  expect_bf16_matches_f32(
      "bf16 sdpa", {{"q", q}, {"k", k}, {"v", v}, {"dout", dout}},
      [](Builder&, const std::vector<Val>& in) {
        SdpaResult s = sdpa(in[0], in[1], in[2], true);
        Builder& b = *in[0].b;
        std::vector<Val> d = b.add(Op::sdpa_backward, {in[0], in[1], in[2], s.out, s.lse, in[3]},
                                   {{"causal", true}, {"scale", 0.0}});
        return std::vector<Val>{s.out, s.lse, d[0], d[1], d[2]};
      },
      // The backward reads a bf16 out: 2^-9 perturbations amplified by the softmax Jacobian.
      1e-2, kBf16Rtol);
}

// bf16 attention multiplies bf16 operands (attention.cc product(): P rounds to bf16), on
// the bf16 dot products where the CPU has them, else on the f32 kernel with rounded copies: the
// two agree up to f32 summation order, and both differ from the f32 kernel, whose P does not
// round. Causal over two key tiles (T 80), GQA 2:1, and a sliding window.
TEST(ForwardBf16, SdpaRoundsAlikeWithAndWithoutDotProducts) {
  if (!cpu::attn::bf16_dot_available()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  struct DotOff {
    DotOff() { cpu::attn::set_bf16_dot_enabled(false); }
    ~DotOff() { cpu::attn::set_bf16_dot_enabled(true); }
  };
  for (const int64_t window : {int64_t{0}, int64_t{23}}) {
    std::vector<GraphInput> in = {{"q", random_tensor(DType::f32, {1, 4, 80, 32}, 51)},
                                  {"k", random_tensor(DType::f32, {1, 2, 80, 32}, 52)},
                                  {"v", random_tensor(DType::f32, {1, 2, 80, 32}, 53)},
                                  {"dout", random_tensor(DType::f32, {1, 4, 80, 32}, 54)}};
    std::vector<GraphInput> f32_in, bf16_in;
    for (const GraphInput& g : in) {
      f32_in.push_back({g.name, rounded(rounded(g.value, DType::bf16), DType::f32)});
      bf16_in.push_back({g.name, rounded(g.value, DType::bf16)});
    }
    const BuildFn build = [window](Builder&, const std::vector<Val>& v) {
      SdpaResult s = sdpa(v[0], v[1], v[2], true, 0.0, window);
      std::vector<Val> d = v[0].b->add(Op::sdpa_backward, {v[0], v[1], v[2], s.out, s.lse, v[3]},
                                       {{"causal", true}, {"scale", 0.0}, {"window", window}});
      return std::vector<Val>{s.out, d[0], d[1], d[2]};
    };
    auto dot = run_graph(bf16_in, build);
    StatusOr<std::vector<RefTensor>> plain = [&] {
      DotOff off;
      return run_graph(bf16_in, build);
    }();
    auto wide = run_graph(f32_in, build);
    ASSERT_TRUE(dot.ok() && plain.ok() && wide.ok());
    const char* names[] = {"out", "dq", "dk", "dv"};
    for (size_t i = 0; i < 4; ++i) {
      const RefTensor& a = (*dot)[i];
      const RefTensor& b = (*plain)[i];
      const RefTensor w = rounded((*wide)[i], DType::bf16);
      int64_t apart = 0, from_f32 = 0;
      double worst = 0;
      for (int64_t e = 0; e < a.numel(); ++e) {
        apart += a[e] != b[e];
        from_f32 += a[e] != w[e];
        // One bf16 ulp of the larger value: a flipped rounding of the output or of a dS entry.
        const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(a[e]), 1e-3)) - 7);
        worst = std::max(worst, std::fabs(a[e] - b[e]) / ulp);
      }
      const std::string what = std::string(names[i]) + " window " + std::to_string(window);
      if (std::getenv("LJ_OPS_VERBOSE")) {
        std::printf(
            "[observed] %s: %lld of %lld differ with and without dot products (worst "
            "%.2f ulp), %lld from the f32 kernel's\n",
            what.c_str(), static_cast<long long>(apart), static_cast<long long>(a.numel()), worst,
            static_cast<long long>(from_f32));
      }
      EXPECT_LE(worst, 2.0) << what;
      EXPECT_LE(apart, a.numel() / 20) << what;
      EXPECT_GT(from_f32, apart) << what << ": the f32 kernel's P does not round";
    }
  }
}

// rms_norm_backward's own bf16 kernel (rows widened one at a time) gives bitwise what the f32
// kernel gives on the widened tensors, rounded once: dx per element, dw f64 -> f32 -> bf16. With
// and without dres; rows past one dw block (64) and a thread split.
TEST(ForwardBf16, RmsNormBackwardIsTheF32KernelOnWidenedValuesRounded) {
  for (const bool with_res : {false, true}) {
    const Dims d{3, 47, 40};
    std::vector<GraphInput> in = {{"dy", random_tensor(DType::f32, d, 31)},
                                  {"x", random_tensor(DType::f32, d, 32)},
                                  {"w", random_tensor(DType::f32, {40}, 33, 0.5, 1.5)},
                                  {"rstd", random_tensor(DType::f32, {3, 47, 1}, 34, 0.5, 2.0)}};
    if (with_res) in.push_back({"dres", random_tensor(DType::f32, d, 35)});
    std::vector<GraphInput> f32_in, bf16_in;
    for (const GraphInput& g : in) {
      f32_in.push_back({g.name, rounded(rounded(g.value, DType::bf16), DType::f32)});
      bf16_in.push_back({g.name, rounded(g.value, DType::bf16)});
    }
    const BuildFn build = [&](Builder&, const std::vector<Val>& v) {
      const RmsNormGrads g = with_res ? rms_norm_backward(v[0], v[1], v[2], v[3], v[4])
                                      : rms_norm_backward(v[0], v[1], v[2], v[3]);
      return std::vector<Val>{g.dx, g.dw};
    };
    auto want = run_graph(f32_in, build);
    auto got = run_graph(bf16_in, build);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_EQ((*got)[i].dtype, DType::bf16);
      EXPECT_EQ((*got)[i].data, rounded((*want)[i], DType::bf16).data)
          << (i == 0 ? "dx" : "dw") << (with_res ? " with dres" : "");
    }
  }
}

TEST(ForwardBf16, NormSwigluRope) {
  const RefTensor x = random_tensor(DType::f32, {3, 17, 64}, 8);
  const RefTensor r = random_tensor(DType::f32, {3, 17, 64}, 9);
  const RefTensor w = random_tensor(DType::f32, {64}, 10, 0.5, 1.5);
  const RefTensor dy = random_tensor(DType::f32, {3, 17, 64}, 11);
  // rms_norm's statistics accumulate in f32; y and rstd are rounded once (max_rel ~2^-9). The
  // backward reads a bf16 rstd: its dx, dw move by ~2^-9 of their scale; dw sums 51 rows (|dw|
  // up to ~5). Observed: forward bitwise equal; dx max_abs 0.016, dw 0.031 (bound 2e-2 + 2^-8
  // |dw|).
  expect_bf16_matches_f32(
      "bf16 rms_norm", {{"x", x}, {"w", w}, {"dy", dy}, {"r", r}},
      [](Builder&, const std::vector<Val>& in) {
        RmsNormResult n = rms_norm(in[0], in[1], 1e-5);
        RmsNormGrads g = rms_norm_backward(in[2], in[0], in[1], n.rstd);
        AddRmsNormResult a = add_rms_norm(in[0], in[3], in[1], 1e-5);
        return std::vector<Val>{n.y, n.rstd, g.dx, g.dw, a.sum, a.y};
      },
      2e-2);
  const RefTensor gate = random_tensor(DType::f32, {3, 17, 40}, 12, -4, 4);
  const RefTensor up = random_tensor(DType::f32, {3, 17, 40}, 13);
  const RefTensor dout = random_tensor(DType::f32, {3, 17, 40}, 14);
  // Pointwise: one rounding per output; near-zero outputs (silu(0)) get an absolute 1e-6.
  expect_bf16_matches_f32(
      "bf16 swiglu", {{"g", gate}, {"u", up}, {"d", dout}},
      [](Builder&, const std::vector<Val>& in) {
        SwigluGrads g = swiglu_backward(in[2], in[0], in[1]);
        return std::vector<Val>{swiglu(in[0], in[1]), g.dgate, g.dup};
      },
      1e-6);
  const RefTensor hx = random_tensor(DType::f32, {2, 3, 17, 16}, 15);
  const RefTensor cs = random_tensor(DType::f32, {17, 16}, 16);
  const RefTensor sn = random_tensor(DType::f32, {17, 16}, 17);
  // x*cos + rot(x)*sin: two products summed in f32, rounded once; cancellation makes small
  // outputs, so an absolute 2^-9 at the inputs' scale (|x| < 1) as well.
  expect_bf16_matches_f32(
      "bf16 rope", {{"x", hx}, {"c", cs}, {"s", sn}},
      [](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{rope(in[0], in[1], in[2]), rope(in[0], in[1], in[2], true)};
      },
      1.0 / 512);
}

// swiglu_packed in bf16 is bitwise swiglu on the two halves as separate tensors, forward and
// backward (F = 550: a 512-element block and a tail per half, as the packed kernel blocks rows).
TEST(ForwardBf16, PackedSwigluIsSwigluOnTheHalves) {
  const RefTensor x = rounded(random_tensor(DType::f32, {3, 7, 1100}, 18, -4, 4), DType::bf16);
  const RefTensor d = rounded(random_tensor(DType::f32, {3, 7, 550}, 19), DType::bf16);
  auto r = run_graph({{"x", x}, {"d", d}}, [](Builder&, const std::vector<Val>& in) {
    const Val gate = slice(in[0], -1, 0, 550), up = slice(in[0], -1, 550, 1100);
    const SwigluGrads g = swiglu_backward(in[1], gate, up);
    return std::vector<Val>{swiglu_packed(in[0]), swiglu(gate, up),
                            swiglu_packed_backward(in[1], in[0]), concat({g.dgate, g.dup}, -1)};
  });
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ((*r)[0].dtype, DType::bf16);
  ASSERT_EQ((*r)[2].dtype, DType::bf16);
  EXPECT_EQ((*r)[0].data, (*r)[1].data) << "forward";
  EXPECT_EQ((*r)[2].data, (*r)[3].data) << "backward";
}

TEST(ForwardBf16, ElementwiseReductionsSoftmaxLoss) {
  const RefTensor a = random_tensor(DType::f32, {4, 33, 48}, 20, -3, 3);
  const RefTensor b = random_tensor(DType::f32, {48}, 21, 0.5, 2);
  // Pointwise ops round once (max_rel <= 2^-9 observed); sums of 48 or 6336 terms accumulate in
  // f32 (relative 1e-6) and round once; softmax rows are in (0, 1].
  expect_bf16_matches_f32(
      "bf16 elementwise", {{"a", a}, {"b", b}},
      [](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{in[0] + in[1],   in[0] * in[1],   exp(in[0]),
                                silu(in[0]),     rsqrt(in[1]),    sum(in[0], {-1}),
                                mean(in[0], {}), max(in[0], {1}), softmax(in[0])};
      },
      1e-6);
  const RefTensor logits = random_tensor(DType::f32, {37, 50}, 22, -4, 4);
  const RefTensor labels = random_ints(DType::i32, {37}, 23, 0, 50);
  // bf16 logits: the kernel loads each row into f32 and runs the f32 kernel's row functions, so
  // the (f32) loss equals the f32 kernel's and dlogits are its result rounded once. Observed:
  // loss and dlogits bitwise equal.
  expect_bf16_matches_f32(
      "bf16 cross_entropy", {{"l", logits}, {"y", labels}},
      [](Builder& b, const std::vector<Val>& in) {
        const Val loss = cross_entropy(in[0], in[1]);
        const Val dloss = constant(b, 0.5, DType::f32);
        return std::vector<Val>{loss, b.add1(Op::cross_entropy_backward, {in[0], in[1], dloss},
                                             {{"ignore_index", int64_t{-100}}})};
      },
      1e-7);
}

TEST(ForwardBf16, LinearCrossEntropyBf16Gemms) {
  // The three GEMMs on bf16 operands, the softmax and loss in f32. Both ways dw is made
  // (loss.cc bf16_lce_whole_dw): C 48 with chunks of 32 rows (3 chunks; 70 rows <= 32 + 2C, so
  // one dw GEMM over every row at the end), and C 16 with chunks of 8 (9 chunks; 70 > 8 + 2C, so
  // dw accumulated in f32 across them). The loss matches f32's bitwise here; dx and dw differ by
  // the bf16 rounding of dlogits (2^-9 relative each, the target entry -1/N dominating) summed
  // over V or N terms, then one bf16 rounding: as matmul + cross_entropy under torch.autocast.
  // Observed: loss exact, dx and dw max_abs 1.2e-4 with entries up to ~1.4e-2 (under 1%), both
  // ways; bound 2.5e-4 absolute + 2^-8 relative (a missing chunk or transposed GEMM is O(1e-2)).
  struct Case {
    int64_t dim, chunk;
  };
  for (const Case k : {Case{48, 32}, Case{16, 8}}) {
    const RefTensor x = random_tensor(DType::f32, {70, k.dim}, 24);
    const RefTensor w = random_tensor(DType::f32, {300, k.dim}, 25);
    const RefTensor labels = random_ints(DType::i32, {70}, 26, 0, 300);
    expect_bf16_matches_f32(
        "bf16 linear_cross_entropy C " + std::to_string(k.dim), {{"x", x}, {"w", w}, {"y", labels}},
        [chunk = k.chunk](Builder&, const std::vector<Val>& in) {
          LinearCrossEntropyResult r = linear_cross_entropy(in[0], in[1], in[2], -100, chunk);
          return std::vector<Val>{r.loss, r.dx, r.dw};
        },
        2.5e-4);
  }
}

TEST(ForwardBf16, MovementAndCastAreExact) {
  const RefTensor x = random_tensor(DType::f32, {3, 5, 8}, 30);
  const RefTensor ids = random_ints(DType::i32, {7}, 31, 0, 3);
  // Data movement copies 16-bit elements: exact (atol = rtol = 0).
  expect_bf16_matches_f32(
      "bf16 movement", {{"x", x}, {"ids", ids}},
      [](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{permute(in[0], {2, 0, 1}), slice(in[0], 1, 1, 4),
                                concat({in[0], in[0]}, 2),
                                expand(slice(in[0], 0, 0, 1), Shape{4, 5, 8}),
                                gather(reshape(in[0], Shape{3, 40}), in[1])};
      },
      0.0, 0.0);
  // f32 -> bf16 rounds to nearest even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> 1 (even);
  // 1 + 3 * 2^-8 is a tie -> 1 + 2^-6 (even); 1 + 2^-8 + 2^-20 is above the tie -> 1 + 2^-7.
  const RefTensor t = make_tensor(DType::f32, {3},
                                  {1 + std::ldexp(1.0, -8), 1 + 3 * std::ldexp(1.0, -8),
                                   1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -20)});
  auto r = run_graph({{"t", t}}, [](Builder&, const std::vector<Val>& in) {
    return std::vector<Val>{cast(in[0], DType::bf16)};
  });
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_close(
      (*r)[0],
      make_tensor(DType::bf16, {3}, {1.0, 1 + std::ldexp(1.0, -6), 1 + std::ldexp(1.0, -7)}), 0.0,
      0.0, "cast f32 -> bf16 ties to even");
}

}  // namespace
}  // namespace lj::test
