// `ljperf plan --measure`: an autotune of the recompute choices. Every candidate the planner
// lists that fits the budget is built in this one process (one TrainStep each, all training one
// shared set of parameters and AdamW states on one device) and timed round-robin: each round
// runs one step of every candidate, starting one candidate later than the round before, so
// drift (clock frequency, page placement, other processes' load) falls on every candidate
// alike and the rounds pair them. Per candidate: the median step over the rounds, in process CPU
// time / threads and in wall time; the ranking, its split-half agreement and which pairs it
// resolves (probe/measured_ranking.h), against the time model's prediction.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "plan/plan.h"
#include "probe/measured_ranking.h"

namespace lj::cli {

struct MeasureOptions {
  int rounds = 10;          // measured rounds (one step of every candidate each)
  int warmup_rounds = 1;    // rounds run first and not counted
  int threads = 0;          // 0: all
  uint64_t seed = 1234;     // weights and tokens
  bool wall_clock = false;  // rank by wall time instead of CPU time / threads
};

struct MeasuredCandidate {
  Candidate candidate;
  std::vector<double> cpu_seconds;   // per measured round: process CPU time / threads
  std::vector<double> wall_seconds;  // per measured round
};

struct Measurement {
  std::vector<MeasuredCandidate> candidates;  // the plan's order (predicted fastest first)
  int skipped = 0;                            // candidates over the budget, not run
  int threads = 0;
  bool wall_clock = false;
  MeasuredRanking ranking;  // by the chosen clock
  double tau = 0;           // predicted against measured, every pair (tau-b)
  double tau_resolved = 0;  // over the pairs the measurement resolves
  int resolved_pairs = 0;
  double build_seconds = 0, run_seconds = 0;
};

// --rounds at least 2, --warmup-rounds not negative.
Status validate_measure_options(const MeasureOptions& o);

// Runs the measurement for the host plan `req` (device host, one process) and its result `r`.
StatusOr<Measurement> measure_candidates(const PlanRequest& req, const PlanResult& r,
                                         const MeasureOptions& o);

std::string format_measurement(const PlanRequest& req, const Measurement& m);
nlohmann::ordered_json measurement_json(const PlanRequest& req, const Measurement& m);

}  // namespace lj::cli
