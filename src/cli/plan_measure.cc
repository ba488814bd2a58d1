#include "cli/plan_measure.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/synthetic_batch.h"
#include "core/units.h"
#include "train/train_step.h"

namespace lj::cli {
namespace {

// The graph options `price_choice` (plan/plan.cc) prices a host candidate with.
GraphOptions graph_options(const PlanRequest& req, const RecomputeConfig& rc) {
  GraphOptions o;
  o.compile = req.compile;
  o.recompute = rc;
  o.dtype = DType::f32;
  if (req.precision != DType::f32) {
    o.autocast = req.precision;
    o.loss_scaling = req.precision == DType::f16;
  }
  return o;
}

std::string choice_name(const Candidate& c, int64_t num_layers) {
  if (c.recompute.policy == RecomputePolicy::none) return "none";
  return fmt::format("{} {}/{}", recompute_policy_name(c.recompute.policy), c.layers, num_layers);
}

double ms(double s) {
  return 1e3 * s;
}

}  // namespace

Status validate_measure_options(const MeasureOptions& o) {
  if (o.rounds < 2) {
    return invalid_argument("--rounds must be at least 2, got " + std::to_string(o.rounds),
                            "e.g. --rounds 10 (more rounds resolve closer choices)");
  }
  if (o.warmup_rounds < 0) {
    return invalid_argument("--warmup-rounds must not be negative", "e.g. --warmup-rounds 1");
  }
  return ok_status();
}

StatusOr<Measurement> measure_candidates(const PlanRequest& req, const PlanResult& r,
                                         const MeasureOptions& o) {
  if (req.device.kind != DeviceKind::cpu) {
    return invalid_argument("--measure runs the candidates on this host",
                            "use --device cpu with --measure");
  }
  if (req.gpus > 1 || req.zero.shards(ZeroSharded::optimizer_states)) {
    return unimplemented("--measure runs one process without ZeRO",
                         "drop --np and --zero, or run ljperf benchmark under mpirun");
  }
  if (req.tune_batch) {
    return unimplemented("--measure compares recompute choices at one micro-batch",
                         "drop --tune-batch");
  }
  LJ_RETURN_IF_ERROR(validate_measure_options(o));
  Measurement m;
  m.wall_clock = o.wall_clock;
  for (const Candidate& c : r.ranked) {
    if (c.fits) {
      m.candidates.push_back({c, {}, {}});
    } else {
      ++m.skipped;
    }
  }
  if (m.candidates.size() < 2) {
    return invalid_argument(
        fmt::format("--measure needs at least 2 candidates that fit the budget, {} do",
                    m.candidates.size()),
        "raise --memory-limit, or plan more choices (drop --recompute / --recompute-layers)");
  }
  const size_t n = m.candidates.size();
  Device dev(o.threads);
  m.threads = dev.threads();
  const double t_build = now_seconds();
  std::vector<std::unique_ptr<TrainStep>> steps;
  for (const MeasuredCandidate& mc : m.candidates) {
    TrainStepConfig cfg;
    cfg.seed = o.seed;
    cfg.graph = graph_options(req, mc.candidate.recompute);
    cfg.loss_scale.enabled = cfg.graph.loss_scaling;
    LJ_ASSIGN_OR_RETURN(std::unique_ptr<TrainStep> s, TrainStep::create(req.model, cfg, dev));
    // One set of weights and AdamW states for every candidate: the memory of one run plus each
    // candidate's graph and executor.
    if (!steps.empty()) LJ_RETURN_IF_ERROR(s->share_state_with(*steps.front()));
    steps.push_back(std::move(s));
  }
  m.build_seconds = now_seconds() - t_build;
  const double lr = AdamWConfig{}.lr;
  const double t_run = now_seconds();
  const int total = o.warmup_rounds + o.rounds;
  for (int round = 0; round < total; ++round) {
    // Every candidate trains the round's batch; the first candidate of a round moves on by one
    // each round, so no candidate always follows the same one.
    const TrainStep::Batch batch =
        synthetic_batch(dev, req.micro_batch, req.seq_len, req.model.vocab_size, o.seed, round);
    const bool counted = round >= o.warmup_rounds;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + static_cast<size_t>(round)) % n;
      const double w0 = now_seconds();
      const double c0 = process_cpu_seconds();
      LJ_ASSIGN_OR_RETURN(StepResult res, steps[i]->step(batch.tokens, batch.targets, lr));
      const double cpu = (process_cpu_seconds() - c0) / m.threads;
      const double wall = now_seconds() - w0;
      if (!std::isfinite(res.loss)) {
        return internal_error(fmt::format(
            "--measure: {} gave a non-finite loss in round {}",
            choice_name(m.candidates[i].candidate, req.model.num_hidden_layers), round + 1));
      }
      if (counted) {
        m.candidates[i].cpu_seconds.push_back(cpu);
        m.candidates[i].wall_seconds.push_back(wall);
      }
    }
    fmt::print(stderr, "measure: round {}/{}{} done ({:.0f} s)\n", round + 1, total,
               counted ? "" : " (warmup)", now_seconds() - t_run);
  }
  m.run_seconds = now_seconds() - t_run;
  std::vector<std::vector<double>> samples;
  std::vector<double> predicted;
  for (const MeasuredCandidate& mc : m.candidates) {
    samples.push_back(o.wall_clock ? mc.wall_seconds : mc.cpu_seconds);
    predicted.push_back(mc.candidate.step_seconds);
  }
  m.ranking = rank_measurements(samples);
  m.tau = kendall_tau_b(predicted, m.ranking.median);
  m.tau_resolved = resolved_tau(predicted, m.ranking.median, m.ranking.resolved, &m.resolved_pairs);
  return m;
}

