// The benchmark's printed summary and JSON record (cli/benchmark_report.h).
#include "cli/benchmark_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/plan_report.h"
#include "cli/report.h"
#include "core/log.h"
#include "core/units.h"
#include "io/jsonl.h"
#include "plan/coefficients.h"
#include "plan/device_catalog.h"
#include "plan/memory_model.h"
#include "plan/plan.h"

#ifndef LJ_VERSION
#define LJ_VERSION "dev"
#endif

namespace lj::cli {
namespace {

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// The GPU route's middle of a list (0 when empty).
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Others' share of the cores' time from which the summary says tokens/s and MFU are held down.
constexpr double kBusyHostShare = 0.05;

// "a, b, c" of each value formatted by `f`.
template <class F>
std::string per_rank(const std::vector<double>& v, F f) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + f(v[i]);
  return s;
}

// The lines only a multi-process run has: throughput per rank, time in collectives, and each
// rank's peak memory against the predictor's per-rank figure.
void print_ranks(const Resolved& r, const Summary& m, const Pricing& predicted) {
  const auto tps = [](double v) { return fmt::format("{:.0f}", v); };
  const auto ms = [](double v) { return format_seconds(v); };
  fmt::print("  per rank      tokens/s {}   (rank order)\n", per_rank(m.tokens_per_s_by_rank, tps));
  fmt::print("  comm/step     p50 {} ({:.1f}% of the step; per rank {})\n",
             format_seconds(m.comm_s), m.p50 > 0 ? 100.0 * m.comm_s / m.p50 : 0.0,
             per_rank(m.comm_s_by_rank, ms));
  fmt::print(
      "  exposed comm  p50 {} ({:.1f}% of the step; per rank {})   overlapped {:.0f}% "
      "(overlap_comm {})\n",
      format_seconds(m.exposed_s), m.p50 > 0 ? 100.0 * m.exposed_s / m.p50 : 0.0,
      per_rank(m.exposed_s_by_rank, ms), 100.0 * m.overlapped_share(),
      r.dp.zero.overlap_comm ? "on" : "off");
  std::vector<double> errors;
  for (size_t i = 0; i < m.rss_by_rank.size() && i < m.predicted_by_rank.size(); ++i)
    errors.push_back(100.0 * (m.predicted_by_rank[i] - m.rss_by_rank[i]) / m.rss_by_rank[i]);
  const auto bytes = [](double v) { return format_bytes(v); };
  fmt::print("  peak RSS per rank (VmHWM)   {}\n", per_rank(m.rss_by_rank, bytes));
  fmt::print("  predicted per rank          {} (ZeRO {} over {} ranks; error {})\n",
             per_rank(m.predicted_by_rank, bytes), r.dp.zero.stage, r.dp.world_size,
             per_rank(errors, [](double v) { return fmt::format("{:+.1f}%", v); }));
  fmt::print("  optimizer states per rank   {}   (ljperf accounting; predicted {})\n",
             per_rank(m.optimizer_bytes_by_rank, [](double v) { return format_bytes(v); }),
             format_bytes(predicted.memory.get("optimizer")));
}

// The summary's first lines: throughput, MFU, step time on the wall and CPU clocks, host load.
void print_throughput(const CpuRun& run, const StepLog& log, const Summary& m) {
  const Resolved& r = run.r;
  const bool ranks = r.dp.world_size > 1;
  fmt::print(
      "\nsummary: {} measured steps, FLOPs per token 6N + 12·L·H·Q·T = {:.4g} GFLOP (torchtitan's "
      "convention)\n",
      log.measured_seconds.size(), m.flops_per_token / 1e9);
  const LlamaConfig& model = r.model.config;
  if (model.is_moe()) {
    fmt::print(
        "  N counts the active parameters: {:.1f}M of {:.1f}M without the input embedding "
        "(the router and {} of {} experts per token)\n",
        static_cast<double>(model.num_active_params_without_embedding()) / 1e6,
        static_cast<double>(model.num_params_without_embedding()) / 1e6, model.moe.top_k,
        model.moe.num_experts);
  }
  const std::string all = ranks ? fmt::format("all {} ranks, ", r.dp.world_size) : "";
  fmt::print("  tokens/s      {:.0f}   ({}median step)\n", m.tokens_per_s, all);
  fmt::print("  TFLOP/s       {:.4f}{}\n", m.tflops, ranks ? "   (all ranks)" : "");
  fmt::print("  MFU           {:.2f}%   (of {})\n", 100.0 * m.mfu, m.peak_name);
  if (m.mfu > 1.0) {
    LJ_LOG(warning) << "MFU above 100%: the steps ran faster than both peak probes, which the "
                       "host slowed (a neighbour on the cores' other hardware threads); rerun it";
  }
  fmt::print("  step time     p50 {}   p90 {}\n", format_seconds(m.p50), format_seconds(m.p90));
  // CPU time: on a shared host, the step's work without the time others held the cores.
  const double cpu = percentile(log.measured_cpu_seconds, 0.5);
  const std::string mfu_cpu =
      ranks ? "" : fmt::format(", MFU {:.2f}% of the CPU time", 100.0 * m.mfu_cpu);
  fmt::print(
      "  step CPU time p50 {}   ({:.0f} tokens per CPU-second{}; process CPU time, {} threads)\n",
      format_seconds(cpu), cpu > 0 ? static_cast<double>(r.tokens_per_step()) / cpu : 0.0, mfu_cpu,
      run.dev.threads());
  // What else held this host's cores over the measured steps: on session 10's shared virtual
  // machine one run's steps ranged over 1.65x while steal reached 16% of the cores' time.
  if (!std::isnan(m.host_other_share)) {
    fmt::print(
        "  host load     others held {:.1f}% of the cores' time ({:.1f}% hypervisor steal){}\n",
        100.0 * m.host_other_share,
        std::isnan(m.host_steal_share) ? 0.0 : 100.0 * m.host_steal_share,
        m.host_other_share >= kBusyHostShare ? ": tokens/s and MFU are held down by it; the "
                                               "CPU-time figures are the steadier ones"
                                             : "");
  }
}

// The time model (plan/time_model.h) against the step's CPU time per thread, which is what its
// rates measure (wall time on a quiet host).
void print_predicted_step(const CpuRun& run, const StepLog& log, const std::string& rates_note) {
  const Pricing& predicted = run.prepared.predicted;
  if (!predicted.times) return;
  const double cpu = percentile(log.measured_cpu_seconds, 0.5) / run.dev.threads();
  std::string cats;
  for (const auto& [name, s] : predicted.times->items())
    cats += fmt::format("{}{} {:.0f} ms", cats.empty() ? "" : ", ", name, 1e3 * s);
  fmt::print("  predicted step {}   (time model; CPU time / threads {}, {:+.1f}%)\n    {}\n",
             format_seconds(predicted.step_seconds), format_seconds(cpu),
             cpu > 0 ? 100.0 * (predicted.step_seconds - cpu) / cpu : 0.0, cats);
  if (!rates_note.empty()) fmt::print("    {}", rates_note);
}

// Kernels, the last loss, and memory: measured against predicted, per rank, by category, and
// the static plan's arena when the run is planned.
void print_memory(const CpuRun& run, const StepLog& log, const Summary& m) {
  const Resolved& r = run.r;
  const Pricing& predicted = run.prepared.predicted;
  const bool ranks = r.dp.world_size > 1;
  fmt::print("  kernels/step  {}\n", m.kernels_per_step);
  fmt::print("  final loss    {:.4f}\n", log.losses.back());
  fmt::print("  process peak RSS {}   (predicted peak RSS {}, {:+.2f}%){}\n", format_bytes(m.rss),
             format_bytes(predicted.memory.total), 100.0 * (predicted.memory.total - m.rss) / m.rss,
             ranks ? "   (rank 0)" : "");
  if (ranks) print_ranks(r, m, predicted);
  fmt::print("  memory (ljperf accounting{})\n{}", ranks ? ", rank 0" : "",
             run.dev.memory().to_string());
  if (const ArenaMemory* pm = run.trainer.executor().arena_memory()) {
    fmt::print("{}", memory_plan_summary(pm->plan()));
  }
}

// --profile: kernel time by op category per measured step (on --profile-clock), and the MFU the
// step's GEMMs alone would allow.
void print_profile(const BenchmarkArgs& a, const CpuRun& run, const StepLog& log,
                   const Summary& m) {
  const std::vector<OpProfile>& profile = run.trainer.executor().profile();
  // On the CPU clock the step is its CPU time / threads, as the kernels are.
  const bool cpu = a.profile_clock == "cpu";
  const double steps =
      cpu ? sum(log.measured_cpu_seconds) / run.dev.threads() : sum(log.measured_seconds);
  const auto n = static_cast<int64_t>(log.measured_seconds.size());
  fmt::print("  kernel time by op category (per measured step{})\n{}",
             cpu ? "; process CPU time / threads" : "",
             profile_table(profile, n * run.r.grad_accum,
                           HostTimes{sum(log.measured_optimizer_seconds), steps, n}));
  const double step = steps / static_cast<double>(std::max<int64_t>(n, 1));
  // MFU at the mean step of the profile's clock, so that both sides read the same clock.
  const double mfu = m.p50 > 0 && step > 0 ? m.mfu * m.p50 / step : 0.0;
  fmt::print(
      "  GEMM-bound MFU {:.1f}%   (MFU {:.1f}% at the mean step, if the contraction and "
      "attention kernels at their speed here were all the step ran: the ceiling this host's "
      "matrix products set)\n",
      100.0 * gemm_bound_mfu(profile, n, mfu, step), 100.0 * mfu);
}

// The record's "config": what ran, as the user set it, and the recompute it resolved to.
nlohmann::ordered_json config_record(const BenchmarkArgs& a, const CpuRun& run) {
  const Resolved& r = run.r;
  const LlamaConfig& model = r.model.config;
  nlohmann::ordered_json c = {{"model", model.name},
                              {"params", model.num_params()},
                              {"micro_batch", r.micro_batch},
                              {"seq_len", r.seq_len},
                              {"grad_accum", r.grad_accum},
                              {"steps", r.steps},
                              {"warmup_steps", r.warmup},
                              {"precision", dtype_name(r.precision)},
                              {"threads", run.dev.threads()},
                              {"seed", r.seed},
                              {"compile", r.step.graph.compile},
                              {"lr", r.step.adamw.lr},
                              {"grad_clip", r.step.grad_clip},
                              {"deepspeed", r.ds ? r.ds->source : ""},
                              {"world_size", r.dp.world_size},
                              {"zero_stage", r.dp.zero.stage},
                              {"reduce_bucket_size", r.dp.zero.reduce_bucket_size},
                              {"allgather_bucket_size", r.dp.zero.allgather_bucket_size}};
  return c;
}

// The recompute keys appended to "config" (after "resolved" in the record's key order).
void add_recompute(const Resolved& r, nlohmann::ordered_json* config) {
  const std::string recompute = r.step.graph.recompute.to_string(r.model.config.num_hidden_layers);
  (*config)["recompute"] = recompute;
  (*config)["recompute_policy"] = recompute_policy_name(r.step.graph.recompute.policy);
  (*config)["recompute_method"] = recompute_method_name(r.step.graph.recompute.method);
  (*config)["recompute_layers"] = r.step.graph.recompute.layers;
}

nlohmann::ordered_json host_record(const HostInfo& host, const Summary& m) {
  return {{"cpu", host.cpu_model},
          {"hostname", host.hostname},
          {"cores", host.cores},
          {"ghz", host.ghz},
          {"peak_flops", m.peak_flops},
          {"peak_flops_source", m.peak_name},
          {"nominal_peak_fp32_flops", host.peak_fp32_flops()},
          {"mem_total_bytes", host.mem_total_bytes}};
}

// The record's "summary": the printed figures, with the per-rank lists.
nlohmann::ordered_json summary_record(const CpuRun& run, const StepLog& log, const Summary& m) {
  const MemoryStats& mem = run.dev.memory();
  nlohmann::ordered_json by_cat;
  for (int c = 0; c < kNumMemCategories; ++c) {
    const auto cat = static_cast<MemCategory>(c);
    by_cat[mem_category_name(cat)] = mem.peak(cat);
  }
  return {{"tokens_per_s", m.tokens_per_s},
          {"tflops", m.tflops},
          {"mfu", m.mfu},
          {"flops_per_token", m.flops_per_token},
          {"flops_convention", "6N+12LHQT (torchtitan)"},
          {"step_s_p50", m.p50},
          // Process CPU time per measured step (all threads): what load does not stretch.
          {"step_cpu_s_p50", percentile(log.measured_cpu_seconds, 0.5)},
          {"mfu_cpu", m.mfu_cpu},
          // Shares of the cores' time over the measured steps (null when unreadable or several
          // ranks).
          {"host_other_share", m.host_other_share},
          {"host_steal_share", m.host_steal_share},
          {"step_s_p90", m.p90},
          {"kernels_per_step", m.kernels_per_step},
          {"compile_s", run.compile_s},
          {"bytes_peak", mem.bytes_total_peak},
          {"bytes_peak_by_category", by_cat},
          {"bytes_reserved_peak", mem.bytes_reserved_peak},
          {"process_peak_rss_bytes", m.rss},
          {"peak_rss_bytes", m.rss},
          // Per rank, rank order (one entry for one process); tokens_per_s is their sum.
          {"tokens_per_s_per_rank", m.tokens_per_s_by_rank},
          {"process_peak_rss_bytes_per_rank", m.rss_by_rank},
          {"predicted_peak_rss_bytes_per_rank", m.predicted_by_rank},
          {"optimizer_bytes_per_rank", m.optimizer_bytes_by_rank},
          {"comm_s_per_step", m.comm_s},
          {"comm_s_per_step_per_rank", m.comm_s_by_rank},
          {"comm_exposed_s_per_step", m.exposed_s},
          {"comm_exposed_s_per_step_per_rank", m.exposed_s_by_rank},
          {"comm_overlapped_share", m.overlapped_share()},
          {"overlap_comm", run.r.dp.zero.overlap_comm}};
}

// The record's "plan": the predictor's figures for this run, beside what was measured.
nlohmann::ordered_json plan_record(const CpuRun& run) {
  const Pricing& predicted = run.prepared.predicted;
  nlohmann::ordered_json pred;
  for (const auto& i : predicted.memory.items) pred[i.name] = i.bytes;
  return {{"recompute", run.recompute},
          {"compile", run.r.step.graph.compile},
          // Per rank: one rank's ZeRO shard and collective buffers (host_plan.h).
          {"predicted_peak_rss_bytes", predicted.memory.total},
          {"predicted", pred},
          {"predicted_step_seconds", predicted.step_seconds},
          {"predicted_step_times", step_times_json(predicted.times)},
          // cpu_memory_features (plan/memory_model.h): what calibrate --results fits on.
          {"features", cpu_memory_features(run.prepared.figures, run.r.model.config,
                                           run.prepared.process_baseline_bytes)}};
}

// --profile's rows per measured step (its clock), for the time model's check by category.
nlohmann::ordered_json profile_record(const BenchmarkArgs& a, const CpuRun& run,
                                      const StepLog& log) {
  const double n = static_cast<double>(std::max<size_t>(1, log.measured_seconds.size()));
  nlohmann::ordered_json rows = nlohmann::ordered_json::object();
  for (const OpProfile& p : run.trainer.executor().profile()) {
    const std::string c = category_name(op_def(p.op).category);
    rows[c] = rows.value(c, 0.0) + p.seconds / n;
  }
  rows["optimizer"] = sum(log.measured_optimizer_seconds) / n;
  return {{"clock", a.profile_clock}, {"seconds_per_step", rows}};
}

// As the CPU route appends: whole lines only, fsynced (io/jsonl.h).
template <class Json>
Status append_record(const std::string& path, const Json& j) {
  LJ_ASSIGN_OR_RETURN(JsonlWriter w, JsonlWriter::open(path, /*append=*/true));
  LJ_RETURN_IF_ERROR(w.write(j.dump()));
  return w.flush();
}

// What the GPU route prints and records, from its step log.
struct GpuFigures {
  double step_s = 0;  // the median measured step
  double tokens_per_s = 0, tflops = 0, flops_per_token = 0;
  double peak = 0;  // the catalog's dense bf16 FLOP/s over every rank; 0: not in the catalog
  const DeviceProfile* dev = nullptr;
  double predicted = 0;  // the predictor's peak bytes per GPU; 0: none
};

// The predictor's peak per GPU for this run (bf16 graph, the run's ZeRO over its ranks).
double gpu_predicted_bytes(const GpuRun& run, const DeviceProfile& dev) {
  const Resolved& r = run.r;
  PlanRequest req;
  req.model = r.model.config;
  req.device = dev;
  req.coeffs = default_coefficients();
  req.gpus = run.world;
  req.zero = r.step.data_parallel.zero;
  req.micro_batch = r.micro_batch;
  req.seq_len = r.seq_len;
  req.compile = r.step.graph.compile;
  auto p = price_choice(req, r.step.graph.recompute, r.micro_batch);
  return p.ok() ? p->memory.total : 0;
}

GpuFigures gpu_figures(const GpuRun& run, const StepLog& log) {
  const Resolved& r = run.r;
  GpuFigures f;
  f.step_s = median(log.measured_seconds);
  // Tokens of one step over every rank; the step time is this rank's (rank 0 prints).
  const double tokens = static_cast<double>(r.tokens_per_step() * run.world);
  f.tokens_per_s = f.step_s > 0 ? tokens / f.step_s : 0;
  f.flops_per_token = r.model.config.flops_per_token(r.seq_len);
  f.tflops = f.flops_per_token * f.tokens_per_s / 1e12;
  f.dev = gpu_catalog_entry(run.gpu.device_name);
  f.peak = f.dev != nullptr ? f.dev->peak_bf16_flops * run.world : 0;
  if (f.dev != nullptr) f.predicted = gpu_predicted_bytes(run, *f.dev);
  return f;
}

void print_gpu_summary(const GpuRun& run, const StepLog& log, const GpuFigures& f) {
  const Resolved& r = run.r;
  const GpuReport& g = run.gpu;
  const size_t steps = log.losses.size();
  fmt::print("  device        {} ({}, {})\n", g.device_name, g.arch,
             format_bytes(static_cast<double>(g.device_memory_bytes)));
  fmt::print("  setup         {:.2f} s (graph, weights, {} fused kernels via NVRTC)\n",
             g.setup_seconds, g.fused_kernels);
  fmt::print("  loss          {:.4f} -> {:.4f} over {} steps\n",
             log.losses.empty() ? 0.0 : log.losses.front(),
             log.losses.empty() ? 0.0 : log.losses.back(), steps);
  fmt::print("  step time     {:.2f} ms (median of {} steps after {} warmup), {} kernels a step\n",
             f.step_s * 1e3, log.measured_seconds.size(), steps - log.measured_seconds.size(),
             g.kernels_per_step);
  if (g.cuda_graphs) {
    fmt::print("  CUDA graphs   {} of {} steps replayed{}\n", g.graph_replays, steps,
               g.graph_replays == 0 ? " (the capture failed: see the warning above)" : "");
  }
  if (r.step.data_parallel.comm != nullptr) {
    fmt::print(
        "  NCCL          {:.2f} ms a step waiting on gradient all-reduces ({})\n",
        median(log.measured_exposed_seconds) * 1e3,
        r.step.data_parallel.zero.overlap_comm ? "overlapped with backward" : "after backward");
  }
  fmt::print("  tokens/s      {:.0f}{}\n", f.tokens_per_s, run.world > 1 ? " (all ranks)" : "");
  fmt::print("  TFLOP/s       {:.2f}   ({:.3g} GFLOP/token, 6N+12LHQT)\n", f.tflops,
             f.flops_per_token / 1e9);
  if (f.peak > 0) {
    fmt::print("  MFU           {:.1f}%  of {:.0f} TFLOP/s dense bf16 ({})\n",
               100.0 * f.tflops * 1e12 / f.peak, f.peak / 1e12, f.dev->name);
  } else {
    fmt::print("  MFU           n/a (no catalog entry for {})\n", g.device_name);
  }
  fmt::print("  peak memory   {} reserved by the allocator ({} in use), {} used on the device\n",
             format_bytes(static_cast<double>(g.bytes_reserved_peak)),
             format_bytes(static_cast<double>(g.bytes_in_use_peak)),
             format_bytes(static_cast<double>(g.bytes_device_used)));
  if (f.predicted > 0) {
    const double err = 100.0 * (f.predicted - static_cast<double>(g.bytes_device_used)) /
                       static_cast<double>(std::max<int64_t>(g.bytes_device_used, 1));
    fmt::print("  predicted     {} ({:+.1f}% against the device's used bytes)\n",
               format_bytes(f.predicted), err);
  }
}

nlohmann::json gpu_record(const GpuRun& run, const StepLog& log, const GpuFigures& f) {
  const Resolved& r = run.r;
  const GpuReport& g = run.gpu;
  nlohmann::json j = {{"command", "benchmark"},
                      {"device", "cuda"},
                      {"gpu", g.device_name},
                      {"arch", g.arch},
                      {"model", r.model.config.name},
                      {"params", r.model.config.num_params()},
                      {"precision", r.step.graph.autocast == DType::bf16 ? "bf16" : "f32"},
                      {"compile", r.step.graph.compile},
                      {"batch_size", r.micro_batch},
                      {"grad_accum", r.grad_accum},
                      {"world_size", run.world},
                      {"zero_stage", r.step.data_parallel.zero.stage},
                      {"seq_len", r.seq_len},
                      {"steps", r.steps},
                      {"warmup_steps", log.losses.size() - log.measured_seconds.size()},
                      {"step_time_ms", f.step_s * 1e3},
                      {"tokens_per_s", f.tokens_per_s},
                      {"tflops", f.tflops},
                      {"mfu", f.peak > 0 ? f.tflops * 1e12 / f.peak : 0.0},
                      {"peak_flops", f.peak},
                      {"flops_per_token", f.flops_per_token},
                      {"losses", log.losses},
                      {"bytes_reserved_peak", g.bytes_reserved_peak},
                      {"bytes_in_use_peak", g.bytes_in_use_peak},
                      {"bytes_device_used", g.bytes_device_used},
                      {"bytes_predicted", f.predicted},
                      {"setup_s", g.setup_seconds},
                      {"cuda_graph_replays", g.graph_replays}};
  // Every value the run resolved, with where it came from (cli/run_flags.h), as the CPU's record.
  for (const ConfigLine& l : r.config)
    j["resolved"][l.key] = {{"value", l.value}, {"from", l.origin}};
  return j;
}

}  // namespace

