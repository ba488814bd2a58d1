// Which oneDNN f32 GEMM path, and whether a weight layout kept across steps would pay, at a small
// Llama's linear-layer sizes (x (2048, 288), W (768, 288)): the question of issue 15's "GEMM
// weight layouts chosen by the compiler". Three ways to run the same product:
//   sgemm    dnnl_sgemm on row-major operands (what backends/cpu/gemm.cc does today);
//   plain    a dnnl::matmul primitive over the same row-major operands, created once;
//   blocked  the same primitive with the weights in the layout it prefers (format_tag::any),
//            reordered once outside the timed loop, as a layout kept across steps would be.
// And for bf16 (AMX here), the host cost of building the matmul per call:
//   bf16_per_call  backends/cpu/gemm.h's gemm_bf16 (since session 16 its primitive is built once
//                  per shape and thread, and on Intel without AMX it is the own GEMM: run with
//                  LJ_BF16_GEMM=onednn to compare it with bf16_built; gemm_bf16_bench.cc compares
//                  the two kernels);
//   bf16_built     the same matmul built once, executed in the loop.
// GFLOP/s per call; compare CPU time with OMP_NUM_THREADS=1 on a busy host.
// Run: build/micro_bench --benchmark_filter=gemm_format
#include <benchmark/benchmark.h>
#include <dnnl.h>

#include <dnnl.hpp>
#include <vector>

#include "backends/cpu/gemm.h"
#include "bench_util.h"

namespace lj::bench {
namespace {

using dnnl::memory;
using Dims = memory::dims;

// out (m, n) = a (m, k) b (k, n); a_t / b_t: the operand is stored transposed.
struct Shape {
  int64_t m, n, k;
  bool a_t, b_t;
};
// forward y = x Wᵀ; backward dx = dy W; backward dW = dyᵀ x (W's gradient: "weights" is x).
constexpr Shape kForward{2048, 768, 288, false, true};
constexpr Shape kBackwardDx{2048, 288, 768, false, false};
constexpr Shape kBackwardDw{768, 288, 2048, true, false};

void counters(benchmark::State& state, const Shape& s) {
  const double flops = 2.0 * static_cast<double>(s.m * s.n * s.k);
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

void BM_gemm_format_sgemm(benchmark::State& state, Shape s) {
  std::vector<float> a = filled(static_cast<size_t>(s.m * s.k), 1);
  std::vector<float> b = filled(static_cast<size_t>(s.k * s.n), 2);
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  for (auto _ : state) {
    dnnl_sgemm(s.a_t ? 'T' : 'N', s.b_t ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(),
               s.a_t ? s.m : s.k, b.data(), s.b_t ? s.k : s.n, 0.0f, c.data(), s.n);
    benchmark::ClobberMemory();
  }
  counters(state, s);
}

void BM_gemm_format_matmul(benchmark::State& state, Shape s, bool blocked) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::vector<float> a = filled(static_cast<size_t>(s.m * s.k), 1);
  std::vector<float> b = filled(static_cast<size_t>(s.k * s.n), 2);
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  const memory::desc a_md({s.m, s.k}, memory::data_type::f32, s.a_t ? Dims{1, s.m} : Dims{s.k, 1});
  const memory::desc b_plain({s.k, s.n}, memory::data_type::f32,
                             s.b_t ? Dims{1, s.k} : Dims{s.n, 1});
  const memory::desc b_any({s.k, s.n}, memory::data_type::f32, memory::format_tag::any);
  const memory::desc c_md({s.m, s.n}, memory::data_type::f32, Dims{s.n, 1});
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, blocked ? b_any : b_plain, c_md),
                                        eng);
  const dnnl::matmul prim(pd);
  memory am(a_md, eng, a.data()), cm(c_md, eng, c.data());
  memory b_user(b_plain, eng, b.data());
  memory bm = b_user;
  if (blocked && pd.weights_desc() != b_plain) {  // the once-per-layout reorder, not timed
    bm = memory(pd.weights_desc(), eng);
    dnnl::reorder(b_user, bm).execute(strm, b_user, bm);
    strm.wait();
  }
  for (auto _ : state) {
    prim.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    strm.wait();
    benchmark::ClobberMemory();
  }
  counters(state, s);
  state.SetLabel(pd.impl_info_str());
}

