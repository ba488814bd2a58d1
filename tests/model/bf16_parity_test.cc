// Tier 3: bf16 mixed precision against PyTorch (fixtures by tools/ref/make_bf16_fixtures.py), in
// two parts.
//
// 1. Checks an f32 run fails (Bf16Ops, Bf16Logits, at the end of this file): torch's bf16 results
//    on fixed inputs (GEMMs, the fused rms_norm, swiglu and rope kernels, and each HF fixture's
//    step-0 logits with ljperf's cast placement) against ljperf's, bitwise or within one bf16 ulp,
//    with the share of bitwise-equal values asserted. Each also feeds the f32 path through the
//    same check and requires it to fail.
//
// 2. The trajectory, a sanity bound (Bf16Parity): transformers trained each HF fixture model for
//    10 AdamW steps under torch.autocast("cpu", dtype=torch.bfloat16) with fp32 master weights,
//    and once more in f32; ljperf trains the same model from the same weights and batch with
//    --precision bf16 (passes/autocast) and in f32, and the losses of every step and the
//    parameters' norms after the 10 steps are compared. These bounds are loose enough that torch's
//    own f32 trajectory would pass them (issue 36): they catch a bf16 run that diverges, not one
//    that is secretly f32.
//
// What the trajectory's tolerances rest on (errors observed on this host, oneDNN on
// avx512_core_amx, printed by the test):
//   - ljperf f32 against torch f32: every step within 9.7e-7 relative. The f32 trajectory is the
//     anchor: the bf16 checks below compare two bf16 perturbations of this same trajectory.
//   - Step 0 (identical weights: forward rounding only): bf16 unit roundoff is u = 2^-9 (8
//     significant bits, round to nearest); each rounding of a logit moves it by at most u
//     relative, and the mean over 31 token losses averages independent roundings. Observed at most
//     9.0e-5; the bound is u/4 = 4.9e-4.
//   - Later steps: AdamW divides by sqrt(v), so its first updates are lr x sign(g) per element: a
//     bf16 rounding that flips a near-zero gradient entry moves that weight by 2 lr, and two bf16
//     implementations separate along the trajectory by about as much as bf16 does from f32.
//     transformers' own bf16-vs-f32 gap at step s (in the fixture) measures that sensitivity:
//     up to 5.4e-2 (tied, step 5). The per-step bound is 2^-5 (four bf16 ulps of a loss in
//     [2, 4), relative) plus that gap; observed worst 3.9e-2 against a bound of 8.5e-2 (tied,
//     compiled, step 5), elsewhere at most 2.8e-2 against 4.4e-2 (qwen2, eager, step 6).
//   - The mean over the 10 steps of the relative difference: bound 2^-6 = 1.6e-2, observed at
//     most 7.7e-3 (qwen3, compiled); 8.3e-3 (qwen3 and qwen2_window, eager) since the bf16
//     attention multiplies P rounded to bf16 (session 23; rounding dS as well read 1.66e-2 on
//     qwen3 eager, so dS stays f32). The parameter norms after 10 steps: bound 2^-6, observed
//     at most 1.3e-2 (qwen2_window, eager, v_proj), 1.51e-2 since (its v_proj.bias; the same
//     trajectory's chaos as the k_proj.bias below, smaller), except Qwen2's k_proj.bias: its
//     gradient is rounding noise where RoPE barely turns (hf_parity_test.cc says why), so after 10
//     AdamW steps its norm is a sum of lr-sized steps of random sign, in f32 (6.1e-5 from torch) as
//     in bf16 (7.7e-2): printed, not bounded.
// ljperf places casts as DeepSpeed's bf16 does (the residual stream, norms' outputs and rope are
// bf16; passes/autocast), torch's autocast keeps the residual stream in f32: that difference is
// bf16 rounding too and sits inside these bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <tuple>

#include "graph/builder_fused.h"
#include "model/hf_fixture.h"
#include "ops/op_test_util.h"
#include "train/lr_schedule.h"
#include "train/train_step.h"

namespace lj {
namespace {

using testing_util::HfFixture;

struct TrainRun {
  std::vector<double> losses;
  std::vector<double> norms;  // per parameter, param_specs order
  std::vector<std::string> names;
  int64_t bf16_values = 0;  // values of dtype bf16 in the joint graph
};

double rel(double got, double ref) {
  return std::fabs(got - ref) / std::fabs(ref);
}

// (fixture, compile)
class Bf16Parity : public ::testing::TestWithParam<std::tuple<std::string, bool>> {
 protected:
  static std::string fixture() { return std::get<0>(GetParam()); }
  static bool compiled() { return std::get<1>(GetParam()); }
  static std::string label() { return fixture() + (compiled() ? "/compiled" : "/eager"); }

