// `ljperf benchmark`: trains a model on seeded synthetic tokens for a number of steps and
// reports throughput (tokens/s, TFLOP/s, MFU with torchtitan's FLOP convention), step-time
// percentiles and peak memory by category; one JSON object per run with --out.
// Before allocating anything it predicts the step's memory and refuses a run that cannot fit.
// Under mpirun every rank trains its slice of each global batch (data parallel, ZeRO 0-3); only
// rank 0 prints (cli/dist_session.h), and the summary adds the ranks' throughput, communication
// time and peak memory, measured and predicted per rank.
// This file holds the arguments, the resolution and the two routes, CPU and GPU; the rooms it
// uses are listed in cli/benchmark.h.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>

#include "cli/benchmark.h"
#include "cli/benchmark_fit.h"
#include "cli/benchmark_gpu.h"
#include "cli/benchmark_loop.h"
#include "cli/benchmark_report.h"
#include "cli/cli.h"
#include "cli/device_choice.h"
#include "cli/dist_session.h"
#include "cli/flag_checks.h"
#include "cli/mfu_peak.h"
#include "cli/plan_report.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "core/log.h"
#include "core/units.h"
#include "dist/consistency.h"
#include "io/jsonl.h"
#include "plan/budget.h"
#include "plan/host_plan.h"
#include "probe/host_rates.h"
#include "runtime/host.h"
#include "train/gpu_train.h"
#include "train/train_step.h"
#include "train/trainer.h"