void print_header(const CpuRun& run) {
  const Resolved& r = run.r;
  const LlamaConfig& model = r.model.config;
  fmt::print(
      "ljperf benchmark: model {} ({:.1f}M params), micro-batch {} x seq {} x accum {}, {} steps "
      "({} warmup), "
      "{} threads\n",
      model.name, static_cast<double>(model.num_params()) / 1e6, r.micro_batch, r.seq_len,
      r.grad_accum, r.steps, r.warmup, run.dev.threads());
  if (!r.warmup_note.empty()) fmt::print("{}\n", r.warmup_note);
  fmt::print("{}", describe_config(r.config));
  if (const std::string p = precision_line(r, false); !p.empty()) fmt::print("{}\n", p);
  fmt::print("recompute: {}\n", run.recompute);
  fmt::print("host: {} ({} cores, {:.2f} GHz)\n", run.host.cpu_model, run.host.cores, run.host.ghz);
  if (r.ds) fmt::print("{}", r.ds->describe());
  fmt::print("{}", r.dp.describe());
  if (r.step.graph.compile) {
    fmt::print("compile: on ({:.2f} s to build the step)\n{}", run.compile_s,
               run.trainer.compile_log());
  } else {
    fmt::print("compile: off (eager: one primitive op at a time, caching allocator)\n");
  }
}

