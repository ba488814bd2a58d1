// What each kind of kernel costs on this host, measured by short micro-runs of ljperf's own
// kernels, for the CPU time model (plan/time_model.h host_step_times):
//   GEMM       by shape class: (M, N, K, ta, tb) with every dim capped at kGemmClassCap. A
//              class is measured the first time a graph needs it (a few ms); a GEMM's time is
//              its class's time scaled by the FLOP ratio. Its efficiency is what it is for that
//              shape (a K = 288 GEMM runs at another rate than a square one): nothing fitted.
//              Classes the cache lacks and may not measure take the nearest measured class (log
//              distance over M, N, K; same layout first; only a class the same GEMM runs, ljperf's
//              own or oneDNN's as backends/cpu/gemm.h gemm_uses_own_sgemm decides, unless there is
//              none; the classes are measured outside any parallel region, as a layer's GEMM
//              runs). The class keeps the shape's GEMM: capping dims at kGemmClassCap never moves
//              a shape between the two (every dim at or above 128 stays there).
//              calibrate starts the table with kGemmShapes (square, small K, small M, the three
//              layouts of a linear layer). Measured cold, as a step meets its operands: independent
//              copies of the GEMM on their own buffers (64 MiB of operands, at most 16 copies).
//              Classes are per dtype: a bf16 GEMM takes a bf16 class (format 9 priced bf16 at the
//              f32 rates: `small` bf16 predicted 716 ms against 352 measured, issue 36).
//   attention  sdpa forward and backward FLOP/s (causal, head_dim 64, T 256), f32 and bf16.
//   pointwise  elementwise kernels: bytes moved (node_cost) / bandwidth, interpolated over the
//              bytes a kernel moves (log scale). Measured cold, as a step meets its operands:
//              independent copies of the kernel on their own buffers, 256 MiB in all.
//              Also measured chained: an add that reads what the add before it just produced
//              (and a cold input, into a new output), as a recomputed kernel meets the clone
//              before it; the chain's time less its first, cold, add.
//   movement   data movement (permute, gather, concat, ...): a head permute's bandwidth, cold.
//   reduction  rms_norm's bandwidth (norms, softmax, sums); loss: cross_entropy's bandwidth
//              (its logits pass, also inside linear_cross_entropy's chunks).
//   optimizer  AdamW's traffic (read p, g, m, v; write p, m, v; one more read of g for the
//              gradient norm: 32 B per parameter) at the bandwidth of the training step's own
//              kernels (backends/cpu/adamw_kernel.h: accumulate_squares, adamw_update).
//   overhead   one kernel launch through the executor (a 1-element add), per graph node.
// Every figure is the median of a few runs of process CPU time / threads: another process on the
// cores stretches wall time, not CPU time (on a quiet host the two agree). The median, not the
// best: what a probe's run meets from other processes sharing the caches and the cores (time
// slices, the second vCPU's load) is what the step meets too, and `plan --measure` and
// `benchmark` report the step's median. On a quiet host they differ by the run-to-run spread.
//
// Cache: host_rates.json beside host_peak.json (probe/host_cache.h), one entry per (CPU model,
// hostname, threads, the ISA oneDNN's kernels run). Measured by the first `ljperf plan --device
// host` on a host (a few seconds), remeasured by `ljperf calibrate --measure`; benchmark and train
// read the cache only (plan/host_plan.h: their peak RSS must not include the measurement's
// buffers).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "probe/full_speed.h"

namespace lj {

struct GemmSample {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  double seconds = 0;  // median of the repetitions
  // bf16 operands (backends/cpu/gemm.h gemm_bf16, its output bf16), else f32: a different kernel
  // with its own rate (oneDNN's vdpbf16ps or AMX, or the own GEMM on widened operands).
  bool bf16 = false;
};

struct BandwidthSample {
  double bytes = 0;        // bytes one kernel moves (node_cost: inputs + outputs)
  double bytes_per_s = 0;  // measured
};

inline constexpr int64_t kGemmClassCap = 2048;

struct HostRates {
  int threads = 0;
  std::vector<GemmSample> gemm;  // measured classes (dims capped at kGemmClassCap)
  double attention_forward_flops = 0, attention_backward_flops = 0;
  // The same with bf16 q, k, v (the autocast graph's sdpa); 0: not measured (f32's rates).
  double attention_bf16_forward_flops = 0, attention_bf16_backward_flops = 0;
  std::vector<BandwidthSample> pointwise;      // ascending bytes, operands cold
  std::vector<BandwidthSample> pointwise_hot;  // ascending bytes, chained (one input just made)
  double movement_bandwidth = 0;               // permute, cold
  double reduction_bandwidth = 0;
  double loss_bandwidth = 0;
  double optimizer_bandwidth = 0;
  double kernel_seconds = 0;
  double probe_seconds = 0;  // how long the measurement took
  // The share of the cores' time other processes used while the probe ran (runtime/cpu_load.h;
  // NaN: not known, e.g. an entry cached before it was recorded). CPU time does not count the
  // time others held the cores, but it does count what they cost this process's caches and
  // memory bandwidth: a probe beside other work measures rates too low.
  double other_cpu_share = std::numeric_limits<double>::quiet_NaN();
  // Compute-bound measurements repeated because the host ran in a slow window (probe/full_speed.h),
  // in the measurement that made these rates (not cached).
  int repeated_slow = 0;
  bool cached = false;

