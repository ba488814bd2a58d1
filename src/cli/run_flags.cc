#include "cli/run_flags.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>

#include "cli/device_choice.h"
#include "cli/flag_checks.h"
#include "cli/plan_report.h"
#include "core/units.h"
#include "plan/budget.h"
#include "train/capabilities.h"
#include "train/expert_parallel.h"

namespace lj::cli {
namespace {

// "LJ_COMPILE=1" when the variable is set (what the user exported), else "".
std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : std::string(name) + "=" + v;
}

// The origin of a value the DeepSpeed config resolved: "<source>: <its origin>".
std::string ds_origin(const DeepSpeedConfig& ds, const std::string& key) {
  for (const DeepSpeedConfig::Line& l : ds.resolved) {
    if (l.key == key)
      return l.origin == "flag" ? "flag over " + ds.source : ds.source + ": " + l.origin;
  }
  return ds.source;
}

}  // namespace

bool RunFlags::given(const char* flag) const {
  if (app == nullptr || std::find(defaulted.begin(), defaulted.end(), flag) != defaulted.end())
    return false;
  const CLI::Option* o = app->get_option_no_throw(flag);
  return o != nullptr && o->count() > 0;
}

void add_run_flags(CLI::App* sub, RunFlags* f, const std::string& lr_help) {
  f->app = sub;
  sub->add_option("--model", f->model,
                  "Preset (tiny, small, llama3.2-1b, ...), deepspeed/<preset> (ZeRO-3 bf16 "
                  "recipe), a config.json, or an HF model folder")
      ->capture_default_str();
  sub->add_option("--deepspeed", f->deepspeed, "DeepSpeed JSON config (flags win over it)");
  sub->add_option("--precision", f->precision,
                  "f32, bf16 or fp16 (mixed: f32 master weights, 16-bit compute; fp16 with "
                  "DeepSpeed's dynamic loss scaling)")
      ->capture_default_str();
  sub->add_option("--batch-size", f->batch_size, "Micro-batch size (sequences per rank)")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--seq-len", f->seq_len, "Sequence length")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--grad-accum", f->grad_accum, "Micro-batches per optimizer step (per rank)")
      ->capture_default_str()
      ->check(integer_at_least(1));
  sub->add_option("--lr", f->lr, lr_help)->capture_default_str()->check(finite_above_zero());
  add_device_flag(sub, &f->device);
  sub->add_option("--threads", f->threads, "CPU threads (0: all)")
      ->capture_default_str()
      ->check(integer_at_least(0));
  sub->add_option("--seed", f->seed, "Seed for weights (and benchmark's tokens)")
      ->capture_default_str();
  add_optimization_flags(sub, &f->compile, &f->ckpt_opt, &f->memory_limit, &f->recompute);
  add_zero_flag(sub, &f->zero);
  add_comm_timeout_flag(sub, &f->comm_timeout_s);
  sub->add_option("--expert-parallel", f->expert_parallel,
                  "Mixture-of-experts: shard the experts over N ranks (tokens travel to their "
                  "expert's rank); N divides the expert count and the world size")
      ->capture_default_str()
      ->check(integer_at_least(1));
}

std::string describe_config(const ConfigLines& lines) {
  std::string s = "run configuration:\n";
  for (const auto& l : lines) s += fmt::format("  {} = {}  ({})\n", l.key, l.value, l.origin);
  return s;
}

nlohmann::ordered_json config_json(const ConfigLines& lines) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& l : lines) j[l.key] = {{"value", l.value}, {"from", l.origin}};
  return j;
}

void set_config_value(ConfigLines* lines, const std::string& key, const std::string& value,
                      const std::string& origin) {
  for (auto& l : *lines) {
    if (l.key != key) continue;
    l.value = value;
    if (!origin.empty()) l.origin = origin;
  }
}

