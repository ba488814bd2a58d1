#include "cli/run_config.h"

#include <fmt/format.h>

#include <cstdlib>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "backends/cpu/onednn_info.h"
#include "cli/flag_checks.h"
#include "models/hf_config.h"
#include "plan/budget.h"
#include "train/capabilities.h"

namespace lj::cli {

StatusOr<ModelRef> resolve_model(const std::string& name) {
  namespace fs = std::filesystem;
  ModelRef m;
  std::string preset = name;
  if (name.rfind("deepspeed/", 0) == 0) {
    preset = name.substr(10);
    m.recipe = "deepspeed/zero3_bf16";
  }
  if (fs::is_directory(preset)) {
    m.weights_dir = preset;
    LJ_ASSIGN_OR_RETURN(m.config, load_hf_config(preset + "/config.json"));
  } else if (preset.ends_with(".json")) {
    LJ_ASSIGN_OR_RETURN(m.config, load_hf_config(preset));
  } else {
    LJ_ASSIGN_OR_RETURN(m.config, llama_preset(preset));
  }
  if (!m.recipe.empty()) m.config.name = name;
  return m;
}

bool compile_requested(bool flag) {
  if (flag) return true;
  const char* env = std::getenv("LJ_COMPILE");
  if (env == nullptr) return false;
  const std::string v = env;
  return v == "1" || v == "true" || v == "TRUE" || v == "True";
}

StatusOr<std::optional<DeepSpeedConfig>> resolve_deepspeed(const std::string& file,
                                                           const ModelRef& model, RunSettings run) {
  run.hidden_size = model.config.hidden_size;
  if (!file.empty()) {
    LJ_ASSIGN_OR_RETURN(DeepSpeedConfig c, load_deepspeed_config(file, run));
    return std::optional<DeepSpeedConfig>(std::move(c));
  }
  if (!model.recipe.empty()) {
    LJ_ASSIGN_OR_RETURN(
        DeepSpeedConfig c,
        parse_deepspeed_config(std::string(deepspeed_zero3_bf16_recipe()), model.recipe, run));
    return std::optional<DeepSpeedConfig>(std::move(c));
  }
  return std::optional<DeepSpeedConfig>();
}

void apply_deepspeed(const DeepSpeedConfig& ds, StepSettings* s) {
  s->micro_batch = ds.micro_batch_per_gpu;
  s->grad_accum = ds.gradient_accumulation_steps;
  s->precision = ds.precision;
  s->step.grad_clip = ds.gradient_clipping;
  s->step.adamw = ds.optimizer;
  LossScaleConfig& l = s->step.loss_scale;
  l.loss_scale = ds.loss_scale.loss_scale;
  l.initial_scale_power = ds.loss_scale.initial_scale_power;
  l.loss_scale_window = ds.loss_scale.loss_scale_window;
  l.hysteresis = ds.loss_scale.hysteresis;
  l.min_loss_scale = ds.loss_scale.min_loss_scale;
  l.consecutive_hysteresis = ds.loss_scale.consecutive_hysteresis;
}

StepSettings step_settings(const RunSettings& run, const std::optional<DeepSpeedConfig>& ds) {
  StepSettings s;
  if (ds) {
    apply_deepspeed(*ds, &s);
  } else {
    s.micro_batch = run.micro_batch.value;
    s.grad_accum = run.grad_accum.value;
    s.precision = run.precision.value;
    s.step.grad_clip = run.grad_clip.value;
    s.step.adamw = AdamWConfig{run.lr.value, run.beta1.value, run.beta2.value, run.eps.value,
                               run.weight_decay.value};
  }
  // bf16 / fp16 (--precision, DeepSpeed's bf16 / fp16 blocks): mixed precision by the autocast
  // pass; fp16 with loss scaling.
  apply_precision(&s);
  return s;
}

bool parse_precision(const std::string& name, DType* out) {
  static const std::pair<const char*, DType> kNames[] = {
      {"f32", DType::f32},   {"fp32", DType::f32},      {"float32", DType::f32},
      {"bf16", DType::bf16}, {"bfloat16", DType::bf16}, {"f16", DType::f16},
      {"fp16", DType::f16},  {"float16", DType::f16}};
  for (const auto& [n, t] : kNames) {
    if (name == n) return *out = t, true;
  }
  return false;
}

void apply_precision(StepSettings* s) {
  const bool mixed = s->precision == DType::bf16 || s->precision == DType::f16;
  s->step.graph.autocast = mixed ? s->precision : DType::f32;
  const bool f16 = s->precision == DType::f16;
  s->step.graph.loss_scaling = f16;
  s->step.loss_scale.enabled = f16;
}

std::string precision_line(const StepSettings& s, bool checkpoints) {
  const cpu::OneDnnInfo dnn = cpu::onednn_info();
  const std::string tail = checkpoints ? ", gradients and checkpoints" : " and gradients";
  if (s.precision == DType::bf16) {
    return fmt::format("precision: bf16 mixed (f32 master weights{}; oneDNN {} on {})", tail,
                       dnn.version, dnn.cpu_isa);
  }
  if (s.precision != DType::f16) return "";
  const LossScaleConfig& l = s.step.loss_scale;
  const std::string scaling =
      l.loss_scale > 0
          ? fmt::format("static loss scale {:g}", l.loss_scale)
          : fmt::format("dynamic loss scale 2^{}, window {}, hysteresis {}, min {:g}",
                        l.initial_scale_power, l.loss_scale_window, l.hysteresis, l.min_loss_scale);
  return fmt::format("precision: fp16 mixed (f32 master weights{}; {}; GEMMs: {})", tail, scaling,
                     dnn.f16_matmul
                         ? fmt::format("oneDNN {} f16 on {}", dnn.version, dnn.cpu_isa)
                         : fmt::format("f32 on f16 storage, oneDNN {} has no f16 matmul on {}",
                                       dnn.version, dnn.cpu_isa));
}

DataParallelSettings resolve_data_parallel(const RunSettings& run,
                                           const std::optional<DeepSpeedConfig>& ds, int world_size,
                                           int rank, const std::string& backend) {
  DataParallelSettings d;
  d.world_size = world_size;
  d.rank = rank;
  d.backend = backend;
  if (ds) {
    // The file's resolution already let the flag win; its lines say where each value came from.
    d.zero = ds->zero;
    const auto origin = [&](const std::string& key) {
      for (const auto& l : ds->resolved) {
        if (l.key == key) return ds->source + ": " + l.origin;
      }
      return ds->source;
    };
    d.stage_origin = origin("zero_optimization.stage");
    d.reduce_bucket_origin = origin("zero_optimization.reduce_bucket_size");
    d.allgather_bucket_origin = origin("zero_optimization.allgather_bucket_size");
    d.overlap_origin = origin("zero_optimization.overlap_comm");
    d.stage3_origin = ds->source + ": each key's origin is in its DeepSpeed line";
    return d;
  }
  d.zero = ZeroConfig::defaults(static_cast<int>(run.zero_stage.value));
  d.stage_origin = run.zero_stage.from_flag ? "flag" : "default";
  d.reduce_bucket_origin = d.allgather_bucket_origin = "DeepSpeed default";
  d.overlap_origin = "DeepSpeed default (true for stage 3 only)";
  d.stage3_origin = "DeepSpeed defaults";
  return d;
}

std::string DataParallelSettings::describe() const {
  std::string s = "data parallel: " + std::to_string(world_size) +
                  (world_size == 1 ? " process" : " ranks") + " (communicator: " + backend + ")\n";
  s += "  zero_optimization.stage = " + std::to_string(zero.stage) + "  (" + stage_origin + ")\n";
  s += "  reduce_bucket_size = " + std::to_string(zero.reduce_bucket_size) + "  (" +
       reduce_bucket_origin + ")\n";
  s += "  allgather_bucket_size = " + std::to_string(zero.allgather_bucket_size) + "  (" +
       allgather_bucket_origin + ")\n";
  s += std::string("  overlap_comm = ") + (zero.overlap_comm ? "true" : "false") + "  (" +
       overlap_origin + ")\n";
  if (zero.shards(ZeroSharded::parameters)) {  // the stage3_ settings act on sharded parameters
    s += "  stage3_prefetch_bucket_size = " + std::to_string(zero.stage3_prefetch_bucket_size) +
         ", stage3_param_persistence_threshold = " +
         std::to_string(zero.stage3_param_persistence_threshold) + "\n" +
         "  stage3_max_live_parameters = " + std::to_string(zero.stage3_max_live_parameters) +
         ", stage3_max_reuse_distance = " + std::to_string(zero.stage3_max_reuse_distance) + "  (" +
         stage3_origin + ")\n";
  }
  if (world_size == 1) {
    s += "  one process: no collectives, the stage changes nothing\n";
  } else {
    s += zero.overlap_comm
             ? "  gradient buckets reduce during backward, nonblocking (at most 2 in flight)\n"
             : "  gradient buckets reduce during backward, each blocking where it fills\n";
  }
  return s;
}

Status check_zero_supported(const ZeroConfig& zero) {
  return zero.validate();
}

std::string zero_stages_text() {
  return "cpu: " + supported_values(TrainDevice::cpu, "zero") +
         "; cuda: " + supported_values(TrainDevice::cuda, "zero");
}

void add_zero_flag(CLI::App* sub, int* zero) {
  sub->add_option("--zero", *zero,
                  "ZeRO stage across the ranks of mpirun (" + zero_stages_text() +
                      "; wins over the DeepSpeed JSON's zero_optimization.stage)")
      ->check(CLI::Range(0, 3));
}

void add_comm_timeout_flag(CLI::App* sub, double* seconds) {
  sub->add_option("--comm-timeout", *seconds,
                  "Under mpirun: seconds a collective may wait for the other ranks before the job "
                  "ends (a rank died or hangs; PyTorch's default 600; 0: wait forever)")
      ->capture_default_str()
      ->check(finite_at_least_zero());
}

void add_optimization_flags(CLI::App* sub, bool* compile, bool* ckpt_opt, std::string* memory_limit,
                            RecomputeFlags* recompute) {
  sub->add_flag("--ckpt-opt", *ckpt_opt,
                "Checkpoint optimization (also CHECKPOINT_OPTIMIZATION=true): let the planner "
                "choose what to recompute, the fastest choice that fits the memory budget");
  sub->add_option("--memory-limit", *memory_limit,
                  "Budget for --ckpt-opt, e.g. 2GiB (default: " + default_budget_percent() +
                      " of available memory)");
  sub->add_flag("--compile", *compile,
                "Compile the step: pattern and pointwise fusion, generated kernels, static memory "
                "plan (also LJ_COMPILE=1)");
  add_recompute_flags(sub, recompute);
}

void add_recompute_flags(CLI::App* sub, RecomputeFlags* f) {
  f->policy_flag = sub->add_option("--recompute", f->policy,
                                   "Activation recompute: none, selective (keep matmul and "
                                   "attention outputs) or full (keep each region's input)")
                       ->capture_default_str();
  f->method_flag = sub->add_option("--recompute-method", f->method,
                                   "uniform (every layer, in regions of --recompute-layers "
                                   "layers) or block (the first --recompute-layers layers)")
                       ->capture_default_str();
  f->layers_flag = sub->add_option("--recompute-layers", f->layers,
                                   "Layers per region (uniform) or recomputed layers (block); "
                                   "default: 1 (uniform), all (block)");
}

Status apply_recompute_flags(const RecomputeFlags& f, RunSettings* run) {
  LJ_RETURN_IF_ERROR(parse_recompute_policy(f.policy).status());
  LJ_RETURN_IF_ERROR(parse_recompute_method(f.method).status());
  run->recompute.assign(f.policy, f.policy_flag != nullptr && f.policy_flag->count() > 0);
  run->recompute_method.assign(f.method, f.method_flag != nullptr && f.method_flag->count() > 0);
  run->recompute_layers.assign(f.layers, f.layers_flag != nullptr && f.layers_flag->count() > 0);
  return ok_status();
}

StatusOr<RecomputeConfig> resolve_recompute(const RunSettings& run,
                                            const std::optional<DeepSpeedConfig>& ds,
                                            const LlamaConfig& model) {
  RecomputeConfig c;
  LJ_ASSIGN_OR_RETURN(c.policy, parse_recompute_policy(ds ? ds->recompute : run.recompute.value));
  LJ_ASSIGN_OR_RETURN(
      c.method, parse_recompute_method(ds ? ds->recompute_method : run.recompute_method.value));
  c.layers = ds ? ds->recompute_layers : run.recompute_layers.value;
  LJ_RETURN_IF_ERROR(c.validate(model.num_hidden_layers));
  return c;
}

}  // namespace lj::cli
