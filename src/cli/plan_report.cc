#include "cli/plan_report.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "core/units.h"
#include "plan/gpu_time_model.h"

namespace lj::cli {
namespace {

std::string gib(double b) {
  return fmt::format("{:.2f} GiB", b / static_cast<double>(kGiB));
}

std::string choice_name(const Candidate& c, int64_t L) {
  std::string s =
      c.recompute.policy == RecomputePolicy::none
          ? "none"
          : fmt::format("{} {}/{} layers", recompute_policy_name(c.recompute.policy), c.layers, L);
  return s;
}

std::string row(const PlanRequest& req, const Candidate& c, bool batch) {
  const bool gpu = req.device.kind == DeviceKind::gpu;
  return fmt::format(
      "  {:<24} {}{:>12} {:>12} {:>14.0f}{}  {}{}\n", choice_name(c, req.model.num_hidden_layers),
      batch ? fmt::format("{:>5} ", c.micro_batch) : "", gib(c.memory.total),
      format_seconds(c.step_seconds), c.tokens_per_s,
      gpu ? fmt::format(" {:>6.1f}%", 100 * model_flops_utilization(req.model, req.seq_len,
                                                                    c.tokens_per_s, req.device))
          : "",
      c.fits ? "fits" : "over", c.exact ? "" : " (interpolated)");
}

// The host's collectives: what the step waits in them, or that they are not priced.
std::string host_comm_line(const PlanRequest& req, const Candidate& c) {
  if (!req.comm_rates) {
    return fmt::format(
        "  ZeRO-{} collectives: not priced (no MPI rates measured for {} ranks on this host; "
        "measure them: mpirun -np {} ljperf calibrate --comm)\n",
        req.zero.stage, req.gpus, req.gpus);
  }
  const double exposed =
      c.times ? c.times->category[static_cast<size_t>(OpCategory::collective)] : 0.0;
  return fmt::format(
      "  ZeRO-{} collectives per step: {} exposed (MPI rates measured for {} ranks; none hidden "
      "behind backward, overlap_comm or not: MPI progresses them on the compute thread)\n",
      req.zero.stage, format_seconds(exposed), req.gpus);
}

// Expert parallelism: the experts the priced rank runs, and what its token exchange costs.
std::string expert_line(const PlanRequest& req, const Candidate& c) {
  const int64_t experts = req.model.moe.num_experts, per = experts / req.experts.size;
  std::string s = fmt::format(
      "  expert parallel over groups of {} ranks: rank {} holds and runs experts [{}, {}) of {} "
      "in each sparse layer, on the rows its group routes to them; their weights data-parallel "
      "over {} rank(s)\n",
      req.experts.size, req.rank, req.experts.rank * per, (req.experts.rank + 1) * per, experts,
      req.gpus / req.experts.size);
  if (!req.comm_rates) {
    return s +
           "  token exchange: not priced (no MPI rates measured for this world; measure them: "
           "mpirun -np " +
           std::to_string(req.gpus) + " ljperf calibrate --comm)\n";
  }
  return s + fmt::format(
                 "  token exchange per step: {} (all-to-all of the routed rows out and back, "
                 "forward and backward; part of the collectives above)\n",
                 format_seconds(c.times ? c.times->expert_exchange : 0.0));
}

}  // namespace

std::string format_plan(const PlanRequest& req, const PlanResult& r) {
  const int64_t L = req.model.num_hidden_layers;
  const bool gpu = req.device.kind == DeviceKind::gpu;
  std::string s = fmt::format(
      "ljperf plan: {} ({} params, {} layers) on {}{}, {}micro-batch {} x seq {}, {}{}\n",
      req.model.name, format_params(req.model.num_params()), L,
      gpu ? fmt::format("{} x ", req.gpus) : "", req.device.name,
      gpu || req.gpus > 1
          ? fmt::format("{}ZeRO-{}, ", gpu ? "" : fmt::format("{} processes, ", req.gpus),
                        req.zero.stage)
          : "",
      req.micro_batch, req.seq_len,
      gpu                            ? "bf16"
      : req.precision == DType::bf16 ? "bf16 mixed (f32 master weights, gradients, Adam)"
      : req.precision == DType::f16  ? "fp16 mixed (f32 master weights, gradients, Adam)"
                                     : "f32",
      req.compile ? ", compiled" : ", eager");
  s += fmt::format(
      "budget: {} per {} ({}), coefficients: {}\n", gib(r.budget_bytes), gpu ? "rank" : "process",
      req.budget_bytes > 0 ? "--memory-limit"
                           : default_budget_percent() + " of " + gib(req.device.memory_bytes),
      req.coeffs.source);
  s += "  (" + safety_margin_note() + ")\n";
  const Candidate* best = r.best();
  const Candidate& shown = best ? *best : r.ranked.front();
  s += fmt::format("\nmemory per {} ({}: {}):\n", gpu ? "rank" : "process",
                   best ? "recommended" : "smallest", choice_name(shown, L));
  for (const auto& i : shown.memory.items)
    s += fmt::format("  {:<44} {:>12}\n", i.name, gib(i.bytes));
  s += fmt::format("  {:<44} {:>12}\n", "predicted peak", gib(shown.memory.total));
  if (gpu && req.gpus > 1) {
    // r.comm_seconds is per micro-batch: with accumulation, also the optimizer step's total.
    const bool accum = req.grad_accum > 1;
    s += fmt::format(
        "  ZeRO-{} collectives per {}: {}{} over {} (FSDP overlaps them with compute)\n",
        req.zero.stage, accum ? "micro-batch" : "step", format_seconds(r.comm_seconds),
        accum ? fmt::format(" ({} per optimizer step of {} micro-batches)",
                            format_seconds(r.comm_seconds * static_cast<double>(req.grad_accum)),
                            req.grad_accum)
              : std::string(),
        req.gpus <= kGpusPerNode
            ? std::string("NVLink")
            : fmt::format(
                  "the inter-node fabric at {:.0f} Gb/s per GPU",
                  (req.fabric_bandwidth > 0 ? req.fabric_bandwidth : req.device.fabric_bandwidth) *
                      8 / 1e9));
  }
  if (!gpu && req.gpus > 1) s += host_comm_line(req, shown);
  if (req.experts.size > 1) s += expert_line(req, shown);
  const bool batch = req.tune_batch;
  s += fmt::format("\nrecompute choices:\n  {:<24} {}{:>12} {:>12} {:>14}{}\n", "policy",
                   batch ? "micro " : "", "peak", "step time", "tokens/s/rank",
                   gpu ? fmt::format(" {:>7}", "MFU") : "");
  for (RecomputePolicy p :
       {RecomputePolicy::none, RecomputePolicy::selective, RecomputePolicy::full}) {
    const Candidate* all = nullptr;
    const Candidate* fastest = nullptr;
    for (const auto& c : r.ranked) {
      if (c.recompute.policy != p || c.micro_batch != req.micro_batch) continue;
      if (p == RecomputePolicy::none || c.layers == L) all = &c;
      if (c.fits && (fastest == nullptr || c.tokens_per_s > fastest->tokens_per_s)) fastest = &c;
    }
    if (all == nullptr) {
      for (const auto& c : r.ranked) {
        if (c.recompute.policy == p && c.micro_batch == req.micro_batch) all = &c;
      }
    }
    if (all) s += row(req, *all, batch);
    if (fastest && fastest != all) s += row(req, *fastest, batch);
  }
  if (gpu) {
    s += fmt::format(
        "  (MFU: {:.1f} GFLOP per token = 6N + 12·L·H·Q·T, torchtitan's convention; "
        "recompute not counted)\n",
        req.model.flops_per_token(req.seq_len) / 1e9);
    s += gpu_model_note() + "\n";
  }
  if (best) {
    s += fmt::format("\nrecommendation: {}{} — predicted peak {}, step {}, {:.0f} tokens/s/rank\n",
                     best->recompute.to_string(L),
                     batch ? fmt::format(", micro-batch {}", best->micro_batch) : "",
                     gib(best->memory.total), format_seconds(best->step_seconds),
                     best->tokens_per_s);
    int shown_alt = 0;
    for (size_t i = 1; i < r.ranked.size() && shown_alt < 2; ++i) {
      if (!r.ranked[i].fits) break;
      s += fmt::format("  next best: {}{} — peak {}, step {}\n", r.ranked[i].recompute.to_string(L),
                       batch ? fmt::format(", micro-batch {}", r.ranked[i].micro_batch) : "",
                       gib(r.ranked[i].memory.total), format_seconds(r.ranked[i].step_seconds));
      ++shown_alt;
    }
  } else {
    s += fmt::format("\nnothing fits: the smallest choice needs {} against a budget of {}\n",
                     gib(shown.memory.total), gib(r.budget_bytes));
  }
  return s;
}

nlohmann::ordered_json step_times_json(const std::optional<StepTimes>& t) {
  if (!t) return nullptr;
  nlohmann::ordered_json j;
  for (const auto& [name, s] : t->items()) j[name] = s;
  return j;
}

nlohmann::ordered_json gpu_work_json(const std::optional<GpuStepWork>& w) {
  if (!w) return nullptr;
  nlohmann::ordered_json j;
  j["gemm_flops"] = w->gemm_flops;
  j["attention_forward_flops"] = w->attention_forward_flops;
  j["attention_backward_flops"] = w->attention_backward_flops;
  j["memory_bytes"] = w->memory_bytes_total();
  j["kernels"] = w->kernels;
  return j;
}

nlohmann::ordered_json plan_to_json(const PlanRequest& req, const PlanResult& r) {
  nlohmann::ordered_json j;
  const int64_t L = req.model.num_hidden_layers;
  j["model"] = req.model.name;
  j["params"] = req.model.num_params();
  j["device"] = req.device.id;
  j["gpus"] = req.gpus;
  j["zero"] = req.zero.stage;
  j["micro_batch"] = req.micro_batch;
  j["seq_len"] = req.seq_len;
  j["precision"] = dtype_name(req.device.kind == DeviceKind::gpu ? DType::bf16 : req.precision);
  j["budget_bytes"] = r.budget_bytes;
  j["comm_seconds"] = r.comm_seconds;
  // The host: whether the collectives are priced from measured MPI rates (probe/comm_rates.h).
  if (req.device.kind != DeviceKind::gpu && req.gpus > 1)
    j["comm_measured"] = req.comm_rates != nullptr;
  j["expert_parallel"] = req.experts.size;
  j["dry_runs"] = r.dry_runs;
  const bool gpu = req.device.kind == DeviceKind::gpu;
  if (gpu) {
    const GpuModelError e = gpu_validation_error();
    j["flops_per_token"] = req.model.flops_per_token(req.seq_len);
    j["mfu_convention"] = "6N + 12*L*H*Q*T (torchtitan), recompute not counted";
    j["time_model"] = {{"note", gpu_model_note()},
                       {"validation_rows", e.rows},
                       {"validation_median_error", e.median},
                       {"validation_worst_error", e.worst},
                       {"coefficients", gpu_time_coefficients(req.device.id).sources}};
  }
  auto cand = [&](const Candidate& c) {
    nlohmann::ordered_json m;
    for (const auto& i : c.memory.items) m[i.name] = i.bytes;
    return nlohmann::ordered_json{
        {"policy", recompute_policy_name(c.recompute.policy)},
        {"layers", c.layers},
        {"recompute", c.recompute.to_string(L)},
        {"micro_batch", c.micro_batch},
        {"peak_bytes", c.memory.total},
        {"memory", m},
        {"step_seconds", c.step_seconds},
        {"tokens_per_s", c.tokens_per_s},
        {"mfu", gpu ? nlohmann::ordered_json(model_flops_utilization(req.model, req.seq_len,
                                                                     c.tokens_per_s, req.device))
                    : nlohmann::ordered_json(nullptr)},
        {"gpu_work", gpu_work_json(c.gpu_work)},
        {"fits", c.fits},
        {"exact", c.exact},
        {"step_times", step_times_json(c.times)},
        {"recompute_hot_saving_seconds", c.times ? c.times->recompute_hot_saving : 0.0},
        {"expert_exchange_seconds", c.times ? c.times->expert_exchange : 0.0}};
  };
  j["recommendation"] = r.best() ? cand(*r.best()) : nlohmann::ordered_json();
  j["candidates"] = nlohmann::ordered_json::array();
  for (const auto& c : r.ranked) j["candidates"].push_back(cand(c));
  return j;
}

bool checkpoint_optimization_requested(bool flag) {
  if (flag) return true;
  const char* e = std::getenv("CHECKPOINT_OPTIMIZATION");
  return e != nullptr && (std::strcmp(e, "true") == 0 || std::strcmp(e, "1") == 0 ||
                          std::strcmp(e, "TRUE") == 0 || std::strcmp(e, "True") == 0);
}

void print_ckpt_choice(const CkptChoice& c, int64_t num_layers) {
  const PlanResult& r = c.plan;
  const Candidate* best = r.best();
  const int64_t L = num_layers;
  fmt::print(
      "checkpoint optimization (CHECKPOINT_OPTIMIZATION): budget {} ({}), {} choices priced\n",
      format_bytes(c.budget.bytes), c.budget.source, r.ranked.size());
  fmt::print("  ({})\n", safety_margin_note());
  fmt::print("  chosen:    {} — {} layers recomputed, predicted peak {}, predicted step {}\n",
             best->recompute.to_string(L), best->layers, format_bytes(best->memory.total),
             format_seconds(best->step_seconds));
  int alt = 0;
  for (size_t i = 1; i < r.ranked.size() && alt < 2; ++i, ++alt) {
    const Candidate& cand = r.ranked[i];
    fmt::print("  next best: {} — predicted peak {}, predicted step {}{}\n",
               cand.recompute.to_string(L), format_bytes(cand.memory.total),
               format_seconds(cand.step_seconds), cand.fits ? "" : " (over budget)");
  }
}

}  // namespace lj::cli
