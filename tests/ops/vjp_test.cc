// Tier-2 VJP tests: every differentiable op of the op table against central finite differences in
// f64 (gradcheck.h), table-driven, plus a test that fails when a differentiable op has no case.
//
// Tolerances: each case's `tol` bounds gradcheck's error |analytic - fd| / max(|analytic|, |fd|,
// 1e-3). With h = 1e-6 in f64 the difference quotient carries a truncation error of about
// h^2 |f'''| / 6 ~ 1e-13 and a rounding error of about 1e-16 |loss| / h ~ 1e-10 |loss|; our
// losses are O(1..10), so |analytic - fd| up to ~2e-9 (observed max 2.3e-9), which the 1e-3
// floor turns into a relative error up to ~2e-6 for tiny gradients (observed max 1.1e-6, in
// sdpa_gqa_causal_t37 at a gradient of 2.5e-4). A wrong rule (a sign, a missing broadcast sum,
// a dropped term) shows errors of order 1. The default bound 1e-5 (gradcheck.h) is 10x above
// the noise and 1e5x below a real bug; cases with another bound say why. Observed maxima are
// printed per case ("[gradcheck] ...") and noted above each group (2-thread CPU run).
#include <cstdio>
#include <set>

#include <gtest/gtest.h>

#include "backends/host_callback.h"
#include "gradcheck.h"
#include "graph/autodiff/vjp.h"
#include "graph/builder_fused.h"
#include "graph/builder_moe.h"
#include "op_test_util.h"

