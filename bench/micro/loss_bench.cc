// linear_cross_entropy micro-benchmarks at `small`'s LM head: x (2048, 288), w (32000, 288),
// labels (2048) (and the wider model's: x (1024, 1024)), the fused loss with its gradients through
// the CPU kernel table, at several chunk sizes and vocabulary blocks (the arguments, 0 = the
// kernel's default), and its three GEMM shapes alone on one default chunk. FLOPs: the three (N, V,
// C) GEMMs. Run: build/micro_bench
// --benchmark_filter=lce
// lce_pages and lce_block_gemms: the same with every operand and the scratch on 4 KiB pages (arg
// 0) or advised huge pages (arg 1, what runtime/memory.cc gives with LJ_HUGE_PAGES=1), interleaved
// 0, 1, 0, 1, ...; bench/micro/lce_pages_ab.sh prints the ratios. lce_kernels: the f32 kernel on
// the own GEMM's pieces against the one on gemm.h's GEMMs, paired in one process.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/gemm.h"
#include "bench_util.h"
#include "core/units.h"

namespace lj::bench {
namespace {

constexpr int64_t kRows = 2048, kDim = 288, kVocab = 32000;
constexpr double kFlops = 3 * 2.0 * kRows * kDim * kVocab;

void report(benchmark::State& state, double flops, int threads) {
  const double n = static_cast<double>(state.iterations());
  state.counters["FLOP/s"] = benchmark::Counter(flops * n, benchmark::Counter::kIsRate);
  state.counters["peak_frac"] =
      benchmark::Counter(flops * n / peak_flops(threads), benchmark::Counter::kIsRate);
  state.counters["threads"] = threads;
}

// One fused-loss call through the CPU kernel table: x (rows, dim) scaled by 0.1, w (V, dim),
// labels (i * 7919) mod V, its outputs, the node and its attributes.
struct LceCall {
  OwnedTensor x, w, loss, dx, dw;
  std::vector<int32_t> lab;
  Node node;
  TensorView in[3], out[3];
  LceCall(int64_t rows, int64_t dim, bool huge_pages, int64_t vocab = kVocab)
      : x({rows, dim}, 1, huge_pages),
        w({vocab, dim}, 2, huge_pages),
        loss({}, 3),
        dx({rows, dim}, 4, huge_pages),
        dw({vocab, dim}, 5, huge_pages),
        lab(static_cast<size_t>(rows)) {
    for (float& v : x.storage) v *= 0.1f;
    for (int64_t i = 0; i < rows; ++i)
      lab[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % vocab);
    TensorView labels;
    labels.dtype = DType::i32;
    labels.dims = {rows};
    labels.data = lab.data();
    node.op = Op::linear_cross_entropy;
    in[0] = x.view;
    in[1] = w.view;
    in[2] = labels;
    out[0] = loss.view;
    out[1] = dx.view;
    out[2] = dw.view;
  }
  LceCall(const LceCall&) = delete;
  LceCall& operator=(const LceCall&) = delete;
  Status run(Workspace& ws, int threads) {
    KernelContext c{node, in, out, threads, &ws};
    return cpu::kernels()[Op::linear_cross_entropy](c);
  }
};

void run_lce(benchmark::State& state, int64_t rows, int64_t dim, int64_t chunk = -1,
             int64_t vocab_block = -1, bool huge_pages = true, int64_t vocab = kVocab) {
  const double flops = 3 * 2.0 * rows * dim * static_cast<double>(vocab);
  LceCall call(rows, dim, huge_pages, vocab);
  call.node.attrs = Attrs{{"chunk", chunk >= 0 ? chunk : state.range(0)},
                          {"vocab_block", vocab_block >= 0 ? vocab_block : state.range(1)}};
  MallocWorkspace ws(huge_pages);
  const int threads = bench_threads();
  for (auto _ : state) {
    Status st = call.run(ws, threads);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
    ws.release();
    benchmark::DoNotOptimize(call.dw.storage.data());
    benchmark::ClobberMemory();
  }
  report(state, flops, threads);
}

void BM_lce_fused(benchmark::State& state) {
  run_lce(state, kRows, kDim);
}
// The wider model's head: B4 T256 rows, hidden 1024.
void BM_lce_fused_wide(benchmark::State& state) {
  run_lce(state, 1024, 1024);
}

// qwen3-0.6b-4l's head at B4 T256: x (1024, 1024), Qwen's vocabulary of 151,936 (w and dw 622
// MB each, read and rewritten once per chunk); arg 0: the chunk's rows (0: the default).
void BM_lce_fused_qwen(benchmark::State& state) {
  run_lce(state, 1024, 1024, state.range(0), 0, true, 151936);
}

// mixtral-h256's head at B4 T256: x (1024, 256), V 32000; arg 0: the chunk's rows, arg 1: the
// vocabulary block (0: the defaults).
void BM_lce_fused_mixtral(benchmark::State& state) {
  run_lce(state, 1024, 256, state.range(0), state.range(1));
}

// The fused kernel at its defaults; arg 0: 0 `small`'s head, 1 the wider model's; arg 1: huge
// pages (1) or 4 KiB pages (0).
void BM_lce_pages(benchmark::State& state) {
  const bool wide = state.range(0) != 0;
  run_lce(state, wide ? 1024 : kRows, wide ? 1024 : kDim, 0, 0, state.range(1) != 0);
}

// The kernel's per-block GEMM sequence alone, single-threaded, over the whole vocabulary (every
// block's w rows, logits and dw rows are different memory, as in the kernel): 256 rows, blocks of
// 512 columns. arg 0: 0 logits_b = x w_b^T, 1 dw_b += dlogits_b^T x, 2 dx += dlogits_b w_b;
// arg 1: huge pages (1) or 4 KiB pages (0).
void BM_lce_block_gemms(benchmark::State& state) {
  constexpr int64_t m = 256, vb = 512, blocks = kVocab / vb;
  const int which = static_cast<int>(state.range(0));
  const bool huge = state.range(1) != 0;
  OwnedTensor x({m, kDim}, 1, huge), w({kVocab, kDim}, 2, huge), g({m, kVocab}, 3, huge),
      dx({m, kDim}, 4, huge), dw({kVocab, kDim}, 5, huge);
  cpu::ScopedOmpThreads one(1);
  for (auto _ : state) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* wb = w.storage.data() + b * vb * kDim;
      float* gb = g.storage.data() + b * vb * m;  // (m, vb) dense, as the kernel's blocks
      if (which == 0) {
        cpu::gemm(false, true, m, vb, kDim, 1.0f, x.storage.data(), kDim, wb, kDim, 0.0f, gb, vb);
      } else if (which == 1) {
        cpu::gemm(true, false, vb, kDim, m, 1.0f, gb, vb, x.storage.data(), kDim, 1.0f,
                  dw.storage.data() + b * vb * kDim, kDim);
      } else {
        cpu::gemm(false, false, m, kDim, vb, 1.0f, gb, vb, wb, kDim, 1.0f, dx.storage.data(), kDim);
      }
    }
    benchmark::ClobberMemory();
  }
  report(state, 2.0 * m * kDim * vb * blocks, 1);
}

