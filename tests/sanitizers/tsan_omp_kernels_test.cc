// ThreadSanitizer over the OpenMP CPU kernels (tsan_omp_tests, LJ_TSAN with clang: libomp and
// archer, which tells TSan what OpenMP's barriers and reductions order). Each test runs kernels on
// shapes past their fork thresholds, so every parallel loop below really runs on several threads,
// and checks the result against the same graph on one thread: bitwise where the kernel promises
// that the bits do not depend on the threads. TSan fails the test on any data race it sees.
// Also run here: tests/ops/determinism_test.cc (attention block, forward and backward: matmul,
// sdpa, log_softmax, cross_entropy) and tests/ops/forward_fused_ce_test.cc (linear cross entropy
// at 1, 3 and 4 threads).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/cpu/adamw_kernel.h"
#include "graph/builder.h"
#include "graph/builder_fused.h"
#include "ops/op_test_util.h"
#include "passes/dce/dce.h"
#include "passes/pointwise_fusion/pointwise_fusion.h"
#include "runtime/executor.h"
#include "runtime/fused_kernels.h"

namespace lj::test {
namespace {

constexpr int kThreads = 3;

// Runs the graph on one thread and on kThreads (twice: run_graph checks the two runs agree) and
// expects bitwise-equal outputs.
void expect_same_on_threads(const std::vector<GraphInput>& inputs, const BuildFn& build,
                            const std::string& what, int threads = kThreads) {
  auto one = run_graph(inputs, build, RunOptions{1, false});
  auto many = run_graph(inputs, build, RunOptions{threads, true});
  ASSERT_TRUE(one.ok()) << what << ": " << one.status().to_string();
  ASSERT_TRUE(many.ok()) << what << ": " << many.status().to_string();
  ASSERT_EQ(one->size(), many->size()) << what;
  for (size_t k = 0; k < one->size(); ++k) {
    EXPECT_EQ((*one)[k].dims, (*many)[k].dims) << what << " output " << k;
    EXPECT_EQ((*one)[k].data, (*many)[k].data)
        << what << " output " << k << ": 1 and " << threads << " threads differ";
  }
}

// f32 GEMMs (the own AVX-512 GEMM splits rows or columns over threads past ~1 MFLOP; batched
// matmuls split the batch instead) and the f64 GEMM (row blocks), in each transpose case.
TEST(TsanOmp, MatmulSplitsRowsColumnsAndBatches) {
  for (const DType dt : {DType::f32, DType::f64}) {
    for (const bool ta : {false, true}) {
      const RefTensor a = random_tensor(
          dt, ta ? std::vector<int64_t>{160, 192} : std::vector<int64_t>{192, 160}, 11);
      const RefTensor b = random_tensor(dt, {160, 144}, 12);
      expect_same_on_threads(
          {{"a", a}, {"b", b}},
          [&](Builder&, const std::vector<Val>& in) {
            return std::vector<Val>{matmul(in[0], in[1], ta, false)};
          },
          std::string(dtype_name(dt)) + (ta ? " matmul ta" : " matmul"));
    }
    // (6, 48, 64) x (6, 64, 40): a batch the threads divide.
    const RefTensor a = random_tensor(dt, {6, 48, 64}, 13);
    const RefTensor b = random_tensor(dt, {6, 64, 40}, 14);
    expect_same_on_threads(
        {{"a", a}, {"b", b}},
        [](Builder&, const std::vector<Val>& in) {
          return std::vector<Val>{matmul(in[0], in[1], false, false)};
        },
        std::string(dtype_name(dt)) + " batched matmul");
  }
}

// gather (the embedding) forward, and scatter_add (its gradient: columns split over threads,
// every thread summing all ids for its columns), with repeated ids.
TEST(TsanOmp, EmbeddingGatherAndScatterAdd) {
  constexpr int64_t kVocab = 50, kCols = 512, kIds = 300;
  const RefTensor table = random_tensor(DType::f32, {kVocab, kCols}, 21);
  const RefTensor ids = random_ints(DType::i32, {kIds}, 22, 0, kVocab);
  const RefTensor src = random_tensor(DType::f32, {kIds, kCols}, 23);
  expect_same_on_threads(
      {{"table", table}, {"ids", ids}, {"src", src}},
      [](Builder&, const std::vector<Val>& in) {
        return std::vector<Val>{gather(in[0], in[1]),
                                scatter_add(in[1], in[2], Shape{kVocab, kCols})};
      },
      "gather and scatter_add");
}

// rms_norm forward (rows over threads) and backward (dw from per-block partials summed in block
// order), swiglu forward and backward, softmax and reductions over either axis.
TEST(TsanOmp, NormSwigluSoftmaxAndReductions) {
  constexpr int64_t kRows = 384, kCols = 256;
  const RefTensor x = random_tensor(DType::f32, {kRows, kCols}, 31);
  const RefTensor w = random_tensor(DType::f32, {kCols}, 32, 0.5, 1.5);
  const RefTensor dy = random_tensor(DType::f32, {kRows, kCols}, 33);
  const RefTensor up = random_tensor(DType::f32, {kRows, kCols}, 34);
  expect_same_on_threads(
      {{"x", x}, {"w", w}, {"dy", dy}, {"up", up}},
      [](Builder&, const std::vector<Val>& in) {
        const RmsNormResult n = rms_norm(in[0], in[1], 1e-5);
        const RmsNormGrads g = rms_norm_backward(in[2], in[0], in[1], n.rstd);
        const SwigluGrads s = swiglu_backward(in[2], in[0], in[3]);
        return std::vector<Val>{n.y,
                                n.rstd,
                                g.dx,
                                g.dw,
                                swiglu(in[0], in[3]),
                                s.dgate,
                                s.dup,
                                softmax(in[0], -1),
                                log_softmax(in[0], -1),
                                sum(in[0], {0}),
                                mean(in[0], {-1}),
                                max(in[0], {-1})};
      },
      "rms_norm, swiglu, softmax, reductions");
}

// AdamW's update (static chunks; with and without the 16-bit copy) and the gradient norm's sum
// of squares (fixed chunks summed in order): both promise bits that do not depend on the threads.
TEST(TsanOmp, AdamWUpdateAndSumOfSquares) {
  constexpr int64_t kN = 3 * 65536 + 5;  // past the kernel's fork threshold (65536)
  const RefTensor init = random_tensor(DType::f32, {4, kN}, 41);
  auto column = [&](int64_t r) {
    std::vector<float> v(static_cast<size_t>(kN));
    for (int64_t k = 0; k < kN; ++k)
      v[static_cast<size_t>(k)] = static_cast<float>(init[r * kN + k]);
    return v;
  };
  AdamWStepConstants c;
  c.step_size = 1e-3f;
  c.decay = 1 - 1e-5f;
  c.beta1 = 0.9f;
  c.beta2 = 0.999f;
  c.eps = 1e-8f;
  c.bc2_sqrt = 0.05f;
  c.grad_scale = 0.5f;
  for (const int copy : {0, 1, 2}) {  // no 16-bit copy, bf16, f16
    struct State {
      std::vector<float> p, g, m, v;
      std::vector<uint16_t> low;
    };
    auto step = [&](int threads) {
      State s{column(0), column(1), column(2), column(3), std::vector<uint16_t>(kN)};
      for (float& x : s.v) x = x * x;  // a second moment is not negative
      LowCopy low;
      if (copy > 0) low = LowCopy{s.low.data(), copy == 1 ? DType::bf16 : DType::f16};
      adamw_update(c, s.p.data(), s.g.data(), s.m.data(), s.v.data(), kN, threads, low);
      return s;
    };
    const State one = step(1), many = step(kThreads);
    EXPECT_EQ(one.p, many.p) << "copy " << copy;
    EXPECT_EQ(one.m, many.m) << "copy " << copy;
    EXPECT_EQ(one.v, many.v) << "copy " << copy;
    EXPECT_EQ(one.low, many.low) << "copy " << copy;
  }
  const std::vector<float> g = column(1);
  double one = 0, many = 0;
  accumulate_squares(g.data(), kN, 1, &one);
  accumulate_squares(g.data(), kN, kThreads, &many);
  EXPECT_GT(one, 0.0);
  EXPECT_EQ(one, many);
}

// The pointwise codegen's kernels: C++ rendered at run time, built by the kernel cache with this
// build's clang and -fsanitize=thread (so TSan sees their loads and stores), dlopen'd, and run on
// 2 threads (the kernels take one thread per 16384 elements). They must all compile, and give
// the same bits as the same kernels on one thread.
TEST(TsanOmp, CompiledPointwiseKernels) {
  const Dim kB = Dim::sym('B'), kT = Dim::sym('T');
  constexpr int64_t kC = 40, kBatch = 4, kSeq = 256;  // 40960 elements: 2 threads
  Graph g;
  {
    Builder b(&g);
    Val x = b.input("x", DType::f32, {kB, kT, kC});
    Val w = b.input("w", DType::f32, {kC});
    Val y = silu(x * w + 0.5) / sqrt(square(x) + 1e-3);
    b.output("y", y);
    b.output("r", rsqrt(mean(square(y), {-1}, /*keepdim=*/true) + 1e-5) * x);
    b.output("m", max(tanh(x) * 2.0, {-1}, /*keepdim=*/false));
    ASSERT_TRUE(b.ok()) << b.status().message();
  }
  PointwiseFusionPass pass;
  auto changed = pass.run(g);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  ASSERT_TRUE(*changed);
  ASSERT_TRUE(DcePass().run(g).ok());

  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "lj_tsan_kernels_XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  codegen::KernelCacheOptions options = codegen::KernelCacheOptions::from_env();
  options.dir = dir.string();
  options.cxx = LJ_TSAN_KERNEL_CXX;
  options.flags += " -fsanitize=thread";

  auto run_on = [&](int threads) -> std::vector<RefTensor> {
    Device dev(threads);
    const RefTensor xv = random_tensor(DType::f32, {kBatch, kSeq, kC}, 51, -1.5, 1.5);
    const RefTensor wv = random_tensor(DType::f32, {kC}, 52, -1.5, 1.5);
    const std::vector<Tensor> feed{Tensor::from_doubles(dev, DType::f32, xv.dims, xv.data),
                                   Tensor::from_doubles(dev, DType::f32, wv.dims, wv.data)};
    Executor ex(g, dev);
    codegen::KernelCache cache(options);
    auto report = compile_kernels(g, cache, ex);
    EXPECT_TRUE(report.ok()) << report.status().message();
    if (!report.ok()) return {};
    EXPECT_GT(report->fused_nodes, 0);
    EXPECT_EQ(report->compiled_nodes, report->fused_nodes) << report->to_string();
    auto out = ex.run(feed);
    EXPECT_TRUE(out.ok()) << out.status().message();
    std::vector<RefTensor> r;
    if (out.ok()) {
      for (const Tensor& t : *out) r.push_back(RefTensor{t.dtype(), t.dims(), t.to_doubles()});
    }
    return r;
  };
  const std::vector<RefTensor> one = run_on(1), two = run_on(2);
  std::error_code ec;
  fs::remove_all(dir, ec);
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(two.size(), 3u);
  for (size_t k = 0; k < one.size(); ++k) {
    EXPECT_EQ(one[k].data, two[k].data) << "output " << k << ": 1 and 2 threads differ";
  }
}

}  // namespace
}  // namespace lj::test