  // 10 steps of ljperf from the fixture's initial weights, in f32 or bf16 mixed precision.
  TrainRun train(const HfFixture& init, const nlohmann::json& hp, DType autocast) {
    TrainRun run;
    Device dev(2);
    const LlamaConfig cfg = testing_util::fixture_config(init, fixture());
    TrainStepConfig tc;
    tc.graph.compile = compiled();
    tc.graph.autocast = autocast;
    tc.grad_clip = hp["grad_clip"].get<double>();
    tc.adamw.beta1 = hp["beta1"].get<double>();
    tc.adamw.beta2 = hp["beta2"].get<double>();
    tc.adamw.eps = hp["eps"].get<double>();
    tc.adamw.weight_decay = hp["weight_decay"].get<double>();
    auto t = TrainStep::create(cfg, tc, dev);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    if (!t.ok()) return run;
    auto& trainer = **t;
    for (const Value& v : trainer.graph().values()) run.bf16_values += v.type.dtype == DType::bf16;
    init.load_params(trainer);
    Tensor tokens, targets;
    init.batch(dev, &tokens, &targets);
    LrSchedule sched;
    sched.max_lr = hp["max_lr"].get<double>();
    sched.min_lr = hp["min_lr"].get<double>();
    sched.warmup_steps = hp["warmup_steps"].get<int64_t>();
    sched.total_steps = hp["total_steps"].get<int64_t>();
    for (int64_t s = 0; s < sched.total_steps; ++s) {
      auto r = trainer.step(tokens, targets, sched.at(s));
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      if (!r.ok()) return run;
      EXPECT_TRUE(r->updated) << "step " << s;
      run.losses.push_back(r->loss);
    }
    for (size_t i = 0; i < trainer.params().size(); ++i) {
      const Tensor& p = trainer.params()[i];
      double s2 = 0;
      for (int64_t k = 0; k < p.numel(); ++k) s2 += double(p.data<float>()[k]) * p.data<float>()[k];
      run.norms.push_back(std::sqrt(s2));
      run.names.push_back(trainer.param_specs()[i].name);
    }
    return run;
  }
};

TEST_P(Bf16Parity, TenStepsAgainstTorchAutocast) {
  HfFixture init(fixture() + ".safetensors");
  HfFixture ref(fixture() + ".bf16.safetensors");
  ASSERT_TRUE(init.ok() && ref.ok());
  const auto hp = nlohmann::json::parse(ref.metadata("train"));
  const auto torch_bf16 = ref.read("losses_bf16"), torch_f32 = ref.read("losses_f32");
  const TrainRun f32 = train(init, hp, DType::f32);
  const TrainRun bf16 = train(init, hp, DType::bf16);
  ASSERT_EQ(f32.losses.size(), torch_f32.size());
  ASSERT_EQ(bf16.losses.size(), torch_bf16.size());
  // The bf16 run did run in bf16 (else it would pass the checks below as the f32 run does).
  EXPECT_EQ(f32.bf16_values, 0);
  EXPECT_GT(bf16.bf16_values, 0);
  EXPECT_NE(bf16.losses[0], f32.losses[0]);
  double mean_rel = 0;
  for (size_t s = 0; s < torch_bf16.size(); ++s) {
    EXPECT_LT(rel(f32.losses[s], torch_f32[s]), 1e-5) << "f32, step " << s;
    const double gap = rel(torch_bf16[s], torch_f32[s]);
    const double bound = s == 0 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -5) + gap;
    EXPECT_LT(rel(bf16.losses[s], torch_bf16[s]), bound) << "bf16, step " << s;
    mean_rel += rel(bf16.losses[s], torch_bf16[s]) / static_cast<double>(torch_bf16.size());
    std::printf(
        "[%s] step %zu: torch bf16 %.6f ljperf bf16 %.6f (rel %.2e) | torch f32 %.6f ljperf f32 "
        "%.6f (rel %.2e) | torch bf16-f32 gap %.2e\n",
        label().c_str(), s, torch_bf16[s], bf16.losses[s],
        std::fabs(bf16.losses[s] - torch_bf16[s]) / torch_bf16[s], torch_f32[s], f32.losses[s],
        std::fabs(f32.losses[s] - torch_f32[s]) / torch_f32[s],
        std::fabs(torch_bf16[s] - torch_f32[s]) / torch_f32[s]);
  }
  EXPECT_LT(mean_rel, std::ldexp(1.0, -6));
  double worst_norm = 0;
  std::string worst_name;
  for (size_t i = 0; i < bf16.names.size(); ++i) {
    const double tb = ref.read("norm_bf16." + bf16.names[i])[0];
    const double tf = ref.read("norm_f32." + bf16.names[i])[0];
    if (bf16.names[i].ends_with("k_proj.bias")) {  // noise-level gradient: see the top
      std::printf("[%s] %s norm rel: f32 %.2e, bf16 %.2e (not bounded)\n", label().c_str(),
                  bf16.names[i].c_str(), rel(f32.norms[i], tf), rel(bf16.norms[i], tb));
      continue;
    }
    EXPECT_LT(rel(f32.norms[i], tf), 1e-5) << "f32 " << bf16.names[i];
    EXPECT_LT(rel(bf16.norms[i], tb), std::ldexp(1.0, -6)) << "bf16 " << bf16.names[i];
    if (rel(bf16.norms[i], tb) > worst_norm)
      worst_norm = rel(bf16.norms[i], tb), worst_name = bf16.names[i];
  }
  std::printf(
      "[%s] bf16: mean loss rel diff over 10 steps %.2e; worst parameter norm rel %.2e at %s\n",
      label().c_str(), mean_rel, worst_norm, worst_name.c_str());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Bf16Parity,
                         ::testing::Combine(::testing::Values("gqa_llama3", "tied", "head_dim",
                                                              "qwen2", "qwen2_window", "qwen3",
                                                              "mistral_window", "mixtral",
                                                              "qwen3_moe", "qwen3_moe_step"),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<Bf16Parity::ParamType>& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) ? "_compiled" : "_eager");
                         });

