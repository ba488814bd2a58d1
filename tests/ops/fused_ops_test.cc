// Tier-2 tests of the fused ops of pattern fusion (rms_norm, add_rms_norm, swiglu, rope and their
// backward ops). Their reference is the primitive subgraph each one replaces, written as
// models/llama.cc writes it (those primitives are checked against the plain reference kernels in
// the other forward tests):
//  - the fused forward equals the primitive subgraph's values on the executor, f32 and f64;
//  - the gradients append_gradients builds through the fused VJPs (rms_norm_backward,
//    swiglu_backward, inverse rope) equal the primitive subgraph's gradients, f32 and f64;
//  - every fused kernel gives bitwise the same result for 1, 2 and 3 threads (rms_norm_backward's
//    dw is a sum over rows).
// The finite-difference checks of the fused VJPs are cases of vjp_test.cc.
#include <gtest/gtest.h>

#include "graph/autodiff/autodiff.h"
#include "graph/builder_fused.h"
#include "op_test_util.h"

namespace lj::test {
namespace {

using Dims = std::vector<int64_t>;
using Ins = std::vector<Val>;

constexpr double kEps = 1e-5;

// ---- The primitive subgraphs, as models/llama.cc builds them ----

struct PrimNorm {
  Val y, rstd;
};
PrimNorm prim_rms_norm(Val x, Val w) {
  Val rstd = rsqrt(mean(square(x), {-1}, /*keepdim=*/true) + kEps);
  return {x * rstd * w, rstd};
}

Val prim_rotate_half(Val x) {
  const int64_t d = x.shape().dim(-1).value();
  return concat({-slice(x, -1, d / 2, d), slice(x, -1, 0, d / 2)}, -1);
}
Val prim_rope(Val x, Val cos, Val sin) {
  return x * cos + prim_rotate_half(x) * sin;
}
// The transpose rotation: rotate_half^T(z) = cat(z2, -z1).
Val prim_rope_inverse(Val x, Val cos, Val sin) {
  const Val z = x * sin;
  const int64_t d = x.shape().dim(-1).value();
  return x * cos + concat({slice(z, -1, d / 2, d), -slice(z, -1, 0, d / 2)}, -1);
}

// ---- Cases: one fused op and its primitive spelling over the same inputs ----

struct FusedCase {
  std::string name;
  std::vector<Dims> input_dims;
  std::vector<std::pair<double, double>> ranges;  // per input: values in [lo, hi)
  std::function<Ins(const Ins&)> fused;
  std::function<Ins(const Ins&)> primitive;
};

std::vector<FusedCase> cases() {
  const std::pair<double, double> unit{-1, 1}, wide{-4, 4}, weight{0.5, 1.5};
  std::vector<FusedCase> c;
  // C = 37: two 16-lane groups and a tail; C = 288: the `small` model's width.
  for (const Dims& x : {Dims{3, 5, 37}, Dims{7, 288}}) {
    const Dims w{x.back()};
    c.push_back({"rms_norm" + dims_to_string(x),
                 {x, w},
                 {unit, weight},
                 [](const Ins& in) {
                   const RmsNormResult r = rms_norm(in[0], in[1], kEps);
                   return Ins{r.y, r.rstd};
                 },
                 [](const Ins& in) {
                   const PrimNorm r = prim_rms_norm(in[0], in[1]);
                   return Ins{r.y, r.rstd};
                 }});
    c.push_back({"add_rms_norm" + dims_to_string(x),
                 {x, x, w},
                 {unit, unit, weight},
                 [](const Ins& in) {
                   const AddRmsNormResult r = add_rms_norm(in[0], in[1], in[2], kEps);
                   return Ins{r.sum, r.y, r.rstd};
                 },
                 [](const Ins& in) {
                   const Val s = in[0] + in[1];
                   const PrimNorm r = prim_rms_norm(s, in[2]);
                   return Ins{s, r.y, r.rstd};
                 }});
  }
  // 3 * 37: not a multiple of the 8-lane vectors; (2, 5, 768): the `small` model's FFN width.
  for (const Dims& x : {Dims{3, 37}, Dims{2, 5, 768}}) {
    c.push_back({"swiglu" + dims_to_string(x),
                 {x, x},
                 {wide, unit},
                 [](const Ins& in) { return Ins{swiglu(in[0], in[1])}; },
                 [](const Ins& in) { return Ins{silu(in[0]) * in[1]}; }});
  }
  // The packed form (the experts' gate-up output): F = 37, and F = 896 (mixtral-h256's experts,
  // more than one 512-element block per half).
  for (const Dims& x : {Dims{3, 74}, Dims{2, 3, 1792}}) {
    const int64_t f = x.back() / 2;
    c.push_back({"swiglu_packed" + dims_to_string(x),
                 {x},
                 {wide},
                 [](const Ins& in) { return Ins{swiglu_packed(in[0])}; },
                 [f](const Ins& in) {
                   return Ins{silu(slice(in[0], -1, 0, f)) * slice(in[0], -1, f, 2 * f)};
                 }});
  }
  // D = 8 and the `small` model's head dim 48 (h = 24, not a multiple of 16).
  for (const Dims& x : {Dims{2, 3, 7, 8}, Dims{1, 2, 5, 48}}) {
    const Dims table{x[2], x[3]};
    c.push_back({"rope" + dims_to_string(x),
                 {x, table, table},
                 {unit, unit, unit},
                 [](const Ins& in) { return Ins{rope(in[0], in[1], in[2])}; },
                 [](const Ins& in) { return Ins{prim_rope(in[0], in[1], in[2])}; }});
    c.push_back({"rope_inverse" + dims_to_string(x),
                 {x, table, table},
                 {unit, unit, unit},
                 [](const Ins& in) { return Ins{rope(in[0], in[1], in[2], /*inverse=*/true)}; },
                 [](const Ins& in) { return Ins{prim_rope_inverse(in[0], in[1], in[2])}; }});
  }
  return c;
}

std::vector<GraphInput> make_inputs(const FusedCase& c, DType dt, uint64_t seed) {
  std::vector<GraphInput> in;
  for (size_t i = 0; i < c.input_dims.size(); ++i) {
    in.push_back({"in" + std::to_string(i), random_tensor(dt, c.input_dims[i], seed + i,
                                                          c.ranges[i].first, c.ranges[i].second)});
  }
  return in;
}

TEST(FusedOps, ForwardEqualsPrimitiveSubgraph) {
  uint64_t seed = 100;
  for (const FusedCase& c : cases()) {
    for (DType dt : {DType::f32, DType::f64}) {
      const std::vector<GraphInput> in = make_inputs(c, dt, seed += 10);
      auto fused = run_graph(in, [&](Builder&, const Ins& v) { return c.fused(v); });
      auto prim = run_graph(in, [&](Builder&, const Ins& v) { return c.primitive(v); });
      const std::string what = c.name + " " + dtype_name(dt);
      ASSERT_TRUE(fused.ok()) << what << ": " << fused.status().to_string();
      ASSERT_TRUE(prim.ok()) << what << ": " << prim.status().to_string();
      ASSERT_EQ(fused->size(), prim->size());
      for (size_t k = 0; k < fused->size(); ++k) {
        // The fused kernels evaluate the primitives' formulas in the same order and dtype, so
        // they differ at most where the compiler contracts a multiply-add into one FMA. Observed:
        // rms_norm, add_rms_norm and swiglu bitwise equal in f32; rope f32 max abs 1.2e-7 (one
        // ulp of outputs below 2); f64 max abs 8.9e-16. Bounds: about 16 ulp of outputs of
        // size <= 2 in f32 (2e-6), 4e-15 in f64, plus a 2-ulp relative term.
        expect_close((*fused)[k], (*prim)[k], by_dtype(dt, 2e-6, 4e-15),
                     by_dtype(dt, 2.4e-7, 4.5e-16), what + " output " + std::to_string(k));
      }
    }
  }
}

// Builds loss = sum_k sum(out_k * r_k) over a case's outputs and returns the gradient of every
// case input (in order), through append_gradients.
Ins gradients(Builder& b, const Ins& in, size_t num_case_inputs,
              const std::function<Ins(const Ins&)>& f) {
  const Ins case_in(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(num_case_inputs));
  const Ins out = f(case_in);
  Val loss;
  for (size_t k = 0; k < out.size(); ++k) {
    const Val term = sum(out[k] * in[num_case_inputs + k], {});
    loss = loss.valid() ? loss + term : term;
  }
  if (!b.ok()) return {};
  std::vector<ValueId> wrt;
  for (const Val& v : case_in) wrt.push_back(v.id);
  auto grads = append_gradients(&b.graph(), loss.id, wrt);
  if (!grads.ok()) {
    b.fail(grads.status());
    return {};
  }
  Ins result;
  for (ValueId g : *grads) result.push_back(b.val(g));
  return result;
}

TEST(FusedOps, GradientsEqualPrimitiveSubgraph) {
  uint64_t seed = 500;
  for (const FusedCase& c : cases()) {
    for (DType dt : {DType::f32, DType::f64}) {
      std::vector<GraphInput> in = make_inputs(c, dt, seed += 10);
      const size_t n = in.size();
      // One random cotangent per output; rstd is saved state, not a value the loss reads.
      auto fwd = run_graph(in, [&](Builder&, const Ins& v) { return c.fused(v); });
      ASSERT_TRUE(fwd.ok()) << c.name << ": " << fwd.status().to_string();
      const bool has_rstd = c.name.find("rms_norm") != std::string::npos;
      const size_t num_out = fwd->size() - (has_rstd ? 1 : 0);
      for (size_t k = 0; k < num_out; ++k) {
        in.push_back({"r" + std::to_string(k), random_tensor(dt, (*fwd)[k].dims, seed + 100 + k)});
      }
      auto drop_rstd = [&](const std::function<Ins(const Ins&)>& f) {
        return [f, num_out](const Ins& v) {
          Ins out = f(v);
          out.resize(num_out);
          return out;
        };
      };
      const auto fused_f = drop_rstd(c.fused);
      const auto prim_f = drop_rstd(c.primitive);
      auto fused =
          run_graph(in, [&](Builder& b, const Ins& v) { return gradients(b, v, n, fused_f); });
      auto prim =
          run_graph(in, [&](Builder& b, const Ins& v) { return gradients(b, v, n, prim_f); });
      const std::string what = c.name + " " + dtype_name(dt) + " gradient";
      ASSERT_TRUE(fused.ok()) << what << ": " << fused.status().to_string();
      ASSERT_TRUE(prim.ok()) << what << ": " << prim.status().to_string();
      ASSERT_EQ(fused->size(), n);
      ASSERT_EQ(prim->size(), n);
      for (size_t k = 0; k < n; ++k) {
        // Different but equivalent algebra (the fused backward folds the norm's two terms into
        // one pass and sums dw per block of rows in f64; the primitives' VJPs go through
        // broadcasts and sum_to), each rounding a few times, more where terms cancel (dx of
        // rms_norm is a difference of two O(1) terms). Observed: f32 max abs 2.4e-7 (dx of the
        // norms, gates of swiglu, x of rope), f64 max abs 1.8e-15; dw, dup, dcos and dsin equal.
        // Bounds: 8x that, 2e-6 (f32) and 1.5e-14 (f64) absolute, with a relative term of 1e-5 /
        // 1e-13 for the larger gradients.
        expect_close((*fused)[k], (*prim)[k], by_dtype(dt, 2e-6, 1.5e-14),
                     by_dtype(dt, 1e-5, 1e-13), what + " of input " + std::to_string(k));
      }
    }
  }
}

// Every fused kernel is a pure function of its inputs: 1, 2 and 3 threads give the same bits.
// Shapes are large enough that every kernel splits its rows across threads (rms_norm_backward:
// 600 rows make 10 blocks of dw partials).
TEST(FusedOps, ThreadCountDoesNotChangeResults) {
  for (DType dt : {DType::f32, DType::f64}) {
    const std::vector<GraphInput> in = {
        {"x", random_tensor(dt, {600, 96}, 1)},      {"r", random_tensor(dt, {600, 96}, 2)},
        {"w", random_tensor(dt, {96}, 3, 0.5, 1.5)}, {"dy", random_tensor(dt, {600, 96}, 4)},
        {"t", random_tensor(dt, {6, 100, 96}, 5)},   {"cos", random_tensor(dt, {100, 96}, 6)},
        {"sin", random_tensor(dt, {100, 96}, 7)},
    };
    const BuildFn build = [](Builder&, const Ins& v) {
      const AddRmsNormResult a = add_rms_norm(v[0], v[1], v[2], kEps);
      const RmsNormResult n = rms_norm(v[0], v[2], kEps);
      const RmsNormGrads g = rms_norm_backward(v[3], a.sum, v[2], a.rstd, v[1]);
      const SwigluGrads s = swiglu_backward(v[3], v[0], v[1]);
      return Ins{a.sum,
                 a.y,
                 a.rstd,
                 n.y,
                 n.rstd,
                 g.dx,
                 g.dw,
                 swiglu(v[0], v[1]),
                 s.dgate,
                 s.dup,
                 rope(v[4], v[5], v[6]),
                 rope(v[4], v[5], v[6], true)};
    };
    std::vector<std::vector<RefTensor>> runs;
    for (int threads : {1, 2, 3}) {
      auto r = run_graph(in, build, RunOptions{.threads = threads, .check_repeat = true});
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      runs.push_back(std::move(*r));
    }
    for (size_t t = 1; t < runs.size(); ++t) {
      for (size_t k = 0; k < runs[0].size(); ++k) {
        EXPECT_EQ(runs[t][k].data, runs[0][k].data)
            << dtype_name(dt) << " output " << k << " differs at " << t + 1 << " threads";
      }
    }
  }
}

// A gradient on the saved rstd is refused with a message, not dropped.
TEST(FusedOps, GradientOnRstdIsRefused) {
  Graph g;
  Builder b(&g);
  const Val x = b.param("x", DType::f32, Shape{4, 8});
  const Val w = b.param("w", DType::f32, Shape{8});
  const RmsNormResult r = rms_norm(x, w, kEps);
  const Val loss = sum(r.y, {}) + sum(r.rstd, {});
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const std::vector<ValueId> wrt{x.id, w.id};
  auto grads = append_gradients(&g, loss.id, wrt);
  ASSERT_FALSE(grads.ok());
  EXPECT_NE(grads.status().message().find("rstd"), std::string::npos) << grads.status().to_string();
}

// The shape rules refuse what the fused ops do not take (no broadcasting, odd D, wrong w).
TEST(FusedOps, ShapeRulesRefuseMismatches) {
  Graph g;
  Builder b(&g);
  const Val x = b.input("x", DType::f32, Shape{Dim::sym('B'), 4, 6});
  const Val w5 = b.input("w5", DType::f32, Shape{5});
  const Val row = b.input("row", DType::f32, Shape{1, 4, 6});
  const Val odd = b.input("odd", DType::f32, Shape{2, 3, 5});
  const Val table = b.input("table", DType::f32, Shape{3, 5});
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(rms_norm(x, w5, kEps).y.valid());
  EXPECT_NE(b.status().message().find("w must be (C)"), std::string::npos) << b.status().message();
  Builder b2(&g);
  EXPECT_FALSE(swiglu(b2.val(x.id), b2.val(row.id)).valid());
  EXPECT_NE(b2.status().message().find("same dtype and shape"), std::string::npos);
  Builder b3(&g);
  EXPECT_FALSE(rope(b3.val(odd.id), b3.val(table.id), b3.val(table.id)).valid());
  EXPECT_NE(b3.status().message().find("even"), std::string::npos) << b3.status().message();
}

}  // namespace
}  // namespace lj::test