StatusOr<Summary> summarize(const CpuRun& run, const MfuPeak& peak, const StepLog& log,
                            DistSession& dist) {
  const Resolved& r = run.r;
  Summary m;
  m.p50 = percentile(log.measured_seconds, 0.5);
  m.p90 = percentile(log.measured_seconds, 0.9);
  m.comm_s = percentile(log.measured_comm_seconds, 0.5);
  m.exposed_s = percentile(log.measured_exposed_seconds, 0.5);
  m.flops_per_token = r.model.config.flops_per_token(r.seq_len);
  m.peak_flops = peak.flops;
  m.peak_name = peak.name;
  const double local_tps = static_cast<double>(r.tokens_per_step()) / m.p50;
  m.rss = static_cast<double>(process_peak_rss_bytes());
  LJ_ASSIGN_OR_RETURN(m.tokens_per_s_by_rank, dist.gather(local_tps));
  LJ_ASSIGN_OR_RETURN(m.rss_by_rank, dist.gather(m.rss));
  LJ_ASSIGN_OR_RETURN(m.predicted_by_rank, dist.gather(run.prepared.predicted.memory.total));
  LJ_ASSIGN_OR_RETURN(m.comm_s_by_rank, dist.gather(m.comm_s));
  LJ_ASSIGN_OR_RETURN(m.exposed_s_by_rank, dist.gather(m.exposed_s));
  LJ_ASSIGN_OR_RETURN(
      m.optimizer_bytes_by_rank,
      dist.gather(static_cast<double>(run.dev.memory().peak(MemCategory::optimizer))));
  for (double t : m.tokens_per_s_by_rank) m.tokens_per_s += t;
  m.tflops = m.flops_per_token * m.tokens_per_s / 1e12;
  // Ranks on one host share its peak (MfuPeak counts the cores they use, and the hosts).
  m.mfu = m.tflops * 1e12 / m.peak_flops;
  m.kernels_per_step = run.trainer.executor().kernels_launched() * r.grad_accum;
  if (r.dp.world_size == 1) {
    const double cpu = percentile(log.measured_cpu_seconds, 0.5);
    m.mfu_cpu = cpu > 0 && m.p50 > 0 ? m.mfu * m.p50 * run.dev.threads() / cpu : 0.0;
    m.host_other_share = other_cpu_share(log.load_start, log.load_end);
    m.host_steal_share = steal_share(log.load_start, log.load_end);
  }
  return m;
}

