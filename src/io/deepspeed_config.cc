// DeepSpeed JSON: resolves the file's values (read by deepspeed_keys.cc) against "auto" and the
// run's flags into a DeepSpeedConfig; DeepSpeed's learning-rate schedules. See deepspeed_config.h.
#include "io/deepspeed_config.h"
#include "core/text_file.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <numbers>
#include <sstream>
#include <type_traits>

#include "core/checked_math.h"
#include "io/deepspeed_keys.h"

namespace lj {
namespace {

using namespace deepspeed_detail;  // NOLINT(google-build-using-namespace): this file's own
                                   // internals

// ---- resolution ----

std::string text(int64_t v) {
  return std::to_string(v);
}
std::string text(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round-trip form
  return std::string(buf, r.ptr);
}
std::string text(bool v) {
  return v ? "true" : "false";
}
std::string text(const std::string& v) {
  return v;
}
std::string text(DType v) {
  return dtype_name(v);
}

struct Resolver {
  const std::string& src;
  const RunSettings& run;
  DeepSpeedConfig* out;
  std::vector<std::string> warnings;  // doubtful values, after the walk's unknown-key warnings

  void note(const std::string& key, const std::string& value, const std::string& origin) {
    out->resolved.push_back({key, value, origin});
  }

  // Flag, else "auto" (the run's value, or `auto_value` when given), else the file, else
  // `fallback` (origin `fallback_origin`).
  template <class T>
  T pick(const std::string& key, const FileValue<T>& f, const std::type_identity_t<RunValue<T>>* r,
         T fallback, const std::string& fallback_origin, const T* auto_value = nullptr,
         const std::string& auto_origin = "auto") {
    T v = fallback;
    std::string origin = fallback_origin;
    if (r != nullptr && r->from_flag) {
      v = r->value;
      origin = "flag";
      if (f.present && !f.is_auto && f.value != r->value) origin += "; file said " + text(f.value);
    } else if (f.is_auto) {
      LJ_CHECK(auto_value != nullptr || r != nullptr) << key << ": no value for auto";
      v = auto_value != nullptr ? *auto_value : r->value;
      origin = auto_origin;
    } else if (f.present) {
      v = f.value;
      origin = "file";
    } else if (*f.unset_as != '\0') {
      origin = std::string(f.unset_as) + " in the file: " + fallback_origin;
    }
    note(key, text(v), origin);
    return v;
  }

  Status positive(const std::string& key, int64_t v) {
    if (v >= 1) return ok_status();
    return key_error(src, key, "must be a positive integer, got " + text(v), "e.g. 1");
  }