namespace lj::cli {
namespace {

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
  run.total_steps.assign(a.steps, a.given("--steps"));
  run.warmup_steps.assign(r.warmup, a.given("--skip-steps"));
  LJ_ASSIGN_OR_RETURN(static_cast<ResolvedRun&>(r),
                      resolve_run(a.f, run, dist.world_size(), dist.rank(), dist.backend_name()));
  r.steps = a.steps;
  r.config.push_back({"skip_steps", std::to_string(r.warmup),
                      a.given("--skip-steps") || a.given("--warmup-steps") ? "--skip-steps"
                      : r.warmup_note.empty()
                          ? "default"
                          : "default, lowered for --steps " + std::to_string(a.steps)});
  return r;
}

// CHECKPOINT_OPTIMIZATION / --ckpt-opt: the planner picks what to recompute (before the memory
// check, which is of the chosen recompute).
Status choose_recompute(Resolved* r) {
  if (!r->ckpt_opt) return ok_status();
  LJ_ASSIGN_OR_RETURN(MemoryBudget budget, host_budget(r->memory_limit));
  LJ_ASSIGN_OR_RETURN(
      CkptChoice c,
      checkpoint_optimization(r->model.config, r->micro_batch, r->seq_len, r->step.graph.compile,
                              budget, r->host_parallel(r->threads), r->precision));
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
  LJ_RETURN_IF_ERROR(choose_recompute(&r));
  set_config_value(&r.config, "device", a.f.device == "auto" ? "cpu (auto)" : "cpu");
  r.step.data_parallel = dist.data_parallel(r.dp.zero);
  r.step.graph.experts = expert_shard(r.step.data_parallel);
  // The chosen configuration's joint graph, built once: dry-run here (the memory check and the
  // planner's prediction, per rank, printed beside the measured peak), then run by the TrainStep.
  LJ_ASSIGN_OR_RETURN(g.prepared, prepare_host_run(model, r.micro_batch, r.seq_len, r.step.graph,
                                                   r.host_parallel(r.threads)));
  // Memory first: for a model this host cannot hold, that is the answer the user needs.
  LJ_RETURN_IF_ERROR(check_memory_fits(r, g.prepared.figures, host, dist.ranks_on_host()));
  g.dev = std::make_unique<Device>(r.threads);
  r.step.profile = a.profile;
  r.step.profile_cpu = a.profile_clock == "cpu";
  const double compile_t0 = now_seconds();
  g.recompute = r.step.graph.recompute.to_string(model.num_hidden_layers);
  LJ_ASSIGN_OR_RETURN(g.trainer,
                      TrainStep::create(model, r.step, *g.dev, std::move(g.prepared.graph)));
  // Building the step includes building its graph (done once, above).
  g.compile_s = g.prepared.build_seconds + now_seconds() - compile_t0;
  if (const ExpertShard& e = r.step.graph.experts; e.size > 1) {
    const int64_t per = model.moe.num_experts / e.size;
    fmt::print(
        "expert parallel: groups of {} ranks; rank {} holds and runs experts [{}, {}) of {} in "
        "each sparse layer, data-parallel over {} rank(s); {} exchange nodes (route, dispatch, "
        "combine) in its graph\n",
        e.size, dist.rank(), e.rank * per, (e.rank + 1) * per, model.moe.num_experts,
        dist.world_size() / e.size, g.trainer->expert_exchange_nodes());
  }
  return g;
}

// What every rank of a run must hold alike before any step, the device's fields aside: ranks
// started with another model, sequence length or setting are refused.
RunFingerprint run_fingerprint(const Resolved& r) {
  RunFingerprint fp;
  add_step_fingerprint(r.model.config, r.step, &fp);
  fp.add("batch size", r.micro_batch).add("sequence length", r.seq_len);
  fp.add("gradient accumulation", r.grad_accum).add("steps", r.steps).add("warmup", r.warmup);
  return fp;
}

// The CPU's hooks into the step loop: the kernel profile counts from the first measured step, and
// the user sees progress (a bar on a terminal, else torchtitan's line every --log-every steps).
StatusOr<StepLog> run_cpu_steps(const BenchmarkArgs& a, const Resolved& r, const HostInfo& host,
                                const MfuPeak& peak, Device& dev, TrainStep& trainer) {
  const double flops_per_token = r.model.config.flops_per_token(r.seq_len);
  Progress progress("benchmark", "steps");
  StepHooks hooks;
  hooks.measure_start = [&] { trainer.executor().reset_profile(); };
  hooks.after_step = [&](int64_t s, const StepResult& res, double dt) {
    const double tps = static_cast<double>(r.tokens_per_step()) / dt;
    if (progress.is_tty()) {
      progress.update(s + 1, r.steps);
    } else if (a.log_every > 0 && ((s + 1) % a.log_every == 0 || s + 1 == r.steps)) {
      fmt::print(stderr, "{}{}\n",
                 torchtitan_line(StepLine{s + 1, res.loss, res.grad_norm,
                                          static_cast<double>(process_peak_rss_bytes()),
                                          static_cast<double>(host.mem_total_bytes), tps,
                                          flops_per_token, peak.flops, /*lr=*/-1}),
                 s < r.warmup ? "  (warmup)" : "");
    }
    return ok_status();
  };
  // A DeepSpeed scheduler sets each step's rate; else --lr throughout.
  const bool ds_schedule = r.ds && r.ds->scheduler.type != DsScheduler::Type::none;
  const auto lr_at = [&r, ds_schedule](int64_t s) {
    return ds_schedule ? r.ds->scheduler.lr_for_step(s) : r.step.adamw.lr;
  };
  LJ_ASSIGN_OR_RETURN(StepLog log, run_steps(trainer, dev, loop_plan(r, r.seed, lr_at), hooks));
  progress.finish();
  return log;
}

// Why the time model's prediction may read long: its cached rates come from a slower minute than
// this one (the peak was probed just now, on the same threads, in f32 as the rates' GEMMs run).
std::string rates_note(const Ready& g, const MfuPeak& peak, bool distributed) {
  std::string note = g.prepared.rates_note;
  if (!distributed && peak.measured && g.r.precision == DType::f32 && g.prepared.rates &&
      g.prepared.rates->threads == g.dev->threads()) {
    note += stale_rates_note(*g.prepared.rates, peak.flops);
  }
  return note;
}

// The CPU route: ready on every rank, agreed, then the steps between two probes of the peak
// (one rank of several must not probe the cores the others share: it reads the cached figure;
// the summary divides by the higher probe), the summary, and rank 0's record.
Status run_benchmark_on_cpu(const BenchmarkArgs& a, DistSession& dist) {
  const HostInfo host = host_info();
  // The expert groups first: a collective, before anything that may fail on one rank alone.
  LJ_RETURN_IF_ERROR(dist.split_experts(a.f.expert_parallel));
  StatusOr<Ready> ready = make_ready(a, dist, host);
  // Every rank ready, or every rank stops (the others would wait in the first collective).
  LJ_RETURN_IF_ERROR(dist.agree(ready.status()));
  Ready& g = *ready;
  const Resolved& r = g.r;
  if (dist.distributed()) {
    RunFingerprint fp = run_fingerprint(r);
    fp.add("learning rate", fmt::format("{:.17g}", r.step.adamw.lr));
    // Every rank gets the same answer: agreed, so each returns it and none is aborted.
    LJ_RETURN_IF_ERROR(dist.agree(check_same_on_all_ranks(dist.comm(), fp)));
  }
  const CpuRun run{r, host, g.prepared, *g.dev, *g.trainer, g.compile_s, g.recompute};
  print_header(run);
  const int threads = g.dev->threads();
  MfuPeak peak = mfu_peak(r.precision, threads, dist.ranks_on_host(), dist.world_size(),
                          /*may_probe=*/!dist.distributed());
  LJ_ASSIGN_OR_RETURN(StepLog log, run_cpu_steps(a, r, host, peak, *g.dev, *g.trainer));
  if (!dist.distributed()) {
    peak = higher_peak(peak,
                       mfu_peak(r.precision, threads, dist.ranks_on_host(), dist.world_size(),
                                /*may_probe=*/true),
                       "the probes before and after the steps");
  }
  LJ_ASSIGN_OR_RETURN(const Summary m, summarize(run, peak, log, dist));
  print_summary(a, run, log, m, rates_note(g, peak, dist.distributed()));
  // One record per run: rank 0 writes it.
  if (a.output.empty() || !dist.is_root()) return ok_status();
  return append_results(a, run, log, m);
}

// The resolved run, checked against what the GPU step supports (train/capabilities.h).
StatusOr<Resolved> resolve_for_gpu(const BenchmarkArgs& a, DistSession& dist) {
  LJ_ASSIGN_OR_RETURN(Resolved r, resolve(a, dist));
  if (!r.model.weights_dir.empty()) {
    LJ_RETURN_IF_ERROR(require_capability(TrainDevice::cuda, "hf-weights", "on"));
  }
  if (r.ckpt_opt) {
    LJ_RETURN_IF_ERROR(require_capability(TrainDevice::cuda, "ckpt-opt", "on"));
  }
  if (r.model.config.is_moe())
    LJ_RETURN_IF_ERROR(require_capability(TrainDevice::cuda, "moe", "on"));
  r.step.data_parallel = dist.data_parallel(r.dp.zero);
  LJ_RETURN_IF_ERROR(check_gpu_step_config(r.step));
  return r;
}

// --device cuda: the resolved run on the GPU, one GPU per rank (cli/benchmark_gpu.h).
Status run_benchmark_on_gpu(const BenchmarkArgs& a, DistSession& dist) {
  StatusOr<Resolved> resolved = resolve_for_gpu(a, dist);
  // Every rank ready, or every rank stops (the others would wait in NCCL's bootstrap).
  LJ_RETURN_IF_ERROR(dist.agree(resolved.status()));
  Resolved& r = *resolved;
  if (dist.distributed()) {
    RunFingerprint fp = run_fingerprint(r);
    fp.add("device", "cuda");
    LJ_RETURN_IF_ERROR(dist.agree(check_same_on_all_ranks(dist.comm(), fp)));
  }
  set_config_value(&r.config, "device", a.f.device == "auto" ? "cuda (auto)" : "cuda");
  fmt::print("{}", describe_config(r.config));
  return run_gpu_benchmark(a, r, dist.is_root() ? a.output : "");
}

Status run_benchmark(const BenchmarkArgs& a, DistSession& dist) {
  LJ_ASSIGN_OR_RETURN(const RunDevice device,
                      choose_device(a.f.device, probe_device_host("ljperf benchmark",
                                                                  /*runs_on_cuda=*/true)));
  if (device == RunDevice::cuda) return run_benchmark_on_gpu(a, dist);
  return run_benchmark_on_cpu(a, dist);
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