namespace lj::test {
namespace {

using Dims = std::vector<int64_t>;
using Ins = std::vector<Val>;

// An f64 differentiable input with values in [lo, hi).
GradInput x_in(const std::string& name, Dims dims, uint64_t seed, double lo = -1, double hi = 1) {
  return GradInput{name, random_tensor(DType::f64, std::move(dims), seed, lo, hi), true};
}

// An f64 input whose values are pairwise distinct by at least 0.05 (so max has no ties and a
// step of h cannot change the argmax).
GradInput distinct_in(const std::string& name, Dims dims, uint64_t seed) {
  RefTensor t = ref::zeros(DType::f64, std::move(dims));
  const int64_t n = t.numel();
  const RefTensor jitter = random_tensor(DType::f64, t.dims, seed, 0, 0.04);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t rank = (i * 7 + seed) % n;  // a permutation when gcd(7, n) == 1
    t[i] = 0.1 * static_cast<double>(rank - n / 2) + jitter[i];
  }
  return GradInput{name, t, true};
}

// A non-differentiable integer (or u8) input.
GradInput int_in(const std::string& name, DType dt, Dims dims, std::vector<double> values) {
  return GradInput{name, make_tensor(dt, std::move(dims), std::move(values)), false};
}

GradCase unary_case(const std::string& name, Op op, double lo, double hi, double exponent = 0) {
  return GradCase{name, {x_in("x", {3, 7}, 11, lo, hi)}, [op, exponent](Builder&, const Ins& in) {
                    Val x = in[0];
                    switch (op) {
                      case Op::neg:
                        return Ins{neg(x)};
                      case Op::exp:
                        return Ins{exp(x)};
                      case Op::log:
                        return Ins{log(x)};
                      case Op::sqrt:
                        return Ins{sqrt(x)};
                      case Op::rsqrt:
                        return Ins{rsqrt(x)};
                      case Op::reciprocal:
                        return Ins{reciprocal(x)};
                      case Op::square:
                        return Ins{square(x)};
                      case Op::silu:
                        return Ins{silu(x)};
                      case Op::sigmoid:
                        return Ins{sigmoid(x)};
                      case Op::tanh:
                        return Ins{tanh(x)};
                      case Op::pow_scalar:
                        return Ins{pow(x, exponent)};
                      default:
                        LJ_CHECK(false) << op_name(op);
                    }
                    return Ins{};
                  }};
}

GradCase matmul_case(const std::string& name, Dims a, Dims b, bool ta, bool tb) {
  return GradCase{name,
                  {x_in("a", std::move(a), 21), x_in("b", std::move(b), 22)},
                  [ta, tb](Builder&, const Ins& in) { return Ins{matmul(in[0], in[1], ta, tb)}; }};
}

GradCase sdpa_case(const std::string& name, Dims q, Dims kv, bool causal, double scale) {
  return GradCase{name,
                  {x_in("q", q, 31), x_in("k", kv, 32), x_in("v", kv, 33)},
                  [causal, scale](Builder&, const Ins& in) {
                    // Multi-output op: only `out` enters the loss (lse is saved state).
                    return Ins{sdpa(in[0], in[1], in[2], causal, scale).out};
                  }};
}

std::vector<GradCase> make_cases() {
  std::vector<GradCase> c;
  // ---- Unary (observed max rel err 2e-8, pow_scalar_3 6e-7: FD noise at small x^2) ----
  c.push_back(unary_case("neg", Op::neg, -2, 2));
  c.push_back(unary_case("exp", Op::exp, -2, 2));
  c.push_back(unary_case("log_positive", Op::log, 0.5, 3));
  c.push_back(unary_case("sqrt_positive", Op::sqrt, 0.5, 3));
  c.push_back(unary_case("rsqrt_positive", Op::rsqrt, 0.5, 3));
  c.push_back(unary_case("reciprocal_positive", Op::reciprocal, 0.5, 3));
  c.push_back(unary_case("square", Op::square, -2, 2));
  c.push_back(unary_case("silu", Op::silu, -3, 3));
  c.push_back(unary_case("sigmoid", Op::sigmoid, -3, 3));
  c.push_back(unary_case("tanh", Op::tanh, -2, 2));
  c.push_back(unary_case("pow_scalar_3", Op::pow_scalar, -2, 2, 3.0));
  c.push_back(unary_case("pow_scalar_2", Op::pow_scalar, -2, 2, 2.0));
  c.push_back(unary_case("pow_scalar_half", Op::pow_scalar, 0.5, 3, 0.5));
  c.push_back(unary_case("pow_scalar_minus_1_5", Op::pow_scalar, 0.5, 3, -1.5));
  c.push_back(GradCase{"cast_f64_to_f64", {x_in("x", {4, 5}, 12)}, [](Builder&, const Ins& in) {
                         return Ins{cast(in[0], DType::f64)};
                       }});
  // Through f32 and back: the function is x rounded to f32, so the difference quotient needs
  // a large step (h = 1e-2; the function is linear, so no truncation error) and carries f32
  // rounding of x +- h, 6e-8 * |x| / 2h = 3e-6 for |x| <= 1 (observed 2.1e-6): tol 1e-4.
  {
    GradCase k{"cast_through_f32", {x_in("x", {4, 5}, 13)}, [](Builder&, const Ins& in) {
                 return Ins{cast(cast(in[0], DType::f32), DType::f64)};
               }};
    k.tol = 1e-4;
    k.h = 1e-2;
    c.push_back(k);
  }
  // ---- Binary with broadcasting (observed <= 5e-8) ----
  c.push_back(GradCase{"add_broadcast_4x1x3_5x3",
                       {x_in("a", {4, 1, 3}, 41), x_in("b", {5, 3}, 42)},
                       [](Builder&, const Ins& in) { return Ins{add(in[0], in[1])}; }});
  c.push_back(GradCase{"sub_broadcast_3x1_1x4",
                       {x_in("a", {3, 1}, 43), x_in("b", {1, 4}, 44)},
                       [](Builder&, const Ins& in) { return Ins{sub(in[0], in[1])}; }});
  c.push_back(GradCase{"mul_broadcast_2x3x4_3x1",
                       {x_in("a", {2, 3, 4}, 45), x_in("b", {3, 1}, 46)},
                       [](Builder&, const Ins& in) { return Ins{mul(in[0], in[1])}; }});
  c.push_back(GradCase{"mul_scalar_operand",
                       {x_in("a", {}, 47), x_in("b", {2, 5}, 48)},
                       [](Builder&, const Ins& in) { return Ins{mul(in[0], in[1])}; }});
  c.push_back(GradCase{"div_broadcast_3x4_4",
                       {x_in("a", {3, 4}, 49), x_in("b", {4}, 50, 0.5, 2.0)},
                       [](Builder&, const Ins& in) { return Ins{div(in[0], in[1])}; }});
  // where: the u8 condition is not differentiable; a and b broadcast differently.
  c.push_back(GradCase{
      "where_broadcast",
      {int_in("cond", DType::u8, {4, 1}, {1, 0, 0, 1}), x_in("a", {4, 5}, 51), x_in("b", {5}, 52)},
      [](Builder&, const Ins& in) { return Ins{where(in[0], in[1], in[2])}; }});
  // Fan-out: x reaches the loss three times; the contributions must be summed.
  c.push_back(GradCase{"fan_out_x_times_x_plus_exp_x",
                       {x_in("x", {3, 4}, 53)},
                       [](Builder&, const Ins& in) { return Ins{in[0] * in[0] + exp(in[0])}; }});
  // ---- Reductions, softmax (observed <= 3e-8) ----
  c.push_back(GradCase{"sum_axis1_keepdim",
                       {x_in("x", {3, 4, 5}, 61)},
                       [](Builder&, const Ins& in) { return Ins{sum(in[0], {1}, true)}; }});
  c.push_back(GradCase{"sum_all", {x_in("x", {3, 4, 5}, 62)}, [](Builder&, const Ins& in) {
                         return Ins{sum(in[0], {}, false)};
                       }});
  c.push_back(GradCase{"mean_axes_0_2", {x_in("x", {3, 4, 5}, 63)}, [](Builder&, const Ins& in) {
                         return Ins{mean(in[0], {0, 2}, false)};
                       }});
  c.push_back(GradCase{"mean_last_keepdim",
                       {x_in("x", {3, 4, 5}, 64)},
                       [](Builder&, const Ins& in) { return Ins{mean(in[0], {-1}, true)}; }});
  c.push_back(GradCase{"max_last_distinct",
                       {distinct_in("x", {3, 4, 5}, 65)},
                       [](Builder&, const Ins& in) { return Ins{max(in[0], {-1}, false)}; }});
  c.push_back(GradCase{"max_axis0_keepdim_distinct",
                       {distinct_in("x", {3, 4, 5}, 66)},
                       [](Builder&, const Ins& in) { return Ins{max(in[0], {0}, true)}; }});
  c.push_back(GradCase{"max_all_distinct",
                       {distinct_in("x", {4, 6}, 67)},
                       [](Builder&, const Ins& in) { return Ins{max(in[0], {}, false)}; }});
  c.push_back(GradCase{"softmax_axis1_of_3",
                       {x_in("x", {3, 4, 5}, 68, -2, 2)},
                       [](Builder&, const Ins& in) { return Ins{softmax(in[0], 1)}; }});
  c.push_back(GradCase{"softmax_last", {x_in("x", {4, 7}, 69, -2, 2)}, [](Builder&, const Ins& in) {
                         return Ins{softmax(in[0], -1)};
                       }});
  c.push_back(GradCase{"log_softmax_last",
                       {x_in("x", {4, 7}, 70, -2, 2)},
                       [](Builder&, const Ins& in) { return Ins{log_softmax(in[0], -1)}; }});
  c.push_back(GradCase{"log_softmax_axis0",
                       {x_in("x", {5, 3}, 71, -2, 2)},
                       [](Builder&, const Ins& in) { return Ins{log_softmax(in[0], 0)}; }});
  // ---- Matmul: every ta/tb combination, batched, a shared 2-D weight, broadcast batch
  // (observed <= 4e-8; broadcast batch 9.5e-7 at a near-zero gradient) ----
  c.push_back(matmul_case("matmul_nn", {5, 7}, {7, 3}, false, false));
  c.push_back(matmul_case("matmul_tn", {7, 5}, {7, 3}, true, false));
  c.push_back(matmul_case("matmul_nt", {5, 7}, {3, 7}, false, true));
  c.push_back(matmul_case("matmul_tt", {7, 5}, {3, 7}, true, true));
  c.push_back(matmul_case("matmul_batched", {2, 4, 6}, {2, 6, 3}, false, false));
  c.push_back(matmul_case("matmul_weight_2d_tb", {2, 5, 6}, {4, 6}, false, true));
  c.push_back(matmul_case("matmul_weight_2d_ta", {2, 6, 5}, {6, 4}, true, false));
  c.push_back(matmul_case("matmul_broadcast_batch", {2, 1, 3, 4}, {3, 4, 5}, false, false));
  // ---- Data movement (observed <= 3e-8) ----
  c.push_back(GradCase{"reshape", {x_in("x", {3, 4, 5}, 81)}, [](Builder&, const Ins& in) {
                         return Ins{reshape(in[0], Shape{12, Dim(-1)})};
                       }});
  c.push_back(GradCase{"permute_2_0_1", {x_in("x", {3, 4, 5}, 82)}, [](Builder&, const Ins& in) {
                         return Ins{permute(in[0], {2, 0, 1})};
                       }});
  c.push_back(GradCase{"slice_axis1", {x_in("x", {3, 5, 2}, 83)}, [](Builder&, const Ins& in) {
                         return Ins{slice(in[0], 1, 1, 3)};
                       }});
  c.push_back(
      GradCase{"concat_axis1_three",
               {x_in("a", {2, 3, 4}, 84), x_in("b", {2, 1, 4}, 85), x_in("c", {2, 2, 4}, 86)},
               [](Builder&, const Ins& in) {
                 return Ins{concat({in[0], in[1], in[2]}, 1)};
               }});
  c.push_back(GradCase{"expand_3x1_to_2x3x4", {x_in("x", {3, 1}, 87)}, [](Builder&, const Ins& in) {
                         return Ins{expand(in[0], Shape{2, 3, 4})};
                       }});
  // gather: the int ids are not differentiable; repeated ids accumulate.
  c.push_back(GradCase{"gather_repeated_ids",
                       {x_in("table", {6, 4}, 88),
                        int_in("ids", DType::i32, {2, 5}, {0, 3, 3, 5, 1, 3, 0, 2, 5, 5})},
                       [](Builder&, const Ins& in) { return Ins{gather(in[0], in[1])}; }});
  // grouped_matmul with an empty group (expert 1), both weight layouts; its weight gradient
  // (grouped_matmul_wgrad) and that op's own VJP through a second case.
  for (bool tb : {true, false}) {
    c.push_back(GradCase{
        std::string("grouped_matmul_") + (tb ? "tb" : "nt"),
        {x_in("x", {7, 4}, 90), x_in("w", tb ? Dims{3, 5, 4} : Dims{3, 4, 5}, 91),
         int_in("g", DType::i32, {3}, {3, 0, 4})},
        [tb](Builder&, const Ins& in) { return Ins{grouped_matmul(in[0], in[1], in[2], tb)}; }});
  }
  // Expert parallelism's receive capacity: 2 padding rows past the groups (zero out, no
  // gradient into w, zero gradient into them).
  c.push_back(GradCase{
      "grouped_matmul_padded_rows",
      {x_in("x", {7, 4}, 94), x_in("w", {3, 5, 4}, 95), int_in("g", DType::i32, {3}, {2, 0, 3})},
      [](Builder&, const Ins& in) { return Ins{grouped_matmul(in[0], in[1], in[2], true)}; }});
  // The exchange over a group of one rank (the CPU kernels' own case; dist tests run more):
  // dispatch and combine are each other's gradient.
  c.push_back(
      GradCase{"ep_dispatch_one_rank",
               {x_in("rows", {5, 3}, 96), int_in("g", DType::i32, {2}, {3, 2}),
                int_in("r", DType::i32, {2}, {3, 2})},
               [](Builder&, const Ins& in) { return Ins{ep_dispatch(in[0], in[1], in[2], 1)}; }});
  c.push_back(
      GradCase{"ep_combine_one_rank",
               {x_in("y", {5, 3}, 97), int_in("g", DType::i32, {2}, {1, 4}),
                int_in("r", DType::i32, {2}, {1, 4})},
               [](Builder&, const Ins& in) { return Ins{ep_combine(in[0], in[1], in[2], 1)}; }});
  c.push_back(GradCase{
      "grouped_matmul_wgrad",
      {x_in("a", {6, 3}, 92), x_in("b", {6, 5}, 93), int_in("g", DType::i32, {3}, {2, 4, 0})},
      [](Builder&, const Ins& in) { return Ins{grouped_matmul_wgrad(in[0], in[1], in[2])}; }});
  c.push_back(
      GradCase{"scatter_add_repeated_ids",
               {int_in("ids", DType::i64, {7}, {4, 0, 4, 2, 0, 4, 1}), x_in("src", {7, 3}, 89)},
               [](Builder&, const Ins& in) {
                 return Ins{scatter_add(in[0], in[1], Shape{5, 3})};
               }});
  // ---- Loss: labels not differentiable; ignore_index rows contribute nothing (observed
  // <= 4e-8) ----
  c.push_back(GradCase{"cross_entropy_ignore_rows",
                       {x_in("logits", {6, 5}, 91, -2, 2),
                        int_in("labels", DType::i32, {6}, {1, -100, 4, 0, -100, 2})},
                       [](Builder&, const Ins& in) { return Ins{cross_entropy(in[0], in[1])}; }});
  c.push_back(GradCase{
      "cross_entropy_custom_ignore",
      {x_in("logits", {5, 7}, 92, -2, 2), int_in("labels", DType::i64, {5}, {3, 6, 3, 0, 1})},
      [](Builder&, const Ins& in) { return Ins{cross_entropy(in[0], in[1], 3)}; }});
  // ---- Attention: GQA (H = 4, G = 2), T = 37 (not a multiple of a tile). Observed 1.1e-6
  // (causal), 1.3e-7 (non-causal), 1e-7 (MQA): FD noise at gradients of ~1e-4 ----
  c.push_back(sdpa_case("sdpa_gqa_causal_t37", {1, 4, 37, 8}, {1, 2, 37, 8}, true, 0.0));
  c.push_back(sdpa_case("sdpa_gqa_noncausal_t37", {1, 4, 37, 8}, {1, 2, 37, 8}, false, 0.0));
  c.push_back(sdpa_case("sdpa_mqa_tq5_tk9_scale", {2, 2, 5, 4}, {2, 1, 9, 4}, false, 0.3));
  // ---- Small subgraphs, as the model uses them (observed <= 8e-8) ----
  c.push_back(GradCase{
      "rmsnorm", {x_in("x", {3, 8}, 101), x_in("w", {8}, 102)}, [](Builder&, const Ins& in) {
        Val x = in[0];
        Val r = rsqrt(mean(square(x), {-1}, true) + 1e-5);
        return Ins{x * r * in[1]};
      }});
  // ---- Fused ops of pattern fusion (graph/builder_fused.h), cos and sin differentiated too;
  // add_rms_norm with both s and y in the loss, so the residual gradient joins the norm's
  // (observed <= 2.6e-7, swiglu; the others <= 1.7e-7) ----
  c.push_back(
      GradCase{"rms_norm_fused",
               {x_in("x", {2, 3, 12}, 111), x_in("w", {12}, 112, 0.5, 1.5)},
               [](Builder&, const Ins& in) { return Ins{rms_norm(in[0], in[1], 1e-5).y}; }});
  c.push_back(GradCase{
      "add_rms_norm_fused_sum_and_y",
      {x_in("x", {2, 3, 12}, 113), x_in("r", {2, 3, 12}, 114), x_in("w", {12}, 115, 0.5, 1.5)},
      [](Builder&, const Ins& in) {
        const AddRmsNormResult a = add_rms_norm(in[0], in[1], in[2], 1e-5);
        return Ins{a.sum, a.y};
      }});
  c.push_back(GradCase{"swiglu_fused",
                       {x_in("gate", {3, 13}, 116, -3, 3), x_in("up", {3, 13}, 117)},
                       [](Builder&, const Ins& in) { return Ins{swiglu(in[0], in[1])}; }});
  c.push_back(GradCase{"swiglu_packed_fused",
                       {x_in("x", {3, 26}, 124, -3, 3)},
                       [](Builder&, const Ins& in) { return Ins{swiglu_packed(in[0])}; }});
  c.push_back(
      GradCase{"rope_fused",
               {x_in("x", {2, 3, 5, 8}, 118), x_in("cos", {5, 8}, 119), x_in("sin", {5, 8}, 120)},
               [](Builder&, const Ins& in) { return Ins{rope(in[0], in[1], in[2])}; }});
  c.push_back(
      GradCase{"rope_inverse_fused",
               {x_in("x", {2, 3, 5, 8}, 121), x_in("cos", {5, 8}, 122), x_in("sin", {5, 8}, 123)},
               [](Builder&, const Ins& in) { return Ins{rope(in[0], in[1], in[2], true)}; }});
  c.push_back(GradCase{"linear_silu_cross_entropy",
                       {x_in("x", {4, 6}, 103), x_in("w", {5, 6}, 104),
                        int_in("labels", DType::i32, {4}, {0, 4, -100, 2})},
                       [](Builder&, const Ins& in) {
                         return Ins{cross_entropy(silu(matmul(in[0], in[1], false, true)), in[2])};
                       }});
  // ---- A host callback (opaque) with its own backward: y = x^3, dx = 3 x^2 dy, in f64.
  // Observed 2.1e-9 ----
  register_host_callback(
      "vjp_test_cube", HostCallback{[](const TensorView& x, TensorView& y) {
                                      for (int64_t i = 0; i < x.numel(); ++i) {
                                        const double v = x.as<double>()[i];
                                        y.as<double>()[i] = v * v * v;
                                      }
                                      return ok_status();
                                    },
                                    [](const TensorView& x, const TensorView& dy, TensorView& dx) {
                                      for (int64_t i = 0; i < x.numel(); ++i) {
                                        const double v = x.as<double>()[i];
                                        dx.as<double>()[i] = 3 * v * v * dy.as<double>()[i];
                                      }
                                      return ok_status();
                                    }});
  c.push_back(
      GradCase{"opaque_host_callback", {x_in("x", {3, 5}, 105)}, [](Builder&, const Ins& in) {
                 return Ins{opaque(in[0], "vjp_test_cube")};
               }});
  // ---- Fused ops of pattern fusion: linear_cross_entropy (chunk 3 does not divide N = 7;
  // ignored rows) and matmul_add (a linear layer with a residual; batched, a transposed).
  // Observed <= 1.5e-7 ----
  c.push_back(GradCase{"linear_cross_entropy_chunk3_ignore",
                       {x_in("x", {7, 5}, 111), x_in("w", {6, 5}, 112),
                        int_in("labels", DType::i32, {7}, {1, -100, 5, 0, 2, -100, 3})},
                       [](Builder&, const Ins& in) {
                         return Ins{linear_cross_entropy(in[0], in[1], in[2], -100, 3).loss};
                       }});
  c.push_back(GradCase{"linear_cross_entropy_auto_chunk_custom_ignore",
                       {x_in("x", {5, 4}, 113), x_in("w", {9, 4}, 114),
                        int_in("labels", DType::i64, {5}, {3, 8, 3, 0, 1})},
                       [](Builder&, const Ins& in) {
                         return Ins{linear_cross_entropy(in[0], in[1], in[2], 3).loss};
                       }});
  c.push_back(GradCase{
      "matmul_add_linear_residual",
      {x_in("a", {2, 5, 6}, 115), x_in("b", {4, 6}, 116), x_in("c", {2, 5, 4}, 117)},
      [](Builder&, const Ins& in) { return Ins{matmul_add(in[0], in[1], in[2], false, true)}; }});
  c.push_back(GradCase{
      "matmul_add_batched_ta",
      {x_in("a", {3, 7, 4}, 118), x_in("b", {3, 7, 5}, 119), x_in("c", {3, 4, 5}, 120)},
      [](Builder&, const Ins& in) { return Ins{matmul_add(in[0], in[1], in[2], true, false)}; }});
  return c;
}

const std::vector<GradCase>& grad_cases() {
  static const std::vector<GradCase> kCases = make_cases();
  return kCases;
}

class VjpTest : public ::testing::TestWithParam<size_t> {};

TEST_P(VjpTest, MatchesFiniteDifferences) {
  const GradCase& c = grad_cases()[GetParam()];
  GradResult r;
  const Status s = run_gradcheck(c, &r);
  ASSERT_TRUE(s.ok()) << c.name << ": " << s.to_string();
  std::printf("[gradcheck] %-34s max_rel %.2e  max_abs %.2e  (%lld elements)\n", c.name.c_str(),
              r.max_rel_err, r.max_abs_err, static_cast<long long>(r.elements_checked));
  EXPECT_GT(r.elements_checked, 0) << c.name;
  EXPECT_LE(r.max_rel_err, c.tol) << c.name << ": worst " << r.worst;
}

INSTANTIATE_TEST_SUITE_P(Ops, VjpTest, ::testing::Range<size_t>(0, grad_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return grad_cases()[info.param].name;
                         });

// Adding a differentiable op to the op table without a gradient check here fails this test.
TEST(VjpCoverage, EveryDifferentiableOpHasACase) {
  std::set<Op> covered;
  for (const GradCase& c : grad_cases()) {
    auto ops = case_ops(c);
    ASSERT_TRUE(ops.ok()) << c.name << ": " << ops.status().to_string();
    covered.insert(ops->begin(), ops->end());
  }
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    if (op_def(op).vjp == &vjp_none) continue;
    EXPECT_TRUE(covered.count(op)) << "differentiable op " << op_name(op)
                                   << " has no gradient-check case in tests/ops/vjp_test.cc";
  }
}

}  // namespace
}  // namespace lj::test
