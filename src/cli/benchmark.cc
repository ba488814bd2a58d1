// `ljperf benchmark`: trains a model on seeded synthetic tokens for a number of steps and
// reports throughput (tokens/s, TFLOP/s, MFU with torchtitan's FLOP convention), step-time
// percentiles and peak memory by category; one JSON object per run with --out.
// Before allocating anything it predicts the step's memory and refuses a run that cannot fit.
// Under mpirun every rank trains its slice of each global batch (data parallel, ZeRO 0-3); only
// rank 0 prints (cli/dist_session.h), and the summary adds the ranks' throughput, communication
// time and peak memory, measured and predicted per rank.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <nlohmann/json.hpp>

#include "backends/cpu/onednn_info.h"
#include "cli/benchmark_gpu.h"
#include "cli/cli.h"
#include "cli/device_choice.h"
#include "cli/dist_session.h"
#include "cli/flag_checks.h"
#include "cli/mfu_peak.h"
#include "cli/plan_report.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "cli/run_config.h"
#include "cli/run_flags.h"
#include "cli/synthetic_batch.h"
#include "core/log.h"
#include "core/random.h"
#include "core/units.h"
#include "dist/batch_shard.h"
#include "dist/consistency.h"
#include "io/jsonl.h"
#include "plan/budget.h"
#include "plan/graph_figures.h"
#include "plan/host_plan.h"
#include "plan/host_rates.h"
#include "runtime/cpu_load.h"
#include "runtime/host.h"
#include "train/train_step.h"
#include "train/trainer.h"

#ifndef LJ_VERSION
#define LJ_VERSION "dev"
#endif