std::vector<uint16_t> filled_bf16(size_t n, uint32_t seed) {
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<uint16_t>(0x3f00u | ((seed >> 16) & 0x7fu));  // in [0.5, 1)
  }
  return v;
}

void BM_gemm_format_bf16_per_call(benchmark::State& state, Shape s) {
  std::vector<uint16_t> a = filled_bf16(static_cast<size_t>(s.m * s.k), 1);
  std::vector<uint16_t> b = filled_bf16(static_cast<size_t>(s.k * s.n), 2);
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  for (auto _ : state) {
    cpu::gemm_bf16(s.a_t, s.b_t, s.m, s.n, s.k, a.data(), b.data(), c.data(), true, false);
    benchmark::ClobberMemory();
  }
  counters(state, s);
}

void BM_gemm_format_bf16_built(benchmark::State& state, Shape s) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::vector<uint16_t> a = filled_bf16(static_cast<size_t>(s.m * s.k), 1);
  std::vector<uint16_t> b = filled_bf16(static_cast<size_t>(s.k * s.n), 2);
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  const memory::desc a_md({s.m, s.k}, memory::data_type::bf16, s.a_t ? Dims{1, s.m} : Dims{s.k, 1});
  const memory::desc b_md({s.k, s.n}, memory::data_type::bf16, s.b_t ? Dims{1, s.k} : Dims{s.n, 1});
  const memory::desc c_md({s.m, s.n}, memory::data_type::f32, Dims{s.n, 1});
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

BENCHMARK_CAPTURE(BM_gemm_format_bf16_per_call, forward, kForward)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gemm_format_bf16_built, forward, kForward)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gemm_format_bf16_per_call, backward_dw, kBackwardDw)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gemm_format_bf16_built, backward_dw, kBackwardDw)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gemm_format_sgemm, forward, kForward)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gemm_format_matmul, forward_plain, kForward, false)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gemm_format_matmul, forward_blocked, kForward, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gemm_format_sgemm, backward_dx, kBackwardDx)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gemm_format_matmul, backward_dx_plain, kBackwardDx, false)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gemm_format_matmul, backward_dx_blocked, kBackwardDx, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gemm_format_sgemm, backward_dw, kBackwardDw)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gemm_format_matmul, backward_dw_plain, kBackwardDw, false)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lj::bench
namespace lj::bench {
namespace {
// linear_cross_entropy's chunk GEMMs at `small`'s head (256 rows, C 288, V 32000), row-major
// logits (as loss.cc) and vocab-major (logitsᵀ (V, m)).
constexpr Shape kLceLogits{256, 32000, 288, false, true};
constexpr Shape kLceDx{256, 288, 32000, false, false};
constexpr Shape kLceDw{32000, 288, 256, true, false};
constexpr Shape kLceLogitsT{32000, 256, 288, false, true};
constexpr Shape kLceDxT{256, 288, 32000, true, false};
constexpr Shape kLceDwT{32000, 288, 256, false, false};
BENCHMARK_CAPTURE(BM_gemm_format_sgemm, lce_logits, kLceLogits)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_gemm_format_matmul, lce_logits, kLceLogits, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_gemm_format_sgemm, lce_dx, kLceDx)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_gemm_format_matmul, lce_dx, kLceDx, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_gemm_format_sgemm, lce_dw, kLceDw)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_gemm_format_matmul, lce_dw, kLceDw, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_gemm_format_sgemm, lce_logits_t, kLceLogitsT)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_gemm_format_matmul, lce_logits_t, kLceLogitsT, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_gemm_format_sgemm, lce_dx_t, kLceDxT)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_gemm_format_matmul, lce_dx_t, kLceDxT, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_gemm_format_sgemm, lce_dw_t, kLceDwT)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_gemm_format_matmul, lce_dw_t, kLceDwT, false)->Unit(benchmark::kMillisecond);
}  // namespace
}  // namespace lj::bench
