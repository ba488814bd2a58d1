// The one table of DeepSpeed keys ljperf knows, with each key's treatment, and the walk over a
// config file that reads honoured keys into Raw. See deepspeed_config.h for the rules.
#include "io/deepspeed_keys.h"

#include "core/json_read.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <type_traits>

namespace lj::deepspeed_detail {
namespace {

using json = nlohmann::json;

KeySpec honour(const char* scope, const char* key, Target t, bool auto_ok = false,
               const char* detail = "") {
  return {scope, key, Treat::honoured, t, auto_ok, detail, "false"};
}
KeySpec no_effect(const char* scope, const char* key, const char* why = "") {
  return {scope, key, Treat::no_effect, {}, false, why, "false"};
}
KeySpec refuse(const char* scope, const char* key, const char* hint,
               const char* inactive = "false") {
  return {scope, key, Treat::refused, {}, false, hint, inactive};
}
KeySpec block(const char* scope, const char* key, const char* child) {
  return {scope, key, Treat::block, {}, false, child, "false"};
}

constexpr bool kAuto = true;
constexpr const char* kZ = "zero_optimization";
constexpr const char* kSp = "scheduler.params";
constexpr const char* kAllSchedulers = "WarmupLR WarmupDecayLR WarmupCosineLR";

// THE table: every key ljperf knows, with its treatment.
const std::vector<KeySpec>& key_table() {
  static const std::vector<KeySpec> t = {
      honour("", "train_batch_size", &Raw::train_batch, kAuto),
      honour("", "train_micro_batch_size_per_gpu", &Raw::micro_batch, kAuto),
      honour("", "gradient_accumulation_steps", &Raw::grad_accum, kAuto),
      honour("", "gradient_clipping", &Raw::grad_clip, kAuto),
      block("", "fp16", "fp16"),
      block("", "bf16", "bf16"),
      block("", "bfloat16", "bf16"),  // DeepSpeed's older name
      block("", "optimizer", "optimizer"),
      block("", "scheduler", "scheduler"),
      block("", "zero_optimization", kZ),
      block("", "activation_checkpointing", "activation_checkpointing"),
      no_effect("", "steps_per_print", "ljperf prints every step"),
      no_effect("", "wall_clock_breakdown", "see ljperf's profile output"),
      no_effect("", "memory_breakdown", "ljperf reports memory by category"),
      no_effect("", "zero_allow_untested_optimizer"),
      no_effect("", "zero_force_ds_cpu_optimizer"),
      no_effect("", "communication_data_type", "ljperf reduces gradients in fp32"),
      no_effect("", "seq_parallel_communication_data_type"),
      no_effect("", "gradient_accumulation_dtype", "ljperf accumulates gradients in fp32"),
      no_effect("", "prescale_gradients", "the same sum up to rounding"),
      no_effect("", "gradient_predivide_factor", "the same sum up to rounding"),
      no_effect("", "dataloader_drop_last"),
      no_effect("", "disable_allgather"),
      no_effect("", "dump_state"),
      no_effect("", "checkpoint", "ljperf writes its own checkpoints"),
      no_effect("", "aio", "no NVMe offload"),
      no_effect("", "tensorboard", "see ljperf's --tensorboard"),
      no_effect("", "wandb"),
      no_effect("", "csv_monitor"),
      no_effect("", "comet"),
      no_effect("", "comms_logger"),
      no_effect("", "flops_profiler", "ljperf prints tflops and MFU"),
      no_effect("", "timers"),
      no_effect("", "compile", "ljperf always compiles its graph"),
      refuse("", "pipeline", "ljperf trains with data parallelism and ZeRO; remove the block"),
      refuse("", "sparse_attention", "remove the block"),
      refuse("", "sparse_gradients", "set it to false"),
      refuse("", "amp", "use bf16 or fp16 instead of apex amp"),
      refuse("", "torch_autocast", "use bf16 or fp16"),
      refuse("", "tensor_parallel", "ljperf trains with data parallelism and ZeRO"),
      refuse("", "elasticity", "set enabled to false"),
      refuse("", "autotuning", "ljperf's planner picks recompute; see --ckpt-opt"),
      refuse("", "compression_training", "remove the block"),
      refuse("", "data_efficiency", "remove the block"),
      refuse("", "curriculum_learning", "remove the block"),
      refuse("", "progressive_layer_drop", "remove the block"),
      refuse("", "eigenvalue", "remove the block"),
      refuse("", "hybrid_engine", "remove the block"),
      refuse("", "weight_quantization", "remove the block"),

      honour("fp16", "enabled", &Raw::fp16_enabled, kAuto),
      honour("fp16", "loss_scale", &Raw::loss_scale),
      honour("fp16", "initial_scale_power", &Raw::initial_scale_power),
      honour("fp16", "loss_scale_window", &Raw::loss_scale_window),
      honour("fp16", "hysteresis", &Raw::hysteresis),
      honour("fp16", "min_loss_scale", &Raw::min_loss_scale),
      honour("fp16", "consecutive_hysteresis", &Raw::consecutive_hysteresis),
      no_effect("fp16", "auto_cast"),
      refuse("fp16", "fp16_master_weights_and_grads", "ljperf keeps fp32 master weights"),
      honour("bf16", "enabled", &Raw::bf16_enabled, kAuto),
      no_effect("bf16", "immediate_grad_update"),
      no_effect("bf16", "check_grad_overflow"),
      refuse("bf16", "bf16_master_weights_and_grads", "ljperf keeps fp32 master weights"),
      refuse("bf16", "bf16_optimizer_states", "ljperf keeps fp32 Adam states"),

      honour("optimizer", "type", &Raw::optimizer_type),
      block("optimizer", "params", "optimizer.params"),
      honour("optimizer.params", "lr", &Raw::lr, kAuto),
      honour("optimizer.params", "betas", &Raw::betas, kAuto),
      honour("optimizer.params", "eps", &Raw::eps, kAuto),
      honour("optimizer.params", "weight_decay", &Raw::weight_decay, kAuto),
      honour("optimizer.params", "adam_w_mode", &Raw::adam_w_mode),
      no_effect("optimizer.params", "torch_adam", "ljperf has one AdamW"),
      no_effect("optimizer.params", "fused"),
      refuse("optimizer.params", "amsgrad", "set it to false"),
      refuse("optimizer.params", "bias_correction", "set it to true", "true"),

      honour("scheduler", "type", &Raw::scheduler_type),
      block("scheduler", "params", kSp),
      honour(kSp, "warmup_min_lr", &Raw::warmup_min_lr, kAuto, "WarmupLR WarmupDecayLR"),
      honour(kSp, "warmup_max_lr", &Raw::warmup_max_lr, kAuto, "WarmupLR WarmupDecayLR"),
      honour(kSp, "warmup_num_steps", &Raw::warmup_num_steps, kAuto, kAllSchedulers),
      honour(kSp, "warmup_type", &Raw::warmup_type, false, kAllSchedulers),
      honour(kSp, "total_num_steps", &Raw::total_num_steps, kAuto, "WarmupDecayLR WarmupCosineLR"),
      honour(kSp, "warmup_min_ratio", &Raw::warmup_min_ratio, false, "WarmupCosineLR"),
      honour(kSp, "cos_min_ratio", &Raw::cos_min_ratio, false, "WarmupCosineLR"),
      refuse(kSp, "last_batch_iteration", "resume with ljperf's checkpoints instead", "-1"),

      honour(kZ, "stage", &Raw::stage),
      honour(kZ, "reduce_bucket_size", &Raw::reduce_bucket, kAuto),
      honour(kZ, "allgather_bucket_size", &Raw::allgather_bucket),
      honour(kZ, "stage3_prefetch_bucket_size", &Raw::prefetch_bucket, kAuto),
      honour(kZ, "stage3_param_persistence_threshold", &Raw::persistence, kAuto),
      honour(kZ, "stage3_max_live_parameters", &Raw::max_live),
      honour(kZ, "stage3_max_reuse_distance", &Raw::max_reuse),
      honour(kZ, "sub_group_size", &Raw::sub_group),
      honour(kZ, "overlap_comm", &Raw::overlap_comm),
      honour(kZ, "contiguous_gradients", &Raw::contiguous_gradients),
      honour(kZ, "reduce_scatter", &Raw::reduce_scatter),
      honour(kZ, "allgather_partitions", &Raw::allgather_partitions),
      honour(kZ, "stage3_gather_16bit_weights_on_model_save", &Raw::gather_16bit),
      honour(kZ, "stage3_gather_fp16_weights_on_model_save", &Raw::gather_16bit),  // older name
      block(kZ, "offload_optimizer", "zero_optimization.offload_optimizer"),
      block(kZ, "offload_param", "zero_optimization.offload_param"),
      no_effect(kZ, "round_robin_gradients"),
      no_effect(kZ, "load_from_fp32_weights"),
      no_effect(kZ, "elastic_checkpoint"),
      no_effect(kZ, "ignore_unused_parameters"),
      no_effect(kZ, "memory_efficient_linear"),
      no_effect(kZ, "use_multi_rank_bucket_allreduce"),
      no_effect(kZ, "stage3_module_granularity_threshold"),
      no_effect(kZ, "log_trace_cache_warnings"),
      refuse(kZ, "cpu_offload", "use offload_optimizer with device none"),
      refuse(kZ, "cpu_offload_params", "use offload_param with device none"),
      refuse(kZ, "zero_quantized_weights", "set it to false"),
      refuse(kZ, "zero_quantized_gradients", "set it to false"),
      refuse(kZ, "zero_quantized_nontrainable_weights", "set it to false"),
      refuse(kZ, "zero_hpz_partition_size", "set it to 1", "1"),
      refuse(kZ, "mics_shard_size", "set it to -1", "-1"),
      honour("zero_optimization.offload_optimizer", "device", &Raw::offload_optimizer_device),
      honour("zero_optimization.offload_param", "device", &Raw::offload_param_device),
      no_effect("zero_optimization.offload_optimizer", "pin_memory"),
      no_effect("zero_optimization.offload_optimizer", "nvme_path"),
      no_effect("zero_optimization.offload_optimizer", "buffer_count"),
      no_effect("zero_optimization.offload_optimizer", "fast_init"),
      no_effect("zero_optimization.offload_optimizer", "ratio"),
      no_effect("zero_optimization.offload_param", "pin_memory"),
      no_effect("zero_optimization.offload_param", "nvme_path"),
      no_effect("zero_optimization.offload_param", "buffer_count"),
      no_effect("zero_optimization.offload_param", "buffer_size"),
      no_effect("zero_optimization.offload_param", "max_in_cpu"),

      // The block itself asks for full recompute of every layer (deepspeed_config.h).
      no_effect("activation_checkpointing", "partition_activations",
                "splits checkpoints over model-parallel ranks; one process has none"),
      no_effect("activation_checkpointing", "contiguous_memory_optimization",
                "the caching allocator places checkpoints"),
      no_effect("activation_checkpointing", "number_checkpoints",
                "sizes DeepSpeed's contiguous buffer; --recompute-layers chooses layers"),
      refuse("activation_checkpointing", "cpu_checkpointing",
             "set it to false; ljperf keeps checkpoints in device memory"),
      no_effect("activation_checkpointing", "synchronize_checkpoint_boundary",
                "one stream: nothing to synchronise"),
      no_effect("activation_checkpointing", "profile", "see benchmark --profile"),
  };
  return t;
}

// ---- reading one value ----

bool convert(const json& v, int64_t* out) {
  if (v.is_number_integer()) {
    const std::optional<int64_t> i = json_int_if(v);  // none above 2^63 - 1
    if (i) *out = *i;
    return i.has_value();
  }
  if (!v.is_number_float()) return false;
  const double d = *json_number_if(v);  // 5e8 is an integer to DeepSpeed too
  if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18) return false;
  *out = static_cast<int64_t>(d);
  return true;
}
bool convert(const json& v, double* out) {
  const std::optional<double> d = json_number_if(v);
  if (d) *out = *d;
  return d.has_value();
}
bool convert(const json& v, bool* out) {
  const std::optional<bool> b = json_bool_if(v);
  if (b) *out = *b;
  return b.has_value();
}
bool convert(const json& v, std::string* out) {
  const std::string* s = json_string_if(v);
  if (s != nullptr) *out = *s;
  return s != nullptr;
}
bool convert(const json& v, std::vector<double>* out) {
  if (!v.is_array()) return false;
  out->clear();
  for (const json& e : v) {
    const std::optional<double> d = json_number_if(e);
    if (!d) return false;
    out->push_back(*d);
  }
  return true;
}
const char* expected(int64_t*) {
  return "an integer";
}
const char* expected(double*) {
  return "a number";
}
const char* expected(bool*) {
  return "true or false";
}
const char* expected(std::string*) {
  return "a string";
}
const char* expected(std::vector<double>*) {
  return "a list of numbers";
}

template <class T>
Status read_value(const json& v, const KeySpec& k, const std::string& src, const std::string& path,
                  FileValue<T>* out) {
  if (v.is_null()) {  // null = not given, as in DeepSpeed's pydantic models
    out->unset_as = "null";
    return ok_status();
  }
  const std::string* text = json_string_if(v);
  if (k.auto_ok && text != nullptr && text->empty()) {  // "left empty"
    out->unset_as = "empty";
    return ok_status();
  }
  if (text != nullptr && *text == "auto") {
    if (!k.auto_ok) {
      return key_error(src, path, "\"auto\" is not resolved for this key",
                       "give a value; HF's Trainer fills \"auto\" only for batch sizes, "
                       "gradient_clipping, fp16/bf16.enabled, optimizer and scheduler params "
                       "and three zero_optimization bucket sizes");
    }
    out->present = out->is_auto = true;
    return ok_status();
  }
  if (!convert(v, &out->value)) {
    return key_error(src, path,
                     std::string("expected ") + expected(&out->value) + ", got " + v.dump(),
                     "see DeepSpeed's configuration reference for this key");
  }
  out->present = true;
  return ok_status();
}

// Walks one JSON object whose keys are looked up under `scope`.
Status walk(const json& obj, const std::string& scope, const std::string& prefix,
            const std::string& src, Raw* raw) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
    const KeySpec* k = find_key(scope, it.key());
    const json& v = it.value();
    if (k == nullptr) {
      raw->warnings.push_back(src + ": unknown key '" + path + "' ignored");
      continue;
    }
    switch (k->treat) {
      case Treat::honoured: {
        raw->seen.emplace_back(k, path);
        Status s = std::visit(
            [&](auto member) -> Status {
              if constexpr (std::is_same_v<decltype(member), std::monostate>) {
                return ok_status();
              } else {
                return read_value(v, *k, src, path, &(raw->*member));
              }
            },
            k->target);
        LJ_RETURN_IF_ERROR(s);
        break;
      }
      case Treat::no_effect:
        raw->no_effect.push_back(path);
        break;
      case Treat::refused: {
        const bool off =
            v.is_null() || v == json::parse(k->inactive) ||
            (v.is_object() && (v.empty() || (v.contains("enabled") && v["enabled"] == false)));
        if (!off) return unimplemented(src + ": " + path + " is not supported yet", k->detail);
        raw->no_effect.push_back(path);
        break;
      }
      case Treat::block:
        if (v.is_null()) break;
        if (!v.is_object()) {
          return key_error(src, path, "expected an object, got " + v.dump(),
                           "see DeepSpeed's configuration reference for this block");
        }
        raw->blocks.insert(k->detail);
        LJ_RETURN_IF_ERROR(walk(v, k->detail, path, src, raw));
        break;
    }
  }
  return ok_status();
}

}  // namespace

const KeySpec* find_key(const std::string& scope, const std::string& key) {
  for (const KeySpec& k : key_table()) {
    if (scope == k.scope && key == k.key) return &k;
  }
  return nullptr;
}

Status key_error(const std::string& src, const std::string& path, const std::string& what,
                 const std::string& hint) {
  return invalid_argument(src + ": " + path + ": " + what, hint);
}

Status read_deepspeed_json(const std::string& text, const std::string& src, Raw* raw) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error; out_of_range for numbers such as 2e308
    std::string what = e.what();  // "[json.exception.parse_error.101] parse error at line 3, ..."
    const size_t p = what.find("] ");
    if (p != std::string::npos) what = what.substr(p + 2);
    return invalid_argument(src + ": not valid JSON: " + what,
                            "DeepSpeed configs are plain JSON: no comments, no trailing commas");
  }
  if (!j.is_object()) {
    return invalid_argument(src + ": expected a JSON object, got " + std::string(j.type_name()),
                            "a DeepSpeed config is an object such as {\"train_batch_size\": 32}");
  }
  return walk(j, "", "", src, raw);
}

}  // namespace lj::deepspeed_detail
