// GraphOptions{.compile = true}: the train graph after cse, dce and pointwise fusion, with its
// fused kernels compiled once at TrainStep::create, gives eager's loss and every gradient within
// fp32 tolerance, launches fewer kernels, and runs a new sequence length without compiling.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "model/model_test_util.h"
#include "train/train_step.h"

namespace lj {
namespace {

using testing_util::tokens_of;

TEST(Compile, TinyLossAndGradientsEqualEagerAndNewSeqLenCompilesNothing) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  std::string tmpl = (std::filesystem::temp_directory_path() / "lj_compile_test_XXXXXX").string();
  const std::string dir = mkdtemp(tmpl.data());
  codegen::KernelCacheOptions opts = codegen::KernelCacheOptions::from_env();
  opts.dir = dir;
  auto cache = std::make_shared<codegen::KernelCache>(opts);

  Device dev(2);
  TrainStepConfig eager_cfg, compiled_cfg;
  compiled_cfg.graph.compile = true;
  compiled_cfg.kernel_cache = cache;
  auto eager = TrainStep::create(*model, eager_cfg, dev);
  auto compiled = TrainStep::create(*model, compiled_cfg, dev);
  ASSERT_TRUE(eager.ok()) << eager.status().message();
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  const FusedKernelReport& rep = (*compiled)->kernel_report();
  std::printf("tiny: %zu -> %zu nodes; %s\n", (*eager)->graph().nodes().size(),
              (*compiled)->graph().nodes().size(), rep.to_string().c_str());
  EXPECT_GT(rep.fused_nodes, 0);
  EXPECT_EQ(rep.compiled_nodes, rep.fused_nodes);
  const int64_t compiled_kernels = cache->stats().compiled + cache->stats().loaded;
  EXPECT_GT(compiled_kernels, 0);

  for (int64_t T : {32, 16}) {
    const int64_t B = 2, V = model->vocab_size;
    Tensor x = tokens_of(dev, B, T, 0, V), y = tokens_of(dev, B, T, 1, V);
    auto a = (*eager)->forward_backward(x, y);
    auto b = (*compiled)->forward_backward(x, y);
    ASSERT_TRUE(a.ok() && b.ok());
    const int64_t k_eager = (*eager)->executor().kernels_launched();
    const int64_t k_compiled = (*compiled)->executor().kernels_launched();
    EXPECT_LT(k_compiled, k_eager);
    // Observed: losses equal to 9 digits (5.56094503 at T=32, 5.55361938 at T=16).
    EXPECT_NEAR(a->loss, b->loss, 1e-5 * std::fabs(a->loss));
    ASSERT_EQ(a->grads.size(), b->grads.size());
    const double worst = testing_util::worst_relative_error(b->grads, a->grads);
    std::printf(
        "T=%lld: loss %.9g vs %.9g, worst gradient error %.3g of its max, kernels %lld "
        "-> %lld\n",
        static_cast<long long>(T), a->loss, b->loss, worst, static_cast<long long>(k_eager),
        static_cast<long long>(k_compiled));
    // Observed worst 3.5e-7 (T=32) and 3.9e-7 (T=16) of the gradient's largest element (exp and
    // sums rounding in another order); 1e-4 leaves room for other thread counts and still catches
    // a wrong kernel (a dropped term moves a gradient by far more).
    EXPECT_LT(worst, 1e-4);
  }
  // The second sequence length compiled nothing: kernels take their dims at run time.
  EXPECT_EQ(cache->stats().compiled + cache->stats().loaded, compiled_kernels);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(Compile, FailingCompilerRunsTheInterpreterWithEagerResults) {
  auto model = llama_preset("tiny");
  ASSERT_TRUE(model.ok());
  codegen::KernelCacheOptions opts = codegen::KernelCacheOptions::from_env();
  opts.cxx = "/bin/false";  // as LJ_CXX=/bin/false sets it
  opts.dir = (std::filesystem::temp_directory_path() / "lj_compile_test_unused").string();
  Device dev(2);
  TrainStepConfig eager_cfg, compiled_cfg;
  compiled_cfg.graph.compile = true;
  compiled_cfg.kernel_cache = std::make_shared<codegen::KernelCache>(opts);
  auto eager = TrainStep::create(*model, eager_cfg, dev);
  auto compiled = TrainStep::create(*model, compiled_cfg, dev);
  ASSERT_TRUE(eager.ok() && compiled.ok());
  const FusedKernelReport& rep = (*compiled)->kernel_report();
  EXPECT_GT(rep.fused_nodes, 0);
  EXPECT_EQ(rep.interpreted_nodes, rep.fused_nodes);
  const int64_t B = 2, T = 16, V = model->vocab_size;
  Tensor x = tokens_of(dev, B, T, 0, V), y = tokens_of(dev, B, T, 1, V);
  auto a = (*eager)->forward_backward(x, y);
  auto b = (*compiled)->forward_backward(x, y);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().message();
  // Observed: losses equal to 9 digits; worst gradient error 3.8e-7 of its max.
  EXPECT_NEAR(a->loss, b->loss, 1e-5 * std::fabs(a->loss));
  const double worst = testing_util::worst_relative_error(b->grads, a->grads);
  std::printf("interpreted: loss %.9g vs %.9g, worst gradient error %.3g of its max\n", a->loss,
              b->loss, worst);
  // Same bound and reason as the compiled test above.
  EXPECT_LT(worst, 1e-4);
}

}  // namespace
}  // namespace lj
