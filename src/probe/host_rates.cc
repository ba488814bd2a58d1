#include "probe/host_rates.h"

#include <atomic>

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>
#include <map>

#include "backends/cpu/adamw_kernel.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/onednn_info.h"
#include "core/json_read.h"
#include "core/log.h"
#include "core/units.h"
#include "graph/builder.h"
#include "graph/builder_fused.h"
#include "probe/full_speed.h"
#include "probe/host_cache.h"
#include "probe/host_peak.h"
#include "probe/measured_ranking.h"
#include "runtime/cpu_load.h"
#include "runtime/executor.h"
#include "runtime/host.h"

namespace lj {
namespace {

// 11: bf16 attention on bf16 dot products (format-10 bf16 attention rates measured the f32 kernel
// on widened copies). 10: GEMM classes and attention per dtype (format 9 priced bf16 GEMMs at f32
// rates). 9: huge pages opt-in again (format-8 probes ran on them). 8: the runtime's blocks on
// transparent huge pages by default (format-7 probes ran on 4 KiB pages). 7: a layer's GEMMs go to
// ljperf's own GEMM from 128 in every dimension (format-6 classes measured oneDNN's). 6: AdamW's
// kernel divides by a reciprocal (1.75x the speed): format-5 optimizer rates are stale. 5: each
// entry records the share of the cores other processes used during its probe (entries of format 4
// may have been measured beside other work without saying so); pointwise_hot is an add in a chain
// (reading the add before's output), no longer one add rerun in cache. 4: pointwise also measured
// hot, the optimizer on AdamW's own kernels (3: GEMMs, pointwise, movement and reduction cold; 1,
// 2: some hot, in cache).
constexpr const char* kFormat = "ljperf host rates 11";

// One micro-graph, run once to warm up (oneDNN's JIT, first-touch page faults) and then
// `reps` times: the median process CPU time per run divided by the threads (other processes on
// the cores stretch wall time, not CPU time; with every thread busy the two agree), and the
// node_cost bytes and FLOPs of its first node of op `op`.
struct Timing {
  double seconds = 0, bytes = 0, flops = 0;
};
StatusOr<Timing> time_graph(const Graph& g, Device& dev, const std::vector<Tensor>& in, int reps,
                            Op op, std::vector<Tensor>* outputs = nullptr) {
  Executor ex(g, dev);
  Timing t;
  std::vector<double> runs;
  for (int r = 0; r <= reps; ++r) {
    const double c0 = process_cpu_seconds();
    LJ_ASSIGN_OR_RETURN(std::vector<Tensor> out, ex.run(in));
    const double s = (process_cpu_seconds() - c0) / static_cast<double>(dev.threads());
    if (r > 0) runs.push_back(s);
    if (outputs != nullptr) *outputs = std::move(out);
  }
  t.seconds = median_of(runs);
  for (const Node& n : g.nodes()) {
    if (n.op != op) continue;
    const Cost c = node_cost(g, n, ex.env());
    t.bytes = c.bytes;
    t.flops = c.flops;
    break;
  }
  return t;
}

Tensor zeros(Device& dev, std::vector<int64_t> dims, DType dtype = DType::f32) {
  return Tensor::zeros(dev, dtype, std::move(dims), MemCategory::temporaries);
}

// One GEMM's seconds, its operands cold as in a step (independent copies on their own
// buffers, kColdGemmBytes of operands in all, at most kMaxGemmCopies).
constexpr double kColdGemmBytes = 64.0 * 1024 * 1024;
constexpr int kMaxGemmCopies = 16;

StatusOr<double> gemm_seconds_measured(Device& dev, const GemmSample& s, int reps) {
  const std::vector<int64_t> da = s.ta ? std::vector{s.k, s.m} : std::vector{s.m, s.k};
  const std::vector<int64_t> db = s.tb ? std::vector{s.n, s.k} : std::vector{s.k, s.n};
  const DType dt = s.bf16 ? DType::bf16 : DType::f32;
  const double bytes =
      static_cast<double>(dtype_size(dt)) * static_cast<double>(s.m * s.k + s.k * s.n + s.m * s.n);
  const int copies = std::clamp(static_cast<int>(kColdGemmBytes / bytes), 1, kMaxGemmCopies);
  Graph g;
  Builder b(&g);
  std::vector<Tensor> in;
  for (int c = 0; c < copies; ++c) {
    Val x = b.input("a" + std::to_string(c), dt, Shape::concrete(da));
    Val y = b.input("b" + std::to_string(c), dt, Shape::concrete(db));
    b.output("c" + std::to_string(c), matmul(x, y, s.ta, s.tb));
    in.push_back(zeros(dev, da, dt));
    in.push_back(zeros(dev, db, dt));
  }
  LJ_RETURN_IF_ERROR(b.status());
  LJ_ASSIGN_OR_RETURN(Timing t, time_graph(g, dev, in, reps, Op::matmul));
  return t.seconds / copies;
}

// Causal sdpa and its backward at (B, H, T, D) with q, k, v (and out, dout) of `dt`: forward and
// backward FLOP/s, each op alone (the backward fed the forward's outputs).
Status measure_attention(Device& dev, DType dt, double* forward, double* backward) {
  // 128 heads of T 256: a forward of about 1 ms at B2 H8 ended before the second OpenMP thread
  // woke (passive wait), so CPU time / threads read half the wall time and the f32 forward rate
  // ranged 93-300 GFLOP/s over five calibrations, above the 235 GFLOP/s FMA peak (AMD EPYC,
  // session 22).
  const int64_t B = 8, H = 16, T = 256, D = 64;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<Tensor> fwd_out;
  {
    Graph g;
    Builder b(&g);
    Val q = b.input("q", dt, Shape{B, H, T, D});
    Val k = b.input("k", dt, Shape{B, H, T, D});
    Val v = b.input("v", dt, Shape{B, H, T, D});
    SdpaResult o = sdpa(q, k, v, /*causal=*/true, scale);
    b.output("out", o.out);
    b.output("lse", o.lse);
    LJ_RETURN_IF_ERROR(b.status());
    std::vector<Tensor> in;
    for (int i = 0; i < 3; ++i) in.push_back(zeros(dev, {B, H, T, D}, dt));
    LJ_ASSIGN_OR_RETURN(Timing t, time_graph(g, dev, in, 4, Op::sdpa, &fwd_out));
    *forward = t.flops / t.seconds;
  }
  Graph g;
  Builder b(&g);
  Val q = b.input("q", dt, Shape{B, H, T, D});
  Val k = b.input("k", dt, Shape{B, H, T, D});
  Val v = b.input("v", dt, Shape{B, H, T, D});
  Val out = b.input("out", dt, Shape{B, H, T, D});
  Val lse = b.input("lse", fwd_out[1].dtype(), Shape::concrete(fwd_out[1].dims()));
  Val dout = b.input("dout", dt, Shape{B, H, T, D});
  const std::vector<Val> grads =
      b.add(Op::sdpa_backward, {q, k, v, out, lse, dout}, {{"causal", true}, {"scale", scale}});
  for (size_t i = 0; i < grads.size(); ++i) b.output("d" + std::to_string(i), grads[i]);
  LJ_RETURN_IF_ERROR(b.status());
  std::vector<Tensor> in;
  for (int i = 0; i < 3; ++i) in.push_back(zeros(dev, {B, H, T, D}, dt));
  in.push_back(fwd_out[0]);
  in.push_back(fwd_out[1]);
  in.push_back(zeros(dev, {B, H, T, D}, dt));
  LJ_ASSIGN_OR_RETURN(Timing t, time_graph(g, dev, in, 4, Op::sdpa_backward));
  *backward = t.flops / t.seconds;
  return ok_status();
}

// Bytes a training step's pointwise kernels see come from memory, not from cache (an
// activation is consumed long after it was made): `copies` independent instances of one
// kernel, each on its own inputs, so that together they move kColdBytes; per instance, node_cost
// bytes per second of CPU time.
constexpr double kColdBytes = 256.0 * 1024 * 1024;

int copies_for(double bytes_each) {
  return std::clamp(static_cast<int>(kColdBytes / bytes_each), 1, 512);
}

StatusOr<double> cold_bandwidth(Device& dev, Op op, int copies,
                                const std::function<Val(Builder&, int)>& one,
                                const std::vector<std::vector<int64_t>>& input_dims, int reps) {
  Graph g;
  Builder b(&g);
  for (int c = 0; c < copies; ++c) b.output("y" + std::to_string(c), one(b, c));
  LJ_RETURN_IF_ERROR(b.status());
  std::vector<Tensor> in;
  for (int c = 0; c < copies; ++c) {
    for (const auto& d : input_dims) in.push_back(zeros(dev, d));
  }
  LJ_ASSIGN_OR_RETURN(Timing t, time_graph(g, dev, in, reps, op));
  return t.bytes * copies / t.seconds;
}

// An add over n elements, cold.
StatusOr<BandwidthSample> measure_add(Device& dev, int64_t n) {
  const double bytes = 12.0 * static_cast<double>(n);
  const auto one = [&](Builder& b, int c) {
    Val x = b.input("a" + std::to_string(c), DType::f32, Shape{n});
    Val y = b.input("b" + std::to_string(c), DType::f32, Shape{n});
    return x + y;
  };
  LJ_ASSIGN_OR_RETURN(double bw,
                      cold_bandwidth(dev, Op::add, copies_for(bytes), one, {{n}, {n}}, 3));
  return BandwidthSample{bytes, bw};
}

// An add over n elements that reads what the kernel before it just produced, as a recomputed
// kernel does (time_model.cc reads_just_produced): chains of kChainAdds adds, v = v + c_i, each
// writing a new value and reading the previous one (hot) and a cold input. A chain costs one
// cold add (its first, `cold` bytes per second) plus kChainAdds - 1 chained ones. One add rerun
// on its own buffers instead (format 4) keeps inputs and output in cache and read 1.3-2.6 times
// the cold rate on this Xeon; a chained add 1.1-2.0 times (quiet calibrations, session 7: its
// output is new memory, its second input cold). The rerun figure priced small's selective recompute
// at 4.2 ms per layer against 9.1 ms measured (bench/plan/time_model.sh, 24 rounds).
constexpr int kChainAdds = 8;

StatusOr<BandwidthSample> measure_add_chain(Device& dev, int64_t n, double cold) {
  const double bytes = 12.0 * static_cast<double>(n);
  const int copies = copies_for(bytes * kChainAdds);
  Graph g;
  Builder b(&g);
  for (int c = 0; c < copies; ++c) {
    const auto in = [&](int i) {
      return b.input(fmt::format("x{}_{}", c, i), DType::f32, Shape{n});
    };
    Val v = in(0) + in(1);
    for (int i = 1; i < kChainAdds; ++i) v = v + in(i + 1);
    b.output("y" + std::to_string(c), v);
  }
  LJ_RETURN_IF_ERROR(b.status());
  std::vector<Tensor> inputs;
  for (int c = 0; c < copies; ++c) {
    for (int i = 0; i <= kChainAdds; ++i) inputs.push_back(zeros(dev, {n}));
  }
  LJ_ASSIGN_OR_RETURN(Timing t, time_graph(g, dev, inputs, 3, Op::add));
  // The chain less its first add; on a noisy host the difference can come out at nothing or
  // below: then the chain's mean add (its first, cold, add included: slower, never faster).
  const double per_chain = t.seconds / copies;
  double chained = (per_chain - bytes / cold) / (kChainAdds - 1);
  if (!(chained > 0.25 * per_chain / kChainAdds)) chained = per_chain / kChainAdds;
  return BandwidthSample{bytes, bytes / chained};
}

// A head permute (B, T, H, D) -> (B, H, T, D), cold: data movement.
StatusOr<double> measure_permute(Device& dev) {
  const int64_t B = 4, T = 256, H = 8, D = 64;
  const auto one = [&](Builder& b, int c) {
    return permute(b.input("x" + std::to_string(c), DType::f32, Shape{B, T, H, D}), {0, 2, 1, 3});
  };
  return cold_bandwidth(dev, Op::permute, copies_for(8.0 * B * T * H * D), one, {{B, T, H, D}}, 3);
}

// rms_norm forward over (rows, cols), cold.
StatusOr<double> measure_reduction(Device& dev) {
  const int64_t rows = 2048, cols = 512;
  const auto one = [&](Builder& b, int c) {
    Val x = b.input("x" + std::to_string(c), DType::f32, Shape{rows, cols});
    Val w = b.input("w" + std::to_string(c), DType::f32, Shape{cols});
    return rms_norm(x, w, 1e-5).y;
  };
  return cold_bandwidth(dev, Op::rms_norm, copies_for(8.0 * rows * cols), one,
                        {{rows, cols}, {cols}}, 3);
}

// cross_entropy forward over (rows, vocab) logits: bytes moved (node_cost) per second.
StatusOr<double> measure_loss(Device& dev) {
  const int64_t rows = 256, vocab = 16384;
  Graph g;
  Builder b(&g);
  Val x = b.input("logits", DType::f32, Shape{rows, vocab});
  Val y = b.input("labels", DType::i32, Shape{rows});
  b.output("loss", cross_entropy(x, y));
  LJ_RETURN_IF_ERROR(b.status());
  std::vector<Tensor> in{zeros(dev, {rows, vocab}),
                         Tensor::zeros(dev, DType::i32, {rows}, MemCategory::temporaries)};
  LJ_ASSIGN_OR_RETURN(Timing t, time_graph(g, dev, in, 4, Op::cross_entropy));
  return t.bytes / t.seconds;
}

// Per-kernel overhead: a chain of 64 one-element adds, the median run / 64 kernels.
StatusOr<double> measure_overhead(Device& dev) {
  constexpr int kChain = 64;
  Graph g;
  Builder b(&g);
  Val x = b.input("a", DType::f32, Shape{1});
  Val y = x;
  for (int i = 0; i < kChain; ++i) y = y + x;
  b.output("y", y);
  LJ_RETURN_IF_ERROR(b.status());
  LJ_ASSIGN_OR_RETURN(Timing t, time_graph(g, dev, {zeros(dev, {1})}, 20, Op::add));
  return t.seconds / kChain;
}

// The optimizer step as train/adamw.h runs it, on the same kernels (backends/cpu/adamw_kernel.h):
// the gradient norm's sum of squares over g, then adamw_update reading p, g, m, v and writing
// p, m, v: 32 bytes per parameter. Over 8 Mi parameters (32 MiB per array, 128 MiB in all: far
// past the caches, as a step's are after its backward), the median of 3 runs after one to warm
// up.
double measure_optimizer(int threads) {
  const int64_t n = int64_t{8} << 20;
  std::vector<float> p(n, 1.0f), g(n, 1e-3f), m(n, 0.0f), v(n, 0.0f);
  AdamWStepConstants c;
  c.step_size = 1e-4f;
  c.decay = 0.99f;
  c.beta1 = 0.9f;
  c.beta2 = 0.95f;
  c.eps = 1e-8f;
  std::vector<double> runs;
  for (int r = 0; r <= 3; ++r) {
    const double c0 = process_cpu_seconds();
    double sum = 0;
    accumulate_squares(g.data(), n, threads, &sum);
    c.grad_scale = static_cast<float>(1.0 / (1.0 + std::sqrt(sum)));
    adamw_update(c, p.data(), g.data(), m.data(), v.data(), n, threads);
    if (r > 0) runs.push_back((process_cpu_seconds() - c0) / threads);
  }
  return 32.0 * static_cast<double>(n) / median_of(runs);
}

// The ISA oneDNN's GEMMs run is part of the key: DNNL_MAX_CPU_ISA=AVX2 on an AVX-512 host (or
// a oneDNN that does not know the CPU) halves the GEMM rates on the same CPU model.
bool same_key(const nlohmann::json& e, const HostInfo& h, int threads) {
  return cache_entry_has(e, "cpu", h.cpu_model) && cache_entry_has(e, "hostname", h.hostname) &&
         cache_entry_has(e, "threads", int64_t{threads}) &&
         cache_entry_has(e, "isa", cpu::onednn_info().cpu_isa);
}

}  // namespace

GemmSample gemm_class(const GemmSample& s) {
  return {std::min(s.m, kGemmClassCap),
          std::min(s.n, kGemmClassCap),
          std::min(s.k, kGemmClassCap),
          s.ta,
          s.tb,
          0.0,
          s.bf16};
}

const std::vector<GemmSample>& gemm_shapes() {
  static const std::vector<GemmSample> kShapes = [] {
    const std::vector<GemmSample> f32 = {
        {1024, 1024, 1024, false, false}, {2048, 1024, 1024, false, true},
        {2048, 1024, 1024, false, false}, {1024, 1024, 2048, true, false},
        {2048, 2048, 128, false, true},   {2048, 128, 2048, false, false},
        {128, 2048, 2048, false, true},   {2048, 512, 512, false, true},
    };
    std::vector<GemmSample> all = f32;
    for (GemmSample g : f32) {
      g.bf16 = true;
      all.push_back(g);
    }
    return all;
  }();
  return kShapes;
}

namespace {

double flops_of(const GemmSample& s) {
  return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
}

// Larger than any log distance between two shapes' dims (3 · ln(2048)² ≈ 174).
constexpr double kOtherGemmDistance = 1e4;

bool same_class(const GemmSample& a, const GemmSample& b) {
  return a.m == b.m && a.n == b.n && a.k == b.k && a.ta == b.ta && a.tb == b.tb && a.bf16 == b.bf16;
}

// The host's cached f32 peak on `threads` threads: a speed it is known to reach (0: none).
double cached_peak_flops(int threads) {
  const std::optional<HostPeak> p = cached_host_peak(DType::f32, threads);
  return p ? p->flops : 0.0;
}

// Which GEMM runs the class: ljperf's own or oneDNN's (backends/cpu/gemm.h).
bool runs_own(const GemmSample& c) {
  return c.bf16 ? cpu::gemm_bf16_uses_own()
                : cpu::gemm_uses_own_sgemm(c.ta, c.tb, c.m, c.n, c.k, false);
}

}  // namespace

double HostRates::gemm_seconds(const GemmSample& shape) const {
  const GemmSample c = gemm_class(shape);
  const bool own = runs_own(c);
  const GemmSample* best = nullptr;
  double best_d = 1e300;
  for (const GemmSample& g : gemm) {
    if (same_class(g, c)) {
      best = &g;
      break;
    }
    const auto l = [](int64_t a, int64_t b) {
      const double d = std::log(static_cast<double>(a) / static_cast<double>(b));
      return d * d;
    };
    // A class another GEMM runs (ljperf's own against oneDNN's) is a different kernel with its
    // own rate: taken only when no class of the shape's own GEMM was measured.
    // A class of the other dtype, further still: taken only when the dtype has none.
    const double other_gemm = runs_own(g) != own ? kOtherGemmDistance : 0.0;
    const double other_dtype = g.bf16 != c.bf16 ? 2 * kOtherGemmDistance : 0.0;
    const double d = l(g.m, c.m) + l(g.n, c.n) + l(g.k, c.k) + (g.ta != c.ta || g.tb != c.tb) +
                     other_gemm + other_dtype;
    if (d < best_d) {
      best_d = d;
      best = &g;
    }
  }
  if (best == nullptr || !(best->seconds > 0)) return 0;
  return best->seconds * flops_of(shape) / flops_of(*best);
}

StatusOr<int> measure_gemm_classes(HostRates* r, const std::vector<GemmSample>& shapes,
                                   SpeedWatch* watch) {
  Device dev(r->threads);
  SpeedWatch own(r->threads, cached_peak_flops(r->threads));
  SpeedWatch& w = watch != nullptr ? *watch : own;
  const int repeated0 = w.repeated();
  int measured = 0;
  for (const GemmSample& s : shapes) {
    GemmSample c = gemm_class(s);
    const bool have = std::any_of(r->gemm.begin(), r->gemm.end(),
                                  [&](const GemmSample& g) { return same_class(g, c); });
    if (have) continue;
    // About 100 ms of GEMMs per class, the median of at least 5 runs: small classes repeat more.
    const int reps = std::clamp(static_cast<int>(1e-1 * 1e11 / flops_of(c)), 5, 40);
    LJ_ASSIGN_OR_RETURN(c.seconds,
                        w.measure<double>([&] { return gemm_seconds_measured(dev, c, reps); }));
    r->gemm.push_back(c);
    ++measured;
  }
  r->repeated_slow += w.repeated() - repeated0;
  return measured;
}

namespace {

// Log-linear in bytes between samples, flat outside them.
double interpolate_bandwidth(const std::vector<BandwidthSample>& samples, double bytes) {
  if (samples.empty()) return 0;
  if (bytes <= samples.front().bytes) return samples.front().bytes_per_s;
  for (size_t i = 1; i < samples.size(); ++i) {
    const BandwidthSample& a = samples[i - 1];
    const BandwidthSample& b = samples[i];
    if (bytes <= b.bytes) {
      const double t = std::log(bytes / a.bytes) / std::log(b.bytes / a.bytes);
      return a.bytes_per_s + t * (b.bytes_per_s - a.bytes_per_s);
    }
  }
  return samples.back().bytes_per_s;
}

bool samples_ok(const std::vector<BandwidthSample>& v) {
  return !v.empty() && std::all_of(v.begin(), v.end(),
                                   [](const auto& p) { return p.bytes > 0 && p.bytes_per_s > 0; });
}

}  // namespace

double HostRates::attention_flops(bool backward, bool bf16) const {
  const double low = backward ? attention_bf16_backward_flops : attention_bf16_forward_flops;
  if (bf16 && low > 0) return low;
  return backward ? attention_backward_flops : attention_forward_flops;
}

double HostRates::pointwise_bandwidth(double bytes) const {
  return interpolate_bandwidth(pointwise, bytes);
}

double HostRates::pointwise_hot_bandwidth(double bytes) const {
  return interpolate_bandwidth(pointwise_hot, bytes);
}

bool HostRates::valid() const {
  const bool gemm_ok = !gemm.empty() && std::all_of(gemm.begin(), gemm.end(), [](const auto& g) {
    return g.m > 0 && g.n > 0 && g.k > 0 && g.seconds > 0;
  });
  const bool pw_ok = samples_ok(pointwise) && samples_ok(pointwise_hot);
  return threads > 0 && gemm_ok && pw_ok && attention_forward_flops > 0 &&
         attention_backward_flops > 0 && movement_bandwidth > 0 && reduction_bandwidth > 0 &&
         loss_bandwidth > 0 && optimizer_bandwidth > 0 && kernel_seconds >= 0;
}

bool HostRates::contended() const {
  return other_cpu_share > kContendedShare;  // false for NaN (not known)
}

bool should_remeasure(const HostRates& r, double load_per_core, double peak_flops) {
  const bool suspect = r.contended() || !stale_rates_note(r, peak_flops).empty();
  return suspect && load_per_core < kQuietLoadPerCore;  // false for NaN load
}

StatusOr<HostRates> measure_host_rates(int threads) {
  const double t0 = now_seconds();
  const CpuLoadMark load0 = cpu_load_mark();
  Device dev(threads);
  HostRates r;
  r.threads = dev.threads();
  // The compute-bound figures at the host's full speed (probe/full_speed.h).
  SpeedWatch watch(r.threads, cached_peak_flops(r.threads));
  LJ_RETURN_IF_ERROR(measure_gemm_classes(&r, gemm_shapes(), &watch).status());
  const int repeated0 = watch.repeated();  // the GEMM classes' are counted already
  for (DType dt : {DType::f32, DType::bf16}) {
    using Rates = std::pair<double, double>;
    LJ_ASSIGN_OR_RETURN(Rates a, watch.measure<Rates>([&]() -> StatusOr<Rates> {
      Rates x;
      LJ_RETURN_IF_ERROR(measure_attention(dev, dt, &x.first, &x.second));
      return x;
    }));
    (dt == DType::f32 ? r.attention_forward_flops : r.attention_bf16_forward_flops) = a.first;
    (dt == DType::f32 ? r.attention_backward_flops : r.attention_bf16_backward_flops) = a.second;
  }
  r.repeated_slow += watch.repeated() - repeated0;
  for (int64_t n : {int64_t{1} << 14, int64_t{1} << 17, int64_t{1} << 20, int64_t{1} << 23}) {
    LJ_ASSIGN_OR_RETURN(BandwidthSample s, measure_add(dev, n));
    r.pointwise.push_back(s);
    LJ_ASSIGN_OR_RETURN(BandwidthSample h, measure_add_chain(dev, n, s.bytes_per_s));
    r.pointwise_hot.push_back(h);
  }
  LJ_ASSIGN_OR_RETURN(r.movement_bandwidth, measure_permute(dev));
  LJ_ASSIGN_OR_RETURN(r.reduction_bandwidth, measure_reduction(dev));
  LJ_ASSIGN_OR_RETURN(r.loss_bandwidth, measure_loss(dev));
  LJ_ASSIGN_OR_RETURN(r.kernel_seconds, measure_overhead(dev));
  r.optimizer_bandwidth = measure_optimizer(r.threads);
  r.probe_seconds = now_seconds() - t0;
  r.other_cpu_share = other_cpu_share(load0, cpu_load_mark());
  return r;
}

nlohmann::json host_rates_to_json(const HostRates& r) {
  nlohmann::json gemm = nlohmann::json::array();
  for (const GemmSample& s : r.gemm) {
    nlohmann::json e = {{"m", s.m},   {"n", s.n},   {"k", s.k},
                        {"ta", s.ta}, {"tb", s.tb}, {"seconds", s.seconds}};
    if (s.bf16) e["dtype"] = "bf16";
    gemm.push_back(e);
  }
  const auto samples = [](const std::vector<BandwidthSample>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const BandwidthSample& s : v)
      a.push_back({{"bytes", s.bytes}, {"bytes_per_s", s.bytes_per_s}});
    return a;
  };
  return {{"threads", r.threads},
          {"gemm", gemm},
          {"attention_forward_flops", r.attention_forward_flops},
          {"attention_backward_flops", r.attention_backward_flops},
          {"attention_bf16_forward_flops", r.attention_bf16_forward_flops},
          {"attention_bf16_backward_flops", r.attention_bf16_backward_flops},
          {"pointwise", samples(r.pointwise)},
          {"pointwise_hot", samples(r.pointwise_hot)},
          {"movement_bandwidth", r.movement_bandwidth},
          {"reduction_bandwidth", r.reduction_bandwidth},
          {"loss_bandwidth", r.loss_bandwidth},
          {"optimizer_bandwidth", r.optimizer_bandwidth},
          {"kernel_seconds", r.kernel_seconds},
          {"probe_seconds", r.probe_seconds},
          // null when not known (JSON has no NaN)
          {"other_cpu_share", std::isnan(r.other_cpu_share) ? nlohmann::json(nullptr)
                                                            : nlohmann::json(r.other_cpu_share)}};
}

