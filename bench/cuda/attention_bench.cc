// sdpa forward and backward on the GPU, timed with CUDA events: TFLOP/s of the CUDA backend's
// attention kernels (backends/cuda/flash_attention.cu) at one shape, by default llama3.2-1b's
// (32 query heads, 8 kv heads, head dim 64) at batch 4 and seq 2048, causal, bf16.
// FLOPs as graph/cost.cc counts them: forward 4 B H D T(T+1)/2 under the causal mask, backward
// 2.5x the forward (FlashAttention's convention; ljperf's deterministic backward does 3.5x).
//
// usage: gpu_attention_bench [--batch B] [--heads H] [--kv-heads G] [--seq T] [--head-dim D]
//                            [--dtype bf16|f32] [--full] [--iters N]
// Built with -DLJ_CUDA=ON (target gpu_attention_bench); tools/gpu_check.sh runs it.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/context.h"
#include "backends/cuda/kernels.h"
#include "graph/builder.h"
#include "graph/ir.h"

namespace lj {
namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "gpu_attention_bench: %s\nusage: gpu_attention_bench [--batch B] [--heads H] "
               "[--kv-heads G] [--seq T] [--head-dim D] [--dtype bf16|f32] [--full] [--iters N]\n",
               why);
  return 2;
}