  Status batch(const Raw& raw) {
    const int64_t w = run.world_size;
    if (w < 1)
      return invalid_argument(src + ": world_size " + text(w) + " is not positive",
                              "check the launcher");
    struct Known {
      bool set = false;
      int64_t v = 0;
      std::string origin;
    };
    auto take = [&](const FileValue<int64_t>& f, const RunValue<int64_t>& r) {
      if (r.from_flag) return Known{true, r.value, "flag"};
      if (f.is_auto) return Known{true, r.value, "auto"};
      if (f.present) return Known{true, f.value, "file"};
      return Known{};
    };
    Known m = take(raw.micro_batch, run.micro_batch);
    Known a = take(raw.grad_accum, run.grad_accum);
    Known t;  // "auto" train_batch_size is derived, as HF computes it
    if (raw.train_batch.present && !raw.train_batch.is_auto)
      t = {true, raw.train_batch.value, "file"};
    if (t.set) LJ_RETURN_IF_ERROR(positive("train_batch_size", t.v));
    if (m.set) LJ_RETURN_IF_ERROR(positive("train_micro_batch_size_per_gpu", m.v));
    if (a.set) LJ_RETURN_IF_ERROR(positive("gradient_accumulation_steps", a.v));
    const std::string formula =
        "train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x "
        "world_size";
    auto divide = [&](const std::string& what, int64_t den, const std::string& den_text,
                      Known* target) -> Status {
      if (t.v % den != 0) {
        return key_error(src, "train_batch_size",
                         text(t.v) + " is not divisible by " + den_text + " = " + text(den),
                         formula + "; give values that divide exactly");
      }
      *target = {true, t.v / den, "inferred: " + what};
      return ok_status();
    };
    const std::string ws = "world_size " + text(w);
    // A product of the batch sizes, or an error naming `key` when it overflows int64 (the
    // file's integers can be anything up to 2^63 - 1).
    auto product = [&](std::initializer_list<int64_t> factors, const std::string& factors_text,
                       const char* key, int64_t* out) -> Status {
      const std::optional<int64_t> p = checked_product<int64_t>(factors);
      if (!p) {
        return key_error(src, key, factors_text + " overflows a 64-bit integer",
                         formula + "; give batch sizes that fit");
      }
      *out = *p;
      return ok_status();
    };
    // micro x accum x world; an overflow names the larger of micro and accum.
    auto micro_accum_world = [&](int64_t* out) {
      return product({m.v, a.v, w},
                     "train_micro_batch_size_per_gpu " + text(m.v) +
                         " x gradient_accumulation_steps " + text(a.v) + " x " + ws,
                     m.v >= a.v ? "train_micro_batch_size_per_gpu" : "gradient_accumulation_steps",
                     out);
    };
    if (t.set && m.set && a.set) {
      int64_t mxaxw = 0;
      LJ_RETURN_IF_ERROR(micro_accum_world(&mxaxw));
      if (t.v != mxaxw) {
        return key_error(src, "train_batch_size",
                         text(t.v) + " (" + t.origin + ") != train_micro_batch_size_per_gpu " +
                             text(m.v) + " (" + m.origin + ") x gradient_accumulation_steps " +
                             text(a.v) + " (" + a.origin + ") x " + ws + " = " + text(mxaxw),
                         formula + "; give two of the three, or set train_batch_size to \"auto\"");
      }
    } else if (t.set && m.set) {
      const std::string mxw = "train_micro_batch_size_per_gpu " + text(m.v) + " x " + ws;
      int64_t den = 0;
      LJ_RETURN_IF_ERROR(product({m.v, w}, mxw, "train_micro_batch_size_per_gpu", &den));
      LJ_RETURN_IF_ERROR(divide("train / (micro x world)", den, mxw, &a));
    } else if (t.set && a.set) {
      const std::string axw = "gradient_accumulation_steps " + text(a.v) + " x " + ws;
      int64_t den = 0;
      LJ_RETURN_IF_ERROR(product({a.v, w}, axw, "gradient_accumulation_steps", &den));
      LJ_RETURN_IF_ERROR(divide("train / (accum x world)", den, axw, &m));
    } else if (t.set) {
      a = {true, 1, "DeepSpeed default (only train_batch_size given)"};
      LJ_RETURN_IF_ERROR(divide("train / world", w, ws, &m));
    } else {
      if (!m.set && !a.set) {
        m = {true, run.micro_batch.value, "run (no batch keys)"};
        a = {true, run.grad_accum.value, "run (no batch keys)"};
      }
      if (!m.set) m = {true, 1, "DeepSpeed default"};
      if (!a.set) a = {true, 1, "DeepSpeed default"};
      int64_t mxaxw = 0;
      LJ_RETURN_IF_ERROR(micro_accum_world(&mxaxw));
      t = {true, mxaxw,
           raw.train_batch.is_auto ? "auto: micro x accum x world"
                                   : "inferred: micro x accum x world"};
    }
    out->train_batch_size = t.v;
    out->micro_batch_per_gpu = m.v;
    out->gradient_accumulation_steps = a.v;
    out->world_size = w;
    note("train_batch_size", text(t.v), t.origin);
    note("train_micro_batch_size_per_gpu", text(m.v), m.origin);
    note("gradient_accumulation_steps", text(a.v), a.origin);
    note("world_size", text(w), "launcher");
    return ok_status();
  }

