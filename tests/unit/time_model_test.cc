// plan/time_model.h host_step_times and probe/host_rates.h: the CPU time model from measured
// rates. The rates here are made up (no timing in unit tests): what is checked is how the model
// prices a graph with them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "backends/cpu/gemm.h"
#include "backends/cpu/sgemm_avx512.h"
#include "models/config.h"
#include "plan/graph_figures.h"
#include "plan/host_plan.h"
#include "plan/time_model.h"
#include "probe/gemm_calls.h"
#include "probe/host_rates.h"
#include "probe/measured_ranking.h"
#include "unit/temp_cache_home.h"

namespace lj {
namespace {

HostRates made_up_rates() {
  HostRates r;
  r.threads = 1;
  // One class at 100 GFLOP/s, one at 50 (a different layout and a small K).
  r.gemm = {{1024, 1024, 1024, false, true, 2.0 * 1024 * 1024 * 1024 / 100e9},
            {1024, 1024, 64, false, false, 2.0 * 1024 * 1024 * 64 / 50e9}};
  r.attention_forward_flops = 80e9;
  r.attention_backward_flops = 100e9;
  r.pointwise = {{1e5, 40e9}, {1e7, 10e9}};
  r.pointwise_hot = {{1e5, 40e9}, {1e7, 10e9}};  // as cold: no cache effect unless a test says
  r.movement_bandwidth = 8e9;
  r.reduction_bandwidth = 12e9;
  r.loss_bandwidth = 9e9;
  r.optimizer_bandwidth = 16e9;
  r.kernel_seconds = 2e-6;
  return r;
}

LlamaConfig tiny() {
  auto m = llama_preset("tiny");
  EXPECT_TRUE(m.ok());
  return *m;
}

StepTimes priced(const LlamaConfig& model, RecomputePolicy p, int64_t layers, HostRates* rates) {
  GraphOptions o;
  o.recompute.policy = p;
  o.recompute.method =
      p == RecomputePolicy::none ? RecomputeMethod::uniform : RecomputeMethod::block;
  o.recompute.layers = p == RecomputePolicy::none ? -1 : layers;
  DryRunOptions dry;
  dry.rates = rates;
  auto f = graph_figures(model, 2, 64, o, dry);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_TRUE(f->times.has_value());
  EXPECT_DOUBLE_EQ(f->compute_seconds, f->times->total());
  return *f->times;
}

TEST(HostRatesTest, GemmClassesScaleByFlopsAndCapTheirDims) {
  const HostRates r = made_up_rates();
  // The measured class itself, and twice its M (capped at 2048: same class, twice the FLOPs).
  EXPECT_DOUBLE_EQ(r.gemm_seconds({1024, 1024, 1024, false, true}), r.gemm[0].seconds);
  EXPECT_DOUBLE_EQ(r.gemm_seconds({2048, 1024, 1024, false, true}), 2 * r.gemm[0].seconds);
  EXPECT_EQ(gemm_class({8192, 100, 4096, true, false}).m, kGemmClassCap);
  EXPECT_EQ(gemm_class({8192, 100, 4096, true, false}).n, 100);
  EXPECT_EQ(gemm_class({8192, 100, 4096, true, false}).k, kGemmClassCap);
  // Not measured: the nearest class in log distance; a small-K GEMM takes the 50 GFLOP/s class.
  const double small_k = r.gemm_seconds({1024, 1024, 48, false, false});
  EXPECT_NEAR(2.0 * 1024 * 1024 * 48 / small_k, 50e9, 1e3);
  const double square = r.gemm_seconds({900, 1000, 1100, false, true});
  EXPECT_NEAR(2.0 * 900 * 1000 * 1100 / square, 100e9, 1e3);
  HostRates none;
  EXPECT_EQ(none.gemm_seconds({64, 64, 64, false, false}), 0);
}

TEST(HostRatesTest, NearestClassIsOneTheShapesOwnGemmRuns) {
  // A weight gradient aᵀb that ljperf's own GEMM takes on an AVX-512 host (gemm.h): the nearest
  // class in log distance is oneDNN's (N = 96, another layout: distance 2.2), the own GEMM's
  // class is further (about 3.1). It prices by the class its own GEMM ran.
  const GemmSample dw{768, 288, 2048, true, false, 0};
  const double dims = 2.0 * 768 * 288 * 2048, own_class = 2.0 * 2048 * 1024 * 1024,
               onednn_class = 2.0 * 768 * 96 * 2048;
  HostRates r;
  r.gemm = {{768, 96, 2048, false, false, onednn_class / 100e9},
            {2048, 1024, 1024, true, false, own_class / 200e9}};
  ASSERT_FALSE(cpu::gemm_uses_own_sgemm(false, false, 768, 96, 2048, false));
  ASSERT_TRUE(cpu::sgemm_avx512_chosen(true, false, 2048, 1024, 1024, false));
  const bool own = cpu::gemm_uses_own_sgemm(dw.ta, dw.tb, dw.m, dw.n, dw.k, false);
  EXPECT_NEAR(dims / r.gemm_seconds(dw), own ? 200e9 : 100e9, 1e3) << "own GEMM here: " << own;
  // Only other-GEMM classes: the nearest of them still prices it (never 0).
  r.gemm.resize(1);
  EXPECT_NEAR(dims / r.gemm_seconds(dw), 100e9, 1e3);
}

TEST(HostRatesTest, Bf16GemmsAndAttentionTakeTheirOwnRates) {
  // issue 36: a bf16 step was priced at the f32 rates (small bf16 predicted 716 ms against 352).
  HostRates r = made_up_rates();
  const double sq = 2.0 * 1024 * 1024 * 1024;
  EXPECT_FALSE(r.gemm_seconds({1024, 1024, 1024, false, true, 0, true}) == 0);  // none: f32's
  {
    // Which f32 class is nearest depends on the host: a class another GEMM runs (ljperf's own
    // bf16 GEMM on an AVX512_BF16 host, oneDNN's f32 one) is further (seen on AMD EPYC,
    // 2026-12-04: the 50 GFLOP/s class). With one f32 class, that one.
    HostRates one = r;
    one.gemm.resize(1);
    EXPECT_NEAR(sq / one.gemm_seconds({1024, 1024, 1024, false, true, 0, true}), 100e9, 1e3);
  }
  r.gemm.push_back({1024, 1024, 1024, false, true, sq / 400e9, true});
  EXPECT_NEAR(sq / r.gemm_seconds({1024, 1024, 1024, false, true, 0, true}), 400e9, 1e3);
  EXPECT_NEAR(sq / r.gemm_seconds({1024, 1024, 1024, false, true}), 100e9, 1e3);  // f32 kept
  // A bf16 shape nearer an f32 class still takes the bf16 one.
  const double small_k = 2.0 * 1024 * 1024 * 64;
  EXPECT_NEAR(small_k / r.gemm_seconds({1024, 1024, 64, false, false, 0, true}), 400e9, 1e3);
  EXPECT_NEAR(small_k / r.gemm_seconds({1024, 1024, 64, false, false}), 50e9, 1e3);
  EXPECT_TRUE(gemm_class({4096, 8, 8, false, false, 0, true}).bf16);
  // Attention: bf16's rates where measured, else f32's.
  EXPECT_DOUBLE_EQ(r.attention_flops(false, true), 80e9);
  r.attention_bf16_forward_flops = 150e9;
  r.attention_bf16_backward_flops = 160e9;
  EXPECT_DOUBLE_EQ(r.attention_flops(false, true), 150e9);
  EXPECT_DOUBLE_EQ(r.attention_flops(true, true), 160e9);
  EXPECT_DOUBLE_EQ(r.attention_flops(true, false), 100e9);
  // calibrate measures every class in both dtypes.
  int bf16 = 0;
  for (const GemmSample& g : gemm_shapes()) bf16 += g.bf16;
  EXPECT_EQ(2 * bf16, static_cast<int>(gemm_shapes().size()));
}

TEST(HostRatesTest, ProbeRunsTakeTheMedianNotTheBest) {
  EXPECT_DOUBLE_EQ(median_of({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median_of({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(median_of({1.5, 9.0, 1.0, 1.2, 1.1}), 1.2);  // one contended run
  EXPECT_DOUBLE_EQ(median_of({0.7}), 0.7);
  EXPECT_DOUBLE_EQ(median_of({}), 0.0);
}

TEST(HostRatesTest, GemmClassKeepsTheShapesGemm) {
  // Capping dims at kGemmClassCap must not move a shape between ljperf's GEMM and oneDNN's
  // (sgemm_avx512_chosen is the shape rule gemm.h applies on AVX-512 hosts).
  const int64_t dims[] = {1, 96, 127, 128, 255, 256, 288, 1024, 1025, 2048, 2049, 4096, 32000};
  int chosen = 0, cases = 0;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int64_t m : dims)
        for (int64_t n : dims)
          for (int64_t k : dims) {
            const GemmSample c = gemm_class({m, n, k, ta == 1, tb == 1, 0});
            const bool s = cpu::sgemm_avx512_chosen(ta == 1, tb == 1, m, n, k, false);
            ASSERT_EQ(cpu::sgemm_avx512_chosen(c.ta, c.tb, c.m, c.n, c.k, false), s)
                << m << " x " << n << " x " << k << " ta " << ta << " tb " << tb;
            chosen += s;
            ++cases;
          }
  EXPECT_GT(chosen, 0);
  EXPECT_LT(chosen, cases);
}

TEST(HostRatesTest, PointwiseBandwidthIsLogLinearBetweenSamples) {
  const HostRates r = made_up_rates();
  EXPECT_DOUBLE_EQ(r.pointwise_bandwidth(1e5), 40e9);
  EXPECT_DOUBLE_EQ(r.pointwise_bandwidth(1e7), 10e9);
  EXPECT_NEAR(r.pointwise_bandwidth(1e6), 25e9, 1);  // log-midpoint: the mean
  EXPECT_DOUBLE_EQ(r.pointwise_bandwidth(10), 40e9);
  EXPECT_DOUBLE_EQ(r.pointwise_bandwidth(1e12), 10e9);
}

TEST(HostRatesTest, JsonRoundTripAndRefusals) {
  const HostRates r = made_up_rates();
  auto back = host_rates_from_json(host_rates_to_json(r));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->threads, r.threads);
  ASSERT_EQ(back->gemm.size(), r.gemm.size());
  EXPECT_EQ(back->gemm[1].k, 64);
  EXPECT_FALSE(back->gemm[1].tb);
  EXPECT_DOUBLE_EQ(back->gemm[1].seconds, r.gemm[1].seconds);
  EXPECT_DOUBLE_EQ(back->pointwise_bandwidth(1e6), r.pointwise_bandwidth(1e6));
  EXPECT_DOUBLE_EQ(back->loss_bandwidth, r.loss_bandwidth);
  EXPECT_DOUBLE_EQ(back->kernel_seconds, r.kernel_seconds);
  nlohmann::json j = host_rates_to_json(r);
  j.erase("loss_bandwidth");
  EXPECT_FALSE(host_rates_from_json(j).ok());
  j = host_rates_to_json(r);
  j["optimizer_bandwidth"] = 0.0;
  EXPECT_FALSE(host_rates_from_json(j).ok());
  j = host_rates_to_json(r);
  j.erase("pointwise_hot");  // a cache entry of format 3 has none
  EXPECT_FALSE(host_rates_from_json(j).ok());
  j = host_rates_to_json(r);
  j["gemm"] = nlohmann::json::array();
  EXPECT_FALSE(host_rates_from_json(j).ok());
  // Per-dtype classes and attention round-trip; an unknown dtype is refused.
  HostRates low = made_up_rates();
  low.gemm[1].bf16 = true;
  low.attention_bf16_forward_flops = 3e11;
  back = host_rates_from_json(host_rates_to_json(low));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_FALSE(back->gemm[0].bf16);
  EXPECT_TRUE(back->gemm[1].bf16);
  EXPECT_DOUBLE_EQ(back->attention_bf16_forward_flops, 3e11);
  EXPECT_DOUBLE_EQ(back->attention_bf16_backward_flops, 0);
  j = host_rates_to_json(low);
  j["gemm"][1]["dtype"] = "f16";
  const auto refused = host_rates_from_json(j);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().to_string().find("'f16'"), std::string::npos)
      << refused.status().to_string();
}

TEST(HostRatesTest, ContentionIsRecordedAndDecidesARemeasure) {
  HostRates r = made_up_rates();
  // Not known (an entry cached before the share was recorded): trusted, never remeasured.
  EXPECT_TRUE(std::isnan(r.other_cpu_share));
  EXPECT_FALSE(r.contended());
  EXPECT_FALSE(should_remeasure(r, 0.0));
  auto back = host_rates_from_json(host_rates_to_json(r));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(std::isnan(back->other_cpu_share));
  EXPECT_TRUE(host_rates_to_json(r).at("other_cpu_share").is_null());
  // Measured beside other work: remeasured once the host is quiet, not while it is busy.
  r.other_cpu_share = 0.6;
  back = host_rates_from_json(host_rates_to_json(r));
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(back->other_cpu_share, 0.6);
  EXPECT_TRUE(back->contended());
  EXPECT_TRUE(should_remeasure(*back, 0.1));
  EXPECT_FALSE(should_remeasure(*back, kQuietLoadPerCore + 0.1));
  EXPECT_FALSE(should_remeasure(*back, std::nan("")));  // load unknown: keep the cache
  // At or below the threshold: a quiet enough probe.
  r.other_cpu_share = kContendedShare;
  EXPECT_FALSE(r.contended());
  EXPECT_FALSE(should_remeasure(r, 0.0));
  EXPECT_NE(describe_host_rates(r).find("other processes used 25% of the cores"),
            std::string::npos);
}

TEST(HostRatesTest, StaleSquareGemmAgainstThePeakMeasuredNow) {
  HostRates r = made_up_rates();  // 1024³ at 100 GFLOP/s, 1024² x 64 at 50
  EXPECT_NEAR(square_gemm_flops(r), 100e9, 1e3);
  // Healthy: 100 of 120 (83%, what a quiet calibration reads); just above the threshold share:
  // not stale; just below: stale.
  EXPECT_EQ(stale_rates_note(r, 120e9), "");
  EXPECT_EQ(stale_rates_note(r, 0.999 * 100e9 / kStaleGemmShare), "");
  EXPECT_NE(stale_rates_note(r, 1.001 * 100e9 / kStaleGemmShare), "");
  // Session 12's stale entry: 102 of 233.6 (44%).
  const std::string note = stale_rates_note(r, 230e9);
  EXPECT_NE(note.find("1024³ GEMM ran at 100.0 GFLOP/s, 43% of this host's measured peak of 230.0"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("ljperf calibrate --measure"), std::string::npos);
  // Stale rates are remeasured by the next plan when the host is quiet; healthy ones are not.
  EXPECT_TRUE(should_remeasure(r, 0.1, 230e9));
  EXPECT_FALSE(should_remeasure(r, kQuietLoadPerCore + 0.1, 230e9));
  EXPECT_FALSE(should_remeasure(r, 0.1, 120e9));
  EXPECT_FALSE(should_remeasure(r, 0.1));  // peak not known
  // The largest square class is the one compared; the small-K class never is.
  r.gemm.push_back({512, 512, 512, false, false, 2.0 * 512 * 512 * 512 / 10e9});
  EXPECT_NEAR(square_gemm_flops(r), 100e9, 1e3);
  r.gemm.erase(r.gemm.begin());
  EXPECT_NEAR(square_gemm_flops(r), 10e9, 1e3);
  // Unknown on either side: nothing said.
  r.gemm.pop_back();  // only the small-K class is left
  ASSERT_EQ(r.gemm.size(), 1u);
  EXPECT_EQ(square_gemm_flops(r), 0.0);
  EXPECT_EQ(stale_rates_note(r, 230e9), "");
  EXPECT_EQ(stale_rates_note(made_up_rates(), 0.0), "");
}

TEST(HostRatesTest, CachedPerHostAndThreads) {
  const TempCacheHome cache_home("lj_host_rates_test");
  HostRates r = made_up_rates();
  r.threads = 3;
  EXPECT_FALSE(cached_host_rates(3).has_value());
  cache_host_rates(r);
  auto got = cached_host_rates(3);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->cached);
  EXPECT_DOUBLE_EQ(got->gemm[0].seconds, r.gemm[0].seconds);
  EXPECT_FALSE(cached_host_rates(5).has_value());  // other threads: not this entry
  r.loss_bandwidth = 1e9;                          // replaced, not appended
  cache_host_rates(r);
  EXPECT_DOUBLE_EQ(cached_host_rates(3)->loss_bandwidth, 1e9);
  // A plan that may not probe reads the cache only.
  EXPECT_EQ(plan_host_rates(5, /*may_probe=*/false), nullptr);
  ASSERT_NE(plan_host_rates(3, /*may_probe=*/false), nullptr);
  // A run's plan request prices its step with the rates of the threads it runs on (benchmark
  // --threads 3), not the host's default count (before: `--threads 1` on 2 cores took the
  // 2-thread rates and read -49.8%).
  StatusOr<PlanRequest> req =
      host_plan_request(tiny(), 2, 64, /*compile=*/false, HostParallel{.threads = 3});
  ASSERT_TRUE(req.ok()) << req.status().to_string();
  ASSERT_NE(req->rates, nullptr);
  EXPECT_EQ(req->rates->threads, 3);
  req = host_plan_request(tiny(), 2, 64, /*compile=*/false, HostParallel{.threads = 5});
  ASSERT_TRUE(req.ok()) << req.status().to_string();
  EXPECT_EQ(req->rates, nullptr);  // none cached for 5: the roofline, never 3's rates
}

TEST(TimeModelTest, CategoriesSumToTheTotal) {
  HostRates r = made_up_rates();
  const StepTimes t = priced(tiny(), RecomputePolicy::none, 0, &r);
  double sum = 0;
  for (const auto& [name, s] : t.items()) sum += s;
  EXPECT_NEAR(sum, t.total(), 1e-12 * t.total());
  // Every kind of kernel the step runs is priced.
  for (OpCategory c : {OpCategory::contraction, OpCategory::attention, OpCategory::elementwise,
                       OpCategory::reduction, OpCategory::data_movement})
    EXPECT_GT(t.category[static_cast<size_t>(c)], 0) << category_name(c);
  // AdamW: 32 bytes per parameter at the optimizer bandwidth.
  EXPECT_NEAR(t.optimizer, 32.0 * static_cast<double>(tiny().num_params()) / r.optimizer_bandwidth,
              1e-12);
  EXPECT_GT(t.overhead, 0);
}

TEST(TimeModelTest, RecomputeCostsItsForwardAgain) {
  HostRates r = made_up_rates();
  const LlamaConfig m = tiny();  // 2 layers
  const StepTimes none = priced(m, RecomputePolicy::none, 0, &r);
  const StepTimes sel1 = priced(m, RecomputePolicy::selective, 1, &r);
  const StepTimes sel2 = priced(m, RecomputePolicy::selective, 2, &r);
  const StepTimes full1 = priced(m, RecomputePolicy::full, 1, &r);
  const StepTimes full2 = priced(m, RecomputePolicy::full, 2, &r);
  EXPECT_GT(sel1.total(), none.total());
  EXPECT_GT(sel2.total(), sel1.total());
  EXPECT_GT(full1.total(), none.total());
  EXPECT_GT(full2.total(), full1.total());
  EXPECT_GT(full2.total(), sel2.total());
  // Full recompute runs the layer's GEMMs again; the optimizer does not change.
  const auto gemm = [](const StepTimes& t) {
    return t.category[static_cast<size_t>(OpCategory::contraction)];
  };
  EXPECT_GT(gemm(full1), gemm(none));
  EXPECT_DOUBLE_EQ(full2.optimizer, none.optimizer);
  // Each recomputed layer adds the same work: full 2 - full 1 = full 1 - none.
  EXPECT_NEAR(full2.total() - full1.total(), full1.total() - none.total(), 1e-9 * full2.total());
}

// A recomputed memory-bound kernel whose inputs the clone before it just produced is priced at
// the hot bandwidth: with hot = 2x cold, the recomputed elementwise work of selective recompute
// costs less than with hot = cold, but more than half (the first clone of a layer reads the
// saved, cold input) and more than nothing; GEMMs and the non-recomputed nodes do not move.
TEST(TimeModelTest, RecomputedKernelsOnJustProducedOperandsRunHot) {
  const LlamaConfig m = tiny();
  HostRates cold = made_up_rates();
  HostRates hot = cold;
  for (BandwidthSample& s : hot.pointwise_hot) s.bytes_per_s *= 2;
  EXPECT_DOUBLE_EQ(hot_factor(hot, 1e6), 0.5);
  EXPECT_DOUBLE_EQ(hot_factor(cold, 1e6), 1.0);
  const auto elementwise = [](const StepTimes& t) {
    return t.category[static_cast<size_t>(OpCategory::elementwise)];
  };
  const auto gemm = [](const StepTimes& t) {
    return t.category[static_cast<size_t>(OpCategory::contraction)];
  };
  const StepTimes none_c = priced(m, RecomputePolicy::none, 0, &cold);
  const StepTimes none_h = priced(m, RecomputePolicy::none, 0, &hot);
  EXPECT_DOUBLE_EQ(none_c.total(), none_h.total());  // nothing recomputed: nothing hot
  const StepTimes sel_c = priced(m, RecomputePolicy::selective, 2, &cold);
  const StepTimes sel_h = priced(m, RecomputePolicy::selective, 2, &hot);
  const double extra_c = elementwise(sel_c) - elementwise(none_c);
  const double extra_h = elementwise(sel_h) - elementwise(none_h);
  EXPECT_GT(extra_c, 0);
  EXPECT_LT(extra_h, extra_c);
  EXPECT_GT(extra_h, 0.5 * extra_c);
  // The saving is reported, and adding it back gives the all-cold price.
  EXPECT_DOUBLE_EQ(sel_c.recompute_hot_saving, 0.0);
  EXPECT_GT(sel_h.recompute_hot_saving, 0.0);
  EXPECT_NEAR(sel_h.total() + sel_h.recompute_hot_saving, sel_c.total(), 1e-12 * sel_c.total());
  const StepTimes full_c = priced(m, RecomputePolicy::full, 2, &cold);
  const StepTimes full_h = priced(m, RecomputePolicy::full, 2, &hot);
  EXPECT_DOUBLE_EQ(gemm(full_c), gemm(full_h));
  EXPECT_LT(full_h.total(), full_c.total());
}

TEST(TimeModelTest, GraphGemmShapesAreTheLinearLayersAndTheLossChunks) {
  const LlamaConfig m = tiny();  // C 64, FFN 128, V 256, 4 heads of 16, 2 kv heads
  Graph g;
  ASSERT_TRUE(build_train_graph(m, GraphOptions{}, &g).ok());
  HostRates r = made_up_rates();
  DryRunOptions dry;
  dry.rates = &r;
  auto f = graph_figures(g, m, 2, 64, GraphOptions{}, dry);
  ASSERT_TRUE(f.ok());
  const SymEnv env{{'B', 2}, {'T', 64}};  // as the dry run binds them
  const std::vector<GemmSample> shapes = graph_gemm_shapes(g, env);
  const auto has = [&](int64_t mm, int64_t n, int64_t k, bool ta, bool tb) {
    for (const GemmSample& s : shapes) {
      if (s.m == mm && s.n == n && s.k == k && s.ta == ta && s.tb == tb) return true;
    }
    return false;
  };
  EXPECT_TRUE(has(128, 64, 64, false, true));    // q projection: B·T rows, x Wᵀ
  EXPECT_TRUE(has(128, 128, 64, false, true));   // gate / up
  EXPECT_TRUE(has(128, 64, 128, false, true));   // down
  EXPECT_TRUE(has(128, 64, 128, false, false));  // input gradient through gate / up: dy W
  EXPECT_TRUE(has(128, 64, 128, true, false));   // weight gradient of gate / up: dyᵀ x
  // Compiled, the LM head is linear_cross_entropy: per chunk of rows (all 128 here) the logits
  // (rows, V, C), dx (rows, C, V) and dw (V, C, rows) GEMMs.
  GraphOptions compiled;
  compiled.compile = true;
  Graph gc;
  ASSERT_TRUE(build_train_graph(m, compiled, &gc).ok());
  const std::vector<GemmSample> fused = graph_gemm_shapes(gc, env);
  const auto in_fused = [&](int64_t mm, int64_t n, int64_t k, bool ta, bool tb) {
    for (const GemmSample& s : fused) {
      if (s.m == mm && s.n == n && s.k == k && s.ta == ta && s.tb == tb) return true;
    }
    return false;
  };
  EXPECT_TRUE(in_fused(128, 256, 64, false, true));
  EXPECT_TRUE(in_fused(128, 64, 256, false, false));
  EXPECT_TRUE(in_fused(256, 64, 128, true, false));
  EXPECT_FALSE(has(128, 256, 64, false, false));  // eager: a matmul with tb, no fused dx layout
  for (const GemmSample& s : fused) EXPECT_FALSE(s.bf16);
  // bf16 (autocast): the same GEMMs, each a bf16 class.
  GraphOptions low = compiled;
  low.autocast = DType::bf16;
  Graph gl;
  ASSERT_TRUE(build_train_graph(m, low, &gl).ok());
  const std::vector<GemmSample> low_shapes = graph_gemm_shapes(gl, env);
  ASSERT_EQ(low_shapes.size(), fused.size());
  for (const GemmSample& s : low_shapes) EXPECT_TRUE(s.bf16) << s.m << " x " << s.n << " x " << s.k;
}

}  // namespace
}  // namespace lj
