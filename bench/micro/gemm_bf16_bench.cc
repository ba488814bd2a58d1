// The two bf16 GEMM kernels at the step's shapes (issue 36): oneDNN's matmul primitive (built
// once, as backends/cpu/gemm.h now keeps it; AMX or vdpbf16ps as its dispatcher picks) against
// ljperf's own GEMM on operands widened to f32 (sgemm_avx512.h gemm_bf16_avx512), with the f32
// own GEMM on the same shape for reference. GFLOP/s per call, operands hot. Shapes: the wide model
// (bench/speed/wide, B4 T256: 1024 rows) and `small` (B8 T256: 2048 rows); forward y = x Wᵀ
// (bf16 out), dx = dy W (bf16 out), dW = dyᵀ x (f32 out).
// Run: OMP_NUM_THREADS=2 build/micro_bench --benchmark_filter=gemm_bf16
#include <benchmark/benchmark.h>

#include <dnnl.hpp>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/sgemm_avx512.h"
#include "bench_util.h"
#include "core/dtype.h"

namespace lj::bench {
namespace {

using dnnl::memory;
using Dims = memory::dims;

struct Shape {
  int64_t m, n, k;
  bool ta, tb, c_f32;
};
constexpr Shape kWideUp{1024, 2816, 1024, false, true, false};
constexpr Shape kWideDownDx{1024, 2816, 1024, false, false, false};
constexpr Shape kWideUpDw{2816, 1024, 1024, true, false, true};
constexpr Shape kSmallUp{2048, 768, 288, false, true, false};
constexpr Shape kSmallUpDw{768, 288, 2048, true, false, true};
// The bf16 fused LM head's three GEMMs per chunk of 256 rows (backends/cpu/loss.cc
// linear_cross_entropy_bf16) at Qwen3-0.6B's head (C 1024, V 151936): logits = x wᵀ (f32 out),
// dx = dlogits w (bf16 out), dw += dlogitsᵀ x (f32 out).
constexpr Shape kQwenLceLogits{256, 151936, 1024, false, true, true};
constexpr Shape kQwenLceDx{256, 1024, 151936, false, false, false};
constexpr Shape kQwenLceDw{151936, 1024, 256, true, false, true};

std::vector<uint16_t> bf16_of(const std::vector<float>& f) {
  std::vector<uint16_t> v(f.size());
  for (size_t i = 0; i < f.size(); ++i) v[i] = f32_to_bf16(f[i]);
  return v;
}

void counters(benchmark::State& state, const Shape& s) {
  const double flops = 2.0 * static_cast<double>(s.m * s.n * s.k);
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

void BM_gemm_bf16_own(benchmark::State& state, Shape s) {
  if (!cpu::own_sgemm_enabled()) {
    state.SkipWithError("no AVX-512 own GEMM on this host");
    return;
  }
  const std::vector<uint16_t> a = bf16_of(filled(static_cast<size_t>(s.m * s.k), 1));
  const std::vector<uint16_t> b = bf16_of(filled(static_cast<size_t>(s.k * s.n), 2));
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  for (auto _ : state) {
    cpu::gemm_bf16_avx512(s.ta, s.tb, s.m, s.n, s.k, a.data(), b.data(), c.data(), s.c_f32, false);
    benchmark::ClobberMemory();
  }
  counters(state, s);
}

void BM_gemm_bf16_onednn(benchmark::State& state, Shape s) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::vector<uint16_t> a = bf16_of(filled(static_cast<size_t>(s.m * s.k), 1));
  std::vector<uint16_t> b = bf16_of(filled(static_cast<size_t>(s.k * s.n), 2));
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  const memory::desc a_md({s.m, s.k}, memory::data_type::bf16, s.ta ? Dims{1, s.m} : Dims{s.k, 1});
  const memory::desc b_md({s.k, s.n}, memory::data_type::bf16, s.tb ? Dims{1, s.k} : Dims{s.n, 1});
  const memory::desc c_md({s.m, s.n}, s.c_f32 ? memory::data_type::f32 : memory::data_type::bf16,
                          Dims{s.n, 1});
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);
  const dnnl::matmul prim(pd);
  memory am(a_md, eng, a.data()), bm(b_md, eng, b.data()), cm(c_md, eng, c.data());
  for (auto _ : state) {
    prim.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    strm.wait();
    benchmark::ClobberMemory();
  }
  counters(state, s);
  state.SetLabel(pd.impl_info_str());
}

void BM_gemm_bf16_f32_reference(benchmark::State& state, Shape s) {
  const std::vector<float> a = filled(static_cast<size_t>(s.m * s.k), 1);
  const std::vector<float> b = filled(static_cast<size_t>(s.k * s.n), 2);
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  for (auto _ : state) {
    cpu::gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), s.ta ? s.m : s.k, b.data(),
              s.tb ? s.k : s.n, 0.0f, c.data(), s.n);
    benchmark::ClobberMemory();
  }
  counters(state, s);
}

#define LJ_GEMM_BF16_SHAPE(name, shape)                                               \
  BENCHMARK_CAPTURE(BM_gemm_bf16_own, name, shape)->Unit(benchmark::kMillisecond);    \
  BENCHMARK_CAPTURE(BM_gemm_bf16_onednn, name, shape)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(BM_gemm_bf16_f32_reference, name, shape)->Unit(benchmark::kMillisecond);

LJ_GEMM_BF16_SHAPE(wide_up, kWideUp)
LJ_GEMM_BF16_SHAPE(wide_down_dx, kWideDownDx)
LJ_GEMM_BF16_SHAPE(wide_up_dw, kWideUpDw)
LJ_GEMM_BF16_SHAPE(small_up, kSmallUp)
LJ_GEMM_BF16_SHAPE(small_up_dw, kSmallUpDw)
LJ_GEMM_BF16_SHAPE(qwen_lce_logits, kQwenLceLogits)
LJ_GEMM_BF16_SHAPE(qwen_lce_dx, kQwenLceDx)
LJ_GEMM_BF16_SHAPE(qwen_lce_dw, kQwenLceDw)

}  // namespace
}  // namespace lj::bench