namespace {

// The array `key` of `j`, each element read by `read`.
template <class T, class Read>
Status read_samples(const nlohmann::json& j, const char* key, const JsonWhere& at, Read read,
                    std::vector<T>* out) {
  const nlohmann::json& a = json_member(j, key);
  LJ_RETURN_IF_ERROR(json_need_array(a, at / key));
  for (size_t i = 0; i < a.size(); ++i) {
    LJ_ASSIGN_OR_RETURN(T sample, read(a[i], (at / key)[i]));
    out->push_back(sample);
  }
  return ok_status();
}

StatusOr<GemmSample> gemm_sample(const nlohmann::json& s, const JsonWhere& at) {
  GemmSample g;
  LJ_ASSIGN_OR_RETURN(g.m, json_read<int64_t>(json_member(s, "m"), at / "m"));
  LJ_ASSIGN_OR_RETURN(g.n, json_read<int64_t>(json_member(s, "n"), at / "n"));
  LJ_ASSIGN_OR_RETURN(g.k, json_read<int64_t>(json_member(s, "k"), at / "k"));
  LJ_ASSIGN_OR_RETURN(g.ta, json_read<bool>(json_member(s, "ta"), at / "ta"));
  LJ_ASSIGN_OR_RETURN(g.tb, json_read<bool>(json_member(s, "tb"), at / "tb"));
  LJ_ASSIGN_OR_RETURN(g.seconds, json_read<double>(json_member(s, "seconds"), at / "seconds"));
  LJ_ASSIGN_OR_RETURN(const std::string dtype,
                      json_read_or<std::string>(json_member(s, "dtype"), "f32", at / "dtype"));
  if (dtype != "f32" && dtype != "bf16")
    return invalid_argument(
        fmt::format("{}: dtype '{}' is neither f32 nor bf16", (at / "dtype").name(), dtype),
        "remeasure with ljperf calibrate --measure");
  g.bf16 = dtype == "bf16";
  return g;
}

StatusOr<BandwidthSample> bandwidth_sample(const nlohmann::json& s, const JsonWhere& at) {
  BandwidthSample b;
  LJ_ASSIGN_OR_RETURN(b.bytes, json_read<double>(json_member(s, "bytes"), at / "bytes"));
  LJ_ASSIGN_OR_RETURN(b.bytes_per_s,
                      json_read<double>(json_member(s, "bytes_per_s"), at / "bytes_per_s"));
  return b;
}

}  // namespace

