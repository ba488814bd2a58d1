// `ljperf train`: real training on token files with crash-safe checkpoints (train/trainer.h),
// logs to the console (torchtitan's line), DIR/metrics.jsonl and TensorBoard (DIR/tb).
//
// Under mpirun every rank runs this same code (cli/dist_session.h): data parallel with ZeRO 0-3
// (--zero or the DeepSpeed JSON), only rank 0 prints and writes the logs, every rank writes its
// checkpoint shard and rank 0 commits (train/sharded_checkpoint.h). Each rank resolves and loads
// on its own; then every rank is ready or all stop (DistSession::agree) before the first
// collective. A collective that waits past --comm-timeout (a rank died) ends the job.
#include <fmt/format.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "backends/cuda/cuda.h"
#include "cli/cli.h"
#include "cli/data_sample.h"
#include "cli/device_choice.h"
#include "cli/dist_session.h"
#include "cli/flag_checks.h"
#include "cli/mfu_peak.h"
#include "cli/plan_report.h"
#include "cli/report.h"
#include "cli/run_config.h"
#include "cli/run_flags.h"
#include "cli/stop_signals.h"
#include "cli/tokenizer_files.h"
#include "core/units.h"
#include "io/jsonl.h"
#include "io/tensorboard.h"
#include "models/hf_config.h"
#include "runtime/host.h"
#include "train/checkpoint.h"
#include "train/gpu_train.h"
#include "train/hf_model.h"
#include "train/trainer.h"

