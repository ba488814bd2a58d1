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
#include "core/units.h"
#include "io/deepspeed_config.h"
#include "plan/budget.h"
#include "plan/device_catalog.h"
#include "plan/gpu_time_model.h"
#include "plan/host_baseline.h"
#include "plan/host_peak.h"
#include "plan/host_rates.h"
#include "plan/plan.h"
#include "runtime/launch_env.h"

namespace lj::cli {
namespace {

// The defaults are benchmark's and train's (small, micro-batch 4, seq 256, the device a run would
// take), so `ljperf plan` alone predicts what `ljperf benchmark` alone runs.
struct PlanArgs {
  std::string model = "small";
  std::string device = "auto";
  std::string recompute;
  std::string memory_limit;
  std::string deepspeed;
  std::string model_file;
  std::string precision = "auto";
  int64_t gpus = 1;  // --np
  int zero = -1;
  int64_t batch_size = 4;
  int64_t seq_len = 256;  // when not given, at most the model's max_position_embeddings
  int64_t recompute_layers = -1;
  double fabric_gbps = 0;  // 0: the catalog's
  bool tune_batch = false;
  bool compile = false;
  bool exhaustive = false;
  bool json = false;
  bool measure = false;
  MeasureOptions measure_opts;
  std::string measure_clock = "cpu";
  CLI::App* app = nullptr;
  bool given(const char* flag) const { return app->get_option(flag)->count() > 0; }
};

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
  LJ_ASSIGN_OR_RETURN(ModelRef model, resolve_model(a.model));
  LJ_ASSIGN_OR_RETURN(PredictorCoefficients coeffs, load_coefficients(a.model_file));
  PlanRequest req;
  req.model = model.config;
  req.coeffs = coeffs;
  LJ_ASSIGN_OR_RETURN(req.device, find_device(plan_device_id(a.device), coeffs));
  req.gpus = gpus;
  const bool host = req.device.kind == DeviceKind::cpu;
  const int stage = a.zero >= 0 ? a.zero : (!host && gpus > 1 ? 3 : 0);
  // GPUs: the `deepspeed/` recipe's sizes (HF's "auto" for this model); the host: as
  // `ljperf benchmark` runs without a DeepSpeed JSON, DeepSpeed's code defaults.
  req.zero = host ? ZeroConfig::defaults(stage) : ZeroConfig::hf_auto(stage, req.model.hidden_size);
  // The process baseline measured on this host (cached; probed once).
  if (host) LJ_RETURN_IF_ERROR(attach_host_baseline(&req.coeffs));
  if (a.precision != "auto") {
    DType p;
    if (!parse_precision(a.precision, &p)) {
      return invalid_argument("unknown --precision '" + a.precision + "'",
                              "use f32, bf16 or fp16 (auto: f32 on the host, bf16 on GPUs)");
    }
    if (!host && p != DType::bf16) {
      return unimplemented(
          "GPU plans price DeepSpeed's bf16 recipe, not " + std::string(dtype_name(p)),
          "use --precision bf16 (or auto) with a GPU --device");
    }
    req.precision = host ? p : DType::f32;
  }
  req.micro_batch = a.batch_size;
  // Not given: 2048, or the model's context when that is shorter (small's 1024).
  req.seq_len = a.given("--seq-len")
                    ? a.seq_len
                    : std::min<int64_t>(a.seq_len, req.model.max_position_embeddings);
  req.compile = a.compile;
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
  if (!a.recompute.empty()) {
    LJ_ASSIGN_OR_RETURN(RecomputePolicy p, parse_recompute_policy(a.recompute));
    req.policy = p;
  }
  if (!a.deepspeed.empty()) {
    RunSettings run;
    run.world_size = gpus;
    if (a.zero >= 0) run.zero_stage.set_flag(a.zero);  // the flag wins, as in benchmark
    run.hidden_size = req.model.hidden_size;
    run.micro_batch.assign(a.batch_size, a.given("--batch-size"));
    LJ_ASSIGN_OR_RETURN(DeepSpeedConfig ds, load_deepspeed_config(a.deepspeed, run));
    req.zero = ds.zero;
    // The run's DeepSpeed mapping (apply_deepspeed), of which a plan needs the micro-batch; a
    // --batch-size flag wins here as it does in the file's resolution.
    StepSettings from_ds;
    apply_deepspeed(ds, &from_ds);
    if (!a.given("--batch-size")) req.micro_batch = from_ds.micro_batch;
    if (host && a.precision == "auto") req.precision = from_ds.precision;  // bf16/fp16 blocks
    if (!a.given("--recompute") && ds.recompute != "none") {
      LJ_ASSIGN_OR_RETURN(RecomputePolicy p, parse_recompute_policy(ds.recompute));
      req.policy = p;
      if (a.recompute_layers < 0 && ds.recompute_layers > 0)
        req.recompute_layers = ds.recompute_layers;
    }
  }
  if (!a.memory_limit.empty()) {
    LJ_ASSIGN_OR_RETURN(req.budget_bytes, parse_bytes(a.memory_limit));
  }
  for (const char* flag : {"--rounds", "--warmup-rounds", "--seed", "--measure-clock"}) {
    if (!a.measure && a.given(flag)) {
      return invalid_argument(std::string(flag) + " needs --measure",
                              "ljperf plan --device host --measure " + std::string(flag) + " ...");
    }
  }
  if (a.measure) LJ_RETURN_IF_ERROR(validate_measure_options(a.measure_opts));
  if (a.measure && !host) {
    return invalid_argument("--measure runs the candidates on this host",
                            "use --device host with --measure");
  }
  // The time model's measured rates (plan/host_rates.h): cached, else measured now, once the
  // request is known to be valid (a probe takes seconds; bad input gets its error at once).
  if (host) req.rates = plan_host_rates(a.measure_opts.threads, /*may_probe=*/true);
  const double t0 = now_seconds();
  LJ_ASSIGN_OR_RETURN(PlanResult r, make_plan(req));
  const double wall = now_seconds() - t0;
  std::optional<Measurement> measured;
  if (a.measure) {
    MeasureOptions o = a.measure_opts;
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
  if (a.json) {
    nlohmann::ordered_json j = plan_to_json(req, r);
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
  fmt::print("{}", format_plan(req, r));
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
  a->app = sub;
  sub->footer(
      "Example: ljperf plan --model llama3-8b --device h100 --np 8 --zero 3 --batch-size 2 "
      "--seq-len 8192 --recompute selective\n"
      "The prediction needs no device: the joint graph is dry-run on a virtual one. Coefficients "
      "come from --coefficients, else " +
      default_coefficients_path() +
      " when present (ljperf calibrate writes it), else the built-in "
      "defaults.");
  sub->add_option("--model", a->model,
                  "Preset (llama3-8b, llama3.1-70b, tiny, ...) or a config.json")
      ->capture_default_str();
  sub->add_option("--device", a->device,
                  "auto, " + device_ids() +
                      "; auto: this host's GPU when the catalog has it, else its CPU (as "
                      "benchmark's --device auto)")
      ->capture_default_str();
  sub->add_option("--np", a->gpus,
                  "Data-parallel ranks, mpirun's -np (one per GPU, or processes with --device "
                  "cpu; default: the launcher's world size under mpirun, else 1)")
      ->capture_default_str();
  add_renamed_option(sub, "--gpus", "--np", "ranks, as mpirun and ablation count them", &a->gpus);
  sub->add_option("--zero", a->zero,
                  "ZeRO stage 0-3 (default: 3 with several GPUs, else 0; runs take " +
                      zero_stages_text() + ")");
  sub->add_option("--fabric-gbps", a->fabric_gbps,
                  "GPUs: inter-node bandwidth per GPU in Gb/s, for ranks beyond one node of " +
                      std::to_string(kGpusPerNode) +
                      " (default: the catalog's reference node, e.g. DGX H100: 400)");
  sub->add_option("--batch-size", a->batch_size, "Micro-batch size per rank")
      ->capture_default_str();
  sub->add_option("--seq-len", a->seq_len,
                  "Sequence length (default: 256, or the model's max_position_embeddings when "
                  "shorter)")
      ->capture_default_str();
  sub->add_option("--precision", a->precision,
                  "host: f32, bf16 or fp16 (mixed: f32 master weights, gradients and Adam states, "
                  "16-bit activations; docs/memory.md); GPUs: bf16. auto: f32 on the host, bf16 "
                  "on GPUs, or the DeepSpeed JSON's")
      ->capture_default_str();
  sub->add_option("--recompute", a->recompute,
                  "Only this policy (none, selective, full); default: search all three");
  sub->add_option("--recompute-layers", a->recompute_layers,
                  "Only this many recomputed layers (block method); default: search 1..L");
  sub->add_option("--memory-limit", a->memory_limit,
                  "Budget per rank, e.g. 20GiB (default: " + default_budget_percent() +
                      " of the device's memory)");
  sub->add_option(
      "--deepspeed", a->deepspeed,
      "DeepSpeed JSON: ZeRO stage and bucket sizes, micro-batch, activation_checkpointing");
  sub->add_option("--coefficients", a->model_file, "Predictor coefficients file to read");
  add_renamed_option(sub, "--model-file", "--coefficients", "--model is the model", &a->model_file);
  sub->add_flag("--tune-batch", a->tune_batch,
                "Also search micro-batch sizes 1, 2, 4, ... up to --batch-size");
  sub->add_flag("--compile", a->compile, "Plan the compiled graph (--compile)");
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
  sub->add_option("--threads", a->measure_opts.threads,
                  "Device host: CPU threads the time model's rates and --measure use (0: all)")
      ->capture_default_str();
  sub->add_option("--seed", a->measure_opts.seed, "--measure: seed for weights and tokens")
      ->capture_default_str();
  sub->add_option("--measure-clock", a->measure_clock,
                  "--measure ranks by cpu (process CPU time / threads: what other processes on "
                  "the cores do not stretch) or wall time")
      ->check(CLI::IsMember({"cpu", "wall"}))
      ->capture_default_str();
  return {sub, [a] { return run_plan(*a); }};
}

}  // namespace lj::cli