StatusOr<HostRates> host_rates_from_json(const nlohmann::json& j) {
  HostRates r;
  const JsonWhere at{"host rates entry", "", "remeasure with ljperf calibrate --measure"};
  const auto number = [&](const char* key, double* out) -> Status {
    LJ_ASSIGN_OR_RETURN(*out, json_read<double>(json_member(j, key), at / key));
    return ok_status();
  };
  LJ_ASSIGN_OR_RETURN(r.threads, json_read<int>(json_member(j, "threads"), at / "threads"));
  LJ_RETURN_IF_ERROR(read_samples(j, "gemm", at, gemm_sample, &r.gemm));
  LJ_RETURN_IF_ERROR(number("attention_forward_flops", &r.attention_forward_flops));
  LJ_RETURN_IF_ERROR(number("attention_backward_flops", &r.attention_backward_flops));
  for (const auto& [key, out] :
       {std::pair{"attention_bf16_forward_flops", &r.attention_bf16_forward_flops},
        std::pair{"attention_bf16_backward_flops", &r.attention_bf16_backward_flops}}) {
    LJ_ASSIGN_OR_RETURN(*out, json_read_or<double>(json_member(j, key), 0.0, at / key));
  }
  LJ_RETURN_IF_ERROR(read_samples(j, "pointwise", at, bandwidth_sample, &r.pointwise));
  LJ_RETURN_IF_ERROR(read_samples(j, "pointwise_hot", at, bandwidth_sample, &r.pointwise_hot));
  LJ_RETURN_IF_ERROR(number("movement_bandwidth", &r.movement_bandwidth));
  LJ_RETURN_IF_ERROR(number("reduction_bandwidth", &r.reduction_bandwidth));
  LJ_RETURN_IF_ERROR(number("loss_bandwidth", &r.loss_bandwidth));
  LJ_RETURN_IF_ERROR(number("optimizer_bandwidth", &r.optimizer_bandwidth));
  LJ_RETURN_IF_ERROR(number("kernel_seconds", &r.kernel_seconds));
  LJ_ASSIGN_OR_RETURN(r.probe_seconds, json_read_or<double>(json_member(j, "probe_seconds"), 0.0,
                                                            at / "probe_seconds"));
  // null when not known (JSON has no NaN): the default, NaN, stays.
  if (const std::optional<double> share = json_number_if(json_member(j, "other_cpu_share")))
    r.other_cpu_share = *share;
  if (!r.valid())
    return invalid_argument("host rates entry: a rate is missing or not positive",
                            "remeasure with ljperf calibrate --measure");
  return r;
}