  Status precision(const Raw& raw) {
    const bool fp16_auto = run.precision.value == DType::f16,
               bf16_auto = run.precision.value == DType::bf16;
    const bool fp16 =
        raw.fp16_enabled.present && (raw.fp16_enabled.is_auto ? fp16_auto : raw.fp16_enabled.value);
    const bool bf16 =
        raw.bf16_enabled.present && (raw.bf16_enabled.is_auto ? bf16_auto : raw.bf16_enabled.value);
    if (run.precision.from_flag) {
      out->precision = run.precision.value;
      note("precision", text(out->precision), "flag");
    } else {
      if (fp16 && bf16) {
        return key_error(src, "fp16.enabled", "fp16 and bf16 are both enabled",
                         "enable one of them; ljperf trains GPUs in bf16");
      }
      out->precision = bf16 ? DType::bf16 : fp16 ? DType::f16 : DType::f32;
      const bool is_auto = (bf16 && raw.bf16_enabled.is_auto) || (fp16 && raw.fp16_enabled.is_auto);
      note("precision", text(out->precision),
           fp16 || bf16 ? (is_auto ? "auto" : "file") : "DeepSpeed default");
    }
    DsLossScale& l = out->loss_scale;
    const std::string d = "DeepSpeed default";
    l.loss_scale = pick("fp16.loss_scale", raw.loss_scale, nullptr, 0.0, d);
    l.initial_scale_power =
        pick("fp16.initial_scale_power", raw.initial_scale_power, nullptr, int64_t{16}, d);
    l.loss_scale_window =
        pick("fp16.loss_scale_window", raw.loss_scale_window, nullptr, int64_t{1000}, d);
    l.hysteresis = pick("fp16.hysteresis", raw.hysteresis, nullptr, int64_t{2}, d);
    l.min_loss_scale = pick("fp16.min_loss_scale", raw.min_loss_scale, nullptr, 1.0, d);
    l.consecutive_hysteresis =
        pick("fp16.consecutive_hysteresis", raw.consecutive_hysteresis, nullptr, false, d);
    if (l.loss_scale < 0)
      return key_error(src, "fp16.loss_scale", "must be >= 0", "0 means dynamic loss scaling");
    if (l.initial_scale_power < 0 || l.initial_scale_power > 63) {
      return key_error(src, "fp16.initial_scale_power", "must be in [0, 63]",
                       "DeepSpeed's default is 16");
    }
    if (l.loss_scale_window < 1)
      return key_error(src, "fp16.loss_scale_window", "must be >= 1", "default 1000");
    if (l.hysteresis < 1) return key_error(src, "fp16.hysteresis", "must be >= 1", "default 2");
    if (l.min_loss_scale <= 0)
      return key_error(src, "fp16.min_loss_scale", "must be > 0", "default 1");
    return ok_status();
  }

