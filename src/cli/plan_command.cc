// `ljperf plan`: memory per rank by category, predicted peak and step time for each recompute
// choice, and the recommendation, for a model on a device that need not be present.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

#include "backends/cuda/cuda.h"
#include "cli/cli.h"
#include "cli/flag_checks.h"
#include "cli/plan_measure.h"
#include "cli/plan_report.h"
#include "cli/run_config.h"
#include "cli/run_flags.h"
#include "core/units.h"
#include "io/deepspeed_config.h"
#include "plan/budget.h"
#include "plan/coefficients.h"
#include "plan/device_catalog.h"
#include "plan/gpu_time_model.h"
#include "plan/plan.h"
#include "probe/comm_rates.h"
#include "probe/host_peak.h"
#include "probe/host_rates.h"
#include "runtime/launch_env.h"

namespace lj::cli {
namespace {

// The defaults are benchmark's and train's (small, micro-batch 4, seq 256, the device a run would
// take), so `ljperf plan` alone predicts what `ljperf benchmark` alone runs. The settings plan
// shares with them (model, DeepSpeed JSON, micro-batch, sequence, precision, ZeRO stage, compile,
// recompute policy, threads, seed) are RunFlags and go through resolve_run, as theirs do.
struct PlanArgs {
  RunFlags f;  // --precision defaults to auto here; --recompute restricts the search
  std::string model_file;
  int64_t gpus = 1;  // --np
  int64_t recompute_layers = -1;
  double fabric_gbps = 0;  // 0: the catalog's
  bool tune_batch = false;
  bool exhaustive = false;
  bool json = false;
  bool measure = false;
  MeasureOptions measure_opts;  // threads and seed are f's
  std::string measure_clock = "cpu";
  bool given(const char* flag) const { return f.given(flag); }
};

// The settings of resolve_run that a plan reads, in its printout.
const std::vector<std::string> kPlanConfigKeys = {
    "model",     "recipe",     "deepspeed", "micro_batch",    "grad_accum",
    "seq_len",   "world_size", "precision", "zero_stage",     "compile",
    "recompute", "device",     "threads",   "expert_parallel"};

// A plan in which no choice fits is an error (exit 1), after the plan is printed.
Status nothing_fits(const PlanResult& r) {
  if (r.best() != nullptr) return ok_status();
  return resource_exhausted(
      "no recompute choice fits the budget of " + format_bytes(r.budget_bytes) + " per rank",
      "more ranks (--np), a higher --zero stage, a smaller --batch-size or --seq-len, or a larger "
      "--memory-limit");
}

// --device auto: the catalog GPU this host has (a CUDA build that sees one), else this host's
// CPU, as `ljperf benchmark --device auto` picks.
std::string plan_device_id(const std::string& requested) {
  if (requested != "auto") return requested;
  if (!cuda::built_with_cuda()) return "cpu";
  const cuda::Probe p = cuda::probe();
  for (const cuda::DeviceProps& d : p.devices) {
    if (const std::string id = catalog_id_for(d.name); !id.empty()) return id;
  }
  return "cpu";
}

Status run_plan(const PlanArgs& a) {
  // Under a launcher (mpirun -np N ljperf plan ...) the plan is for that world: --np defaults
  // to its size, and rank 0 alone prints it (the plan needs no communicator).
  const StatusOr<LaunchEnv> launch =
      resolve_launch_env([](const char* v) { return std::getenv(v); });
  LJ_RETURN_IF_ERROR(launch.status());
  if (launch->rank != 0) return ok_status();
  const int64_t gpus = a.given("--np") || a.given("--gpus") ? a.gpus : launch->world_size;
  // plan's flags through benchmark's resolver: --precision auto is "not given" (the DeepSpeed
  // JSON's, else f32); a default --seq-len is capped at the model's context.
  RunFlags f = a.f;
  if (f.precision == "auto") {
    f.precision = "f32";
    f.defaulted.push_back("--precision");
  }
  f.cap_default_seq_len = true;
  // (--np below 1 is make_plan's error.)
  const int world_size = static_cast<int>(std::max<int64_t>(gpus, 1));
  LJ_ASSIGN_OR_RETURN(ResolvedRun run, resolve_run(f, RunSettings{}, world_size, 0, "self"));
  LJ_ASSIGN_OR_RETURN(PredictorCoefficients coeffs, load_coefficients(a.model_file));
  PlanRequest req;
  req.model = run.model.config;
  req.coeffs = coeffs;
  LJ_ASSIGN_OR_RETURN(req.device, find_device(plan_device_id(f.device), coeffs));
  req.gpus = gpus;
  // Rank 0 of its expert-parallel group (resolve_run checked the size against the model and the
  // world; make_plan refuses it on a GPU).
  req.experts = ExpertShard{.size = f.expert_parallel, .rank = 0};
  const bool host = req.device.kind == DeviceKind::cpu;
  // The ZeRO settings: the DeepSpeed JSON's (the flag won inside it) or, on the host, DeepSpeed's
  // code defaults at the resolved stage, as `ljperf benchmark` runs. GPUs without a JSON: the
  // `deepspeed/` recipe's sizes (HF's "auto" for this model), stage 3 with several GPUs.
  req.zero = run.dp.zero;
  if (!host && !run.ds) {
    // A choice of stage (the user's, else the default), not a question of what a stage shards.
    const int stage = a.f.zero >= 0 ? a.f.zero : (gpus > 1 ? 3 : 0);
    req.zero = ZeroConfig::hf_auto(stage, req.model.hidden_size);
    if (a.f.zero < 0) set_config_value(&run.config, "zero_stage", std::to_string(stage), "default");
  }
  // The process baseline measured on this host (cached; probed once).
  if (host) LJ_RETURN_IF_ERROR(attach_host_baseline(&req.coeffs));
  if (!host) {
    if (a.f.precision != "auto" && run.precision != DType::bf16) {
      return unimplemented(
          "GPU plans price DeepSpeed's bf16 recipe, not " + std::string(dtype_name(run.precision)),
          "use --precision bf16 (or auto) with a GPU --device");
    }
    set_config_value(&run.config, "precision", "bf16", "DeepSpeed's recipe on GPUs");
  }
  req.precision = host ? run.precision : DType::f32;
  req.micro_batch = run.micro_batch;
  req.grad_accum = run.grad_accum;
  req.seq_len = run.seq_len;
  req.compile = run.step.graph.compile;
  if (a.given("--fabric-gbps")) {
    if (host || !(a.fabric_gbps > 0)) {
      return invalid_argument("--fabric-gbps needs a GPU --device and a positive rate",
                              "the inter-node bandwidth per GPU in Gb/s, e.g. --fabric-gbps 400");
    }
    req.fabric_bandwidth = a.fabric_gbps * 1e9 / 8;
  }
  req.tune_batch = a.tune_batch;
  req.exhaustive = a.exhaustive;
  req.recompute_layers = a.recompute_layers;
  // --recompute (or the DeepSpeed JSON's activation checkpointing) restricts the search to one
  // policy; without either every policy is searched.
  const RecomputeConfig& recompute = run.step.graph.recompute;
  if (a.given("--recompute") || (run.ds && run.ds->recompute != "none")) {
    req.policy = recompute.policy;
    if (!a.given("--recompute") && a.recompute_layers < 0 && run.ds->recompute_layers > 0)
      req.recompute_layers = run.ds->recompute_layers;
  } else {
    set_config_value(&run.config, "recompute", "searched (none, selective, full)", "plan");
  }
  // The device line as benchmark writes it ("cpu (auto)"), with the catalog GPU's id.
  set_config_value(
      &run.config, "device",
      (host ? std::string("cpu") : req.device.id) + (f.device == "auto" ? " (auto)" : ""));
  if (a.given("--np") || a.given("--gpus")) {
    set_config_value(&run.config, "world_size", std::to_string(gpus), "--np");
  } else if (launch->world_size > 1) {
    set_config_value(&run.config, "world_size", std::to_string(gpus), "launcher");
  }
  if (!f.memory_limit.empty()) {
    LJ_ASSIGN_OR_RETURN(req.budget_bytes, parse_bytes(f.memory_limit));
  }
  MeasureOptions measure_opts = a.measure_opts;
  measure_opts.threads = f.threads;
  measure_opts.seed = f.seed;
  for (const char* flag : {"--rounds", "--warmup-rounds", "--seed", "--measure-clock"}) {
    if (!a.measure && a.given(flag)) {
      return invalid_argument(std::string(flag) + " needs --measure",
                              "ljperf plan --device host --measure " + std::string(flag) + " ...");
    }
  }
  if (a.measure) LJ_RETURN_IF_ERROR(validate_measure_options(measure_opts));
  if (a.measure && !host) {
    return invalid_argument("--measure runs the candidates on this host",
                            "use --device host with --measure");
  }
  if (a.measure && req.experts.size > 1) {
    return invalid_argument(
        "--measure runs the candidates in this one process, and expert "
        "parallelism needs its group's ranks",
        "measure it with mpirun -np N ljperf benchmark --expert-parallel N");
  }
  // The time model's measured rates (probe/host_rates.h): cached, else measured now, once the
  // request is known to be valid (a probe takes seconds; bad input gets its error at once).
  if (host) req.rates = plan_host_rates(measure_opts.threads, /*may_probe=*/true);
  // The MPI collectives' measured rates for this world size (probe/comm_rates.h), cached by
  // `mpirun -np N ljperf calibrate --comm`; without them the plan says so.
  if (host && gpus > 1) {
    if (auto c = cached_comm_rates(static_cast<int>(gpus)))
      req.comm_rates = std::make_shared<const CommRates>(*c);
  }
  const double t0 = now_seconds();
  LJ_ASSIGN_OR_RETURN(PlanResult r, make_plan(req));
  const double wall = now_seconds() - t0;
  std::optional<Measurement> measured;
  if (a.measure) {
    MeasureOptions o = measure_opts;
    o.wall_clock = a.measure_clock == "wall";
    LJ_ASSIGN_OR_RETURN(measured, measure_candidates(req, r, o));
  }
  // Rates from a slower minute than the last benchmark's peak probe (plan_host_rates remeasured
  // them already when the host was quiet).
  std::string stale_note;
  if (req.rates) {
    if (auto peak = cached_host_peak(DType::f32, req.rates->threads)) {
      stale_note = stale_rates_note(*req.rates, peak->flops);
    }
  }
  const ConfigLines config = select_config(run.config, kPlanConfigKeys);
  if (a.json) {
    nlohmann::ordered_json j = plan_to_json(req, r);
    j["resolved"] = config_json(config);
    if (req.rates) {
      // The share of the cores other processes used while the rates were measured (null: not
      // known); contended rates predict step times long.
      j["rates_other_cpu_share"] = std::isnan(req.rates->other_cpu_share)
                                       ? nlohmann::ordered_json(nullptr)
                                       : nlohmann::ordered_json(req.rates->other_cpu_share);
      j["rates_contended"] = req.rates->contended();
      j["rates_stale"] = !stale_note.empty();
    }
    if (measured) j["measured"] = measurement_json(req, *measured);
    fmt::print("{}\n", j.dump(2));
    return nothing_fits(r);
  }
  fmt::print("{}{}", format_plan(req, r), describe_config(config));
  if (req.rates) fmt::print("{}{}", contention_note(*req.rates), stale_note);
  if (measured) fmt::print("{}", format_measurement(req, *measured));
  fmt::print("planned in {} ({} dry runs)\n", format_seconds(wall), r.dry_runs);
  return nothing_fits(r);
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* sub = app.add_subcommand(
      "plan", "Predict memory per rank and step time for each recompute choice, and pick one");
  a->f.app = sub;
  a->f.precision = "auto";
  sub->footer(
      "Example: ljperf plan --model llama3-8b --device h100 --np 8 --zero 3 --batch-size 2 "
      "--seq-len 8192 --recompute selective\n"
      "The prediction needs no device: the joint graph is dry-run on a virtual one. Coefficients "
      "come from --coefficients, else " +
      default_coefficients_path() +
      " when present (ljperf calibrate writes it), else the built-in "
      "defaults.");
  sub->add_option("--model", a->f.model,
                  "Preset (llama3-8b, llama3.1-70b, tiny, ...) or a config.json")
      ->capture_default_str();
  sub->add_option("--device", a->f.device,
                  "auto, " + device_ids() +
                      "; auto: this host's GPU when the catalog has it, else its CPU (as "
                      "benchmark's --device auto)")
      ->capture_default_str();
  sub->add_option("--np", a->gpus,
                  "Data-parallel ranks, mpirun's -np (one per GPU, or processes with --device "
                  "cpu; default: the launcher's world size under mpirun, else 1)")
      ->capture_default_str();
  add_renamed_option(sub, "--gpus", "--np", "ranks, as mpirun and ablation count them", &a->gpus);
  sub->add_option("--zero", a->f.zero,
                  "ZeRO stage 0-3 (default: 3 with several GPUs, else 0; runs take " +
                      zero_stages_text() + ")");
  sub->add_option("--expert-parallel", a->f.expert_parallel,
                  "Host, mixture-of-experts: the experts sharded over groups of N ranks, as "
                  "benchmark's flag; prices a rank's experts and its all-to-all token exchange")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--fabric-gbps", a->fabric_gbps,
                  "GPUs: inter-node bandwidth per GPU in Gb/s, for ranks beyond one node of " +
                      std::to_string(kGpusPerNode) +
                      " (default: the catalog's reference node, e.g. DGX H100: 400)");
  // The checks are benchmark's (add_run_flags): a value is refused at parse, naming the flag.
  sub->add_option("--batch-size", a->f.batch_size, "Micro-batch size per rank")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--seq-len", a->f.seq_len,
                  "Sequence length (default: 256, or the model's max_position_embeddings when "
                  "shorter)")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--grad-accum", a->f.grad_accum,
                  "Micro-batches per optimizer step (or the DeepSpeed JSON's "
                  "gradient_accumulation_steps); GPU plans run the optimizer and ZeRO-0/1's "
                  "gradient reduction once per step, ZeRO-2/3's per micro-batch")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--precision", a->f.precision,
                  "host: f32, bf16 or fp16 (mixed: f32 master weights, gradients and Adam states, "
                  "16-bit activations; docs/memory.md); GPUs: bf16. auto: f32 on the host, bf16 "
                  "on GPUs, or the DeepSpeed JSON's")
      ->capture_default_str();
  a->f.recompute.policy_flag =
      sub->add_option("--recompute", a->f.recompute.policy,
                      "Only this policy (none, selective, full); default: search all three");
  sub->add_option("--recompute-layers", a->recompute_layers,
                  "Only this many recomputed layers (block method); default: search 1..L");
  sub->add_option("--memory-limit", a->f.memory_limit,
                  "Budget per rank, e.g. 20GiB (default: " + default_budget_percent() +
                      " of the device's memory)");
  sub->add_option(
      "--deepspeed", a->f.deepspeed,
      "DeepSpeed JSON: ZeRO stage and bucket sizes, micro-batch, activation_checkpointing");
  sub->add_option("--coefficients", a->model_file, "Predictor coefficients file to read");
  add_renamed_option(sub, "--model-file", "--coefficients", "--model is the model", &a->model_file);
  sub->add_flag("--tune-batch", a->tune_batch,
                "Also search micro-batch sizes 1, 2, 4, ... up to --batch-size");
  sub->add_flag("--compile", a->f.compile, "Plan the compiled graph (--compile, or LJ_COMPILE=1)");
  sub->add_flag("--exhaustive", a->exhaustive,
                "Dry-run every layer count instead of interpolating between 2 and L-1");
  sub->add_flag("--json", a->json, "Print the plan as JSON");
  sub->add_flag("--measure", a->measure,
                "Device host: also run every candidate that fits, in this process, round-robin "
                "(one step of each per round), and rank them by the measured median step (an "
                "autotune; minutes: rounds x candidates steps)");
  sub->add_option("--rounds", a->measure_opts.rounds,
                  "--measure: measured rounds (more rounds resolve closer choices)")
      ->capture_default_str();
  sub->add_option("--warmup-rounds", a->measure_opts.warmup_rounds,
                  "--measure: rounds run first and not counted")
      ->capture_default_str();
  sub->add_option("--threads", a->f.threads,
                  "Device host: CPU threads the time model's rates and --measure use (0: all)")
      ->capture_default_str()
      ->check(integer_at_least(0));
  sub->add_option("--seed", a->f.seed, "--measure: seed for weights and tokens")
      ->capture_default_str();
  sub->add_option("--measure-clock", a->measure_clock,
                  "--measure ranks by cpu (process CPU time / threads: what other processes on "
                  "the cores do not stretch) or wall time")
      ->check(CLI::IsMember({"cpu", "wall"}))
      ->capture_default_str();
  return {sub, [a] { return run_plan(*a); }};
}

}  // namespace lj::cli