std::string describe_host_rates(const HostRates& r) {
  std::string s =
      fmt::format("  time model rates ({} threads; median CPU time / threads)\n", r.threads);
  for (const GemmSample& g : r.gemm) {
    s += fmt::format("    GEMM {:>5} x {:>5} x {:>5} {}{} {:4}  {:7.1f} GFLOP/s\n", g.m, g.n, g.k,
                     g.ta ? "ta" : "  ", g.tb ? "tb" : "  ", g.bf16 ? "bf16" : "f32",
                     flops_of(g) / g.seconds / 1e9);
  }
  s += fmt::format("    attention (causal sdpa) forward {:.1f}, backward {:.1f} GFLOP/s\n",
                   r.attention_forward_flops / 1e9, r.attention_backward_flops / 1e9);
  if (r.attention_bf16_forward_flops > 0) {
    s += fmt::format("    attention bf16 forward {:.1f}, backward {:.1f} GFLOP/s\n",
                     r.attention_bf16_forward_flops / 1e9, r.attention_bf16_backward_flops / 1e9);
  }
  for (size_t i = 0; i < r.pointwise.size(); ++i) {
    const BandwidthSample& b = r.pointwise[i];
    s += fmt::format("    pointwise (add) moving {:>9}: {:.1f} GB/s cold, {:.1f} GB/s chained\n",
                     format_bytes(b.bytes), b.bytes_per_s / 1e9,
                     r.pointwise_hot_bandwidth(b.bytes) / 1e9);
  }
  s += fmt::format(
      "    data movement (permute) {:.1f} GB/s; reduction (rms_norm) {:.1f} GB/s; loss "
      "(cross_entropy) {:.1f} GB/s; optimizer (AdamW "
      "traffic) {:.1f} GB/s; {:.2f} us per kernel\n",
      r.movement_bandwidth / 1e9, r.reduction_bandwidth / 1e9, r.loss_bandwidth / 1e9,
      r.optimizer_bandwidth / 1e9, r.kernel_seconds * 1e6);
  if (!std::isnan(r.other_cpu_share)) {
    s += fmt::format(
        "    measured while other processes used {:.0f}% of the cores{}\n",
        100.0 * r.other_cpu_share,
        r.contended() ? ": contended, the rates read low (remeasure on a quiet host)" : "");
  }
  if (r.repeated_slow > 0) {
    s += fmt::format(
        "    {} measurement(s) repeated: the host ran under {:.0f}% of its best speed while they "
        "ran (a slow window; probe/full_speed.h)\n",
        r.repeated_slow, 100.0 * kSlowShare);
  }
  return s;
}