std::string format_measurement(const PlanRequest& req, const Measurement& m) {
  const int64_t L = req.model.num_hidden_layers;
  const size_t n = m.candidates.size();
  std::string s = fmt::format(
      "\nmeasured: {} candidates in one process, round-robin, {} rounds; {} thread{}; ranked by "
      "{}\n",
      n, m.ranking.rounds, m.threads, m.threads == 1 ? "" : "s",
      m.wall_clock ? "wall time" : "process CPU time / threads");
  if (m.skipped > 0) s += fmt::format("  ({} over the budget not run)\n", m.skipped);
  s += fmt::format("  {:>4}  {:<16} {:>10} {:>10} {:>10} {:>8}  {:<26} {:>5}\n", "rank", "choice",
                   "measured", "CPU/thr", "wall", "error", "vs fastest (95% CI)", "pred.");
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[static_cast<size_t>(m.ranking.rank[i] - 1)] = i;
  std::vector<double> predicted;
  for (const MeasuredCandidate& mc : m.candidates) predicted.push_back(mc.candidate.step_seconds);
  std::vector<int> pred_rank(n);
  {
    std::vector<size_t> p(n);
    for (size_t i = 0; i < n; ++i) p[i] = i;
    std::stable_sort(p.begin(), p.end(),
                     [&](size_t a, size_t b) { return predicted[a] < predicted[b]; });
    for (size_t i = 0; i < n; ++i) pred_rank[p[i]] = static_cast<int>(i + 1);
  }
  for (size_t i : order) {
    const MeasuredCandidate& mc = m.candidates[i];
    const double med = m.ranking.median[i];
    const MedianInterval& d = m.ranking.vs_fastest[i];
    const std::string vs = m.ranking.rank[i] == 1 ? "fastest"
                                                  : fmt::format("{:+.1f} ms [{:+.1f}, {:+.1f}]",
                                                                ms(d.median), ms(d.lo), ms(d.hi));
    s += fmt::format("  {:>4}  {:<16} {:>10} {:>10} {:>10} {:>+7.1f}%  {:<26} {:>5}\n",
                     m.ranking.rank[i], choice_name(mc.candidate, L), format_seconds(med),
                     format_seconds(median_of(mc.cpu_seconds)),
                     format_seconds(median_of(mc.wall_seconds)),
                     100.0 * (mc.candidate.step_seconds - med) / med, vs, pred_rank[i]);
  }
  const int all_pairs = static_cast<int>(n * (n - 1) / 2);
  int resolved = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) resolved += m.ranking.resolved[i][j] ? 1 : 0;
  s += fmt::format(
      "  measured: the median over the rounds; error: predicted (time model) against it; vs "
      "fastest: the median of the rounds' paired differences and its sign-test interval\n");
  s += fmt::format(
      "  split-half tau {:.3f} (the even rounds' medians against the odd rounds'); the "
      "measurement resolves {} of {} pairs\n",
      m.ranking.split_half_tau, resolved, all_pairs);
  s += fmt::format(
      "  Kendall tau, predicted against measured: {:.3f} over all {} pairs; {:.3f} over the {} "
      "resolved pairs\n",
      m.tau, all_pairs, m.tau_resolved, m.resolved_pairs);
  const MeasuredCandidate& best = m.candidates[order[0]];
  s += fmt::format("  fastest measured: {} (the plan's recommendation: {})\n",
                   best.candidate.recompute.to_string(L),
                   m.candidates.front().candidate.recompute.to_string(L));
  s += fmt::format("  built in {}, measured in {}\n", format_seconds(m.build_seconds),
                   format_seconds(m.run_seconds));
  return s;
}

nlohmann::ordered_json measurement_json(const PlanRequest& req, const Measurement& m) {
  const int64_t L = req.model.num_hidden_layers;
  nlohmann::ordered_json j;
  j["rounds"] = m.ranking.rounds;
  j["threads"] = m.threads;
  j["clock"] = m.wall_clock ? "wall" : "cpu";
  j["skipped_over_budget"] = m.skipped;
  j["split_half_tau"] = m.ranking.split_half_tau;
  j["tau"] = m.tau;
  j["tau_resolved"] = m.tau_resolved;
  j["resolved_pairs"] = m.resolved_pairs;
  j["build_seconds"] = m.build_seconds;
  j["run_seconds"] = m.run_seconds;
  j["candidates"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < m.candidates.size(); ++i) {
    const MeasuredCandidate& mc = m.candidates[i];
    const MedianInterval& d = m.ranking.vs_fastest[i];
    std::vector<int> resolved_with;
    for (size_t k = 0; k < m.candidates.size(); ++k)
      if (m.ranking.resolved[i][k]) resolved_with.push_back(static_cast<int>(k));
    j["candidates"].push_back({{"policy", recompute_policy_name(mc.candidate.recompute.policy)},
                               {"layers", mc.candidate.layers},
                               {"recompute", mc.candidate.recompute.to_string(L)},
                               {"predicted_step_seconds", mc.candidate.step_seconds},
                               {"measured_step_seconds", m.ranking.median[i]},
                               {"rank", m.ranking.rank[i]},
                               {"vs_fastest_seconds", {d.lo, d.median, d.hi}},
                               {"resolved_with", resolved_with},
                               {"cpu_seconds", mc.cpu_seconds},
                               {"wall_seconds", mc.wall_seconds}});
  }
  return j;
}

}  // namespace lj::cli