int run(int argc, char** argv) {
  int64_t b = 4, h = 32, g = 8, t = 2048, d = 64;
  int iters = 20;
  bool causal = true;
  DType dt = DType::bf16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage("sdpa forward + backward TFLOP/s on the GPU");
      return 0;
    }
    if (a == "--full") {
      causal = false;
      continue;
    }
    if (i + 1 >= argc) return usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--batch")
      b = std::atoll(v.c_str());
    else if (a == "--heads")
      h = std::atoll(v.c_str());
    else if (a == "--kv-heads")
      g = std::atoll(v.c_str());
    else if (a == "--seq")
      t = std::atoll(v.c_str());
    else if (a == "--head-dim")
      d = std::atoll(v.c_str());
    else if (a == "--iters")
      iters = std::atoi(v.c_str());
    else if (a == "--dtype" && (v == "bf16" || v == "f32"))
      dt = v == "bf16" ? DType::bf16 : DType::f32;
    else
      return usage(("unknown option or value: " + a + " " + v).c_str());
  }
  if (b <= 0 || h <= 0 || g <= 0 || h % g != 0 || t <= 0 || d <= 0 || iters <= 0)
    return usage("sizes must be positive and heads a multiple of kv heads");
  auto ctx_or = cuda::Context::create(0);
  if (!ctx_or.ok()) {
    std::fprintf(stderr, "gpu_attention_bench: %s\n", ctx_or.status().message().c_str());
    return 1;
  }
  cuda::Context& ctx = **ctx_or;
  Graph graph;
  Builder bld(&graph);
  Val q = bld.input("q", dt, Shape::concrete({b, h, t, d}));
  Val k = bld.input("k", dt, Shape::concrete({b, g, t, d}));
  Val v = bld.input("v", dt, Shape::concrete({b, g, t, d}));
  Val dout = bld.input("dout", dt, Shape::concrete({b, h, t, d}));
  Attrs attrs;
  attrs.set("causal", causal);
  std::vector<Val> fwd = bld.add(Op::sdpa, {q, k, v}, attrs);
  std::vector<Val> bwd = bld.add(Op::sdpa_backward, {q, k, v, fwd[0], fwd[1], dout}, attrs);
  LJ_CHECK(bld.ok()) << bld.status().message();
  // Device buffers for every value, inputs filled with small values (1/64: scores stay O(1)).
  std::vector<void*> buf(graph.values().size(), nullptr);
  std::vector<std::vector<int64_t>> dims(graph.values().size());
  for (size_t i = 0; i < graph.values().size(); ++i) {
    const TypedShape& ts = graph.values()[i].type;
    dims[i] = ts.shape.concrete_dims();
    const size_t bytes = static_cast<size_t>(numel_of(dims[i]) * dtype_size(ts.dtype));
    auto p = ctx.allocator().allocate(bytes);
    LJ_CHECK(p.ok()) << p.status().message();
    buf[i] = *p;
    LJ_CHECK(cudaMemset(buf[i], 0x3c, bytes) == cudaSuccess);  // bf16 0x3c3c = 0.0115
  }
  LJ_CHECK(cudaDeviceSynchronize() == cudaSuccess);
  auto call = [&](const Node& n) {
    std::vector<TensorView> iv, ov;
    for (ValueId x : n.inputs)
      iv.push_back(TensorView{buf[static_cast<size_t>(x)], graph.type(x).dtype,
                              dims[static_cast<size_t>(x)]});
    for (ValueId x : n.outputs)
      ov.push_back(TensorView{buf[static_cast<size_t>(x)], graph.type(x).dtype,
                              dims[static_cast<size_t>(x)]});
    cuda::AllocatorWorkspace ws(ctx.allocator());
    KernelContext kc{n, iv, ov, 1, &ws};
    const Status s = cuda::kernels()[n.op](kc, ctx.env());
    LJ_CHECK(s.ok()) << s.message();
  };
  const Node* fnode = nullptr;
  const Node* bnode = nullptr;
  for (const Node& n : graph.nodes()) {
    if (n.op == Op::sdpa) fnode = &n;
    if (n.op == Op::sdpa_backward) bnode = &n;
  }
  cudaStream_t st = ctx.stream().get();
  cudaEvent_t e0, e1, e2;
  LJ_CHECK(cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess &&
           cudaEventCreate(&e2) == cudaSuccess);
  for (int w = 0; w < 3; ++w) {
    call(*fnode);
    call(*bnode);
  }
  LJ_CHECK(cudaEventRecord(e0, st) == cudaSuccess);
  for (int i = 0; i < iters; ++i) call(*fnode);
  LJ_CHECK(cudaEventRecord(e1, st) == cudaSuccess);
  for (int i = 0; i < iters; ++i) call(*bnode);
  LJ_CHECK(cudaEventRecord(e2, st) == cudaSuccess);
  LJ_CHECK(cudaEventSynchronize(e2) == cudaSuccess);
  float fms = 0, bms = 0;
  LJ_CHECK(cudaEventElapsedTime(&fms, e0, e1) == cudaSuccess);
  LJ_CHECK(cudaEventElapsedTime(&bms, e1, e2) == cudaSuccess);
  const double pairs = causal ? static_cast<double>(t) * static_cast<double>(t + 1) / 2
                              : static_cast<double>(t) * static_cast<double>(t);
  const double ffl = 4.0 * static_cast<double>(b * h * d) * pairs, bfl = 2.5 * ffl;
  const double fs = fms / 1e3 / iters, bs = bms / 1e3 / iters;
  std::printf("sdpa %s B=%lld H=%lld G=%lld T=%lld D=%lld %s, %d iterations\n", dtype_name(dt),
              static_cast<long long>(b), static_cast<long long>(h), static_cast<long long>(g),
              static_cast<long long>(t), static_cast<long long>(d), causal ? "causal" : "full",
              iters);
  std::printf("  forward   %8.3f ms  %7.1f TFLOP/s\n", fs * 1e3, ffl / fs / 1e12);
  std::printf("  backward  %8.3f ms  %7.1f TFLOP/s\n", bs * 1e3, bfl / bs / 1e12);
  std::printf("  fwd+bwd   %8.3f ms  %7.1f TFLOP/s\n", (fs + bs) * 1e3,
              (ffl + bfl) / (fs + bs) / 1e12);
  for (void* p : buf) ctx.allocator().deallocate(p);
  return 0;
}

}  // namespace
}  // namespace lj

int main(int argc, char** argv) {
  return lj::run(argc, argv);
}