std::string host_rates_cache_path() {
  return host_cache_path("host_rates.json");
}

void cache_host_rates(const HostRates& r) {
  const HostInfo h = host_info();
  const std::string path = host_rates_cache_path();
  nlohmann::json entry = host_rates_to_json(r);
  entry["cpu"] = h.cpu_model;
  entry["hostname"] = h.hostname;
  entry["isa"] = cpu::onednn_info().cpu_isa;
  entry["time"] = static_cast<int64_t>(std::time(nullptr));
  write_host_cache(
      path, kFormat, read_host_cache(path, kFormat),
      [&](const nlohmann::json& e) { return same_key(e, h, r.threads); }, entry);
}

Status add_gemm_classes(HostRates* r, const std::vector<GemmSample>& shapes) {
  LJ_ASSIGN_OR_RETURN(int measured, measure_gemm_classes(r, shapes));
  if (measured > 0) cache_host_rates(*r);
  return ok_status();
}

std::shared_ptr<HostRates> plan_host_rates(int threads, bool may_probe) {
  std::optional<HostRates> c = cached_host_rates(threads);
  // Contended rates: the caller says so beside its figures (contention_note), after the request
  // has been checked, so that bad input gets its error alone.
  if (!may_probe) {
    static std::atomic<bool> said{false};  // once per process: a search asks many times
    if (!c && !said.exchange(true)) {
      LJ_LOG(info) << "no measured host rates in " << host_rates_cache_path()
                   << "; step times from the roofline (ljperf calibrate --measure measures them)";
    }
    return c ? std::make_shared<HostRates>(*c) : nullptr;
  }
  const double load = load_per_core();
  const double peak_flops = c ? cached_peak_flops(c->threads) : 0.0;
  const bool remeasure = c && should_remeasure(*c, load, peak_flops);
  if (remeasure && c->contended()) {
    LJ_LOG(info) << fmt::format(
        "the cached time model rates were measured while other processes used {:.0f}% of the "
        "cores; the host is quieter now (load {:.2f} per core): remeasuring them",
        100.0 * c->other_cpu_share, load);
  } else if (remeasure) {
    LJ_LOG(info) << fmt::format(
        "the cached time model rates' square GEMM ran at {:.1f} GFLOP/s, under {:.0f}% of this "
        "host's last measured peak ({:.1f}): remeasuring them",
        square_gemm_flops(*c) / 1e9, 100.0 * kStaleGemmShare, peak_flops / 1e9);
  }
  if (c && !remeasure) return std::make_shared<HostRates>(*c);
  StatusOr<HostRates> r = host_rates(threads, /*remeasure=*/true);
  if (!r.ok()) {
    LJ_LOG(warning) << r.status().message() << "; step times from the roofline model";
    return nullptr;
  }
  return std::make_shared<HostRates>(*r);
}

