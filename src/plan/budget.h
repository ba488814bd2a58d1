// The one rule for "does it fit" (docs/architecture.md, "Memory and recompute"): a memory budget is
// either what the user gave (--memory-limit) or kDefaultBudgetFraction of what the device has (a
// GPU's memory, the host's available memory), and a predicted peak fits a budget when it is at most
// budget × (1 − f) − b, the margin (f, b) measured for the predictor's under-predictions.
// The planner's search, checkpoint optimization and benchmark's refusal of a run that cannot fit
// all read this file, and so do the help strings.
#pragma once

#include <string>

namespace lj {

// The default budget: this fraction of the device's memory.
inline constexpr double kDefaultBudgetFraction = 0.9;
// "90%": kDefaultBudgetFraction as help strings and reports print it.
std::string default_budget_percent();

// What a prediction must stay below the budget by: a fraction of the budget plus bytes.
struct SafetyMargin {
  double fraction = 0;
  double bytes = 0;
};

// From the predictor's measured error distribution, in the dangerous direction: 208 runs of
// bench/plan/host_variants.sh (40 random shapes never fitted + 12 presets, on four host
// configurations: oneDNN AVX-512 or AVX2, 2 or 1 threads; shipped coefficients, nothing fitted
// on any of them). Under-predictions grow in bytes with the run (worst -0.44 MiB below 50 MiB,
// -1.12 MiB at 100-200 MiB, -1.41 MiB above 400) and shrink as a fraction (-1.39% at 32 MiB,
// -0.28% above 400 MiB): a fraction alone must be 1.39% to cover the smallest runs and is then
// loose for every large one. 0.5 MiB + 0.501% covers all 208; 0.6% leaves a fifth on top.
// Peaks are measured with the malloc thresholds pinned (runtime/malloc_policy.h), which
// removed the 8-10 MiB bimodal peaks that once pushed a choice over its budget
// (bench/plan/SWEEP.md).
inline constexpr SafetyMargin kBudgetSafetyMargin{0.006, 0.5 * 1024 * 1024};
// One line for reports: the rule and where its margin comes from.
std::string safety_margin_note();

struct MemoryBudget {
  double bytes = 0;
  // For reports: "--memory-limit", or "90% of available memory" (default_budget's `of`).
  std::string source;
};

// The budget when the user gave none: kDefaultBudgetFraction of `available_bytes`; `of` names
// that memory for the source string ("available memory", "80.00 GiB").
MemoryBudget default_budget(double available_bytes, const std::string& of);
// The user's limit when given (> 0), else default_budget(available_bytes, of).
MemoryBudget budget_or_default(double limit_bytes, double available_bytes, const std::string& of);

// What a prediction may reach under `budget_bytes`.
double usable_bytes(double budget_bytes, SafetyMargin safety_margin = kBudgetSafetyMargin);
// Whether a predicted peak fits the budget: predicted <= usable_bytes(budget).
bool fits(double predicted_bytes, double budget_bytes,
          SafetyMargin safety_margin = kBudgetSafetyMargin);

}  // namespace lj