namespace lj::cli {
namespace {

// Set by SIGTERM / SIGINT (cli/stop_signals.h); the trainer checks it between steps.
std::atomic<bool> g_stop{false};

struct TrainArgs {
  RunFlags f;  // the flags benchmark and train share (cli/run_flags.h)
  std::string data, val_data, out;
  std::string data_format = "auto";
  std::string tokenizer;  // when given, decoded samples of the data are printed at start
  TrainerConfig t;
  double min_lr = 3e-5, weight_decay = 0.1, grad_clip = 1.0;
  std::string decay = "cosine";
  CLI::App* app = nullptr;
  bool given(const char* flag) const { return app->get_option(flag)->count() > 0; }
  int64_t warmup_steps = 0;  // --warmup-steps; when not given, default_warmup_steps(--steps)
  int64_t log_every = 1;
};

StatusOr<LrSchedule::Decay> parse_decay(const std::string& name) {
  if (name == "cosine") return LrSchedule::Decay::cosine;
  if (name == "linear") return LrSchedule::Decay::linear;
  if (name == "constant") return LrSchedule::Decay::constant;
  return invalid_argument("unknown --decay '" + name + "'", "use cosine, linear or constant");
}

// The flags that need no file to be checked.
Status check_args(const TrainArgs& a) {
  if (a.t.steps <= 0)
    return invalid_argument("--steps must be positive, got " + std::to_string(a.t.steps));
  if (a.t.keep_last < 0) return invalid_argument("--keep-last must be >= 0 (0 keeps all)");
  if (a.f.lr <= 0 || a.min_lr < 0 || a.min_lr > a.f.lr)
    return invalid_argument("need 0 <= --min-lr <= --lr and --lr > 0");
  return ok_status();
}

// What the run trains: the resolved run (cli/run_flags.h, with every value's origin) and train's
// own settings.
struct ResolvedTrain : ResolvedRun {
  TokenFormat format;        // --data-format
  LrSchedule::Decay decay;   // --decay
  int64_t warmup_steps = 0;  // the LR warmup: --warmup-steps, else default_warmup_steps
};

// The LR warmup when --warmup-steps is not given: a tenth of the run (HF Trainer's common
// warmup_ratio 0.1), so a short run still decays (10 steps warm up 1, then decay over 9).
int64_t default_warmup_steps(int64_t steps) {
  return steps / 10;
}

StatusOr<ResolvedTrain> resolve(const TrainArgs& a, const DistSession& dist) {
  ResolvedTrain r;
  if (!parse_token_format(a.data_format, &r.format)) {
    return invalid_argument("unknown --data-format '" + a.data_format + "'",
                            "use auto, llmc, megatron, u16 or u32");
  }
  LJ_RETURN_IF_ERROR(check_args(a));
  LJ_ASSIGN_OR_RETURN(r.decay, parse_decay(a.decay));
  RunSettings run;
  run.weight_decay.assign(a.weight_decay, a.given("--weight-decay"));
  run.grad_clip.assign(a.grad_clip, a.given("--grad-clip"));
  run.total_steps.assign(a.t.steps, a.given("--steps"));
  r.warmup_steps = a.given("--warmup-steps") ? a.warmup_steps : default_warmup_steps(a.t.steps);
  run.warmup_steps.assign(r.warmup_steps, a.given("--warmup-steps"));
  LJ_ASSIGN_OR_RETURN(static_cast<ResolvedRun&>(r),
                      resolve_run(a.f, run, dist.world_size(), dist.rank(), dist.backend_name()));
  r.config.push_back({"warmup_steps", std::to_string(r.warmup_steps),
                      a.given("--warmup-steps") ? "--warmup-steps" : "default: --steps / 10"});
  return r;
}

// The trainer's configuration from the resolved run; prints the DeepSpeed settings in use.
void configure_trainer(const TrainArgs& a, const ResolvedTrain& r, TrainerConfig* t) {
  t->out_dir = a.out;
  t->lr = LrSchedule{r.step.adamw.lr, a.min_lr, r.warmup_steps, t->steps, r.decay};
  t->batch_size = r.micro_batch;
  t->seq_len = r.seq_len;
  t->grad_accum = r.grad_accum;
  t->step = r.step;
  if (r.dp.world_size > 1) fmt::print("{}", r.dp.describe());
  if (!r.ds) return;
  const DeepSpeedConfig& ds = *r.ds;
  if (ds.scheduler.type != DsScheduler::Type::none) {
    const DsScheduler sched = ds.scheduler;
    t->lr_fn = [sched](int64_t step) { return sched.lr_for_step(step); };
  }
  fmt::print("{}", ds.describe());
  for (const auto& w : ds.warnings) fmt::print(stderr, "warning: {}\n", w);
}

// CHECKPOINT_OPTIMIZATION / --ckpt-opt: the planner picks what to recompute.
Status choose_recompute(ResolvedTrain& r, TrainerConfig* t) {
  if (!r.ckpt_opt) return ok_status();
  const LlamaConfig& model = r.model.config;
  LJ_ASSIGN_OR_RETURN(MemoryBudget budget, host_budget(r.memory_limit));
  LJ_ASSIGN_OR_RETURN(
      CkptChoice c, checkpoint_optimization(model, t->batch_size, t->seq_len, t->step.graph.compile,
                                            budget, r.host_parallel(r.threads), r.precision));
  print_ckpt_choice(c, model.num_hidden_layers);
  t->step.graph.recompute = c.recompute;
  set_config_value(&r.config, "recompute", c.recompute.to_string(model.num_hidden_layers));
  return ok_status();
}

// The run's logs: console lines, DIR/metrics.jsonl and TensorBoard (DIR/tb), opened on start.
struct RunLogs {
  std::optional<JsonlWriter> jsonl;
  std::optional<EventWriter> tb;
  Status error;  // the first failed write
  bool started = false;
};

// With several ranks only rank 0 writes the files (`root`); the console is gated by DistSession.
TrainerCallbacks make_callbacks(const TrainArgs& a, const TrainerConfig& t,
                                const LlamaConfig& model, const HostInfo& host,
                                const DistSession& dist, RunLogs* logs) {
  const double flops_per_token = model.flops_per_token(t.seq_len);
  // MFU's denominator: the peak on the run's threads, measured at the start (cli/mfu_peak.h);
  // one rank of several must not probe the cores the others share: it reads the cached figure.
  // On the GPU: the catalog's dense bf16 peak of the GPU (every rank has one of the same).
  // One process divides by the higher of its probe and the one cached by the run before: the
  // steps are logged as they go, so a probe a busy neighbour slowed cannot be redone after them.
  const cuda::Probe gpus = t.device == TrainDevice::cuda ? cuda::probe() : cuda::Probe{};
  const int threads = a.f.threads > 0 ? a.f.threads : host.cores;
  const auto cpu_peak = [&] {
    const DType dt = t.step.graph.autocast;
    if (dist.distributed()) {
      return mfu_peak(dt, threads, dist.ranks_on_host(), dist.world_size(), /*may_probe=*/false);
    }
    const MfuPeak before = mfu_peak(dt, threads, 1, 1, /*may_probe=*/false);  // read first
    return higher_peak(mfu_peak(dt, threads, 1, 1, /*may_probe=*/true), before,
                       "this run's probe and the previous run's");
  };
  const MfuPeak peak =
      t.device == TrainDevice::cuda
          ? gpu_mfu_peak(gpus.devices.empty() ? std::string() : gpus.devices[0].name,
                         dist.world_size())
          : cpu_peak();
  const double peak_flops = peak.flops;
  // Memory: the GPU's (its allocator's reserved peak, of its total) or the process's peak RSS.
  const double mem_total = t.device == TrainDevice::cuda && !gpus.devices.empty()
                               ? static_cast<double>(gpus.devices[0].memory_bytes)
                               : static_cast<double>(host.mem_total_bytes);
  TrainerCallbacks cb;
  cb.info = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
  cb.on_start = [logs, out = a.out, root = dist.is_root()]() -> Status {
    logs->started = true;
    if (!root) return ok_status();
    LJ_ASSIGN_OR_RETURN(JsonlWriter j, JsonlWriter::open(out + "/metrics.jsonl", /*append=*/true));
    logs->jsonl.emplace(std::move(j));
    LJ_ASSIGN_OR_RETURN(EventWriter w, EventWriter::open(out + "/tb"));
    logs->tb.emplace(std::move(w));
    return ok_status();
  };
  cb.on_step = [=, log_every = a.log_every, steps = t.steps](const StepMetrics& m) {
    const double tps = static_cast<double>(m.tokens) / m.step_seconds;
    const double mem = m.device_memory_peak > 0 ? static_cast<double>(m.device_memory_peak)
                                                : static_cast<double>(process_peak_rss_bytes());
    if (log_every > 0 && (m.step % log_every == 0 || m.step == steps)) {
      fmt::print(stderr, "{}{}\n",
                 torchtitan_line(StepLine{m.step, m.loss, m.grad_norm, mem, mem_total, tps,
                                          flops_per_token, peak_flops, m.lr}),
                 m.overflow
                     ? fmt::format("  (skipped: fp16 overflow at loss scale {:g}, next {:g})",
                                   m.loss_scale, m.next_loss_scale)
                 : m.skipped ? "  (skipped: not finite)"
                             : "");
    }
    nlohmann::ordered_json j{{"step", m.step},
                             {"loss", m.loss},
                             {"grad_norm", m.grad_norm},
                             {"lr", m.lr},
                             {"step_s", m.step_seconds},
                             {"tps", tps},
                             {"tflops", flops_per_token * tps / 1e12},
                             {"mfu", peak_flops > 0 ? flops_per_token * tps / peak_flops : 0.0},
                             {"memory_bytes", mem},
                             {"skipped", m.skipped}};
    if (m.loss_scale > 0) {
      j["loss_scale"] = m.loss_scale;
      j["overflow"] = m.overflow;
      j["overflow_steps"] = m.overflow_total;
    }
    if (!std::isfinite(m.loss)) j["loss"] = nullptr;
    if (!logs->jsonl) return;  // a rank other than 0
    Status s = logs->jsonl->write(j.dump());
    if (s.ok()) {
      s = logs->tb->add_scalars(m.step,
                                {{"loss", m.loss},
                                 {"lr", m.lr},
                                 {"grad_norm", m.grad_norm},
                                 {"tps", tps},
                                 {"mfu", peak_flops > 0 ? flops_per_token * tps / peak_flops : 0.0},
                                 {"memory_gib", mem / static_cast<double>(kGiB)}});
    }
    if (!s.ok() && logs->error.ok()) logs->error = s;
  };
  cb.on_eval = [logs](const EvalMetrics& e) {
    fmt::print(stderr, "eval: step {}  val_loss {:.4f}  val_ppl {:.3f}\n", e.step, e.loss,
               e.perplexity);
    if (!logs->jsonl) return;  // a rank other than 0
    Status s = logs->jsonl->write(
        nlohmann::json{{"step", e.step}, {"val_loss", e.loss}, {"val_perplexity", e.perplexity}}
            .dump());
    if (s.ok()) s = logs->tb->add_scalar("val_loss", e.step, e.loss);
    if (!s.ok() && logs->error.ok()) logs->error = s;
  };
  return cb;
}

void print_done(const TrainArgs& a, const TrainSummary& r) {
  if (r.stopped_by_signal) {
    fmt::print(stderr,
               "stopped by signal at step {}; checkpoint saved, rerun the same command to resume\n",
               r.final_step);
  } else {
    fmt::print("done: step {} ({} steps in this run{}), checkpoint {}\n", r.final_step, r.steps_run,
               r.resumed ? ", resumed from step " + std::to_string(r.resumed_from) : "",
               latest_checkpoint_dir(a.out));
    if (r.final_loss_scale > 0) {
      fmt::print("fp16: {} steps skipped for overflow in total; loss scale now {:g}\n",
                 r.overflow_steps, r.final_loss_scale);
    }
  }
}

// The training data (and validation data when given), opened before the output folder is
// touched: a bad input leaves nothing behind.
struct TrainData {
  TokenFile train;
  std::optional<TokenFile> val;
};

StatusOr<TrainData> open_data(const TrainArgs& a, TokenFormat format) {
  LJ_ASSIGN_OR_RETURN(TokenFile train, TokenFile::open(a.data, format));
  TrainData d{std::move(train), std::nullopt};
  if (!a.val_data.empty()) {
    LJ_ASSIGN_OR_RETURN(TokenFile v, TokenFile::open(a.val_data, format));
    d.val.emplace(std::move(v));
  }
  return d;
}

// What one rank has ready before the first collective: the run resolved, its data open, its
// initial weights loaded, the output folder made (by rank 0).
struct PreparedTrain {
  ResolvedTrain r;
  std::optional<TrainData> data;
  std::vector<Tensor> initial;
  bool out_existed = true;           // rank 0: whether --out was there before this run
  std::vector<std::string> samples;  // --tokenizer: "train: <text>", "validation: <text>"
};

StatusOr<PreparedTrain> prepare_train(TrainArgs& a, const DistSession& dist, Device& dev) {
  namespace fs = std::filesystem;
  PreparedTrain p;
  LJ_ASSIGN_OR_RETURN(p.r, resolve(a, dist));
  LJ_ASSIGN_OR_RETURN(TrainData data, open_data(a, p.r.format));
  if (!a.tokenizer.empty()) {
    // What the run trains on, as text: a wrong tokenizer for the data is refused here.
    LJ_ASSIGN_OR_RETURN(std::string train_text, decoded_sample(a.tokenizer, data.train));
    p.samples.push_back("train: " + train_text);
    if (data.val) {
      LJ_ASSIGN_OR_RETURN(std::string val_text, decoded_sample(a.tokenizer, *data.val));
      p.samples.push_back("validation: " + val_text);
    }
  }
  p.data.emplace(std::move(data));
  TrainerConfig& t = a.t;
  configure_trainer(a, p.r, &t);
  LJ_RETURN_IF_ERROR(choose_recompute(p.r, &t));
  if (!p.r.model.weights_dir.empty()) {
    LJ_ASSIGN_OR_RETURN(HfModel hf, load_hf_model(p.r.model.weights_dir, dev));
    p.initial = std::move(hf.params);
  }
  // Last, so a bad input leaves nothing behind. Rank 0 makes it: the ranks share the folder.
  if (dist.is_root()) {
    std::error_code ec;
    p.out_existed = fs::exists(a.out);
    fs::create_directories(a.out, ec);
    if (ec || !fs::is_directory(a.out)) {
      return io_error("cannot create output folder " + a.out + (ec ? ": " + ec.message() : ""),
                      "check --out and permissions");
    }
    // The tokenizer travels with the run (export writes it into the HF folder).
    const std::string tokenizer = !a.tokenizer.empty() ? a.tokenizer
                                  : !tokenizer_files_in(p.r.model.weights_dir).empty()
                                      ? p.r.model.weights_dir
                                      : "";
    if (!tokenizer.empty()) {
      if (Status s = keep_tokenizer(tokenizer, a.out); !s.ok()) {
        if (!p.out_existed) fs::remove_all(a.out, ec);
        return s;
      }
    }
  }
  return p;
}

Status run_train(TrainArgs& a, DistSession& dist, StopSignals& signals) {
  namespace fs = std::filesystem;
  LJ_ASSIGN_OR_RETURN(const RunDevice device,
                      choose_device(a.f.device, probe_device_host("ljperf train",
                                                                  /*runs_on_cuda=*/true)));
  Device dev(a.f.threads);
  // Checkpoint optimization plans the host's memory: refused on the GPU before it runs.
  StatusOr<PreparedTrain> prepared =
      device == RunDevice::cuda && checkpoint_optimization_requested(a.f.ckpt_opt)
          ? StatusOr<PreparedTrain>(require_capability(TrainDevice::cuda, "ckpt-opt", "on"))
          : prepare_train(a, dist, dev);
  if (prepared.ok() && device == RunDevice::cuda) {
    // What the GPU step refuses (train/capabilities.h), before any rank starts NCCL.
    TrainStepConfig step = a.t.step;
    step.data_parallel = dist.data_parallel(prepared->r.dp.zero);
    if (Status s = check_gpu_step_config(step); !s.ok()) prepared = s;
  }
  // Every rank ready, or every rank stops (the others would wait in the first collective).
  LJ_RETURN_IF_ERROR(dist.agree(prepared.status()));
  PreparedTrain& p = *prepared;
  for (const std::string& line : p.samples) {
    fmt::print("data sample (first 64 tokens, decoded), {}\n", line);
  }
  const LlamaConfig& model = p.r.model.config;
  TrainData& data = *p.data;
  TrainerConfig& t = a.t;
  if (device == RunDevice::cpu) LJ_RETURN_IF_ERROR(dist.split_experts(a.f.expert_parallel));
  t.step.data_parallel = dist.data_parallel(p.r.dp.zero);
  t.device = device == RunDevice::cuda ? TrainDevice::cuda : TrainDevice::cpu;

  const HostInfo host = host_info();
  fmt::print(
      "ljperf train: model {} ({:.2f}M params), data {} ({} tokens), batch {} x {} x accum {}{}, "
      "{} steps, on {}, out {}\n",
      model.name, static_cast<double>(model.num_params()) / 1e6, a.data, data.train.size(),
      t.batch_size, t.seq_len, t.grad_accum,
      dist.distributed() ? fmt::format(" x {} ranks", dist.world_size()) : "", t.steps,
      device == RunDevice::cuda
          ? fmt::format("the GPU{}", dist.distributed() ? " of each rank (NCCL)" : "")
          : std::string("the CPU"),
      a.out);
  set_config_value(&p.r.config, "device",
                   std::string(device == RunDevice::cuda ? "cuda" : "cpu") +
                       (a.f.device == "auto" ? " (auto)" : ""));
  fmt::print("{}", describe_config(p.r.config));
  fmt::print("recompute: {}\n", t.step.graph.recompute.to_string(model.num_hidden_layers));
  if (const std::string line = precision_line(p.r, true); !line.empty()) {
    fmt::print("{}\n", line);
  }
  RunLogs logs;
  const TrainerCallbacks cb = make_callbacks(a, t, model, host, dist, &logs);
  // Until here SIGTERM / SIGINT end the process; from here they stop it at the next step.
  signals.deliver_to(&g_stop);
  // Errors the trainer returns are every rank's (one failing alone ends the job itself).
  auto result = run_training(model, p.initial.empty() ? nullptr : &p.initial, data.train,
                             data.val ? &*data.val : nullptr, t, dev, &g_stop, cb);
  Status s = result.status();
  if (s.ok() && logs.jsonl) s = logs.jsonl->flush();
  if (s.ok() && logs.tb) s = logs.tb->flush();
  if (s.ok()) s = logs.error;
  // A run that fails before it starts writing leaves no trace: a folder it created is removed,
  // an existing one is untouched. Once logs are open they are kept (they say what happened).
  if (!result.ok() && dist.is_root() && !p.out_existed && !logs.started) {
    std::error_code ec;
    fs::remove_all(a.out, ec);
  }
  // One result for all ranks: an error every rank returns is returned (no abort), one on rank 0
  // alone (its log files) still stops every rank.
  LJ_RETURN_IF_ERROR(dist.agree(s));
  print_done(a, *result);
  return ok_status();
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* sub =
      app.add_subcommand("train", "Train on token files, with checkpoints that survive crashes");
  a->app = sub;
  add_run_flags(sub, &a->f, "Peak learning rate");
  sub->add_option("--data", a->data,
                  "Training tokens (llm.c .bin, Megatron .bin/.idx, raw u16/u32)")
      ->required();
  sub->add_option("--data-format", a->data_format, "auto, llmc, megatron, u16 or u32")
      ->capture_default_str();
  sub->add_option("--val-data", a->val_data, "Validation tokens");
  sub->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.json (or its folder): print the first tokens of the data as text");
  sub->add_option("--val-every", a->t.val_every, "Evaluate every N steps (0: never)")
      ->capture_default_str()
      ->check(integer_at_least(0));
  sub->add_option("--val-batches", a->t.val_batches, "Batches per evaluation")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--out", a->out, "Output folder: checkpoints, metrics.jsonl, tb/")->required();
  sub->add_option("--steps", a->t.steps, "Optimizer steps in total")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--min-lr", a->min_lr, "Final learning rate")
      ->capture_default_str()
      ->check(finite_at_least_zero());
  sub->add_option("--warmup-steps", a->warmup_steps,
                  "Learning-rate warmup: linear from 0 to --lr over N steps (HF Trainer's "
                  "warmup_steps; default: a tenth of --steps)")
      ->check(integer_at_least(0));
  sub->add_option("--decay", a->decay, "cosine, linear or constant")->capture_default_str();
  sub->add_option("--weight-decay", a->weight_decay, "AdamW weight decay")
      ->capture_default_str()
      ->check(finite_at_least_zero());
  sub->add_option("--grad-clip", a->grad_clip, "Global gradient-norm clip (0: off)")
      ->capture_default_str()
      ->check(finite_at_least_zero());
  sub->add_option("--checkpoint-every", a->t.checkpoint_every,
                  "Checkpoint every N steps (0: at the end only)")
      ->capture_default_str()
      ->check(integer_at_least(0));
  sub->add_option("--keep-last", a->t.keep_last, "Checkpoints to keep (0: all)")
      ->capture_default_str()
      ->check(integer_at_least(0));
  sub->add_option("--max-bad-steps", a->t.max_bad_steps,
                  "Abort after this many non-finite steps in a row")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--log-every", a->log_every, "Console line every N steps")
      ->capture_default_str()
      ->check(integer_at_least(0));
  sub->footer("Several processes: mpirun -np N ljperf train ... (data parallel, ZeRO stage " +
              zero_stages_text() +
              " from --zero or the DeepSpeed JSON; --grad-accum is per rank). Only rank 0 prints "
              "and writes the logs; checkpoints are sharded and resume at any world size.");
  return {sub, [a] {
            // First, before MPI's and OpenMP's threads exist: they inherit the blocked signals.
            // Never destroyed: a signal during the exit (MPI_Finalize included) still only sets
            // the flag, as it did while training, and the exit status stays the run's.
            static StopSignals* const signals = new StopSignals();
            return DistSession::run(
                CommOptions{.timeout_seconds = a->f.comm_timeout_s},
                [&](DistSession& dist) { return run_train(*a, dist, *signals); });
          }};
}

}  // namespace lj::cli