ConfigLines select_config(const ConfigLines& lines, const std::vector<std::string>& keys) {
  ConfigLines out;
  for (const auto& l : lines) {
    if (std::find(keys.begin(), keys.end(), l.key) != keys.end()) out.push_back(l);
  }
  return out;
}

StatusOr<ResolvedRun> resolve_run(const RunFlags& f, RunSettings run, int world_size, int rank,
                                  const std::string& backend) {
  ResolvedRun r;
  DType precision;
  if (!parse_precision(f.precision, &precision)) {
    return invalid_argument("unknown --precision '" + f.precision + "'", "use f32, bf16 or fp16");
  }
  if (!f.memory_limit.empty()) LJ_RETURN_IF_ERROR(parse_bytes(f.memory_limit).status());
  LJ_ASSIGN_OR_RETURN(r.model, resolve_model(f.model));
  LJ_RETURN_IF_ERROR(check_expert_parallel(f.expert_parallel, r.model.config, world_size));
  if (f.expert_parallel > 1) {
    LJ_RETURN_IF_ERROR(require_capability(f.device == "cuda" ? TrainDevice::cuda : TrainDevice::cpu,
                                          "expert-parallel", "on"));
  }
  r.seq_len = f.seq_len;
  const bool seq_len_capped = f.cap_default_seq_len && !f.given("--seq-len") &&
                              r.seq_len > r.model.config.max_position_embeddings;
  if (seq_len_capped) r.seq_len = r.model.config.max_position_embeddings;
  if (r.seq_len > r.model.config.max_position_embeddings) {
    return invalid_argument("--seq-len " + std::to_string(f.seq_len) + " is above " +
                                r.model.config.name + "'s max_position_embeddings " +
                                std::to_string(r.model.config.max_position_embeddings),
                            "use a shorter --seq-len");
  }
  run.micro_batch.assign(f.batch_size, f.given("--batch-size"));
  run.grad_accum.assign(f.grad_accum, f.given("--grad-accum"));
  run.precision.assign(precision, f.given("--precision"));
  run.lr.assign(f.lr, f.given("--lr"));
  run.world_size = world_size;
  run.zero_stage.assign(std::max(f.zero, 0), f.zero >= 0);
  LJ_RETURN_IF_ERROR(apply_recompute_flags(f.recompute, &run));
  LJ_ASSIGN_OR_RETURN(r.ds, resolve_deepspeed(f.deepspeed, r.model, run));
  r.dp = resolve_data_parallel(run, r.ds, world_size, rank, backend);
  LJ_RETURN_IF_ERROR(check_zero_supported(r.dp.zero));
  static_cast<StepSettings&>(r) = step_settings(run, r.ds);
  if (f.expert_parallel > 1 && r.precision != DType::f32) {
    LJ_RETURN_IF_ERROR(require_capability(f.device == "cuda" ? TrainDevice::cuda : TrainDevice::cpu,
                                          "expert-parallel",
                                          r.precision == DType::f16 ? "fp16" : "bf16"));
  }
  LJ_ASSIGN_OR_RETURN(r.step.graph.recompute, resolve_recompute(run, r.ds, r.model.config));
  r.step.seed = f.seed;
  r.step.graph.compile = compile_requested(f.compile);
  r.step.comm_options.timeout_seconds = f.comm_timeout_s;
  r.ckpt_opt = checkpoint_optimization_requested(f.ckpt_opt);
  r.memory_limit = f.memory_limit;
  r.threads = f.threads;
  r.seed = f.seed;
  r.expert_parallel = f.expert_parallel;

  // Where each value came from: the flag, the DeepSpeed JSON (flags already won inside it), the
  // environment, the launcher, or ljperf's default.
  auto from = [&](const char* flag, const char* ds_key) -> std::string {
    if (f.given(flag)) return flag;
    if (r.ds) return ds_origin(*r.ds, ds_key);
    return "default";
  };
  auto add = [&](std::string key, std::string value, std::string origin) {
    r.config.push_back({std::move(key), std::move(value), std::move(origin)});
  };
  const LlamaConfig& m = r.model.config;
  add("model",
      fmt::format("{} ({} params, {} layers)", m.name, format_params(m.num_params()),
                  m.num_hidden_layers),
      f.given("--model") ? "--model" : "default");
  if (!r.model.recipe.empty()) add("recipe", r.model.recipe, "--model " + f.model);
  if (!f.deepspeed.empty()) add("deepspeed", f.deepspeed, "--deepspeed");
  add("micro_batch", std::to_string(r.micro_batch),
      from("--batch-size", "train_micro_batch_size_per_gpu"));
  add("grad_accum", std::to_string(r.grad_accum),
      from("--grad-accum", "gradient_accumulation_steps"));
  add("seq_len", std::to_string(r.seq_len),
      f.given("--seq-len") ? "--seq-len"
      : seq_len_capped     ? "default, capped at the model's max_position_embeddings"
                           : "default");
  add("world_size", std::to_string(world_size),
      world_size > 1 ? "launcher (" + backend + ")" : "one process");
  add("precision", dtype_name(r.precision), from("--precision", "precision"));
  add("lr", fmt::format("{:g}", r.step.adamw.lr), from("--lr", "optimizer.lr"));
  const AdamWConfig& o = r.step.adamw;
  add("weight_decay", fmt::format("{:g}", o.weight_decay),
      from("--weight-decay", "optimizer.weight_decay"));
  add("betas", fmt::format("{:g}, {:g}", o.beta1, o.beta2), from("--betas", "optimizer.beta1"));
  add("eps", fmt::format("{:g}", o.eps), from("--eps", "optimizer.eps"));
  add("grad_clip", r.step.grad_clip > 0 ? fmt::format("{:g}", r.step.grad_clip) : "off",
      from("--grad-clip", "gradient_clipping"));
  if (run.total_steps.value > 0) {
    add("steps", std::to_string(run.total_steps.value), f.given("--steps") ? "--steps" : "default");
  }
  add("zero_stage", std::to_string(r.dp.zero.stage), r.dp.stage_origin);
  if (f.expert_parallel > 1) {
    add("expert_parallel", std::to_string(f.expert_parallel), "--expert-parallel");
  }
  const std::string compile_env = env_text("LJ_COMPILE");
  add("compile", r.step.graph.compile ? "on" : "off",
      f.compile              ? "--compile"
      : !compile_env.empty() ? compile_env
                             : "default");
  const std::string ckpt_env = env_text("CHECKPOINT_OPTIMIZATION");
  add("ckpt_opt", r.ckpt_opt ? "on" : "off",
      f.ckpt_opt          ? "--ckpt-opt"
      : !ckpt_env.empty() ? ckpt_env
                          : "default");
  if (r.ckpt_opt) {
    add("memory_limit",
        f.memory_limit.empty() ? default_budget_percent() + " of available memory" : f.memory_limit,
        f.memory_limit.empty() ? "default" : "--memory-limit");
  }
  const bool recompute_flag =
      f.given("--recompute") || f.given("--recompute-layers") || f.given("--recompute-method");
  add("recompute", r.step.graph.recompute.to_string(m.num_hidden_layers),
      r.ckpt_opt       ? "chosen by checkpoint optimization"
      : recompute_flag ? "--recompute flags"
      : r.ds           ? ds_origin(*r.ds, "recompute")
                       : "default");
  add("device", f.device, f.given("--device") ? "--device" : "default");
  add("threads", f.threads > 0 ? std::to_string(f.threads) : "all cores",
      f.given("--threads") ? "--threads" : "default");
  add("seed", std::to_string(f.seed), f.given("--seed") ? "--seed" : "default");
  if (world_size > 1) {
    add("comm_timeout", fmt::format("{:g} s", f.comm_timeout_s),
        f.given("--comm-timeout") ? "--comm-timeout" : "default (PyTorch's)");
  }
  return r;
}

}  // namespace lj::cli