// ---------------------------------------------------------------------------------------------
// Known tensors against torch's bf16 results (bf16_ops.safetensors, tools/ref/make_bf16_fixtures.py
// says how each was made). The trajectory above cannot tell bf16 from f32; these can. torch's
// result on fixed bf16 inputs is a bf16 value, and ljperf's must be that value or, where the two
// round at different points, its neighbour on the bf16 grid; a given share must be bitwise equal.
// Each check also runs the f32 path through the same comparison and requires it to fail: a single
// op in f32 gives values off the bf16 grid; the f32 model's logits, even rounded to bf16, lack the
// intermediate roundings and match only 22-28% of torch's bf16 logits bitwise.

// x's place on the bf16 grid, in bf16 ulps: the f32 bit pattern as an ordered integer over 2^16
// (one bf16 ulp is 2^16 f32 ulps). Two bf16 values k ulps apart differ by k here; an f32 value
// off the grid lands between two integers.
double bf16_grid(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const double mag = static_cast<double>(u & 0x7fffffffu) / 65536.0;
  return (u >> 31) != 0 ? -mag : mag;
}

struct UlpStats {
  int64_t count = 0;
  int64_t exact = 0;      // bitwise equal (+0 and -0 equal)
  int64_t off_grid = 0;   // got is not a bf16 value
  int64_t over_one = 0;   // more than one bf16 ulp apart
  double max_ulps = 0.0;  // the largest distance, in bf16 ulps
  double exact_fraction() const { return count == 0 ? 0.0 : double(exact) / double(count); }
};

// Distances in bf16 ulps of want; where |want| < floor (a sum that cancelled), in ulps of floor.
UlpStats ulp_stats(std::span<const float> got, std::span<const float> want, double floor = 0.0) {
  UlpStats s;
  EXPECT_EQ(got.size(), want.size());
  const double floor_ulp = floor > 0 ? std::ldexp(1.0, std::ilogb(floor) - 7) : 0.0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    ++s.count;
    s.exact += got[i] == want[i];
    s.off_grid += bf16_to_f32(f32_to_bf16(got[i])) != got[i];
    const double d = std::fabs(want[i]) < floor
                         ? std::fabs(double(got[i]) - double(want[i])) / floor_ulp
                         : std::fabs(bf16_grid(got[i]) - bf16_grid(want[i]));
    s.over_one += d > 1.0;
    s.max_ulps = std::max(s.max_ulps, d);
  }
  return s;
}

std::string describe(const UlpStats& s) {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%lld values: %.2f%% bitwise equal, %lld more than 1 ulp apart (max %.2f ulps), "
                "%lld not bf16 values",
                static_cast<long long>(s.count), 100.0 * s.exact_fraction(),
                static_cast<long long>(s.over_one), s.max_ulps, static_cast<long long>(s.off_grid));
  return buf;
}

// What a check requires: every value a bf16 value, at most `max_ulps` from torch's, and at least
// `min_exact` of them bitwise equal.
struct Bound {
  double max_ulps = 1.0;
  double min_exact = 0.0;
};