// The f32 kernel on the own GEMM's pieces (loss_fused_avx512.h; the default on AVX-512 hosts)
// against the one on gemm.h's GEMMs (the `per_block_gemms` attribute), in one process: each
// iteration runs both, in alternating order, and times each call's process CPU time, so drifts in
// the host's speed hit both alike. Arg: 0 `small`'s head, 1 the wider model's. Counters: the
// medians of each kernel's calls (ms) and of the per-iteration ratios own / per-block.
void BM_lce_kernels(benchmark::State& state) {
  const bool wide = state.range(0) != 0;
  LceCall call(wide ? 1024 : kRows, wide ? 1024 : kDim, true);
  MallocWorkspace ws(true);
  const int threads = bench_threads();
  const auto timed = [&](bool per_block) {
    call.node.attrs = Attrs{{"per_block_gemms", int64_t{per_block ? 1 : 0}}};
    const double t0 = process_cpu_seconds();
    const Status st = call.run(ws, threads);
    const double t = 1e3 * (process_cpu_seconds() - t0);
    ws.release();
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
    return t;
  };
  timed(false);  // first touch of the scratch and the outputs
  timed(true);
  std::vector<double> own, per_block, ratio;
  for (auto _ : state) {
    const bool own_first = own.size() % 2 == 0;
    const double first = timed(!own_first), second = timed(own_first);
    own.push_back(own_first ? first : second);
    per_block.push_back(own_first ? second : first);
    ratio.push_back(own.back() / per_block.back());
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  state.counters["own_ms"] = median(own);
  state.counters["per_block_ms"] = median(per_block);
  state.counters["own_over_per_block"] = median(ratio);
  state.counters["threads"] = threads;
}

// One chunk's GEMM alone (dnnl_sgemm, gemm.h); arg 0: 0 logits, 1 dx, 2 dw; arg 1: rows.
void BM_lce_gemm(benchmark::State& state) {
  const int64_t which = state.range(0), m = state.range(1);
  OwnedTensor x({m, kDim}, 1), w({kVocab, kDim}, 2), g({m, kVocab}, 3), dx({m, kDim}, 4),
      dw({kVocab, kDim}, 5);
  const int threads = bench_threads();
  cpu::ScopedOmpThreads scoped(threads);
  for (auto _ : state) {
    if (which == 0) {
      cpu::gemm(false, true, m, kVocab, kDim, 1.0f, x.storage.data(), kDim, w.storage.data(), kDim,
                0.0f, g.storage.data(), kVocab);
    } else if (which == 1) {
      cpu::gemm(false, false, m, kDim, kVocab, 1.0f, g.storage.data(), kVocab, w.storage.data(),
                kDim, 0.0f, dx.storage.data(), kDim);
    } else {
      cpu::gemm(true, false, kVocab, kDim, m, 1.0f, g.storage.data(), kVocab, x.storage.data(),
                kDim, 1.0f, dw.storage.data(), kDim);
    }
    benchmark::ClobberMemory();
  }
  report(state, 2.0 * m * kDim * kVocab, threads);
}

BENCHMARK(BM_lce_fused)
    ->ArgsProduct({{0, 256, 512}, {0, 128, 256, 512, 1024}})
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lce_fused_wide)
    ->ArgsProduct({{0}, {0, 128, 256, 512, 1024}})
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lce_fused_qwen)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lce_fused_mixtral)
    ->ArgsProduct({{0, 128, 512, 1024}, {0, 256, 1024}})
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lce_kernels)->Arg(0)->Arg(1)->Iterations(12)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lce_gemm)->ArgsProduct({{0, 1, 2}, {256}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lce_pages)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lce_block_gemms)
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lj::bench
