// The CUDA renderer's text and launch ABI (codegen/cuda_renderer.h), on any build: the parameter
// words a launcher packs match the struct the source declares, the grid covers the loop, and the
// source names every input and the reduction. (Compiling the source needs NVRTC: the CUDA
// build's tests/cuda/nvrtc_compile_test.cc.)
#include <gtest/gtest.h>

#include "codegen/cuda_renderer.h"

namespace lj::codegen {
namespace {

Kernel parsed(const char* text) {
  auto k = parse_kernel(text);
  EXPECT_TRUE(k.ok()) << k.status().message();
  return *k;
}

TEST(CudaRenderer, ParameterWordsMatchTheDeclaredStruct) {
  const Kernel k = parsed(
      "lj-kernel 1; dtype f32; loop 2 1; in f32 11; in f32 01; t0 = input 0; t1 = input 1; "
      "t2 = mul t0 t1; out t2; reduce sum t2");
  const RenderedKernel r = CudaRenderer().render(k, "lj_e");
  EXPECT_NE(r.source.find("const void* in[2];"), std::string::npos) << r.source;
  EXPECT_NE(r.source.find("void* out[2];"), std::string::npos) << r.source;
  EXPECT_NE(r.source.find("long long d[2];"), std::string::npos) << r.source;
  EXPECT_NE(r.source.find("long long s[4];"), std::string::npos) << r.source;
  EXPECT_NE(r.source.find("lj_block_sum"), std::string::npos) << r.source;
  LaunchGeometry geo{{6, 300}, {300, 1, 0, 1}};
  int a = 0, b = 0, o1 = 0, o2 = 0;
  const std::vector<uint64_t> w = cuda_launch_words(k, geo, {&a, &b}, {&o1, &o2});
  ASSERT_EQ(w.size(), 2u + 2u + 2u + 4u);
  EXPECT_EQ(w[0], reinterpret_cast<uintptr_t>(&a));
  EXPECT_EQ(w[3], reinterpret_cast<uintptr_t>(&o2));
  EXPECT_EQ(w[4], 6u);
  EXPECT_EQ(w[5], 300u);
  EXPECT_EQ(w[6], 300u);
  EXPECT_EQ(w[9], 1u);
  // One block per row for a reduction, capped at 32 blocks per SM; none for an empty loop.
  EXPECT_EQ(cuda_grid_size(k, geo, 132), 6);
  EXPECT_EQ(cuda_grid_size(k, LaunchGeometry{{0, 300}, {0, 0, 0, 0}}, 132), 0);
}

TEST(CudaRenderer, ElementwiseGridCoversTheLoopAndIsCapped) {
  const Kernel k =
      parsed("lj-kernel 1; dtype f32; loop 1; in f32 1; t0 = input 0; t1 = exp t0; out t1");
  EXPECT_EQ(cuda_grid_size(k, LaunchGeometry{{1000}, {1}}, 132),
            (1000 + kCudaBlock - 1) / kCudaBlock);
  EXPECT_EQ(cuda_grid_size(k, LaunchGeometry{{int64_t{1} << 32}, {1}}, 132), 132 * 32);
  EXPECT_EQ(cuda_grid_size(k, LaunchGeometry{{0}, {1}}, 132), 0);
  const std::string src = CudaRenderer().render(k, "lj_x").source;
  EXPECT_NE(src.find("expf(t0)"), std::string::npos) << src;
  // A kernel without inputs still declares a non-empty stride array (C++ has no empty arrays).
  const Kernel c = parsed("lj-kernel 1; dtype f64; loop 1; t0 = constant 2; out t0");
  const std::string csrc = CudaRenderer().render(c, "lj_c").source;
  EXPECT_NE(csrc.find("long long s[1];"), std::string::npos) << csrc;
  EXPECT_EQ(csrc.find("const void* in["), std::string::npos) << csrc;
}

}  // namespace
}  // namespace lj::codegen