  // Seconds of one (M, N, K) GEMM: its class's measured seconds × FLOPs / the class's FLOPs
  // (nearest class when it was not measured, of the same dtype unless there is none; 0 without
  // any).
  double gemm_seconds(const GemmSample& shape) const;
  // The pointwise bandwidth for a kernel moving `bytes` (log-linear between samples, flat
  // outside them).
  double pointwise_bandwidth(double bytes) const;
  // The same for a kernel reading what the kernel before it just produced (pointwise_hot).
  double pointwise_hot_bandwidth(double bytes) const;
  // sdpa's FLOP/s, forward or backward, with q, k, v of `bf16` (f32's where bf16's were not
  // measured).
  double attention_flops(bool backward, bool bf16) const;
  bool valid() const;
  // Measured while other processes held more than kContendedShare of the cores.
  bool contended() const;
};

// Above this share of the cores' time used by other processes, a probe's rates are suspect:
// host_rates.json's entries measured beside a parallel build (load 5–90 on 2 cores) read
// pointwise bandwidths 25–35% below a quiet probe's, and the step then predicted 25% long.
inline constexpr double kContendedShare = 0.25;
// A contended entry is remeasured by the next `ljperf plan` when the 1-minute load average is
// below this per core (the host is quiet enough for a probe).
inline constexpr double kQuietLoadPerCore = 0.5;

// Whether `ljperf plan` remeasures the cached rates `r` on a host whose 1-minute load average
// per core is `load_per_core`: when the host is quiet now and they were measured contended or
// their square GEMM ran below kStaleGemmShare of `peak_flops` (the cached FMA peak of the same
// threads, which every benchmark remeasures; 0: not known), i.e. stale_rates_note says so.
bool should_remeasure(const HostRates& r, double load_per_core, double peak_flops = 0);
// A line for a plan made with contended rates ("" when they are not): what it means and how to
// remeasure.
std::string contention_note(const HostRates& r);

// The FLOP/s of the largest square f32 GEMM class in `r` (calibrate measures 1024³), 0 when it has
// none: the rate a healthy probe puts near the FMA peak.
double square_gemm_flops(const HostRates& r);
// Below this share of the host's measured FMA peak, the cached square GEMM rate is stale. On
// the Zen 4 host of sessions 12–13 quiet calibrations read 1024³ at 183.0–204.0 GFLOP/s while
// benchmark's peak probes read 212–236 (78–96%); an entry measured in a busy minute read 102
// (44%), and benchmark's predicted step then read 27–31% long.
inline constexpr double kStaleGemmShare = 0.6;
// A line for figures made with cached rates `r` when their square GEMM ran below
// kStaleGemmShare of `peak_flops`, the FMA peak of the same threads (measured now, or the cached
// figure the last benchmark measured) ("" when not, or when either is unknown): what it means
// and how to remeasure.
std::string stale_rates_note(const HostRates& r, double peak_flops);

// The class of a GEMM shape: dims capped at kGemmClassCap, seconds 0.
GemmSample gemm_class(const GemmSample& shape);

// The GEMM classes calibrate measures up front, in f32 and in bf16.
const std::vector<GemmSample>& gemm_shapes();

// Runs the micro-benchmarks on `threads` threads (0: all), the GEMM classes of gemm_shapes().
StatusOr<HostRates> measure_host_rates(int threads = 0);
// Measures the classes of `shapes` that `r` lacks (on r->threads), each at the host's full speed
// (probe/full_speed.h; a watch of its own when `watch` is null); the count measured.
StatusOr<int> measure_gemm_classes(HostRates* r, const std::vector<GemmSample>& shapes,
                                   SpeedWatch* watch = nullptr);

// The cache entry's fields (without the host key) and back; from_json refuses an entry with a
// missing or non-positive rate.
nlohmann::json host_rates_to_json(const HostRates& r);
StatusOr<HostRates> host_rates_from_json(const nlohmann::json& j);

// calibrate's lines: every GEMM sample measured against the fitted model, then each rate.
std::string describe_host_rates(const HostRates& r);

std::string host_rates_cache_path();
// This host's rates on `threads` threads (0: all): cached, else measured and cached.
StatusOr<HostRates> host_rates(int threads = 0, bool remeasure = false);
// Replaces this host's entry for r.threads in the cache with `r` (best effort).
void cache_host_rates(const HostRates& r);
// Adds the classes of `shapes` that `r` lacks, measured, to `r` and to the cache.
Status add_gemm_classes(HostRates* r, const std::vector<GemmSample>& shapes);
// The cached rates only (nullopt when none): for a process that must not probe.
std::optional<HostRates> cached_host_rates(int threads = 0);
// For a plan on this host: host_rates (measured on first use) when `may_probe`, else the cached
// rates; null when there are none (a warning is logged: the step time is then the roofline's).
// With `may_probe`, cached rates measured contended are remeasured when the host is quiet now
// (should_remeasure); callers print contention_note beside figures made with contended rates.
std::shared_ptr<HostRates> plan_host_rates(int threads, bool may_probe);

}  // namespace lj