void print_summary(const BenchmarkArgs& a, const CpuRun& run, const StepLog& log, const Summary& m,
                   const std::string& rates_note) {
  print_throughput(run, log, m);
  print_predicted_step(run, log, rates_note);
  print_memory(run, log, m);
  if (a.profile) print_profile(a, run, log, m);
}

Status append_results(const BenchmarkArgs& a, const CpuRun& run, const StepLog& log,
                      const Summary& m) {
  nlohmann::ordered_json j;
  j["ljperf"] = LJ_VERSION;
  j["time"] = static_cast<int64_t>(std::time(nullptr));
  j["config"] = config_record(a, run);
  // Every value the run resolved, with where it came from (cli/run_flags.h).
  j["resolved"] = config_json(run.r.config);
  add_recompute(run.r, &j["config"]);
  j["host"] = host_record(run.host, m);
  j["step_seconds"] = log.all_seconds;
  j["losses"] = log.losses;
  j["summary"] = summary_record(run, log, m);
  j["plan"] = plan_record(run);
  if (a.profile) j["profile"] = profile_record(a, run, log);
  LJ_RETURN_IF_ERROR(append_record(a.output, j));
  fmt::print("  result appended to {}\n", a.output);
  return ok_status();
}

void print_gpu_header(const GpuRun& run) {
  const Resolved& r = run.r;
  const Communicator* comm = r.step.data_parallel.comm;
  fmt::print(
      "ljperf benchmark on the GPU: {} ({:.3f} B params), batch {} x seq {} x accum {}{}, {}{}\n",
      r.model.config.name, static_cast<double>(r.model.config.num_params()) / 1e9, r.micro_batch,
      r.seq_len, r.grad_accum,
      comm != nullptr ? fmt::format(" x {} ranks (NCCL, ZeRO stage {})", run.world,
                                    r.step.data_parallel.zero.stage)
                      : "",
      r.step.graph.autocast == DType::bf16 ? "bf16 mixed precision" : "f32",
      r.step.graph.compile ? ", compiled" : ", eager");
}

Status report_gpu_run(const GpuRun& run, const StepLog& log, const std::string& output) {
  const GpuFigures f = gpu_figures(run, log);
  print_gpu_summary(run, log, f);
  if (output.empty()) return ok_status();
  return append_record(output, gpu_record(run, log, f));
}

}  // namespace lj::cli