::testing::AssertionResult matches_torch_bf16(const UlpStats& s, Bound b) {
  if (s.count > 0 && s.off_grid == 0 && s.max_ulps <= b.max_ulps &&
      s.exact_fraction() >= b.min_exact)
    return ::testing::AssertionSuccess() << describe(s);
  return ::testing::AssertionFailure() << describe(s) << "; want bf16 values within " << b.max_ulps
                                       << " ulp, " << 100.0 * b.min_exact << "% bitwise equal";
}

std::vector<float> as_floats(const test::RefTensor& t) {
  return std::vector<float>(t.data.begin(), t.data.end());
}

class Bf16Ops : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(ops_.ok()); }

  // The fixture's tensor as a RefTensor tagged `dtype` (its values are bf16 values).
  test::RefTensor input(const std::string& name, DType dtype) const {
    const SafetensorsEntry* e = ops_.file().find(name);
    EXPECT_NE(e, nullptr) << name;
    if (e == nullptr) return {};
    const std::vector<float> v = ops_.read(name);
    return test::RefTensor{dtype, e->shape, std::vector<double>(v.begin(), v.end())};
  }

  // Runs `build` twice: on the named inputs as the bf16 graph takes them (bf16, or f32 for rope's
  // tables) and on the same values all as f32. Checks both first outputs against torch's
  // `want_name` with ulp_stats(.., floor) and `bound`: the bf16 run must pass, the f32 run fail.
  void check(const std::string& what, const std::vector<std::pair<std::string, DType>>& inputs,
             const test::BuildFn& build, const std::string& want_name, Bound bound,
             double floor = 0.0) {
    std::vector<test::GraphInput> lo, hi;
    for (const auto& [name, dtype] : inputs) {
      lo.push_back({name, input(name, dtype)});
      hi.push_back({name, input(name, DType::f32)});
    }
    const std::vector<float> want = ops_.read(want_name);
    auto got = test::run_graph(lo, build);
    auto got_f32 = test::run_graph(hi, build);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_TRUE(got_f32.ok()) << got_f32.status().to_string();
    EXPECT_EQ((*got)[0].dtype, DType::bf16) << what;
    const UlpStats s = ulp_stats(as_floats((*got)[0]), want, floor);
    const UlpStats f = ulp_stats(as_floats((*got_f32)[0]), want, floor);
    std::printf("[%s] bf16: %s\n[%s] f32 on the same inputs: %s\n", what.c_str(),
                describe(s).c_str(), what.c_str(), describe(f).c_str());
    EXPECT_TRUE(matches_torch_bf16(s, bound)) << what << " (bf16)";
    EXPECT_FALSE(matches_torch_bf16(f, bound)) << what << " (the f32 path must fail)";
  }

  HfFixture ops_{"bf16_ops.safetensors"};
};

// torch's F.linear on bf16 operands (oneDNN, f32 accumulation, one rounding). A bf16 GEMM may
// accumulate in another order (an f32 FMA kernel on widened operands); an order can flip an
// output's rounding by one ulp. In torch on these inputs, f32 sums in four orders (sgemm, k
// reversed, 16-wide k blocks, sequential k) flip none; on an earlier, larger draw k reversed
// flipped 1 of 6144 (K = 288) and 1 of 2048 (K = 1024). Observed here (oneDNN): 100% bitwise.
// Bound: within one ulp, 99% bitwise. The f32 GEMM's outputs are off the grid (0% bitwise).
TEST_F(Bf16Ops, Gemms) {
  const auto gemms = nlohmann::json::parse(ops_.metadata("gemms"));
  for (size_t i = 0; i < gemms.size(); ++i) {
    const std::string g = "gemm" + std::to_string(i);
    check(g + " (M, K, N) " + gemms[i].dump(), {{g + ".x", DType::bf16}, {g + ".w", DType::bf16}},
          [](Builder&, const std::vector<Val>& in) {
            return std::vector<Val>{matmul(in[0], in[1], false, true)};
          },
          g + ".y", {1.0, 0.99});
  }
}