namespace lj::cli {
namespace {

inline constexpr int64_t kDefaultWarmupSteps = 2;

struct BenchmarkArgs {
  RunFlags f;  // the flags benchmark and train share (cli/run_flags.h)
  std::string output;
  int64_t steps = 12;
  int64_t warmup_steps = kDefaultWarmupSteps;  // --skip-steps
  int64_t log_every = 1;
  bool profile = false;
  std::string profile_clock = "wall";
  CLI::App* app = nullptr;
  bool given(const char* flag) const { return app->get_option(flag)->count() > 0; }
};

// What the benchmark runs, after presets, DeepSpeed JSON and flags are resolved.
struct Resolved : StepSettings {
  ModelRef model;
  int64_t seq_len = 0, steps = 0, warmup = 0;
  std::string warmup_note;  // set when the default warmup was lowered for a short run
  std::optional<DeepSpeedConfig> ds;
  DataParallelSettings dp;                // ranks, ZeRO stage and buckets
  std::vector<ResolvedRun::Line> config;  // every value with its origin (ResolvedRun::lines)
  std::string config_text;                // ResolvedRun::describe()
  nlohmann::ordered_json config_json;     // ResolvedRun::to_json()
  // `threads`: --threads (0: all), whose time-model rates price the step.
  HostParallel parallel(int threads) const {
    return HostParallel{dp.world_size, dp.zero, dp.rank, threads};
  }
};

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

// --skip-steps as given (checked), else the default lowered to leave one measured step: a note
// says so (e.g. --steps 2 measures 1 step after 1 warmup step).
StatusOr<int64_t> resolve_warmup(const BenchmarkArgs& a, std::string* note) {
  if (a.given("--skip-steps") || a.given("--warmup-steps")) {
    if (a.warmup_steps < 0 || a.warmup_steps >= a.steps) {
      return invalid_argument("--skip-steps must be in [0, --steps)",
                              "e.g. --steps 12 --skip-steps 2");
    }
    return a.warmup_steps;
  }
  const int64_t warmup = std::min(kDefaultWarmupSteps, a.steps - 1);
  if (warmup < kDefaultWarmupSteps) {
    *note = fmt::format("warmup: {} step{} (lowered from {} for --steps {})", warmup,
                        warmup == 1 ? "" : "s", kDefaultWarmupSteps, a.steps);
  }
  return warmup;
}

StatusOr<Resolved> resolve(const BenchmarkArgs& a, const DistSession& dist) {
  if (a.steps <= 0)
    return invalid_argument("--steps must be positive, got " + std::to_string(a.steps));
  Resolved r;
  // The results file, before any work: a run must not end on an unwritable --out.
  if (!a.output.empty() && dist.is_root())
    LJ_RETURN_IF_ERROR(JsonlWriter::check_appendable(a.output, "--out"));
  LJ_ASSIGN_OR_RETURN(r.warmup, resolve_warmup(a, &r.warmup_note));
  RunSettings run;
  run.total_steps = a.steps;
  run.warmup_steps = r.warmup;
  LJ_ASSIGN_OR_RETURN(ResolvedRun rr,
                      resolve_run(a.f, run, dist.world_size(), dist.rank(), dist.backend_name()));
  static_cast<StepSettings&>(r) = rr.settings;
  r.model = std::move(rr.model);
  r.ds = std::move(rr.ds);
  r.dp = rr.dp;
  r.seq_len = rr.seq_len;
  r.steps = a.steps;
  r.config = std::move(rr.lines);
  return r;
}

// The ranks of a ZeRO-3 run, from `estimate` up, at which one rank's predicted peak (the dry run of
// its graph: its shard of the states, the gathers, its buffers) fits `budget`, one rank per host;
// 0 when none of a few tries does. The estimate shards the states and keeps the rest.
int64_t zero3_ranks_that_fit(const Resolved& r, double estimate, const MemoryBudget& budget) {
  ZeroConfig zero = r.dp.zero;
  zero.stage = 3;
  auto ranks = std::max<int64_t>(2, static_cast<int64_t>(estimate));
  for (int tries = 0; tries < 4; ++tries, ranks += std::max<int64_t>(1, ranks / 4)) {
    const auto run = prepare_host_run(r.model.config, r.micro_batch, r.seq_len, r.step.graph,
                                      HostParallel{static_cast<int>(ranks), zero, 0, 0});
    if (!run.ok()) return 0;
    // The same rule as check_memory_fits: the dry run's reserved bytes beside the process now.
    const double need = static_cast<double>(run->figures.bytes_reserved) +
                        static_cast<double>(process_peak_rss_bytes());
    if (fits(need, budget.bytes)) return ranks;
  }
  return 0;
}

// What would fit instead, for check_memory_fits' hint: a smaller preset, full recompute, ZeRO-3
// over enough ranks, smaller batches. `base`: the process's own bytes outside the step.
std::string what_would_fit(const Resolved& r, const GraphFigures& e, double base,
                           const MemoryBudget& budget) {
  const auto need_of = [&](const GraphFigures& f) {
    return static_cast<double>(f.bytes_reserved) + base;
  };
  std::string hint;
  for (const std::string& p : llama_preset_names()) {
    auto c = llama_preset(p);
    if (!c.ok() || c->family != r.model.config.family ||
        c->num_params() >= r.model.config.num_params()) {
      continue;
    }
    GraphOptions o = r.step.graph;  // the same recompute, where it fits the preset's layers
    if (!o.recompute.validate(c->num_hidden_layers).ok()) o.recompute = RecomputeConfig{};
    auto est = graph_figures(*c, r.micro_batch, std::min(r.seq_len, c->max_position_embeddings), o);
    if (est.ok() && fits(need_of(*est), budget.bytes)) {
      hint = "--model " + p + " fits (" + format_bytes(need_of(*est)) + ")";
    }
  }
  // Recomputing every layer keeps the least activation memory.
  GraphOptions full = r.step.graph;
  full.recompute = RecomputeConfig{RecomputePolicy::full, 1, RecomputeMethod::uniform};
  if (!(full.recompute == r.step.graph.recompute)) {
    auto est = graph_figures(r.model.config, r.micro_batch, r.seq_len, full);
    if (est.ok() && fits(need_of(*est), budget.bytes)) {
      hint = "--recompute full fits (" + format_bytes(need_of(*est)) + ")" +
             (hint.empty() ? "" : "; " + hint);
    }
  }
  const MemoryStats& s = e.stats;
  const auto states =
      static_cast<double>(s.at_peak(MemCategory::weights) + s.at_peak(MemCategory::grads) +
                          s.at_peak(MemCategory::optimizer));
  const double rest = need_of(e) - states;
  const double usable = usable_bytes(budget.bytes);
  if (rest < usable) {
    if (const int64_t ranks = zero3_ranks_that_fit(r, std::ceil(states / (usable - rest)), budget);
        ranks > 0) {
      hint += (hint.empty() ? "" : "; ") +
              fmt::format(
                  "ZeRO-3 over {} or more hosts would shard the {:.1f} GiB of model states enough "
                  "(mpirun -np {}, one rank per host, ljperf benchmark --model {}{}; ranks on one "
                  "host share its memory)",
                  ranks, states / static_cast<double>(kGiB), ranks, r.model.config.name,
                  r.dp.zero.stage == 3 ? "" : " --zero 3");
    }
  }
  hint += (hint.empty() ? "" : "; ") +
          std::string("a smaller --batch-size or --seq-len lowers the activations");
  return hint;
}

// Refuses, before anything is allocated, a run whose predicted memory (the dry run `e` of its
// joint graph) does not fit the host's default budget (plan/budget.h), and says what would fit.
Status check_memory_fits(const Resolved& r, const GraphFigures& e, const HostInfo& host,
                         int ranks_on_host) {
  const double base = static_cast<double>(process_peak_rss_bytes());  // binary, libraries, graph
  const double need = static_cast<double>(e.bytes_reserved) + base;
  // Ranks on one host share its memory: each gets its share (their allocations come after
  // every rank has passed this check, so each sees the same available memory).
  const auto avail = static_cast<double>(host.mem_available_bytes) / ranks_on_host;
  const MemoryBudget budget = default_budget(
      avail, ranks_on_host > 1
                 ? fmt::format("available memory / {} ranks on this host", ranks_on_host)
                 : "available memory");
  LJ_LOG(debug) << "predicted peak " << format_bytes(need) << " ("
                << format_bytes(static_cast<double>(e.bytes_peak)) << " in tensors), available "
                << format_bytes(avail);
  if (fits(need, budget.bytes)) return ok_status();
  const MemoryStats& s = e.stats;
  auto gib = [](int64_t b) {
    return fmt::format("{:.1f}", static_cast<double>(b) / static_cast<double>(kGiB));
  };
  std::string what = fmt::format(
      "{} needs {} for one training step at batch {} x seq {} (GiB: weights {}, grads {}, "
      "optimizer {}, activations "
      "up to {}) but this host has {} available{}",
      r.model.config.name, format_bytes(need), r.micro_batch, r.seq_len,
      gib(s.at_peak(MemCategory::weights)), gib(s.at_peak(MemCategory::grads)),
      gib(s.at_peak(MemCategory::optimizer)), gib(s.peak(MemCategory::activations)),
      format_bytes(avail),
      ranks_on_host > 1 ? fmt::format(" per rank ({} ranks share it)", ranks_on_host) : "");
  return resource_exhausted(what, what_would_fit(r, e, base, budget));
}

void print_header(const Resolved& r, const HostInfo& host, const Device& dev,
                  const std::string& recompute, double compile_s, const TrainStep& trainer) {
  const LlamaConfig& model = r.model.config;
  fmt::print(
      "ljperf benchmark: model {} ({:.1f}M params), micro-batch {} x seq {} x accum {}, {} steps "
      "({} warmup), "
      "{} threads\n",
      model.name, static_cast<double>(model.num_params()) / 1e6, r.micro_batch, r.seq_len,
      r.grad_accum, r.steps, r.warmup, dev.threads());
  if (!r.warmup_note.empty()) fmt::print("{}\n", r.warmup_note);
  fmt::print("{}", describe_config(r.config));
  if (const std::string p = precision_line(r, false); !p.empty()) fmt::print("{}\n", p);
  fmt::print("recompute: {}\n", recompute);
  fmt::print("host: {} ({} cores, {:.2f} GHz)\n", host.cpu_model, host.cores, host.ghz);
  if (r.ds) fmt::print("deepspeed ({}):\n{}", r.ds->source, r.ds->describe());
  fmt::print("{}", r.dp.describe());
  if (r.step.graph.compile) {
    fmt::print("compile: on ({:.2f} s to build the step)\n{}", compile_s, trainer.compile_log());
  } else {
    fmt::print("compile: off (eager: one primitive op at a time, caching allocator)\n");
  }
}

// What the step loop measured.
struct StepLog {
  std::vector<double> measured_seconds;  // after warmup
  std::vector<double> all_seconds;
  std::vector<double> losses;
  std::vector<double> measured_comm_seconds;       // this rank's time in collectives, after warmup
  std::vector<double> measured_exposed_seconds;    // the part of it the step waited for
  std::vector<double> measured_optimizer_seconds;  // StepResult::optimizer_seconds, after warmup
  std::vector<double> measured_cpu_seconds;        // process CPU time per step, after warmup
  // The host's CPU use at the first measured step's start and after the last (runtime/cpu_load.h).
  CpuLoadMark load_start, load_end;
};

StatusOr<StepLog> run_steps(const BenchmarkArgs& a, const Resolved& r, const HostInfo& host,
                            const MfuPeak& peak, Device& dev, TrainStep& trainer) {
  const LlamaConfig& model = r.model.config;
  // This rank's tokens per step (every rank trains as many).
  const int64_t tokens_per_step = r.micro_batch * r.seq_len * r.grad_accum;
  const double flops_per_token = model.flops_per_token(r.seq_len);
  Progress progress("benchmark", "steps");
  const bool tty = progress.is_tty();
  StepLog log;
  for (int64_t s = 0; s < r.steps; ++s) {
    // This rank's slice of the global step, by global micro-batch index: N ranks x accum A
    // train what one process with accum N x A trains (dist/batch_shard.h).
    std::vector<TrainStep::Batch> micro;
    for (const int64_t index : rank_micro_batches(s, r.grad_accum, r.dp.rank, r.dp.world_size)) {
      micro.push_back(
          synthetic_batch(dev, r.micro_batch, r.seq_len, model.vocab_size, a.f.seed, index));
    }
    if (s == r.warmup) {
      trainer.executor().reset_profile();
      log.load_start = cpu_load_mark();
    }
    const double t0 = now_seconds();
    const double cpu0 = process_cpu_seconds();
    const bool ds_schedule = r.ds && r.ds->scheduler.type != DsScheduler::Type::none;
    const double lr = ds_schedule ? r.ds->scheduler.lr_for_step(s) : r.step.adamw.lr;
    LJ_ASSIGN_OR_RETURN(StepResult res, trainer.step(micro, lr));
    const double dt = now_seconds() - t0;
    const double cpu_dt = process_cpu_seconds() - cpu0;
    log.all_seconds.push_back(dt);
    log.losses.push_back(res.loss);
    if (s >= r.warmup) {
      log.measured_seconds.push_back(dt);
      log.measured_comm_seconds.push_back(res.comm_seconds);
      log.measured_optimizer_seconds.push_back(res.optimizer_seconds);
      log.measured_cpu_seconds.push_back(cpu_dt);
      log.measured_exposed_seconds.push_back(res.comm_exposed_seconds);
    }
    const double tps = static_cast<double>(tokens_per_step) / dt;
    if (tty) {
      progress.update(s + 1, r.steps);
    } else if (a.log_every > 0 && ((s + 1) % a.log_every == 0 || s + 1 == r.steps)) {
      fmt::print(stderr, "{}{}\n",
                 torchtitan_line(StepLine{s + 1, res.loss, res.grad_norm,
                                          static_cast<double>(process_peak_rss_bytes()),
                                          static_cast<double>(host.mem_total_bytes), tps,
                                          flops_per_token, peak.flops, /*lr=*/-1}),
                 s < r.warmup ? "  (warmup)" : "");
    }
  }
  log.load_end = cpu_load_mark();
  progress.finish();
  return log;
}

// The run's figures, as printed and recorded.
// The run's figures, as printed and recorded. With several ranks: throughput summed over the
// ranks, and per-rank lists (rank order) gathered to every rank.
struct Summary {
  double p50 = 0, p90 = 0;  // this rank's step seconds
  // All ranks: the sum of the ranks' tokens/s (each its tokens per step over its median step).
  double tokens_per_s = 0, tflops = 0, mfu = 0, flops_per_token = 0, peak_flops = 0;
  std::string peak_name;  // the MFU denominator, named ("232.1 GFLOP/s fp32, measured")
  double rss = 0;         // this process's peak RSS (VmHWM)
  double comm_s = 0;      // this rank's median time in collectives per measured step
  double exposed_s = 0;   // ... of which the step waited for (median)
  int64_t kernels_per_step = 0;
  // One process only (else 0 and NaN: the other ranks are other processes too): the MFU over the
  // median step's CPU time per thread rather than its wall time, and what other processes and
  // the hypervisor (steal) held of the cores' time over the measured steps (runtime/cpu_load.h).
  double mfu_cpu = 0;
  double host_other_share = std::numeric_limits<double>::quiet_NaN();
  double host_steal_share = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> tokens_per_s_by_rank, rss_by_rank, comm_s_by_rank, exposed_s_by_rank,
      optimizer_bytes_by_rank;
  // Each rank's own predicted peak (ranks differ: which part of each bucket they receive, and
  // the MPI library's temporaries, dist/zero.h).
  std::vector<double> predicted_by_rank;
  // The share of the communication hidden behind compute: 1 - exposed / comm.
  double overlapped_share() const {
    return comm_s > 0 ? std::max(0.0, 1.0 - exposed_s / comm_s) : 0;
  }
};

// A collective with several ranks: every rank calls it.
StatusOr<Summary> summarize(const Resolved& r, const MfuPeak& peak, const StepLog& log,
                            const Device& dev, TrainStep& trainer, DistSession& dist,
                            const Pricing& predicted) {
  Summary m;
  m.p50 = percentile(log.measured_seconds, 0.5);
  m.p90 = percentile(log.measured_seconds, 0.9);
  m.comm_s = percentile(log.measured_comm_seconds, 0.5);
  m.exposed_s = percentile(log.measured_exposed_seconds, 0.5);
  m.flops_per_token = r.model.config.flops_per_token(r.seq_len);
  m.peak_flops = peak.flops;
  m.peak_name = peak.name;
  const double local_tps = static_cast<double>(r.micro_batch * r.seq_len * r.grad_accum) / m.p50;
  m.rss = static_cast<double>(process_peak_rss_bytes());
  LJ_ASSIGN_OR_RETURN(m.tokens_per_s_by_rank, dist.gather(local_tps));
  LJ_ASSIGN_OR_RETURN(m.rss_by_rank, dist.gather(m.rss));
  LJ_ASSIGN_OR_RETURN(m.predicted_by_rank, dist.gather(predicted.memory.total));
  LJ_ASSIGN_OR_RETURN(m.comm_s_by_rank, dist.gather(m.comm_s));
  LJ_ASSIGN_OR_RETURN(m.exposed_s_by_rank, dist.gather(m.exposed_s));
  LJ_ASSIGN_OR_RETURN(m.optimizer_bytes_by_rank,
                      dist.gather(static_cast<double>(dev.memory().peak(MemCategory::optimizer))));
  for (double t : m.tokens_per_s_by_rank) m.tokens_per_s += t;
  m.tflops = m.flops_per_token * m.tokens_per_s / 1e12;
  // Ranks on one host share its peak (MfuPeak counts the cores they use, and the hosts).
  m.mfu = m.tflops * 1e12 / m.peak_flops;
  m.kernels_per_step = trainer.executor().kernels_launched() * r.grad_accum;
  if (r.dp.world_size == 1) {
    const double cpu = percentile(log.measured_cpu_seconds, 0.5);
    m.mfu_cpu = cpu > 0 && m.p50 > 0 ? m.mfu * m.p50 * dev.threads() / cpu : 0.0;
    m.host_other_share = other_cpu_share(log.load_start, log.load_end);
    m.host_steal_share = steal_share(log.load_start, log.load_end);
  }
  return m;
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

void print_summary(const BenchmarkArgs& a, const Resolved& r, const StepLog& log, const Summary& m,
                   const Pricing& predicted, const std::string& rates_note, const Device& dev,
                   TrainStep& trainer) {
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
  {
    // CPU time: on a shared host, the step's work without the time others held the cores.
    const double cpu = percentile(log.measured_cpu_seconds, 0.5);
    const std::string mfu_cpu =
        ranks ? "" : fmt::format(", MFU {:.2f}% of the CPU time", 100.0 * m.mfu_cpu);
    fmt::print(
        "  step CPU time p50 {}   ({:.0f} tokens per CPU-second{}; process CPU time, {} threads)\n",
        format_seconds(cpu),
        cpu > 0 ? static_cast<double>(r.micro_batch * r.seq_len * r.grad_accum) / cpu : 0.0,
        mfu_cpu, dev.threads());
  }
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
  if (predicted.times) {
    // The time model (plan/time_model.h) against the step's CPU time per thread, which is what
    // its rates measure (wall time on a quiet host).
    const double cpu = percentile(log.measured_cpu_seconds, 0.5) / dev.threads();
    std::string cats;
    for (const auto& [name, s] : predicted.times->items())
      cats += fmt::format("{}{} {:.0f} ms", cats.empty() ? "" : ", ", name, 1e3 * s);
    fmt::print("  predicted step {}   (time model; CPU time / threads {}, {:+.1f}%)\n    {}\n",
               format_seconds(predicted.step_seconds), format_seconds(cpu),
               cpu > 0 ? 100.0 * (predicted.step_seconds - cpu) / cpu : 0.0, cats);
    if (!rates_note.empty()) fmt::print("    {}", rates_note);
  }
  fmt::print("  kernels/step  {}\n", m.kernels_per_step);
  fmt::print("  final loss    {:.4f}\n", log.losses.back());
  fmt::print("  process peak RSS {}   (predicted peak RSS {}, {:+.2f}%){}\n", format_bytes(m.rss),
             format_bytes(predicted.memory.total), 100.0 * (predicted.memory.total - m.rss) / m.rss,
             ranks ? "   (rank 0)" : "");
  if (ranks) print_ranks(r, m, predicted);
  fmt::print("  memory (ljperf accounting{})\n{}", ranks ? ", rank 0" : "",
             dev.memory().to_string());
  if (const ArenaMemory* pm = trainer.executor().arena_memory()) {
    fmt::print("{}", memory_plan_summary(pm->plan()));
  }
  if (a.profile) {
    // On the CPU clock the step is its CPU time / threads, as the kernels are.
    const bool cpu = a.profile_clock == "cpu";
    const double steps =
        cpu ? sum(log.measured_cpu_seconds) / dev.threads() : sum(log.measured_seconds);
    fmt::print("  kernel time by op category (per measured step{})\n{}",
               cpu ? "; process CPU time / threads" : "",
               profile_table(trainer.executor().profile(),
                             static_cast<int64_t>(log.measured_seconds.size()) * r.grad_accum,
                             HostTimes{sum(log.measured_optimizer_seconds), steps,
                                       static_cast<int64_t>(log.measured_seconds.size())}));
    const auto n = static_cast<int64_t>(log.measured_seconds.size());
    const double step = steps / static_cast<double>(std::max<int64_t>(n, 1));
    // MFU at the mean step of the profile's clock, so that both sides read the same clock.
    const double mfu = m.p50 > 0 && step > 0 ? m.mfu * m.p50 / step : 0.0;
    fmt::print(
        "  GEMM-bound MFU {:.1f}%   (MFU {:.1f}% at the mean step, if the contraction kernels at "
        "their speed here were all the step ran: the ceiling this host's GEMMs set)\n",
        100.0 * gemm_bound_mfu(trainer.executor().profile(), n, mfu, step), 100.0 * mfu);
  }
}

// One JSON object per run, appended to --out.
Status append_results(const BenchmarkArgs& a, const Resolved& r, const HostInfo& host,
                      const Device& dev, const StepLog& log, const Summary& m,
                      const PreparedRun& prepared, double compile_s,
                      const std::vector<OpProfile>& profile) {
  const LlamaConfig& model = r.model.config;
  const std::string recompute = r.step.graph.recompute.to_string(model.num_hidden_layers);
  const MemoryStats& mem = dev.memory();
  nlohmann::ordered_json j;
  j["ljperf"] = LJ_VERSION;
  j["time"] = static_cast<int64_t>(std::time(nullptr));
  j["config"] = {{"model", model.name},
                 {"params", model.num_params()},
                 {"micro_batch", r.micro_batch},
                 {"seq_len", r.seq_len},
                 {"grad_accum", r.grad_accum},
                 {"steps", r.steps},
                 {"warmup_steps", r.warmup},
                 {"precision", dtype_name(r.precision)},
                 {"threads", dev.threads()},
                 {"seed", a.f.seed},
                 {"compile", r.step.graph.compile},
                 {"lr", r.step.adamw.lr},
                 {"grad_clip", r.step.grad_clip},
                 {"deepspeed", r.ds ? r.ds->source : ""},
                 {"world_size", r.dp.world_size},
                 {"zero_stage", r.dp.zero.stage},
                 {"reduce_bucket_size", r.dp.zero.reduce_bucket_size},
                 {"allgather_bucket_size", r.dp.zero.allgather_bucket_size}};
  // Every value the run resolved, with where it came from (cli/run_flags.h).
  j["resolved"] = config_json(r.config);
  j["config"]["recompute"] = recompute;
  j["config"]["recompute_policy"] = recompute_policy_name(r.step.graph.recompute.policy);
  j["config"]["recompute_method"] = recompute_method_name(r.step.graph.recompute.method);
  j["config"]["recompute_layers"] = r.step.graph.recompute.layers;
  j["host"] = {{"cpu", host.cpu_model},
               {"hostname", host.hostname},
               {"cores", host.cores},
               {"ghz", host.ghz},
               {"peak_flops", m.peak_flops},
               {"peak_flops_source", m.peak_name},
               {"nominal_peak_fp32_flops", host.peak_fp32_flops()},
               {"mem_total_bytes", host.mem_total_bytes}};
  j["step_seconds"] = log.all_seconds;
  j["losses"] = log.losses;
  nlohmann::ordered_json by_cat;
  for (int c = 0; c < kNumMemCategories; ++c) {
    const auto cat = static_cast<MemCategory>(c);
    by_cat[mem_category_name(cat)] = mem.peak(cat);
  }
  j["summary"] = {
      {"tokens_per_s", m.tokens_per_s},
      {"tflops", m.tflops},
      {"mfu", m.mfu},
      {"flops_per_token", m.flops_per_token},
      {"flops_convention", "6N+12LHQT (torchtitan)"},
      {"step_s_p50", m.p50},
      // Process CPU time per measured step (all threads): what load does not stretch.
      {"step_cpu_s_p50", percentile(log.measured_cpu_seconds, 0.5)},
      {"mfu_cpu", m.mfu_cpu},
      // Shares of the cores' time over the measured steps (null when unreadable or several ranks).
      {"host_other_share", m.host_other_share},
      {"host_steal_share", m.host_steal_share},
      {"step_s_p90", m.p90},
      {"kernels_per_step", m.kernels_per_step},
      {"compile_s", compile_s},
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
      {"overlap_comm", r.dp.zero.overlap_comm}};
  const Pricing& predicted = prepared.predicted;
  const GraphFigures& figures = prepared.figures;
  nlohmann::ordered_json pred;
  for (const auto& i : predicted.memory.items) pred[i.name] = i.bytes;
  j["plan"] = {{"recompute", recompute},
               {"compile", r.step.graph.compile},
               // Per rank: one rank's ZeRO shard and collective buffers (host_plan.h).
               {"predicted_peak_rss_bytes", predicted.memory.total},
               {"predicted", pred},
               {"predicted_step_seconds", predicted.step_seconds},
               {"predicted_step_times", step_times_json(predicted.times)},
               // cpu_memory_features (plan/memory_model.h): what calibrate --results fits on.
               {"features", cpu_memory_features(figures, model, prepared.process_baseline_bytes)}};
  if (a.profile) {
    // --profile's rows per measured step (its clock), for the time model's check by category.
    const double n = static_cast<double>(std::max<size_t>(1, log.measured_seconds.size()));
    nlohmann::ordered_json rows = nlohmann::ordered_json::object();
    for (const OpProfile& p : profile) {
      const std::string c = category_name(op_def(p.op).category);
      rows[c] = rows.value(c, 0.0) + p.seconds / n;
    }
    rows["optimizer"] = sum(log.measured_optimizer_seconds) / n;
    j["profile"] = {{"clock", a.profile_clock}, {"seconds_per_step", rows}};
  }
  LJ_ASSIGN_OR_RETURN(JsonlWriter w, JsonlWriter::open(a.output, /*append=*/true));
  LJ_RETURN_IF_ERROR(w.write(j.dump()));
  LJ_RETURN_IF_ERROR(w.flush());
  fmt::print("  result appended to {}\n", a.output);
  return ok_status();
}

// CHECKPOINT_OPTIMIZATION / --ckpt-opt: the planner picks what to recompute (before the memory
// check, which is of the chosen recompute).
Status choose_recompute(const BenchmarkArgs& a, Resolved* r) {
  if (!checkpoint_optimization_requested(a.f.ckpt_opt)) return ok_status();
  LJ_ASSIGN_OR_RETURN(MemoryBudget budget, host_budget(a.f.memory_limit));
  LJ_ASSIGN_OR_RETURN(
      CkptChoice c,
      checkpoint_optimization(r->model.config, r->micro_batch, r->seq_len, r->step.graph.compile,
                              budget, r->parallel(a.f.threads), r->precision));
  print_ckpt_choice(c, r->model.config.num_hidden_layers);
  r->step.graph.recompute = c.recompute;
  set_config_value(&r->config, "recompute",
                   c.recompute.to_string(r->model.config.num_hidden_layers));
  return ok_status();
}

// A run made ready on this rank, before any collective: resolved, predicted, checked, built.
struct Ready {
  Resolved r;
  PreparedRun prepared;
  std::unique_ptr<Device> dev;
  std::unique_ptr<TrainStep> trainer;
  double compile_s = 0;
  std::string recompute;
};

StatusOr<Ready> make_ready(const BenchmarkArgs& a, DistSession& dist, const HostInfo& host) {
  Ready g;
  LJ_ASSIGN_OR_RETURN(g.r, resolve(a, dist));
  Resolved& r = g.r;
  const LlamaConfig& model = r.model.config;
  if (r.ds) {
    for (const auto& w : r.ds->warnings) LJ_LOG(warning) << w;
  }
  LJ_RETURN_IF_ERROR(choose_recompute(a, &r));
  set_config_value(&r.config, "device", a.f.device == "auto" ? "cpu (auto)" : "cpu");
  // The chosen configuration's joint graph, built once: dry-run here (the memory check and the
  // planner's prediction, per rank, printed beside the measured peak), then run by the TrainStep.
  LJ_ASSIGN_OR_RETURN(g.prepared, prepare_host_run(model, r.micro_batch, r.seq_len, r.step.graph,
                                                   r.parallel(a.f.threads)));
  // Memory first: for a model this host cannot hold, that is the answer the user needs.
  LJ_RETURN_IF_ERROR(check_memory_fits(r, g.prepared.figures, host, dist.ranks_on_host()));
  g.dev = std::make_unique<Device>(a.f.threads);
  r.step.profile = a.profile;
  r.step.profile_cpu = a.profile_clock == "cpu";
  r.step.data_parallel = dist.data_parallel(r.dp.zero);
  const double compile_t0 = now_seconds();
  g.recompute = r.step.graph.recompute.to_string(model.num_hidden_layers);
  LJ_ASSIGN_OR_RETURN(g.trainer,
                      TrainStep::create(model, r.step, *g.dev, std::move(g.prepared.graph)));
  // Building the step includes building its graph (done once, above).
  g.compile_s = g.prepared.build_seconds + now_seconds() - compile_t0;
  return g;
}

// --device cuda: the resolved run on the GPU, one GPU per rank (cli/benchmark_gpu.h).
Status run_benchmark_on_gpu(const BenchmarkArgs& a, DistSession& dist) {
  StatusOr<Resolved> resolved = resolve(a, dist);
  if (resolved.ok() && !resolved->model.weights_dir.empty()) {
    resolved = require_capability(TrainDevice::cuda, "hf-weights", "on");
  }
  if (resolved.ok() && checkpoint_optimization_requested(a.f.ckpt_opt)) {
    resolved = require_capability(TrainDevice::cuda, "ckpt-opt", "on");
  }
  if (resolved.ok()) {
    resolved->step.data_parallel = dist.data_parallel(resolved->dp.zero);
    resolved->step.comm_options.timeout_seconds = a.f.comm_timeout_s;
    if (Status s = check_gpu_step_config(resolved->step); !s.ok()) resolved = s;
  }
  // Every rank ready, or every rank stops (the others would wait in NCCL's bootstrap).
  LJ_RETURN_IF_ERROR(dist.agree(resolved.status()));
  Resolved& r = *resolved;
  if (dist.distributed()) {
    RunFingerprint fp;
    add_step_fingerprint(r.model.config, r.step, &fp);
    fp.add("batch size", r.micro_batch).add("sequence length", r.seq_len);
    fp.add("gradient accumulation", r.grad_accum).add("steps", r.steps).add("warmup", r.warmup);
    fp.add("device", "cuda");
    LJ_RETURN_IF_ERROR(dist.agree(check_same_on_all_ranks(dist.comm(), fp)));
  }
  set_config_value(&r.config, "device", a.f.device == "auto" ? "cuda (auto)" : "cuda");
  fmt::print("{}", describe_config(r.config));
  GpuBenchmark b;
  b.model_name = r.model.config.name;
  b.run.model = r.model.config;
  b.run.step = r.step;
  b.run.batch = r.micro_batch;
  b.run.seq_len = r.seq_len;
  b.run.grad_accum = r.grad_accum;
  b.run.steps = r.steps;
  b.run.lr = r.step.adamw.lr;
  const int64_t vocab = r.model.config.vocab_size;
  b.run.batch_fn = [&r, vocab, seed = a.f.seed](Device& host, int64_t index) {
    return synthetic_batch(host, r.micro_batch, r.seq_len, vocab, seed, index);
  };
  b.warmup = r.warmup;
  b.output = dist.is_root() ? a.output : "";
  return run_gpu_benchmark(b);
}

Status run_benchmark(const BenchmarkArgs& a, DistSession& dist) {
  LJ_ASSIGN_OR_RETURN(const RunDevice device,
                      choose_device(a.f.device, probe_device_host("ljperf benchmark",
                                                                  /*runs_on_cuda=*/true)));
  if (device == RunDevice::cuda) return run_benchmark_on_gpu(a, dist);
  const HostInfo host = host_info();
  StatusOr<Ready> ready = make_ready(a, dist, host);
  // Every rank ready, or every rank stops (the others would wait in the first collective).
  LJ_RETURN_IF_ERROR(dist.agree(ready.status()));
  Ready& g = *ready;
  const Resolved& r = g.r;
  if (dist.distributed()) {
    // Ranks started with another model, sequence length or setting are refused before any step.
    RunFingerprint fp;
    add_step_fingerprint(r.model.config, r.step, &fp);
    fp.add("batch size", r.micro_batch).add("sequence length", r.seq_len);
    fp.add("gradient accumulation", r.grad_accum).add("steps", r.steps).add("warmup", r.warmup);
    fp.add("learning rate", fmt::format("{:.17g}", r.step.adamw.lr));
    // Every rank gets the same answer: agreed, so each returns it and none is aborted.
    LJ_RETURN_IF_ERROR(dist.agree(check_same_on_all_ranks(dist.comm(), fp)));
  }
  print_header(r, host, *g.dev, g.recompute, g.compile_s, *g.trainer);
  // One rank of several must not probe the cores the others share: it reads the cached figure.
  // Measured again after the steps (below); the summary divides by the higher.
  MfuPeak peak = mfu_peak(r.precision, g.dev->threads(), dist.ranks_on_host(), dist.world_size(),
                          /*may_probe=*/!dist.distributed());
  LJ_ASSIGN_OR_RETURN(StepLog log, run_steps(a, r, host, peak, *g.dev, *g.trainer));
  if (!dist.distributed()) {
    peak = higher_peak(peak,
                       mfu_peak(r.precision, g.dev->threads(), dist.ranks_on_host(),
                                dist.world_size(), /*may_probe=*/true),
                       "the probes before and after the steps");
  }
  LJ_ASSIGN_OR_RETURN(const Summary m,
                      summarize(r, peak, log, *g.dev, *g.trainer, dist, g.prepared.predicted));
  std::string rates_note = g.prepared.rates_note;
  // Cached rates from a slower minute than this one (the peak was probed just now, on the same
  // threads, in f32 as the rates' GEMMs run): the predicted step reads long, and says why.
  if (!dist.distributed() && peak.measured && r.precision == DType::f32 && g.prepared.rates &&
      g.prepared.rates->threads == g.dev->threads()) {
    rates_note += stale_rates_note(*g.prepared.rates, peak.flops);
  }
  print_summary(a, r, log, m, g.prepared.predicted, rates_note, *g.dev, *g.trainer);
  // One record per run: rank 0 writes it.
  if (a.output.empty() || !dist.is_root()) return ok_status();
  return append_results(a, r, host, *g.dev, log, m, g.prepared, g.compile_s,
                        g.trainer->executor().profile());
}

}  // namespace

Command add_benchmark_command(CLI::App& app) {
  auto args = std::make_shared<BenchmarkArgs>();
  CLI::App* sub =
      app.add_subcommand("benchmark", "Train on synthetic tokens and report throughput and memory");
  args->app = sub;
  add_run_flags(sub, &args->f, "AdamW learning rate");
  sub->add_option("--steps", args->steps, "Steps to run, --skip-steps included")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--skip-steps", args->warmup_steps,
                  "First steps left out of the summary: warmup (allocation, caches); the default "
                  "is lowered to --steps - 1 for short runs")
      ->capture_default_str()
      ->check(integer_at_least(0));
  add_renamed_option(sub, "--warmup-steps", "--skip-steps",
                     "--warmup-steps is train's learning-rate warmup", &args->warmup_steps)
      ->check(integer_at_least(0));
  sub->add_option("--log-every", args->log_every,
                  "A progress line every N steps when stderr is not a terminal")
      ->capture_default_str()
      ->check(integer_at_least(0));
  sub->add_flag("--profile", args->profile, "Time every kernel and print time per op category");
  sub->add_option("--profile-clock", args->profile_clock,
                  "--profile's clock: wall, or cpu (process CPU time / threads: what a loaded "
                  "host does not stretch)")
      ->check(CLI::IsMember({"wall", "cpu"}))
      ->capture_default_str();
  sub->add_option("--out", args->output,
                  "Append one JSON object with the run's results to this .jsonl file");
  add_renamed_option(sub, "--output", "--out", "one output flag name in every command",
                     &args->output);
  sub->footer("Several processes: mpirun -np N ljperf benchmark ... (data parallel, ZeRO stage " +
              zero_stages_text() +
              " from --zero or the DeepSpeed JSON); each rank trains its slice of every global "
              "batch, only rank 0 prints.");
  return {sub, [args] {
            return DistSession::run(CommOptions{.timeout_seconds = args->f.comm_timeout_s},
                                    [&](DistSession& dist) { return run_benchmark(*args, dist); });
          }};
}

}  // namespace lj::cli