  Status optimizer(const Raw& raw) {
    AdamWConfig& o = out->optimizer;
    const bool present = raw.blocks.count("optimizer") > 0;
    if (present) {
      std::string type = raw.optimizer_type.value;
      std::transform(type.begin(), type.end(), type.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      if (!raw.optimizer_type.present) {
        return key_error(src, "optimizer.type", "missing",
                         "\"AdamW\" is the type ljperf implements");
      }
      if (type != "adamw" && type != "adam") {
        return unimplemented(
            src + ": optimizer.type \"" + raw.optimizer_type.value + "\" is not supported yet",
            "ljperf implements AdamW (DeepSpeed's \"AdamW\", or \"Adam\" with adam_w_mode)");
      }
    }
    // No block: HF's Trainer builds AdamW from its own arguments; a block's missing params take
    // FusedAdam's defaults.
    const std::string d = present ? "DeepSpeed default" : "run (no optimizer block)";
    o.lr = pick("optimizer.lr", raw.lr, &run.lr, present ? 1e-3 : run.lr.value, d);
    FileValue<double> b1, b2;
    b1.present = b2.present = raw.betas.present;
    b1.is_auto = b2.is_auto = raw.betas.is_auto;
    if (raw.betas.present && !raw.betas.is_auto) {
      if (raw.betas.value.size() != 2) {
        return key_error(src, "optimizer.params.betas", "expected two numbers [beta1, beta2]",
                         "e.g. [0.9, 0.95]");
      }
      b1.value = raw.betas.value[0];
      b2.value = raw.betas.value[1];
    }
    o.beta1 = pick("optimizer.beta1", b1, &run.beta1, present ? 0.9 : run.beta1.value, d);
    o.beta2 = pick("optimizer.beta2", b2, &run.beta2, present ? 0.999 : run.beta2.value, d);
    o.eps = pick("optimizer.eps", raw.eps, &run.eps, present ? 1e-8 : run.eps.value, d);
    o.weight_decay = pick("optimizer.weight_decay", raw.weight_decay, &run.weight_decay,
                          present ? 0.0 : run.weight_decay.value, d);
    const bool w_mode = !raw.adam_w_mode.present || raw.adam_w_mode.value;
    if (!w_mode && o.weight_decay != 0) {
      return unimplemented(src +
                               ": optimizer.params.adam_w_mode false (Adam with L2 weight decay) "
                               "is not supported yet",
                           "set adam_w_mode to true (AdamW) or weight_decay to 0");
    }
    if (o.lr < 0 || o.eps <= 0 || o.weight_decay < 0 || o.beta1 < 0 || o.beta1 >= 1 ||
        o.beta2 < 0 || o.beta2 >= 1) {
      return key_error(src, "optimizer.params",
                       "needs lr >= 0, eps > 0, weight_decay >= 0, betas in [0, 1)",
                       "e.g. lr 3e-4, betas [0.9, 0.95], eps 1e-8, weight_decay 0.1");
    }
    return ok_status();
  }

  Status scheduler(const Raw& raw) {
    DsScheduler& s = out->scheduler;
    if (raw.blocks.count("scheduler") == 0) {
      note("scheduler", "none", "no scheduler block: ljperf's own schedule");
      return ok_status();
    }
    const std::string name = raw.scheduler_type.value;
    if (!raw.scheduler_type.present) {
      return key_error(src, "scheduler.type", "missing",
                       "WarmupLR, WarmupDecayLR or WarmupCosineLR");
    }
    if (name == "WarmupLR")
      s.type = DsScheduler::Type::warmup_lr;
    else if (name == "WarmupDecayLR")
      s.type = DsScheduler::Type::warmup_decay_lr;
    else if (name == "WarmupCosineLR")
      s.type = DsScheduler::Type::warmup_cosine_lr;
    else {
      return unimplemented(src + ": scheduler.type \"" + name + "\" is not supported yet",
                           "ljperf implements WarmupLR, WarmupDecayLR and WarmupCosineLR");
    }
    note("scheduler.type", name, "file");
    for (const auto& [k, path] : raw.seen) {  // params DeepSpeed would reject for this type
      if (std::string(k->scope) != "scheduler.params") continue;
      std::istringstream types(k->detail);
      std::string t;
      bool used = false;
      while (types >> t) used = used || t == name;
      if (!used) warnings.push_back(src + ": " + path + " has no effect on " + name);
    }
    const std::string d = "DeepSpeed default";
    const bool cosine = s.type == DsScheduler::Type::warmup_cosine_lr;
    if (!cosine) {
      const double zero = 0;
      s.warmup_min_lr =
          pick("scheduler.warmup_min_lr", raw.warmup_min_lr, nullptr, 0.0, d, &zero, "auto: 0");
      // Missing warmup_max_lr: recent DeepSpeed takes the optimizer's lr (older ones 0.001).
      s.warmup_max_lr =
          pick("scheduler.warmup_max_lr", raw.warmup_max_lr, &run.lr, out->optimizer.lr,
               "optimizer lr", &out->optimizer.lr, "auto: optimizer lr");
    } else {
      s.warmup_max_lr = out->optimizer.lr;
      note("scheduler.warmup_max_lr", text(s.warmup_max_lr),
           "optimizer lr (WarmupCosineLR scales it)");
      s.warmup_min_ratio =
          pick("scheduler.warmup_min_ratio", raw.warmup_min_ratio, nullptr, 0.0, d);
      s.cos_min_ratio = pick("scheduler.cos_min_ratio", raw.cos_min_ratio, nullptr, 1e-4, d);
    }
    const int64_t w = pick("scheduler.warmup_num_steps", raw.warmup_num_steps, &run.warmup_steps,
                           int64_t{1000}, d);
    if (w < 0)
      return key_error(src, "scheduler.params.warmup_num_steps", "must be >= 0", "e.g. 100");
    s.warmup_num_steps = std::max<int64_t>(2, w);  // DeepSpeed: max(2, warmup_num_steps)
    if (s.warmup_num_steps != w) {
      out->resolved.back().value = "2";
      out->resolved.back().origin += "; DeepSpeed raises it to at least 2";
    }
    std::string wt = pick("scheduler.warmup_type", raw.warmup_type, nullptr, std::string("log"), d);
    if (wt != "log" && wt != "linear") {
      warnings.push_back(src + ": scheduler.params.warmup_type \"" + wt +
                         "\" is unknown; log is used, as in DeepSpeed");
    }
    s.warmup_type = wt == "linear" ? DsScheduler::Warmup::linear : DsScheduler::Warmup::log;
    if (s.type == DsScheduler::Type::warmup_lr) return ok_status();
    if (raw.total_num_steps.is_auto && !run.total_steps.from_flag && run.total_steps.value <= 0) {
      return key_error(src, "scheduler.params.total_num_steps",
                       "is \"auto\" but the run's step count is unknown",
                       "give the number of steps (flag or file)");
    }
    if (!raw.total_num_steps.present && !run.total_steps.from_flag) {
      return key_error(src, "scheduler.params.total_num_steps", "missing (" + name + " needs it)",
                       "give the total number of optimizer steps, or \"auto\"");
    }
    s.total_num_steps =
        pick("scheduler.total_num_steps", raw.total_num_steps, &run.total_steps, int64_t{0}, d);
    if (cosine && s.total_num_steps <= s.warmup_num_steps) {
      return key_error(
          src, "scheduler.params.total_num_steps",
          text(s.total_num_steps) + " must exceed warmup_num_steps " + text(s.warmup_num_steps),
          "WarmupCosineLR divides by total_num_steps - warmup_num_steps");
    }
    if (s.total_num_steps < s.warmup_num_steps) {
      warnings.push_back(src + ": scheduler total_num_steps " + text(s.total_num_steps) +
                         " is less than warmup_num_steps " + text(s.warmup_num_steps));
    }
    return ok_status();
  }

  Status zero(const Raw& raw) {
    DsZero& z = out->zero;
    const std::string d = "DeepSpeed default";
    const int64_t stage =
        pick("zero_optimization.stage", raw.stage, &run.zero_stage, int64_t{0}, d);
    if (stage < 0 || stage > 3) {
      return key_error(src, "zero_optimization.stage", "must be 0, 1, 2 or 3, got " + text(stage),
                       "3 partitions parameters, gradients and optimizer states");
    }
    z.stage = static_cast<int>(stage);
    const int64_t h = run.hidden_size;
    if ((raw.reduce_bucket.is_auto || raw.prefetch_bucket.is_auto || raw.persistence.is_auto) &&
        h <= 0) {
      return key_error(src, "zero_optimization",
                       "\"auto\" bucket sizes need the model's hidden size",
                       "choose the model before the DeepSpeed config");
    }
    const int64_t h2 = ZeroConfig::auto_reduce_bucket(h),
                  prefetch = ZeroConfig::auto_prefetch_bucket(h),
                  persist = ZeroConfig::auto_persistence_threshold(h);
    z.reduce_bucket_size = pick("zero_optimization.reduce_bucket_size", raw.reduce_bucket, nullptr,
                                int64_t{500'000'000}, d, &h2, "auto: hidden_size^2");
    z.allgather_bucket_size = pick("zero_optimization.allgather_bucket_size", raw.allgather_bucket,
                                   nullptr, int64_t{500'000'000}, d);
    z.stage3_prefetch_bucket_size =
        pick("zero_optimization.stage3_prefetch_bucket_size", raw.prefetch_bucket, nullptr,
             int64_t{50'000'000}, d, &prefetch, "auto: int(0.9 hidden_size^2)");
    z.stage3_param_persistence_threshold =
        pick("zero_optimization.stage3_param_persistence_threshold", raw.persistence, nullptr,
             int64_t{100'000}, d, &persist, "auto: 10 hidden_size");
    z.stage3_max_live_parameters = pick("zero_optimization.stage3_max_live_parameters",
                                        raw.max_live, nullptr, int64_t{1'000'000'000}, d);
    z.stage3_max_reuse_distance = pick("zero_optimization.stage3_max_reuse_distance", raw.max_reuse,
                                       nullptr, int64_t{1'000'000'000}, d);
    z.sub_group_size =
        pick("zero_optimization.sub_group_size", raw.sub_group, nullptr, int64_t{1'000'000'000}, d);
    for (const auto& [key, v] :
         {std::pair{"reduce_bucket_size", z.reduce_bucket_size},
          {"allgather_bucket_size", z.allgather_bucket_size},
          {"stage3_prefetch_bucket_size", z.stage3_prefetch_bucket_size},
          {"stage3_param_persistence_threshold", z.stage3_param_persistence_threshold},
          {"stage3_max_live_parameters", z.stage3_max_live_parameters},
          {"stage3_max_reuse_distance", z.stage3_max_reuse_distance},
          {"sub_group_size", z.sub_group_size}}) {
      if (v < 0)
        return key_error(src, std::string("zero_optimization.") + key, "must be >= 0",
                         "sizes count elements");
    }
    z.overlap_comm = pick("zero_optimization.overlap_comm", raw.overlap_comm, nullptr, z.stage == 3,
                          "DeepSpeed default (true only for stage 3)");
    z.contiguous_gradients =
        pick("zero_optimization.contiguous_gradients", raw.contiguous_gradients, nullptr, true, d);
    z.reduce_scatter =
        pick("zero_optimization.reduce_scatter", raw.reduce_scatter, nullptr, true, d);
    z.allgather_partitions =
        pick("zero_optimization.allgather_partitions", raw.allgather_partitions, nullptr, true, d);
    z.stage3_gather_16bit_weights_on_model_save =
        pick("zero_optimization.stage3_gather_16bit_weights_on_model_save", raw.gather_16bit,
             nullptr, false, d);
    for (const auto& [key, dev] : {std::pair{"offload_optimizer", &raw.offload_optimizer_device},
                                   {"offload_param", &raw.offload_param_device}}) {
      if (dev->present)
        note(std::string("zero_optimization.") + key + ".device", dev->value, "file");
      if (!dev->present || dev->value == "none") continue;
      const std::string path = std::string("zero_optimization.") + key + ".device";
      if (dev->value == "cpu" || dev->value == "nvme") {
        return unimplemented(
            src + ": " + path + " \"" + dev->value + "\" is not supported yet",
            "set device to \"none\"; ljperf shards states with ZeRO instead of offloading");
      }
      return key_error(src, path,
                       "expected \"none\", \"cpu\" or \"nvme\", got \"" + dev->value + "\"",
                       "set device to \"none\"");
    }
    return ok_status();
  }

  // activation_checkpointing present: full recompute, one region per layer (HF's gradient
  // checkpointing); each flag wins over its part.
  void recompute(const Raw& raw) {
    const bool block = raw.blocks.count("activation_checkpointing") > 0;
    // The block's value where the flag was not given; the origin as pick() writes it.
    auto take = [&](const std::string& key, const auto& flag, const auto& block_value) {
      auto v = flag.from_flag || !block ? flag.value : block_value;
      std::string origin = flag.from_flag ? "flag" : block ? "activation_checkpointing" : "default";
      if (flag.from_flag && block && flag.value != block_value)
        origin += "; activation_checkpointing means " + text(block_value);
      note(key, text(v), origin);
      return v;
    };
    out->recompute = take("recompute", run.recompute, std::string("full"));
    if (out->recompute == "none") return;
    out->recompute_method = take("recompute_method", run.recompute_method, std::string("uniform"));
    // Every layer is recomputed: one per region (uniform), or all of them (block, -1).
    const int64_t every_layer = out->recompute_method == "uniform" ? 1 : -1;
    out->recompute_layers = take("recompute_layers", run.recompute_layers, every_layer);
  }
};

}  // namespace

double DsScheduler::lr_at(int64_t iteration) const {
  LJ_CHECK(type != Type::none) << "lr_at on a DeepSpeed config without a scheduler";
  const bool cosine = type == Type::warmup_cosine_lr;
  // Before the first step: WarmupLR/WarmupDecayLR set warmup_min_lr at construction;
  // WarmupCosineLR's get_lr() returns 0.0.
  if (iteration < 0) return cosine ? 0.0 : warmup_min_lr;
  const double it = static_cast<double>(iteration), w = static_cast<double>(warmup_num_steps);
  if (iteration < warmup_num_steps) {
    // gamma = log(it + 1) / log(W) ("log"), or it / W ("linear").
    const double gamma = warmup_type == Warmup::log ? std::log(it + 1) / std::log(w) : it / w;
    // WarmupCosineLR: lr = max_lr * (warmup_min_ratio + (1 - warmup_min_ratio) * gamma).
    if (cosine) return warmup_max_lr * (warmup_min_ratio + (1 - warmup_min_ratio) * gamma);
    return warmup_min_lr + (warmup_max_lr - warmup_min_lr) * gamma;  // min + delta * gamma
  }
  const double total = static_cast<double>(total_num_steps);
  switch (type) {
    case Type::warmup_lr:
      return warmup_max_lr;
    case Type::warmup_decay_lr: {
      // gamma = max(0, (T - it) / max(1, T - W)): linear from max_lr down to warmup_min_lr at T.
      const double gamma = std::max(0.0, (total - it) / std::max(1.0, total - w));
      return warmup_min_lr + (warmup_max_lr - warmup_min_lr) * gamma;
    }
    case Type::warmup_cosine_lr: {
      // ratio = max(0, cmr + (1 - cmr) * (1 + cos(pi * (it - W + 1) / (T - W))) / 2). DeepSpeed
      // does not clamp past T: the cosine rises again there, and so does this.
      const double phase = std::numbers::pi * (it - w + 1) / (total - w);
      const double ratio =
          std::max(0.0, cos_min_ratio + (1 - cos_min_ratio) * (1 + std::cos(phase)) / 2);
      return warmup_max_lr * ratio;
    }
    case Type::none:
      break;
  }
  return 0;
}

std::string DeepSpeedConfig::describe() const {
  std::string s = "DeepSpeed config " + source + ":\n";
  for (const Line& l : resolved) s += "  " + l.key + " = " + l.value + "  (" + l.origin + ")\n";
  if (!no_effect_keys.empty()) {
    s += "  accepted without effect:";
    for (const std::string& k : no_effect_keys) s += " " + k;
    s += "\n";
  }
  return s;
}

StatusOr<DeepSpeedConfig> parse_deepspeed_config(const std::string& json_text,
                                                 const std::string& source,
                                                 const RunSettings& run) {
  LJ_RETURN_IF_ERROR(check_input_size(json_text.size(), kMaxDeepSpeedConfigBytes, source));
  Raw raw;
  LJ_RETURN_IF_ERROR(read_deepspeed_json(json_text, source, &raw));
  DeepSpeedConfig c;
  c.source = source;
  Resolver r{source, run, &c, {}};
  LJ_RETURN_IF_ERROR(r.batch(raw));
  LJ_RETURN_IF_ERROR(r.precision(raw));
  c.gradient_clipping =
      r.pick("gradient_clipping", raw.grad_clip, &run.grad_clip, 0.0, "DeepSpeed default (off)");
  if (c.gradient_clipping < 0)
    return key_error(source, "gradient_clipping", "must be >= 0", "0 turns clipping off");
  LJ_RETURN_IF_ERROR(r.optimizer(raw));
  LJ_RETURN_IF_ERROR(r.scheduler(raw));
  LJ_RETURN_IF_ERROR(r.zero(raw));
  r.recompute(raw);
  c.no_effect_keys = std::move(raw.no_effect);
  c.warnings = std::move(raw.warnings);
  c.warnings.insert(c.warnings.end(), r.warnings.begin(), r.warnings.end());
  return c;
}

StatusOr<DeepSpeedConfig> load_deepspeed_config(const std::string& path, const RunSettings& run) {
  LJ_ASSIGN_OR_RETURN(
      std::string text,
      read_text_file(path, "give the path of a DeepSpeed JSON config", kMaxDeepSpeedConfigBytes));
  return parse_deepspeed_config(text, path, run);
}

std::string_view deepspeed_zero3_bf16_recipe() {
  static constexpr std::string_view kRecipe = R"({
  "bf16": {
    "enabled": true
  },
  "fp16": {
    "enabled": false
  },
  "optimizer": {
    "type": "AdamW",
    "params": {
      "lr": "auto",
      "betas": "auto",
      "eps": "auto",
      "weight_decay": "auto"
    }
  },
  "scheduler": {
    "type": "WarmupLR",
    "params": {
      "warmup_min_lr": "auto",
      "warmup_max_lr": "auto",
      "warmup_num_steps": "auto"
    }
  },
  "zero_optimization": {
    "stage": 3,
    "offload_optimizer": {
      "device": "none"
    },
    "offload_param": {
      "device": "none"
    },
    "overlap_comm": true,
    "contiguous_gradients": true,
    "sub_group_size": 1e9,
    "reduce_bucket_size": "auto",
    "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto",
    "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9,
    "stage3_gather_16bit_weights_on_model_save": true
  },
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "steps_per_print": 2000,
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "wall_clock_breakdown": false
}
)";
  return kRecipe;
}

}  // namespace lj