std::string contention_note(const HostRates& r) {
  if (!r.contended()) return "";
  return fmt::format(
      "note: the time model's rates were measured while other processes used {:.0f}% of the "
      "cores, so predicted step times read long; ljperf calibrate --measure on a quiet host "
      "remeasures them (the next plan does when the load is below {:.1f} per core)\n",
      100.0 * r.other_cpu_share, kQuietLoadPerCore);
}

namespace {
// The largest square GEMM class measured in `r`, null when none.
const GemmSample* largest_square(const HostRates& r) {
  const GemmSample* big = nullptr;
  for (const GemmSample& g : r.gemm) {
    if (!g.bf16 && g.m == g.n && g.n == g.k && g.seconds > 0 && (big == nullptr || g.m > big->m))
      big = &g;
  }
  return big;
}
}  // namespace

double square_gemm_flops(const HostRates& r) {
  const GemmSample* big = largest_square(r);
  return big ? flops_of(*big) / big->seconds : 0.0;
}

std::string stale_rates_note(const HostRates& r, double peak_flops) {
  const double gemm = square_gemm_flops(r);
  if (!(gemm > 0) || !(peak_flops > 0) || gemm >= kStaleGemmShare * peak_flops) return "";
  return fmt::format(
      "note: the time model's cached rates look stale: their {}³ GEMM ran at {:.1f} GFLOP/s, "
      "{:.0f}% of this host's measured peak of {:.1f} (under {:.0f}%: measured in a slower "
      "minute), so predicted step times read long; ljperf calibrate --measure remeasures them\n",
      largest_square(r)->m, gemm / 1e9, 100.0 * gemm / peak_flops, peak_flops / 1e9,
      100.0 * kStaleGemmShare);
}

std::optional<HostRates> cached_host_rates(int threads) {
  const HostInfo h = host_info();
  const int t = threads > 0 ? threads : omp_get_max_threads();
  for (const auto& e : read_host_cache(host_rates_cache_path(), kFormat)) {
    if (!same_key(e, h, t)) continue;
    StatusOr<HostRates> r = host_rates_from_json(e);
    if (r.ok()) {
      r->cached = true;
      return *r;
    }
  }
  return std::nullopt;
}

StatusOr<HostRates> host_rates(int threads, bool remeasure) {
  const int t = threads > 0 ? threads : omp_get_max_threads();
  if (!remeasure) {
    if (auto c = cached_host_rates(t)) return *c;
  }
  LJ_ASSIGN_OR_RETURN(HostRates r, measure_host_rates(t));
  cache_host_rates(r);
  return r;
}

}  // namespace lj
