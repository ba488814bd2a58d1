// The CUDA renderer's source compiles with NVRTC for sm_90, on a host without a GPU (label
// cuda, runs in CI): every fused group of the tiny and small training graphs, compiled, in fp32
// and in bf16 mixed precision; plus the kernel cache (cold compile, then the disk).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>

#include "codegen/cuda/cuda_kernel_cache.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/cuda_renderer.h"
#include "models/config.h"
#include "passes/pipeline/train_graph.h"

namespace lj {
namespace {

// The distinct kernels of a compiled train graph's fused_pointwise nodes.
std::map<std::string, codegen::Kernel> fused_kernels(const std::string& preset, DType autocast) {
  std::map<std::string, codegen::Kernel> out;
  auto model = llama_preset(preset);
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return out;
  GraphOptions o;
  o.compile = true;
  o.autocast = autocast;
  Graph g;
  auto built = build_train_graph(*model, o, &g);
  EXPECT_TRUE(built.ok()) << built.status().message();
  if (!built.ok()) return out;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::fused_pointwise) continue;
    const std::string& text = n.attrs.s("kernel");
    if (out.count(text)) continue;
    auto k = codegen::parse_kernel(text);
    EXPECT_TRUE(k.ok()) << k.status().message();
    if (k.ok()) out.emplace(text, std::move(*k));
  }
  return out;
}

class NvrtcTrainGraph : public testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(NvrtcTrainGraph, EveryFusedGroupCompilesForSm90) {
  const auto& [preset, autocast] = GetParam();
  const auto kernels = fused_kernels(preset, autocast);
  // The fp32 graphs fuse what pattern fusion left (1 kernel in tiny and small today). bf16
  // graphs fuse nothing today (casts end the groups): whatever they come to fuse is checked.
  if (autocast == DType::f32) {
    ASSERT_GT(kernels.size(), 0u);
  }
  codegen::CudaRenderer r;
  int compiled = 0;
  for (const auto& [text, k] : kernels) {
    const std::string source = r.prelude() + r.render(k, "lj_test_entry").source;
    std::string log;
    auto cubin = codegen::nvrtc_compile(source, "lj_test.cu", "sm_90", &log);
    ASSERT_TRUE(cubin.ok()) << "kernel: " << text << "\n"
                            << cubin.status().message() << "\nsource:\n"
                            << source;
    EXPECT_GT(cubin->size(), 0u);
    // A cubin is an ELF file.
    EXPECT_EQ(cubin->substr(0, 4), std::string("\x7f"
                                               "ELF"));
    ++compiled;
  }
  std::printf("%s %s: %d fused kernels compiled with NVRTC %s for sm_90\n", preset.c_str(),
              dtype_name(autocast), compiled, codegen::nvrtc_version().c_str());
}

INSTANTIATE_TEST_SUITE_P(TinyAndSmall, NvrtcTrainGraph,
                         testing::Combine(testing::Values("tiny", "small"),
                                          testing::Values(DType::f32, DType::bf16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

// What the IR can hold beyond today's graphs: f64, bf16 loads, every op, max and mean.
TEST(Nvrtc, EveryKernelOpAndReductionCompiles) {
  const char* texts[] = {
      "lj-kernel 1; dtype f32; loop 2 1; in f32 11; in f32 01; t0 = input 0; t1 = input 1; "
      "t2 = exp t0; t3 = log t2; t4 = sqrt t3; t5 = rsqrt t4; t6 = reciprocal t5; t7 = square t6; "
      "t8 = silu t7; t9 = sigmoid t8; t10 = tanh t9; t11 = pow_scalar t10 0.5; t12 = neg t11; "
      "t13 = add t12 t1; t14 = sub t13 t1; t15 = mul t14 t1; t16 = div t15 t1; out t16; "
      "reduce max t16",
      "lj-kernel 1; dtype f64; loop 1; in f64 1; t0 = input 0; t1 = constant 2; t2 = mul t0 t1; "
      "reduce mean t2",
      "lj-kernel 1; dtype f32; loop 3 1; in f32 10; t0 = input 0; t1 = exp t0; out t1",
  };
  codegen::CudaRenderer r;
  std::string source = r.prelude();
  int i = 0;
  for (const char* t : texts) {
    auto k = codegen::parse_kernel(t);
    ASSERT_TRUE(k.ok()) << k.status().message();
    source += r.render(*k, "lj_e" + std::to_string(i++)).source;
  }
  // A bf16 input (the IR's parser admits only the compute dtype today; the renderer loads any).
  auto k = codegen::parse_kernel("lj-kernel 1; dtype f32; loop 1; in f32 1; t0 = input 0; out t0");
  ASSERT_TRUE(k.ok());
  k->inputs[0].dtype = DType::bf16;
  source += r.render(*k, "lj_bf16").source;
  auto cubin = codegen::nvrtc_compile(source, "lj_ops.cu", "sm_90");
  ASSERT_TRUE(cubin.ok()) << cubin.status().message() << "\nsource:\n" << source;
}

TEST(Nvrtc, CompileErrorCarriesTheLog) {
  auto cubin = codegen::nvrtc_compile("extern \"C\" __global__ void f() { undefined_name; }",
                                      "bad.cu", "sm_90");
  ASSERT_FALSE(cubin.ok());
  EXPECT_NE(cubin.status().message().find("undefined_name"), std::string::npos)
      << cubin.status().message();
}

TEST(CudaKernelCache, ColdCompilesOnceWarmReadsTheDisk) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "lj_cuda_cache_XXXXXX").string();
  const std::string dir = mkdtemp(tmpl.data());
  const auto kernels = fused_kernels("tiny", DType::f32);
  std::vector<codegen::Kernel> list;
  for (const auto& [text, k] : kernels) list.push_back(k);
  list.push_back(list.front());  // a duplicate is compiled once
  {
    codegen::CudaKernelCache cache("sm_90", dir);
    auto files = cache.get(list);
    ASSERT_TRUE(files.ok()) << files.status().message();
    ASSERT_EQ(files->size(), list.size());
    for (const auto& f : *files) EXPECT_TRUE(std::filesystem::exists(f.path)) << f.path;
    EXPECT_EQ(files->front().entry, files->back().entry);
    EXPECT_EQ(cache.stats().compiler_runs, 1);
    EXPECT_EQ(cache.stats().compiled, static_cast<int64_t>(kernels.size()));
    auto again = cache.get(list);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(cache.stats().compiler_runs, 1);
  }
  codegen::CudaKernelCache warm("sm_90", dir);
  auto files = warm.get(list);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(warm.stats().compiler_runs, 0);
  EXPECT_EQ(warm.stats().loaded, static_cast<int64_t>(kernels.size()));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace lj