// The fused kernels the compiled graph runs (each computes in f32 and rounds once); the eager
// graph's primitive chains are what the logits below check.
TEST_F(Bf16Ops, FusedRmsNormSwigluRope) {
  // torch's F.rms_norm on bf16 also rounds once. Observed: 100% bitwise; a sum of squares in
  // another order could flip a rounding: within one ulp, 99% bitwise.
  check("rms_norm", {{"rms_norm.x", DType::bf16}, {"rms_norm.w", DType::bf16}},
        [](Builder&, const std::vector<Val>& in) {
          return std::vector<Val>{rms_norm(in[0], in[1], 1e-5).y};
        },
        "rms_norm.y", {1.0, 0.99});
  // torch rounds silu(gate) before the product, the fused kernel only the product: observed
  // 73.2% bitwise, the rest one ulp apart. Bound: within one ulp, 50% bitwise.
  check("swiglu", {{"swiglu.gate", DType::bf16}, {"swiglu.up", DType::bf16}},
        [](Builder&, const std::vector<Val>& in) { return std::vector<Val>{swiglu(in[0], in[1])}; },
        "swiglu.y", {1.0, 0.5});
  // HF rounds x * cos, rotate_half(x) * sin and their sum; the fused kernel only the sum (cos
  // and sin cast to bf16 first, as HF does). Where the sum cancels, HF's two product roundings
  // (each up to 2^-9 for |x|, |cos| <= 1) dominate: distances below |want| = 0.5 are counted in
  // ulps of 0.5 (2^-8). Observed: 82.4% bitwise, at most 1 ulp. Bound: 1 ulp, 50% bitwise.
  check(
      "rope", {{"rope.x", DType::bf16}, {"rope.cos", DType::f32}, {"rope.sin", DType::f32}},
      [](Builder&, const std::vector<Val>& in) {
        const DType dt = in[0].type().dtype;
        return std::vector<Val>{rope(in[0], cast(in[1], dt), cast(in[2], dt))};
      },
      "rope.y", {1.0, 0.5}, 0.5);
}

// (fixture): the logits of the fixture's initial weights and batch at step 0, eager. torch's
// reference is the model cast to bf16 with ljperf's cast placement (bf16_logits in the script):
// every GEMM, norm, activation, RoPE and residual add rounded where ljperf's eager graph rounds.
// Observed: 100% bitwise on all seven fixtures (the reference's attention rounds the probabilities
// to bf16 for P V, as the kernel does since session 23; the former reference, which did not,
// matched 36.8% (qwen3) and 39.3% (mistral_window)). With the reference's GEMMs summing in f32 in
// another order (sgemm on widened operands, or k reversed), 99.98-100% bitwise and none more than
// one ulp apart (K <= 128 here). Bound: 95% bitwise, any distance (a rounding flipped by another
// accumulation order spreads through the layers). ljperf's f32 run rounded to bf16: 22.2-27.7%
// bitwise, 40-47% more than one ulp apart. The compiled graph fuses ops that round once (rms_norm,
// swiglu, rope, the residual add into the GEMM), so its logits differ from this reference by design
// (22-26% bitwise observed); its kernels are checked above, its training by the trajectory test.
class Bf16Logits : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16Logits, EagerMatchesTorchBitwise) {
  const std::string name = GetParam();
  HfFixture init(name + ".safetensors"), ops("bf16_ops.safetensors");
  ASSERT_TRUE(init.ok() && ops.ok());
  const std::vector<float> want = ops.read("logits." + name);
  auto logits = [&](DType autocast) -> std::vector<float> {
    Device dev(2);
    TrainStepConfig tc;
    tc.graph.autocast = autocast;
    tc.graph.output_logits = true;
    auto t = TrainStep::create(testing_util::fixture_config(init, name), tc, dev);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    if (!t.ok()) return {};
    init.load_params(**t);
    Tensor tokens, targets;
    init.batch(dev, &tokens, &targets);
    auto fb = (*t)->forward_backward(tokens, targets);
    EXPECT_TRUE(fb.ok()) << fb.status().to_string();
    if (!fb.ok()) return {};
    std::vector<float> v;
    for (double x : fb->logits.to_doubles()) v.push_back(static_cast<float>(x));
    return v;
  };
  const std::vector<float> bf16 = logits(DType::bf16);
  std::vector<float> f32_rounded = logits(DType::f32);
  for (float& x : f32_rounded) x = bf16_to_f32(f32_to_bf16(x));
  const UlpStats s = ulp_stats(bf16, want), f = ulp_stats(f32_rounded, want);
  std::printf("[%s] ljperf bf16 logits: %s\n[%s] ljperf f32 logits rounded to bf16: %s\n",
              name.c_str(), describe(s).c_str(), name.c_str(), describe(f).c_str());
  const Bound bound{std::numeric_limits<double>::infinity(), 0.95};
  EXPECT_TRUE(matches_torch_bf16(s, bound)) << name << " (bf16)";
  EXPECT_FALSE(matches_torch_bf16(f, bound)) << name << " (the f32 run must fail)";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Bf16Logits,
                         ::testing::Values("gqa_llama3", "tied", "head_dim", "qwen2",
                                           "qwen2_window", "qwen3", "mistral_window"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace lj
